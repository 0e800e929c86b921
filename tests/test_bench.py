"""Every benchmark runs at its tiny size, so that none of them rots (DESIGN.md): each module's
`figures(tiny=True)`, and `python -m purgecheck.bench --tiny` as `make bench` runs it. The
figures are checked for what they are (present, finite, rates positive, shares that add up),
never against a speed: nothing here asserts on the wall clock."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import math

import pytest

from purgecheck.bench import BENCHMARKS, Figure
from purgecheck.bench.__main__ import main as bench_main

import session_cache

# What each benchmark's figures must name at the least (whatever this machine has installed).
EXPECTED = {
    "cluster": ("kill matrix, home-made pool of 2: wall time",
                "kill matrix, Dask LocalCluster of 2: wall time",
                "fuzz campaign, 1 worker: examples per second",
                "fuzz campaign, 2 workers: examples per second",
                "split explorer, 1 worker, bare-1: states per second",
                "split explorer, 2 workers, bare-1: states per second"),
    "conformance": ("differential examples, conformance alone",
                    "instructions the stamp adds to a malloc+free",
                    "trace reader into dicts, all events",
                    "trace reader into dicts, without page observations"),
    "explorer": ("bare-1: states per second", "park-1-short: states per second",
                 "largest bare configuration exhausted within 2 s"),
    "fuzz": tuple(f"{m} machine, {d} driver: steps per second by CPU time"
                  for m in ("page", "epoch", "park") for d in ("program", "rules")),
    "measure": ("bun-serve default, requests per second: strace and perf / neither",
                "bun-serve default, kernel CPU per request: strace and perf / neither",
                "bun-serve default, requests per second: perf only / neither",
                "bun-serve: one measured run, wall time",
                "bun-serve, no-hold, discards_load: model / real",
                "bun-serve, designs ordered by discards_load: same on both sides"),
    "record": ("recorder: cost per call", "trace: bytes per recorded call",
               "recorder: slowdown of python3",
               "model replay, single-threaded (python3): ops per second",
               "model alone, single-threaded (python3): ops per second",
               "long replay: ops per second", "long replay: peak RSS",
               "long replay: CPU seconds for 10 M calls",
               "real replay, threaded (recorded_threads): ops per second",
               "model replay, perl hash of 2,000 keys: ops per second",
               "model replay, perl hash of 20,000 keys: ops per second",
               "replay --engine pypy, perl hash of 20,000 keys: ops per second",
               "replay --engine pypy, long trace: ops per second"),
    "simulate": tuple(f"bun-serve, {d}: allocations per second"
                      for d in ("off", "epoch", "no-hold", "clock")) +
                ("purgecheck simulate --seeds (scaled)",
                 "recording of a perl hash of 1,000 keys, glibc, every version: allocations "
                 "per second",
                 "recording of a perl hash of 1,000 keys, epoch: allocations per second",
                 "recording of a perl hash of 1,000 keys, epoch, cpython: allocations per second",
                 *(f"recording of a perl hash of 1,000 keys, {d}, pypy, in the child: "
                   f"allocations per second" for d in ("off", "epoch", "no-hold")),
                 "recording of a perl hash of 1,000 keys, the 3 designs, pypy, the whole "
                 "child: allocations per second"),
    "weak": ("weak-adv-2: states", "weak-adv-2: seconds",
             "weak-adv-2, sequentially consistent explorer: states",
             "relacy: park at the reference, iterations per second"),
    "traces": ("validate: events per second by CPU time",
               "diff --traces (the same file twice): events per second by CPU time",
               "diff --traces (against its twin): peak memory"),
}


def is_rate(f: Figure) -> bool:
    return f.unit.endswith("/s")


def check_figures(bench: str, figs: list[Figure]) -> None:
    assert figs and all(isinstance(f, Figure) and f.bench == bench for f in figs)
    names = [f.name for f in figs]
    assert len(names) == len(set(names)), "a figure named twice"
    assert set(EXPECTED[bench]) <= set(names)
    for f in figs:
        if not f.measured:  # only for a missing tool or build, and the row says which
            assert f.note.startswith("not measured: ") and math.isnan(f.value), f
            continue
        assert math.isfinite(f.value), f
        if is_rate(f) or f.unit in ("MB", "ms", "instructions", "states", "steps"):
            assert f.value > 0, f
        if not f.name.startswith("instructions the stamp adds"):
            assert f.value >= 0, f


@pytest.fixture(scope="module")
def tiny_figures() -> dict[str, list[Figure]]:
    """Every benchmark's figures at its tiny size. The cluster's kill matrix, in the pool and
    on Dask, judges its mutant against the session's clean run of the glibc engine
    (clean_cells_once's, also test_cluster_matrix's): a figure of this run's wall time only,
    checked for its shape."""
    from purgecheck.bench import cluster
    from purgecheck.mutants import matrix

    def kill_matrix(tiny, client, *args, _real=cluster.kill_matrix):
        session_cache.workers_clean_cells(client)
        return _real(tiny, client, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matrix, "_judged", session_cache.clean_cells(matrix._judged))
        mp.setattr(cluster, "kill_matrix", kill_matrix)
        return {name: importlib.import_module(f"purgecheck.bench.{name}").figures(tiny=True)
                for name in BENCHMARKS}


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_figures_tiny(tiny_figures, bench):
    check_figures(bench, tiny_figures[bench])


def test_reader_bench_reads_its_trace(tiny_figures):
    """The reader's trace is the scenarios' C traces one after the other: read without a
    TraceError (each one's clock starts again at 1000 ms), and about the size asked for."""
    reader = [f for f in tiny_figures["conformance"] if f.name.startswith("trace reader")]
    assert len(reader) == 2
    for f in reader:
        if f.measured:
            assert f.value > 0 and f.note.startswith("20,0"), f  # 20,000 events and the pages


def test_forward_keeps_the_clock_monotone():
    """Traces whose clocks each start at 1000 ms, put one after the other: the readings go on
    forward with the same steps, and the reader takes the result."""
    from model.world import Options
    from purgecheck.bench.conformance import _forward
    from purgecheck.formats.trace import model_header, read_trace, write_trace

    header = {"config": {"clock_start_ms": 1000}}
    one = [{"ev": "clock", "now": 1100}, {"ev": "epoch_advance", "thread": 1, "epoch": 1,
                                          "start": 1100}, {"ev": "clock", "now": 1300}]
    two = [{"ev": "clock", "now": 1100}, {"ev": "clock", "now": 1050}]
    out = list(_forward([(header, one), (header, two), (header, one)], 1000))
    assert [e["now"] for e in out if e["ev"] == "clock"] == [1100, 1300, 1400, 1400, 1500, 1700]
    assert [e["start"] for e in out if e["ev"] == "epoch_advance"] == [1100, 1500]
    assert one[2]["now"] == 1300  # the scenarios' events are not changed in place

    buf = io.BytesIO()
    write_trace(buf, model_header(Options()), out)  # a virtual clock, monotone, from 1000 ms
    assert sum(1 for _ in read_trace(io.BytesIO(buf.getvalue())).events) == len(out)


def test_fuzz_shares_add_up(tiny_figures):
    figs = {f.name: f.value for f in tiny_figures["fuzz"]}
    for m in ("page", "epoch", "park"):
        for d in ("program", "rules"):
            row = f"{m} machine, {d} driver: share of the time in "
            parts = [v for k, v in figs.items() if k.startswith(row)]
            assert len(parts) == 3 and sum(parts) == pytest.approx(100)
            assert 1 <= figs[f"{m} machine, {d} driver: steps per example"] <= 10


def test_make_bench_tiny_json(capsys, monkeypatch, tiny_figures):
    """`python -m purgecheck.bench --tiny --json`: valid JSON (no NaN), every benchmark
    listed with its figures, none failed, and the machine's cores and load. Each module's
    `figures` gives what it gave the fixture (measured once above, not a second time: the
    table's shape is under test here, the figures in test_figures_tiny)."""
    for name in BENCHMARKS:
        module = importlib.import_module(f"purgecheck.bench.{name}")
        monkeypatch.setattr(module, "figures",
                            lambda tiny, budget=None, _figs=tiny_figures[name]: list(_figs))
    assert bench_main(["--tiny", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tiny"] is True and doc["failed"] == []
    assert doc["benchmarks"] == list(BENCHMARKS)
    assert doc["machine"]["cores"] >= 1
    assert len(doc["machine"]["load_before"]) == len(doc["machine"]["load_after"]) == 3
    by_bench: dict[str, list[dict]] = {}
    for f in doc["figures"]:
        assert set(f) == {"bench", "name", "value", "unit", "note"}
        by_bench.setdefault(f["bench"], []).append(f)
    assert set(by_bench) == set(BENCHMARKS)
    for bench, figs in by_bench.items():
        check_figures(bench, [Figure(**{**f, "value": math.nan if f["value"] is None
                                        else f["value"]}) for f in figs])


def test_a_failing_benchmark_is_a_row_and_exit_1(capsys, monkeypatch):
    """A benchmark that raises does not stop the others nor look measured: its row says how
    it failed, the JSON lists it under "failed", and the exit status is 1."""
    import purgecheck.bench.explorer as explorer

    def broken(tiny, budget=None):
        raise RuntimeError("no states today")
    monkeypatch.setattr(explorer, "figures", broken)
    assert bench_main(["--tiny", "--json", "--only", "explorer"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] == ["explorer"]
    [row] = doc["figures"]
    assert row["value"] is None and row["note"] == "failed: RuntimeError: no states today"


def test_make_bench_table_only(capsys):
    """The table: a header line with the cores and the load before and after, then one
    row per figure of the benchmarks asked for, and only theirs."""
    assert bench_main(["--tiny", "--only", "explorer"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "cores, load average" in lines[0] and " before, " in lines[0] and "after" in lines[0]
    assert lines[1].split()[:4] == ["benchmark", "figure", "value", "unit"]
    rows = lines[3:]
    assert rows and all(r.startswith("explorer ") for r in rows)
    assert any(r.split()[1:3] == ["bare-1:", "states"] for r in rows)


def test_make_bench_passes_each_standard_size_to_its_benchmark(capsys, monkeypatch):
    """`make bench` (no --tiny, no --full) runs the cluster and record benchmarks at their
    STANDARD sizes, and `--full` at their own: each size is a parameter `figures` takes (a
    wrong name would stop `make bench` only when it runs, minutes in)."""
    seen = {}
    for name in BENCHMARKS:
        module = importlib.import_module(f"purgecheck.bench.{name}")
        std = getattr(module, "STANDARD", {})
        inspect.signature(module.figures).bind(False, **std)  # TypeError on a wrong name

        def record(tiny, _name=name, **kw):
            seen[_name] = (tiny, kw)
            return [Figure(_name, "a figure", 1.0, "s")]
        monkeypatch.setattr(module, "figures", record)
    assert {n for n in BENCHMARKS
            if getattr(importlib.import_module(f"purgecheck.bench.{n}"), "STANDARD", None)
            } == {"cluster", "measure", "record"}
    assert bench_main(["--json", "--only", "cluster", "--only", "record"]) == 0
    from purgecheck.bench import cluster, record
    assert seen == {"cluster": (False, cluster.STANDARD), "record": (False, record.STANDARD)}
    assert bench_main(["--json", "--full", "--only", "cluster", "--only", "record"]) == 0
    assert seen == {"cluster": (False, {}), "record": (False, {})}
    with pytest.raises(SystemExit):
        bench_main(["--full", "--tiny"])
    capsys.readouterr()


def test_traces_figures_name_their_trace_shape(tmp_path):
    """A throughput figure can be reproduced from its note: events, kinds, pages, threads."""
    from purgecheck.bench.traces import ensure_trace, trace_shape
    path = tmp_path / "t.jsonl"
    n = ensure_trace(path, 2_000, 0, say=lambda s: None)
    shape = trace_shape(path)
    assert shape.startswith(f"{n:,} events of ") and " kinds (" in shape
    assert "pages" in shape and "5 threads" in shape and "tracegen seed 0" in shape


def test_a_figure_with_an_aim_says_whether_this_run_reached_it():
    """Issue 29's aims are printed beside the figures they bound (never asserted): a rate is
    judged from below, a time from above."""
    from purgecheck.bench import against_aim
    assert against_aim(250_000, 200_000, "ops/s").endswith("at least 200,000 ops/s, reached here")
    assert "not reached" in against_aim(150_000, 200_000, "ops/s")
    assert against_aim(90, 120, "s", at_most=True).endswith("reached here")
    assert "not reached" in against_aim(150, 120, "s", at_most=True)



def test_the_scale_figures_carry_their_aims(tiny_figures):
    """Issue 29's figures name their aim: the replay's rate at both sizes of the perl hash and
    on the long trace (by CPython and by the PyPy engine), the long trace's time, the
    simulator's rate on every design."""
    from purgecheck.simulate.mimalloc import DESIGNS
    aimed = [f for f in tiny_figures["record"] if f.name.startswith(
        ("model replay, perl hash", "long replay: ops", "long replay: CPU"))
        or f.name.startswith("replay --engine pypy") and f.name.endswith("ops per second")]
    aimed += [f for f in tiny_figures["simulate"] if f.name.startswith("bun-serve, ")]
    assert len(aimed) == 4 + 3 + len(DESIGNS)
    for f in aimed:
        assert not f.measured or "aim: at " in f.note, f


def test_the_engine_figures_of_a_tree_without_the_engine_are_not_measured(monkeypatch):
    """bench.compare runs this tree's benchmarks on an older tree's code: there the simulate
    benchmark's PyPy part is "not measured" and the rest of the benchmark still runs (before,
    its import failed the whole benchmark on the base: 0 figures against 24). Fails if the
    engine's import is not guarded (ImportError) or the part is dropped silently."""
    import sys

    from purgecheck.bench.simulate import engine_figures
    monkeypatch.setitem(sys.modules, "purgecheck.simulate.engine", None)  # import fails
    figs = engine_figures(tiny=True)
    assert [f.name.split(" keys, ", 1)[-1] for f in figs] == [
        "epoch, cpython: allocations per second",
        *(f"{d}, pypy, in the child: allocations per second" for d in ("off", "epoch", "no-hold")),
        "the 3 designs, pypy, the whole child: allocations per second"]
    assert all(math.isnan(f.value) and "no engine in this tree" in f.note for f in figs)


def test_a_c_driver_under_one_clock_tick_is_not_measured():
    """/proc counts the conformance driver's CPU in clock ticks: 20 examples (the tiny size)
    may not reach one, and the row then says so (a 0 ms per example failed test_figures_tiny
    at load 8); one tick is a figure."""
    from purgecheck.bench.conformance import examples_figures
    r = {"examples": 20, "events": 1_860, "run_wall": 0.5, "run_cpu": 0.2, "c_cpu": 0.0,
         "gen_wall": 0.1, "gen_cpu": 0.1}
    [row] = [f for f in examples_figures(r) if f.name.endswith("in the C driver")]
    assert not row.measured and row.note.startswith("not measured: ") and math.isnan(row.value)
    [row] = [f for f in examples_figures({**r, "c_cpu": 0.01}) if f.name.endswith("C driver")]
    assert row.measured and row.value == pytest.approx(0.5)
