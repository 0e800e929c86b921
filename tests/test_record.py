"""The recorder (reference_c/recorder.c) and `purgecheck record`: every call with its thread
in creation order and a per-thread monotonic clock, fork and exec, a killed program's trace
readable and cut cleanly, and the programs it must refuse (docs/record.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from purgecheck.cli import main
from purgecheck.formats.alloc_trace import F_IN_CREATE, KIND, RECORD, read_trace
from purgecheck.glibc.fromtrace import Conversion, to_ops
from purgecheck.glibc.replay import run_model
from model.glibc.versions import VERSIONS
from purgecheck.record.run import LAUNCH, ROOT, library, record

BUILD = ROOT / "reference_c" / "build"
# Debian's python3 (a plain ELF program); else the one running the tests
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def quiet_record(cmd, out: Path):
    return record(cmd, out, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_threads_are_numbered_in_creation_order_with_monotonic_clocks(tmp_path):
    rec = quiet_record([str(BUILD / "recorded_threads"), "40"], tmp_path / "t.rec")
    assert rec.returncode == 0 and len(rec.traces) == 1
    (img,) = rec.traces[0].images
    assert img.ended and img.cut is None
    created = img.a[img.kind == KIND["thread_new"]].tolist()
    assert created == [1, 2, 3, 4]  # the order of pthread_create calls, numbered from 1
    exits = set(img.thread[img.kind == KIND["thread_exit"]].tolist())
    assert exits == {1, 2, 3, 4}
    for t in range(5):  # each thread's clock never goes back along the call order
        ns = img.ns[img.thread == t].astype(np.int64)
        assert len(ns) and np.all(np.diff(ns) >= 0)
    c = img.counts()
    assert c["malloc"] >= 4 * 40 and c["realloc"] == c["realloc_old"] > 0
    assert c["aligned_alloc"] == 1 and c["calloc"] >= 1
    # pthread_create's own calloc of each new thread's dtv is marked as such
    assert np.count_nonzero(img.flags & F_IN_CREATE) == 4
    # every thread's work is there, with the records of another thread in between
    assert len(set(img.thread[img.kind == KIND["free"]].tolist())) == 5


def test_record_command_prints_each_image_and_the_replay_command(capsys, tmp_path):
    out_file = tmp_path / "t.rec"
    rc, out, _ = cli(capsys, "record", "-o", str(out_file), "--",
                     str(BUILD / "recorded_threads"), "5")
    assert rc == 0
    assert "exited" in out and "thread_new 4" in out
    assert f"replay: purgecheck replay {out_file}" in out


def test_a_fork_child_writes_its_own_file_and_an_exec_continues_the_same(tmp_path):
    code = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    [bytearray(3000) for _ in range(10)]\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "os.execv(sys.executable, [sys.executable, '-c', 'x = [str(i) for i in range(9)]'])\n")
    rec = quiet_record([PYTHON, "-c", code], tmp_path / "f.rec")
    assert rec.returncode == 0
    assert [f.name for f in rec.files][0] == "f.rec" and len(rec.files) == 2
    parent, child = rec.traces
    assert len(parent.images) == 2  # python before the exec, python after it
    before, after = parent.images
    assert before.execed and not before.ended and after.ended
    assert before.pid == after.pid
    forked = before.a[before.kind == KIND["fork"]].tolist()
    assert forked == [child.images[0].pid]
    assert rec.files[1].name == f"f.rec.{forked[0]}"
    assert child.images[0].counts()["malloc"] > 0


def test_a_killed_program_leaves_whole_records_cut_at_the_first_missing_call(tmp_path):
    out = tmp_path / "k.rec"
    env = dict(os.environ, PURGECHECK_RECORD=str(out), PURGECHECK_RECORD_LIB=str(library()))
    proc = subprocess.Popen(["sh", "-c", LAUNCH, "sh", str(BUILD / "recorded_threads"),
                             "100000000"], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while (not out.exists() or out.stat().st_size < 256 * 1024) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert out.stat().st_size % RECORD == 0  # no torn record
    (img,) = read_trace(out).images
    assert not img.ended
    # the image ends where the first call number is missing from the file (how far that is
    # depends on which thread the scheduler kept from writing its buffer)
    words = np.fromfile(out, dtype="<u8").reshape(-1, 4)
    written = set((words[:, 0] & np.uint64((1 << 40) - 1)).tolist())
    first_missing = next(n for n in range(len(written) + 1) if n not in written)
    assert len(img) == first_missing
    assert img.cut == (first_missing if first_missing < len(written) else None)
    # what is kept is a consistent prefix: it converts and replays on the model (up to a
    # call that got back the old block of a realloc whose result was never written, if the
    # kill came there: tests/test_replay.py has that case, found here by CI)
    stats = Conversion()
    list(to_ops(img, stats))
    assert stats.stopped is None or "has no result record" in stats.stopped[1]
    run_model(img, VERSIONS["2.23+"], {}, False)


def test_a_program_that_defines_malloc_is_refused(capsys, tmp_path):
    rc, _, err = cli(capsys, "record", "-o", str(tmp_path / "o.rec"), "--",
                     str(BUILD / "own_malloc"))
    assert rc == 2
    assert "refused: the program defines malloc itself" in err
    assert len(err.strip().splitlines()) == 1


def test_a_static_program_is_refused_before_it_runs(capsys, tmp_path):
    src = tmp_path / "s.c"
    src.write_text("#include <stdlib.h>\nint main(void) { free(malloc(10)); return 0; }\n")
    exe = tmp_path / "s"
    subprocess.run(["gcc", "-static", "-o", str(exe), str(src)], check=True)
    rc, _, err = cli(capsys, "record", "-o", str(tmp_path / "s.rec"), "--", str(exe))
    assert rc == 2 and "statically linked" in err
    assert not (tmp_path / "s.rec").exists()


@pytest.mark.parametrize("argv,expected", [
    (["record"], "expected a command"),
    (["record", "--", "no-such-program-here"], "no such program"),
])
def test_record_usage_errors_are_one_line(capsys, argv, expected):
    rc, _, err = cli(capsys, *argv)
    assert rc == 2 and expected in err and len(err.strip().splitlines()) == 1


def test_help_teaches_with_examples(capsys):
    for cmd in ("record", "replay"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        assert "examples:" in out and "purgecheck replay py.rec --real" in out


def test_record_json_lists_files_images_and_counts(capsys, tmp_path):
    import orjson
    rc, out, _ = cli(capsys, "record", "-o", str(tmp_path / "j.rec"), "--json", "--",
                     str(BUILD / "recorded_threads"), "3")
    assert rc == 0
    doc = orjson.loads(out)  # the program's own output went to stderr
    assert doc["status"] == 0 and len(doc["files"]) == 1
    (image,) = doc["files"][0]["images"]
    assert image["ended"] and image["cut_at"] is None
    assert image["counts"]["thread_new"] == 4 and image["counts"]["malloc"] >= 12


# -- no call lost (issue 29): every thread's buffer at exit, _exit, and in each program ----------

MARK = 777  # recorded_exits allocates blocks of this size


def marked_mallocs(img) -> int:
    return int(np.count_nonzero((img.kind == KIND["malloc"]) & (img.a == MARK)))


def recorded_with(lib: Path, cmd: list[str], out: Path):
    env = dict(os.environ, PURGECHECK_RECORD=str(out), PURGECHECK_RECORD_LIB=str(lib))
    subprocess.run(["sh", "-c", LAUNCH, "sh", *cmd], env=env, check=True)
    return read_trace(out).images[-1]


@pytest.mark.parametrize("mode", ["running", "_exit", "plain"])
def test_every_call_reaches_the_trace_however_the_program_ends(tmp_path, mode):
    """A thread still running at exit, and _exit, lose nothing: each of the 100 mallocs
    (fewer than a buffer holds, so all still buffered at the end) is in the trace, which
    ends with its exit record."""
    img = recorded_with(library(), [str(BUILD / "recorded_exits"), mode, "100"],
                        tmp_path / "e.rec")
    assert marked_mallocs(img) == 100
    assert img.ended and img.cut is None


@pytest.fixture(scope="module")
def own_buffer_only(tmp_path_factory) -> Path:
    """The broken variant: a recorder whose exit writes only the exiting thread's buffer and
    which has no _exit wrapper (the recorder before issue 29)."""
    lib = tmp_path_factory.mktemp("mutant") / "librecord-own.so"
    subprocess.run(["gcc", "-O2", "-DRECORDER_MUTANT_OWN_BUFFER_ONLY", "-fPIC", "-shared",
                    "-o", str(lib), str(ROOT / "reference_c" / "recorder.c"), "-ldl",
                    "-lpthread"], check=True)
    return lib


@pytest.mark.parametrize("mode", ["running", "_exit"])
def test_a_recorder_that_writes_only_the_exiting_threads_buffer_loses_calls(
        tmp_path, own_buffer_only, mode):
    img = recorded_with(own_buffer_only, [str(BUILD / "recorded_exits"), mode, "100"],
                        tmp_path / "e.rec")
    assert marked_mallocs(img) < 100 and not img.ended


def test_sh_running_two_programs_keeps_each_ones_calls(tmp_path):
    exits = BUILD / "recorded_exits"
    rec = quiet_record(["sh", "-c", f"{exits} plain 50; {exits} running 60"],
                       tmp_path / "sh.rec")
    assert rec.returncode == 0
    counts = sorted(marked_mallocs(img) for t in rec.traces for img in t.images
                    if marked_mallocs(img))
    assert counts == [50, 60]
    assert all(img.ended for t in rec.traces for img in t.images if marked_mallocs(img))
