"""Benchmark of recording and replaying real programs (docs/record.md): the recorder's cost
per call and its slowdown of python3, the trace's bytes per call, the model's replay rate and
the real glibc's under strace, and the rate and peak RSS of the replay of a 10 M-call trace
(synthetic, its buffers out of call order). Prints figures; asserts nothing.

    .venv/bin/python -m purgecheck.bench.record             1,000,000 malloc/free pairs
    .venv/bin/python -m purgecheck.bench.record --tiny
    .venv/bin/python -m purgecheck.bench.record --long-calls 1000000   a shorter long replay

The recorder's figures are CPU times of the recorded process (getrusage of the children);
the replays' are the CPU time of this process (the model) and the wall clock (the driver
under strace, which stops at each traced system call).
"""

from __future__ import annotations

import argparse
import gc
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from purgecheck.bench import Figure, against_aim, not_measured, own_peak_kb

BENCH = "record"
PY_WORKLOAD = ("import json, re\n"
               "d = {{str(i): [i, str(i) * 3, {{'k': i}}] for i in range({n})}}\n"
               "s = json.dumps(d)\n"
               "assert json.loads(s) == d\n"
               "print(len(re.findall(r'[a-z]+|[0-9]+', s)))\n")


def _children_cpu(cmd: list[str], env: dict | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _recorded_cpu(cmd: list[str], out: Path) -> float:
    import os
    from purgecheck.record.run import LAUNCH, library, trace_files
    for old in trace_files(out):
        old.unlink()
    env = dict(os.environ, PURGECHECK_RECORD=str(out), PURGECHECK_RECORD_LIB=str(library()))
    return _children_cpu(["sh", "-c", LAUNCH, "sh", *cmd], env)


# `make bench`'s sizes (python -m purgecheck.bench; --full gives this module's own defaults:
# 1 M pairs, a 10 M-call trace)
STANDARD = {"pairs": 200_000, "long_calls": 2_000_000}


def figures(tiny: bool = False, pairs: int | None = None,
            long_calls: int | None = None, hash_keys: tuple[int, int] | None = None
            ) -> list[Figure]:
    from model.glibc.versions import VERSIONS
    from purgecheck.formats.alloc_trace import read_trace
    from purgecheck.glibc.fromtrace import Conversion
    from purgecheck.glibc.replay import load, measure, run_model
    from purgecheck.record.run import ROOT, record

    build = ROOT / "reference_c" / "build"
    pairs = pairs or (20_000 if tiny else 1_000_000)
    py_n = 2_000 if tiny else 50_000
    out: list[Figure] = []
    if not (build / "malloc_loop").exists():
        return [not_measured(BENCH, "recorder: cost per call", "ns",
                             "not measured: reference_c/build/malloc_loop is not built")]
    with tempfile.TemporaryDirectory(prefix="purgecheck-bench-record-") as tmp:
        loop = [str(build / "malloc_loop"), str(pairs)]
        bare = min(_children_cpu(loop) for _ in range(3))
        rec_file = Path(tmp) / "loop.rec"
        with_rec = min(_recorded_cpu(loop, rec_file) for _ in range(3))
        calls = 2 * pairs
        out.append(Figure(BENCH, "recorder: cost per call", (with_rec - bare) / calls * 1e9,
                          "ns", f"malloc_loop {pairs:,}: {bare:.3f} s bare, {with_rec:.3f} s "
                                f"recorded (CPU, best of 3)"))
        size = rec_file.stat().st_size
        n = sum(len(img) for img in read_trace(rec_file).images)
        out.append(Figure(BENCH, "trace: bytes per recorded call", size / n, "bytes",
                          f"{size:,} bytes for {n:,} records (32 each, START and END too)"))

        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        py = [python, "-c", PY_WORKLOAD.format(n=py_n)]
        py_bare = min(_children_cpu(py) for _ in range(3))
        py_rec = min(_recorded_cpu(py, Path(tmp) / "py.rec") for _ in range(3))
        out.append(Figure(BENCH, "recorder: slowdown of python3", py_rec / py_bare, "x",
                          f"a json/re workload of {py_n:,} keys: {py_bare:.3f} s bare, "
                          f"{py_rec:.3f} s recorded (CPU, best of 3)"))

        traces = {"single-threaded (python3)": Path(tmp) / "py.rec"}
        rec = record([str(build / "recorded_threads"), "200" if tiny else "20000"],
                     Path(tmp) / "threads.rec", stdout=subprocess.DEVNULL)
        traces["threaded (recorded_threads)"] = rec.files[0]
        for what, path in traces.items():
            img, _ = load(path)
            stats = Conversion()
            c0 = time.process_time()
            run_model(img, VERSIONS["2.23+"], {}, False, stats)  # as `purgecheck replay`
            cpu = time.process_time() - c0
            out.append(Figure(BENCH, f"model replay, {what}: ops per second", stats.ops / cpu,
                              "ops/s", f"{stats.ops:,} ops on the model of 2.23+, CPU time "
                                       f"(conversion included)"))
            out += _replay_parts(img, what)
            try:
                _, wall = measure(img, {})
            except Exception as e:  # strace missing or failing: say so, measure the rest
                out.append(not_measured(BENCH, f"real replay, {what}: ops per second",
                                        "ops/s", f"not measured: {e}"))
                continue
            out.append(Figure(BENCH, f"real replay, {what}: ops per second", stats.ops / wall,
                              "ops/s", f"{stats.ops:,} ops, glibc_driver under strace "
                                       f"--seccomp-bpf, wall clock with start-up"))
        out += long_trace_figures(long_calls or (20_000 if tiny else 10_000_000), Path(tmp))
        out += live_block_figures(hash_keys or HASH_KEYS[tiny], Path(tmp))
    return out


# perl filling a hash, deleting half of its keys at random, adding strings of other sizes,
# then emptying it: blocks split and merged all over a heap of many live blocks (the issue
# 29 workload: at 400,000 keys, 2.6 M ops and 900,000 blocks live at once)
PERL_HASH = ("srand(1); my %h; $h{{$_}}=[$_] for 1..{n}; "
             "for (1..{n}/2) {{ delete $h{{int(rand({n}))}} }} "
             "$h{{\"k$_\"}}=\"x\" x ($_ % 300) for 1..{n}/2; %h=();")


def perl_hash_recording(keys: int, folder: Path) -> Path:
    """PERL_HASH of `keys` keys recorded now (`purgecheck record`) into `folder`: its trace."""
    from purgecheck.record.run import record
    rec = record(["perl", "-e", PERL_HASH.format(n=keys)], folder / f"perl{keys}.rec",
                 stdout=subprocess.DEVNULL)
    return rec.files[0]


HASH_KEYS = {False: (40_000, 400_000), True: (2_000, 20_000)}  # two sizes: ten times apart
# Issue 29's aims: the replay's rate at every size, the 10 M-call trace's CPU time
REPLAY_AIM_OPS = 200_000
LONG_AIM_SECONDS = 120
LONG_AIM_CALLS = 10_000_000


def live_block_figures(sizes: tuple[int, int], tmp: Path) -> list[Figure]:
    """The model replay's rate on a recorded perl hash workload at two sizes, ten times
    apart in live blocks: a replay that slows down as blocks accumulate shows as a lower rate
    at the larger size (CPU time, conversion included, the model of 2.23+)."""
    import shutil
    from model.glibc.versions import VERSIONS
    from purgecheck.glibc.fromtrace import Conversion
    from purgecheck.glibc.replay import load_stream, run_model

    out = []
    for n in sizes:
        name = f"model replay, perl hash of {n:,} keys: ops per second"
        if shutil.which("perl") is None:
            out.append(not_measured(BENCH, name, "ops/s", "not measured: no perl here"))
            continue
        trace = perl_hash_recording(n, tmp)
        stats = Conversion()
        c0 = time.process_time()
        img, _ = load_stream(trace)
        p = run_model(img, VERSIONS["2.23+"], {}, False, stats)
        cpu = time.process_time() - c0
        out.append(Figure(BENCH, name, stats.ops / cpu, "ops/s",
                          f"{stats.ops:,} ops, at most {stats.max_live:,} blocks live, CPU time "
                          f"(reading, conversion, model of 2.23+); "
                          + against_aim(stats.ops / cpu, REPLAY_AIM_OPS, "ops/s")))
        pypy = None if no_replay_engine() else replay_process(trace, "pypy")
        out += engine_figures(f"perl hash of {n:,} keys", pypy,
                              {"cpu": cpu, "counts": {"2.23+": p.count()}})
        trace.unlink()
    return out


def _long_replay(path: str, engine: str = "cpython") -> dict:
    """Replay a trace file as `purgecheck replay --version 2.23+ --engine E` does in this
    process (run in a child of the benchmark): its ops, the CPU seconds of this process and
    of its PyPy child (reading, conversion, model, and the child's start), the peak RSS of
    the largest process of the two (tree_peak_kb), the engine that ran and the counts."""
    import purgecheck.formats.alloc_stream  # noqa: F401 (numpy's import: not the replay's time)
    from purgecheck.bench import children_cpu, tree_peak_kb
    from purgecheck.glibc.replay import replay

    c0, k0 = time.process_time(), children_cpu()
    # bench.compare's base may be a tree from before the replay had engines
    rep = replay(path, ["2.23+"], {}, {}, False, **({"engine": engine}
                                                     if engine != "cpython" else {}))
    return {"ops": rep.conversion.ops, "cpu": time.process_time() - c0 + children_cpu() - k0,
            "peak_kb": tree_peak_kb(), "engine": getattr(rep, "engine", "cpython"),
            "counts": rep.predicted}


def no_replay_engine() -> str | None:
    """Why the replay's PyPy engine cannot be measured here, or None."""
    import inspect
    from purgecheck.glibc.replay import replay
    from purgecheck.simulate.engine import pypy_path
    if "engine" not in inspect.signature(replay).parameters:
        return "no replay engine in this tree"
    return "pypy3 is not on PATH (make setup installs it)" if pypy_path() is None else None


def replay_process(path: str | Path, engine: str = "cpython") -> dict:
    """_long_replay in a child process of its own (its peak is its own)."""
    import json
    out = subprocess.run([sys.executable, "-m", "purgecheck.bench.record", "--long-replay",
                          str(path), "--engine", engine], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def long_trace_figures(calls: int, tmp: Path) -> list[Figure]:
    """A synthetic trace of `calls` calls (purgecheck/record/synthetic.py, its buffers out of
    call order) replayed in a child process: rate and peak RSS, by CPython and by the PyPy
    engine (its CPU with the child's)."""
    from purgecheck.record.synthetic import write_synthetic

    path = tmp / "long.rec"
    write_synthetic(path, calls)
    got = replay_process(path)
    pypy = None if no_replay_engine() else replay_process(path, "pypy")
    size = path.stat().st_size
    path.unlink()
    what = f"{calls / 1e6:g} M-call synthetic trace"
    rate = got["ops"] / got["cpu"]
    ten_m = LONG_AIM_CALLS / rate  # a synthetic trace has about one op a call
    scaled = "" if calls == LONG_AIM_CALLS else \
        f" at this run's rate ({got['cpu']:.1f} s for {got['ops']:,} ops)"
    return [Figure(BENCH, "long replay: ops per second", rate, "ops/s",
                   f"{got['ops']:,} ops of a {what} (external sort, conversion, model of "
                   f"2.23+), CPU time; " + against_aim(rate, REPLAY_AIM_OPS, "ops/s")),
            Figure(BENCH, "long replay: CPU seconds for 10 M calls", ten_m, "s",
                   f"reading, sorting, conversion and model{scaled}; "
                   + against_aim(ten_m, LONG_AIM_SECONDS, "s", at_most=True)),
            Figure(BENCH, "long replay: peak RSS", got["peak_kb"] / 1024, "MB",
                   f"the replaying process, for a trace file of {size / 2**20:,.0f} MB "
                   f"(aim: bounded, whatever the trace's length: "
                   f"tests/test_replay_stream.py compares two lengths)")] \
        + engine_figures("long trace", pypy, got)


def engine_figures(what: str, pypy: dict | None, cpython: dict) -> list[Figure]:
    """The PyPy engine's rate and peak RSS on a replay (`replay --engine pypy`, the whole
    of it: CPython's reading and the child's start counted), beside CPython's."""
    name = f"replay --engine pypy, {what}"
    if pypy is None:
        return [not_measured(BENCH, f"{name}: ops per second", "ops/s",
                             f"not measured: {no_replay_engine()}")]
    rate = pypy["ops"] / pypy["cpu"]
    same = "the same counts" if pypy["counts"] == cpython["counts"] else "OTHER COUNTS"
    return [Figure(BENCH, f"{name}: ops per second", rate, "ops/s",
                   f"{pypy['ops']:,} ops in {pypy['cpu']:.1f} s of CPU, this process and the "
                   f"pypy3 child, {cpython['cpu'] / pypy['cpu']:.2f}x CPython's, {same}; "
                   + against_aim(rate, REPLAY_AIM_OPS, "ops/s")),
            Figure(BENCH, f"{name}: peak RSS", pypy["peak_kb"] / 1024, "MB",
                   "the largest process (CPython reading, or the pypy3 child)")]


def _replay_parts(img, what: str) -> list[Figure]:
    """The model replay's two parts apart: the trace's conversion to ops, and the model
    running ops already converted (where a speed-up must come from)."""
    from model.glibc.process import Process
    from model.glibc.versions import VERSIONS
    from purgecheck.glibc.fromtrace import to_ops
    from purgecheck.glibc.modelrun import handlers

    # A collection the previous step deferred (the replay pauses the cyclic collector) is not
    # this part's cost: without this, the conversion paid it (x0.23 on the threaded trace).
    gc.collect()
    c0 = time.process_time()
    ops = list(to_ops(img))
    c1 = time.process_time()
    do = handlers(Process(VERSIONS["2.23+"], {}, False))
    for op in ops:  # as replay.run_model runs them
        do[op.name](op.thread, *op.args)
    c2 = time.process_time()
    return [Figure(BENCH, f"conversion alone, {what}: ops per second",
                   len(ops) / max(c1 - c0, 1e-9), "ops/s", "records to ops, CPU time"),
            Figure(BENCH, f"model alone, {what}: ops per second",
                   len(ops) / max(c2 - c1, 1e-9), "ops/s", "ops on the model of 2.23+, CPU time")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--pairs", type=int, help="malloc/free pairs of the recorder's loop")
    ap.add_argument("--long-calls", type=int, help="calls of the long synthetic trace "
                                                   "(default 10,000,000; --tiny 20,000)")
    ap.add_argument("--hash-keys", type=int, nargs=2, metavar=("SMALL", "LARGE"),
                    help="the two sizes of the perl hash workload (default 40000 400000)")
    ap.add_argument("--long-replay", metavar="TRACE", help=argparse.SUPPRESS)  # the child
    ap.add_argument("--engine", default="cpython", help=argparse.SUPPRESS)  # the child's
    args = ap.parse_args(argv)
    if args.long_replay:
        import json
        print(json.dumps(_long_replay(args.long_replay, args.engine)))
        return 0
    for f in figures(args.tiny, args.pairs, args.long_calls,
                     tuple(args.hash_keys) if args.hash_keys else None):
        print(f"{f.name:58} {f.value:>14,.1f} {f.unit:8} {f.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
