"""The recorder (reference_c/recorder.c) and `purgecheck record`: every call with its thread
in creation order and a per-thread monotonic clock, fork and exec, a killed program's trace
readable and cut cleanly, and the programs it must refuse (docs/record.md)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from purgecheck.cli import main
from purgecheck.formats.alloc_trace import (F_IN_CREATE, KIND, RECORD, AllocTraceError,
                                            read_trace)
from purgecheck.glibc.fromtrace import Conversion, to_ops
from purgecheck.glibc.replay import run_model
from model.glibc.versions import VERSIONS
from purgecheck.record.run import LAUNCH, ROOT, library, record, trace_files

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


FORK_EXEC = ("import os, sys\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    [bytearray(3000) for _ in range(10)]\n"
             "    os._exit(0)\n"
             "os.waitpid(pid, 0)\n"
             "os.execv(sys.executable, [sys.executable, '-c', 'x = [str(i) for i in range(9)]'])\n")


def test_a_fork_child_writes_its_own_file_and_an_exec_continues_the_same(tmp_path):
    rec = quiet_record([PYTHON, "-c", FORK_EXEC], tmp_path / "f.rec")
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


def test_a_killed_program_leaves_whole_records_cut_at_a_call_in_flight(tmp_path):
    """recorded_threads killed mid-run: the numbers missing from the file are calls whose
    record was in flight, at most one a thread (the recorder stores each record into the
    mapped file as it is made; the recorder before kept up to 256 a thread unwritten)."""
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
    numbers = written_numbers(out)
    missing = set(range(max(numbers) + 1)) - numbers
    assert len(missing) <= 5  # the main thread and four workers: one call in flight each
    # the image ends where the first call number is missing from the file
    assert img.cut == (min(missing) if missing else None)
    assert len(img) == (min(missing) if missing else len(numbers))
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


EXITS = BUILD / "recorded_exits"


def marked_mallocs(img) -> int:
    return int(np.count_nonzero((img.kind == KIND["malloc"]) & (img.a == MARK)))


def marked_by_thread(img) -> dict[int, int]:
    threads, n = np.unique(img.thread[(img.kind == KIND["malloc"]) & (img.a == MARK)],
                           return_counts=True)
    return dict(zip(threads.tolist(), n.tolist()))


def slots(path: Path) -> np.ndarray:
    """The file's 32-byte slots as (n, 4) words, records and slots never written alike."""
    return np.fromfile(path, dtype="<u8").reshape(-1, 4)


def written_numbers(path: Path) -> set[int]:
    """The call numbers of the records in a one-image file (slots never written left out)."""
    w0 = slots(path)[:, 0]
    return set((w0[w0 != 0] & np.uint64((1 << 40) - 1)).tolist())


WINDOW_RECORDS = 64  # a thread's window of the file (reference_c/recorder.c)


def unwritten_at_end(path: Path) -> int:
    """The slots never written after the file's last record."""
    w0 = slots(path)[:, 0]
    return len(w0) - 1 - int(np.flatnonzero(w0)[-1])


def recorded_with(lib: Path, cmd: list[str], out: Path, status: int = 0):
    env = dict(os.environ, PURGECHECK_RECORD=str(out), PURGECHECK_RECORD_LIB=str(lib))
    assert subprocess.run(["sh", "-c", LAUNCH, "sh", *cmd], env=env).returncode == status
    return read_trace(out).images[-1]


@pytest.mark.parametrize("mode", ["running", "_exit", "plain"])
def test_every_call_reaches_the_trace_however_the_program_ends(tmp_path, mode):
    """A thread still running at exit, and _exit, lose nothing: each of the 100 mallocs is
    in the trace, which ends with its exit record, and the file is cut back to the end of the
    last thread's window (the room the recorder extended it by ahead is given back)."""
    out = tmp_path / "e.rec"
    img = recorded_with(library(), [str(EXITS), mode, "100"], out)
    assert marked_mallocs(img) == 100
    assert img.ended and img.cut is None
    assert unwritten_at_end(out) < WINDOW_RECORDS


def test_a_killed_program_keeps_every_call_it_made(tmp_path):
    """SIGKILL once main and three threads have made their 100 mallocs each (all waiting
    then, no call in flight): every call is in the trace, without a gap, and the trace has
    no exit record."""
    img = recorded_with(library(), [str(EXITS), "killed", "100"], tmp_path / "k.rec",
                        status=-signal.SIGKILL)
    assert marked_by_thread(img) == {0: 100, 1: 100, 2: 100, 3: 100}
    assert img.cut is None and not img.ended


def test_a_killed_programs_replay_says_it_covers_a_prefix(capsys, tmp_path):
    out = tmp_path / "k.rec"
    rc, text, _ = cli(capsys, "record", "-o", str(out), "--", str(EXITS), "killed", "20")
    assert rc == 0 and "no exit record (killed?)" in text
    rc, text, _ = cli(capsys, "replay", str(out), "--version", "2.23+", "--json")
    import orjson
    doc = orjson.loads(text)
    assert not doc["complete"] and "no exit record" in doc["prefix"]


def test_many_threads_each_keep_their_calls(tmp_path):
    """1,100 threads, more than the recorder before had buffers for (1,024), 64 at a time:
    each one's three mallocs are in the trace; the windows of threads that ended are given
    back, so few slots stay unwritten."""
    out = tmp_path / "m.rec"
    img = recorded_with(library(), [str(EXITS), "many", "1100"], out)
    assert marked_by_thread(img) == {t: 3 for t in range(1, 1101)}
    assert img.ended and img.cut is None
    # at most a window a thread running at once (64): the others were given back
    assert np.count_nonzero(slots(out)[:, 0] == 0) < 64 * WINDOW_RECORDS


def recorder_variant(tmp_path_factory, flag: str) -> Path:
    lib = tmp_path_factory.mktemp("mutant") / f"librecord-{flag}.so"
    subprocess.run(["gcc", "-O2", f"-D{flag}", "-fPIC", "-shared", "-o", str(lib),
                    str(ROOT / "reference_c" / "recorder.c"), "-ldl", "-lpthread"], check=True)
    return lib


@pytest.fixture(scope="module")
def own_buffer_only(tmp_path_factory) -> Path:
    """The broken variant: records wait in a buffer of their thread, written when it is full,
    when the thread ends, and at exit for the exiting thread only; no _exit wrapper (the
    recorder before issue 29)."""
    return recorder_variant(tmp_path_factory, "RECORDER_MUTANT_OWN_BUFFER_ONLY")


@pytest.mark.parametrize("mode", ["running", "_exit"])
def test_a_recorder_that_writes_only_the_exiting_threads_buffer_loses_calls(
        tmp_path, own_buffer_only, mode):
    img = recorded_with(own_buffer_only, [str(EXITS), mode, "100"], tmp_path / "e.rec")
    assert marked_mallocs(img) < 100 and not img.ended


def test_a_recorder_that_buffers_its_records_loses_a_killed_programs_calls(
        tmp_path, own_buffer_only):
    img = recorded_with(own_buffer_only, [str(EXITS), "killed", "100"], tmp_path / "k.rec",
                        status=-signal.SIGKILL)
    assert sum(marked_by_thread(img).values()) < 400


def test_a_recorder_that_keeps_the_room_ahead_leaves_slots_the_reader_skips(
        tmp_path_factory, tmp_path):
    """The broken variant that never cuts the file back: the file ends in slots never
    written (the end check above fails on it), which the readers skip: the same calls."""
    lib = recorder_variant(tmp_path_factory, "RECORDER_MUTANT_NO_TRIM")
    out = tmp_path / "e.rec"
    img = recorded_with(lib, [str(EXITS), "plain", "100"], out)
    assert unwritten_at_end(out) >= WINDOW_RECORDS
    assert marked_mallocs(img) == 100 and img.ended and img.cut is None
    from purgecheck.formats.alloc_stream import stream_images
    (streamed,) = stream_images(out)
    assert len(streamed) == len(img) and streamed.ended and streamed.sorted_in_file


def test_a_recorder_whose_fork_child_keeps_its_parents_window_breaks_the_childs_file(
        tmp_path_factory, tmp_path):
    """The broken variant: the child stores into the window it inherited, a window of its
    parent's file (the mapping is shared), so its own file does not start with its START
    record (the fork test above fails on it)."""
    lib = recorder_variant(tmp_path_factory, "RECORDER_MUTANT_CHILD_KEEPS_WINDOW")
    out = tmp_path / "f.rec"
    env = dict(os.environ, PURGECHECK_RECORD=str(out), PURGECHECK_RECORD_LIB=str(lib))
    subprocess.run(["sh", "-c", LAUNCH, "sh", PYTHON, "-c", FORK_EXEC], env=env, check=True)
    (child,) = trace_files(out)[1:]
    with pytest.raises(AllocTraceError, match="expected a START record"):
        read_trace(child)


EXECL = "import ctypes; [bytearray(3000) for _ in range(10)]; ctypes.CDLL(None).{call}"
EXECL_CALLS = ["execl(b'/bin/true', b'true', None)", "execlp(b'true', b'true', None)"]


@pytest.mark.parametrize("call", EXECL_CALLS)
def test_the_execl_family_records_its_exec(tmp_path, call):
    """execl and execlp call execve inside the C library; the recorder wraps them too, so
    the first image ends with its exec record and the file is cut back before the next."""
    out = tmp_path / "l.rec"
    rec = quiet_record([PYTHON, "-c", EXECL.format(call=call)], out)
    before, after = rec.traces[0].images
    assert before.execed and before.cut is None and after.ended
    assert not np.any(slots(out)[:, 0] == 0)


def test_a_recorder_that_does_not_see_the_execl_family_leaves_the_image_unended(
        tmp_path_factory, tmp_path):
    lib = recorder_variant(tmp_path_factory, "RECORDER_MUTANT_NO_EXECL")
    recorded_with(lib, [PYTHON, "-c", EXECL.format(call=EXECL_CALLS[0])], tmp_path / "l.rec")
    before, after = read_trace(tmp_path / "l.rec").images
    assert not before.execed and not before.ended and after.ended


def test_sh_running_two_programs_keeps_each_ones_calls(tmp_path):
    rec = quiet_record(["sh", "-c", f"{EXITS} plain 50; {EXITS} running 60"],
                       tmp_path / "sh.rec")
    assert rec.returncode == 0
    counts = sorted(marked_mallocs(img) for t in rec.traces for img in t.images
                    if marked_mallocs(img))
    assert counts == [50, 60]
    assert all(img.ended for t in rec.traces for img in t.images if marked_mallocs(img))


def test_sh_running_two_programs_the_second_killed_keeps_each_ones_calls(tmp_path):
    """sh forks, each child execs: every process has a file (and windows) of its own; the
    killed one keeps all its threads' calls."""
    rec = quiet_record(["sh", "-c", f"{EXITS} plain 50; {EXITS} killed 30"],
                       tmp_path / "sh.rec")
    assert rec.returncode == 128 + signal.SIGKILL  # sh's status for a child killed so
    marked = {img.ended: marked_by_thread(img) for t in rec.traces for img in t.images
              if marked_mallocs(img)}
    assert marked == {True: {0: 50}, False: {0: 30, 1: 30, 2: 30, 3: 30}}


def test_xz_killed_mid_run_keeps_its_threads_calls(tmp_path):
    """xz -T2 compressing a stream still open, killed once both worker threads have made
    calls: the trace has them, and a number is missing only for a call in flight."""
    if shutil.which("xz") is None:
        pytest.skip("no xz here")
    out = tmp_path / "xz.rec"
    env = dict(os.environ, PURGECHECK_RECORD=str(out), PURGECHECK_RECORD_LIB=str(library()))
    proc = subprocess.Popen(["sh", "-c", LAUNCH, "sh", "xz", "-T2", "-0", "--block-size=65536",
                             "-c"], env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    proc.stdin.write(np.random.default_rng(29).bytes(1 << 20))  # incompressible: 16 blocks
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not {1, 2} <= threads_in(out):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    proc.stdin.close()
    (img,) = read_trace(out).images
    assert {0, 1, 2} <= set(img.thread.tolist()) and not img.ended
    numbers = written_numbers(out)
    assert len(set(range(max(numbers) + 1)) - numbers) <= 3  # in flight: one a thread


def threads_in(path: Path) -> set[int]:
    if not path.exists():
        return set()
    w0 = slots(path)[:, 0]
    return set(((w0[w0 != 0] >> np.uint64(40)) & np.uint64(0xFFFF)).tolist())
