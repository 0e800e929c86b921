"""`purgecheck replay --engine` (issue 29, 4; purgecheck/simulate/engine.py's child):
CPython reads the trace, a pypy3 child converts its records (purgecheck/formats/records.py,
no numpy) and runs the glibc model; every figure of `--json` is the same under both engines
but the CPU seconds and the engine's name. The numpy-free reader is checked against the
streaming reader in CPython (no pypy3 needed); the child on small traces (a second or two:
its start and the JIT's warm-up)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.formats.alloc_trace import RECORD
from purgecheck.formats.records import RecordImage
from purgecheck.glibc.fromtrace import Conversion, to_ops
from purgecheck.glibc.replay import load_stream
from purgecheck.record.synthetic import write_synthetic
from purgecheck.simulate import engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate_figures import XZ  # noqa: E402
from test_heaptrack import HEAD, heaptrack_file  # noqa: E402
from test_replay_stream import stream, with_unwritten_slots  # noqa: E402

needs_pypy = pytest.mark.skipif(engine.pypy_path() is None,
                                reason="pypy3 is not installed (make setup installs it)")


def numpy_free(img) -> RecordImage:
    return RecordImage(*img.in_order(), img.index())


@pytest.mark.parametrize("threads", [1, 4])  # in call order in the file, and sorted
def test_the_numpy_free_reader_gives_the_streaming_readers_ops(tmp_path, threads):
    """Records, record numbers, the next record of a thread, and the ops, on a trace with
    slots never written and a cut. Broken variant caught: a reader that takes a slot never
    written for a record (`if not w0: continue` removed: 4-word case), or that reads the
    sorted file's record number from the wrong word (5-word case)."""
    path = tmp_path / "t.rec"
    write_synthetic(path, 3_000, threads=threads, buffer=64)
    data = with_unwritten_slots(path.read_bytes(), 7)
    path.write_bytes(data[:len(data) // RECORD * 2 // 3 * RECORD])  # killed: cut there
    s = stream(path, chunk=300, run=700)
    assert s.sorted_in_file == (threads == 1) and (s.cut is not None) == (threads > 1)
    r = numpy_free(s)
    assert list(r.rows()) == list(s.rows()) and len(r) == len(s) > 1_000
    for i in (0, 5, 777, len(s) - 3):
        for t in s.last_of_threads():
            assert r.next_of_thread(i, t) == s.next_of_thread(i, t)
    a, b = Conversion(), Conversion()
    assert list(to_ops(r, a)) == list(to_ops(s, b)) and a == b


def replay_json(capsys, *argv) -> tuple[int, dict]:
    rc = main(["replay", *argv, "--json"])
    return rc, orjson.loads(capsys.readouterr().out)


def figures(doc: dict) -> str:
    """`--json` hashed without what may differ between two runs: CPU seconds, the engine."""
    rest = {k: v for k, v in doc.items() if k not in ("model_seconds", "engine")}
    return hashlib.sha256(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)).hexdigest()


@needs_pypy
@pytest.mark.parametrize("image", ["xz", "synthetic", "heaptrack"])
def test_the_pypy_engine_gives_every_figure_cpython_gives(capsys, tmp_path, image):
    """xz -T2's recording (in call order in the file, threads, pthread_create's own blocks),
    a synthetic trace out of call order (the child reads the sorted file), a heaptrack file
    (the child reads it itself), every version. Broken variant caught: a child reader that
    drops the flags (`(w[j + 1] >> 48) & 0xFF` read as 0: pthread_create's own blocks
    replayed, other ops and counts)."""
    path = XZ if image == "xz" else tmp_path / "t.rec"
    if image == "synthetic":
        write_synthetic(path, 4_000, threads=3, buffer=64)
    if image == "heaptrack":  # blocks of 32 B and 200 KiB (mmapped), a third freed
        path = heaptrack_file(tmp_path, HEAD + "a 20 1\na 32000 1\n" + "".join(
            f"+ {i % 2}\n" + ("- 0\n" if i % 3 == 0 else "") for i in range(300)))
    _, mine = replay_json(capsys, str(path), "--engine", "cpython")
    _, theirs = replay_json(capsys, str(path), "--engine", "pypy")
    assert (mine["engine"], theirs["engine"]) == ("cpython", "pypy")
    assert figures(theirs) == figures(mine) and len(mine["predicted"]) == 4
    assert set(theirs["model_seconds"]) == set(mine["predicted"])


@needs_pypy
def test_a_record_the_model_refuses_is_named_as_cpython_names_it(capsys, tmp_path):
    """A free of a block never allocated: the child's message is CPython's, one line, exit 2.
    Broken variant caught: a child error passed on as a traceback (exit 1) or in other
    words."""
    from purgecheck.formats.alloc_trace import MAGIC, encode
    path = tmp_path / "bad.rec"
    path.write_bytes(encode(0, 1, "start", 42, MAGIC) + encode(1, 1, "malloc", 24, 0x1000)
                     + encode(2, 1, "free", 0x2000) + encode(3, 1, "end"))
    errs = []
    for e in ("cpython", "pypy"):
        assert main(["replay", str(path), "--engine", e]) == 2
        errs.append(capsys.readouterr().err)
    assert errs[0] == errs[1] and "record 2" in errs[0] and errs[0].count("\n") == 1


def test_auto_runs_a_small_trace_on_cpython_and_says_so(capsys, monkeypatch):
    """Broken variant caught: an `auto` that always runs pypy3 (or a --json naming no
    engine)."""
    monkeypatch.setattr(engine, "pypy_path", lambda: "/usr/bin/pypy3")  # found or not
    rc, doc = replay_json(capsys, str(XZ), "--version", "2.23+")
    assert rc == 0 and doc["engine"] == "cpython"


@needs_pypy
def test_auto_runs_a_large_trace_on_pypy_and_the_table_says_so(capsys, monkeypatch):
    """The size lowered to xz's: `auto` runs the child, and the table names it. Broken
    variant caught: an `auto` that never runs pypy3."""
    monkeypatch.setattr(engine, "REPLAY_AUTO_FROM", 10)
    assert main(["replay", str(XZ), "--version", "2.23+"]) == 0
    assert "(run by pypy, the child's CPU" in capsys.readouterr().out


# --engine pypy without pypy3: tests/test_simulate_engine.py, for both commands
