"""`purgecheck simulate --engine` (issue 29, 4; purgecheck/simulate/engine.py): the models
run by a pypy3 child give every figure CPython gives (each run's `DesignRun.as_json`, the
samples included, hashed), on a recording and on a named workload; `auto` runs CPython on
a small input; `--engine pypy` without pypy3 is one line and exit 2. Small inputs: the
child's start and the JIT's warm-up are most of its second or two."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.simulate import engine
from purgecheck.simulate.glibc import simulate_ops
from purgecheck.simulate.mimalloc import DESIGNS, calls_of, simulate
from purgecheck.simulate.program import load_program
from purgecheck.simulate.workloads import Workload, make_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate_figures import XZ, digest  # noqa: E402

needs_pypy = pytest.mark.skipif(engine.pypy_path() is None,
                                reason="pypy3 is not installed (make setup installs it)")
VERSIONS = ["2.21", "2.23+"]


def in_pypy(rows, timed_ops: bool, jobs, w, sample_ms, park_after_ms) -> list[str]:
    inp = engine.Input(rows, timed_ops)
    try:
        return [digest(doc) for doc, _ in inp.run(jobs, w, sample_ms, park_after_ms, True)]
    finally:
        inp.close()


@needs_pypy
def test_a_recording_gives_the_same_runs_under_both_engines():
    """Broken variant caught: a child given the ops with their times rounded to whole ms
    (test_a_changed_input_changes_the_childs_runs)."""
    program = load_program(XZ)
    w = Workload(program.name, "", lambda: iter(()), "park", 1000.0)
    mine = [digest(r.as_json()) for r in simulate_ops(w.name, program.timed_ops, VERSIONS,
                                                      idle_ms=w.idle_ms, sample_ms=10)]
    mine += [digest(simulate(w, d, sample_ms=10, park_after_ms=10,
                             calls=calls_of(program.timed_ops())).as_json()) for d in DESIGNS]
    jobs = [("glibc", v) for v in VERSIONS] + [("mimalloc", d) for d in DESIGNS]
    assert in_pypy(program.timed_ops(), True, jobs, w, 10, 10) == mine


@needs_pypy
@pytest.mark.parametrize("keep", [engine.KEEP_OPS, 100])
def test_the_designs_alone_on_a_recording_give_the_same_runs(monkeypatch, keep):
    """The designs without a glibc version: a kept input's timed ops are converted to calls
    once in the child for every design (its ops not kept), an input too long to keep is
    read and converted again for each run. Broken variant caught: the calls made once as an
    iterator, not a list (the second design's run gets none)."""
    monkeypatch.setattr(engine, "KEEP_OPS", keep)
    program = load_program(XZ)
    w = Workload(program.name, "", lambda: iter(()), "park", 1000.0)
    designs = ["off", "epoch", "no-hold"]
    mine = [digest(simulate(w, d, sample_ms=10, park_after_ms=10,
                            calls=calls_of(program.timed_ops())).as_json()) for d in designs]
    jobs = [("mimalloc", d) for d in designs]
    assert in_pypy(program.timed_ops(), True, jobs, w, 10, 10) == mine


@needs_pypy
def test_a_named_workload_gives_the_same_runs_under_both_engines(monkeypatch):
    """bun-serve's calls, made by CPython, on two designs; the child reads them from the
    file again for each run, as it does an input too long to keep. Broken variant caught:
    as above."""
    monkeypatch.setattr(engine, "KEEP_OPS", 100)
    w = make_workload("bun-serve", requests=200, threads=2, idle_ms=100)
    designs = ["off", "epoch"]
    mine = [digest(simulate(w, d).as_json()) for d in designs]
    assert in_pypy(w.calls(), False, [("mimalloc", d) for d in designs], w, 50.0, None) == mine


@needs_pypy
@pytest.mark.slow
def test_a_changed_input_changes_the_childs_runs(monkeypatch):
    """The comparison above can fail: ops written with their times rounded to whole ms give
    other figures in the child."""
    program = load_program(XZ)
    w = Workload(program.name, "", lambda: iter(()), "park", 1000.0)
    mine = digest(simulate(w, "epoch", sample_ms=10, park_after_ms=10,
                           calls=calls_of(program.timed_ops())).as_json())
    rounded = ((float(int(t)), op) for t, op in program.timed_ops())
    assert in_pypy(rounded, True, [("mimalloc", "epoch")], w, 10, 10) != [mine]


def cli_json(capsys, *argv) -> tuple[int, dict]:
    rc = main(["simulate", *argv, "--json"])
    return rc, orjson.loads(capsys.readouterr().out)


def test_auto_runs_a_small_trace_on_cpython_and_says_so(capsys, monkeypatch):
    """Broken variant caught: an `auto` that always runs pypy3 (or that names no engine)."""
    monkeypatch.setattr(engine, "pypy_path", lambda: "/usr/bin/pypy3")  # found or not
    rc, doc = cli_json(capsys, str(XZ), "--design", "epoch", "--version", "2.23+")
    assert rc == 0 and doc["engine"] == "cpython"
    assert [r["design"] for r in doc["runs"]] == ["2.23+", "epoch"]


@needs_pypy
@pytest.mark.slow
def test_auto_runs_a_large_trace_on_pypy_with_the_same_figures(capsys, monkeypatch):
    """A trace at the size `auto` sends to pypy3 (the size lowered to the trace's): the
    same --json as CPython's but for the engine named. Broken variant caught: an `auto` that
    never runs pypy3."""
    argv = (str(XZ), "--design", "epoch", "--version", "2.23+")
    _, mine = cli_json(capsys, *argv, "--engine", "cpython")
    from purgecheck.commands import simulate as command
    monkeypatch.setattr(command, "AUTO_FROM", 10)
    _, theirs = cli_json(capsys, *argv)
    assert (mine.pop("engine"), theirs.pop("engine")) == ("cpython", "pypy")
    assert theirs == mine


@pytest.mark.parametrize("command", ["simulate", "replay"])  # the replay's: test_replay_engine
def test_engine_pypy_without_pypy3_is_one_line_and_exit_2(capsys, monkeypatch, tmp_path,
                                                          command):
    """Broken variant caught: a missing pypy3 that falls back to CPython (exit 0)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no pypy3 on it
    rc = main([command, str(XZ), "--engine", "pypy"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.strip().count("\n") == 0 and "pypy3 is not on PATH" in err


@pytest.mark.parametrize("argv", [("bench-free", "--engine", "pypy"),
                                  ("--seeds", "--engine", "cpython")])
def test_engine_where_no_engine_runs_is_a_usage_error(capsys, argv):
    """Seed 001's glibc workloads and --seeds run on CPython only: --engine there is one
    line and exit 2, before anything runs. Broken variant caught: an --engine ignored there
    (exit 0 after the run)."""
    rc = main(["simulate", *argv])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.strip().count("\n") == 0 and "--engine" in err
