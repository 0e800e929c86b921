"""The simulator and the replay's model under CPython and under PyPy, side by side (issue
29, 4; docs/simulate-guide.md, twelfth round): the same runs on the same input, each run's
figures hashed under both (`DesignRun.as_json`; the replay's system-call counts), CPU time
of each, rounds alternated, the best of each kept. Prints; asserts nothing but the hashes.

    .venv/bin/python -m purgecheck.bench.pypy perl --keys 150000 --rounds 3
    .venv/bin/python -m purgecheck.bench.pypy bun-serve --requests 20000 100000
    .venv/bin/python -m purgecheck.bench.pypy replay --keys 40000 150000 --calls 10000000

`perl`: the perl hash recording of purgecheck/bench/record.py (PERL_HASH) made now, read and
converted once by CPython to its timed ops (as `simulate TRACE` does), then each design
(`--design`, default off, epoch, no-hold; `--design "glibc 2.23+"` a glibc version) run by
CPython in this process and by a `pypy3` child (purgecheck/simulate/engine.py) on those
ops, 10 ms samples, a thread silent for 10 ms parks. `bun-serve`: the workload's calls,
made once by CPython, the same way. The child's CPU is the whole child's (getrusage of the
children: start, reading the input, the JIT's warm-up) and, apart, each run's inside it.
A recording's designs run on its calls made once (`calls_of`) on both sides, as the child
does for a kept input (fifteenth round).
`replay`: `purgecheck replay TRACE --version 2.23+` with `--engine cpython` and `--engine
pypy` in turn, each in a process of its own, on the perl recordings (`--keys`) and synthetic
traces (`--calls`): CPU of the whole (the CPython process and its pypy3 child), peak RSS;
with `--whole`, also the CPU of the command as a user runs it (`python -m purgecheck replay
TRACE --version 2.23+ --engine E --json`: Python's start and the imports included, which
the figure above leaves out), its `--json` compared across engines.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from purgecheck.bench import children_cpu
from purgecheck.bench.record import perl_hash_recording

DEFAULT_DESIGNS = ("off", "epoch", "no-hold")


def digest(doc) -> str:
    import orjson
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def load() -> str:
    return os.getloadavg()[0].__format__(".1f")


def compare(what: str, rows, timed_ops: bool, workload, designs, rounds: int,
            sample_ms: float, park_after_ms: float | None) -> None:
    """Each design under CPython (here) and PyPy (a child), `rounds` times in turn."""
    from purgecheck.simulate.engine import Input, run_job

    c0 = time.process_time()
    inp = Input(rows, timed_ops)
    print(f"{what}: {inp.size:,} {'ops' if timed_ops else 'calls'}; the input written for "
          f"the child in {time.process_time() - c0:.2f} s of CPU", flush=True)
    best: dict[tuple[str, str], float] = {}
    hashes: dict[tuple[str, str], str] = {}
    allocs: dict[str, int] = {}
    # a design "glibc V" is glibc version V, on the timed ops
    jobs = [("glibc", d[6:]) if d.startswith("glibc ") else ("mimalloc", d) for d in designs]
    calls = None
    if timed_ops and any(side == "mimalloc" for side, _ in jobs):
        # the mimalloc side's calls made once for every design, as the child makes them
        from purgecheck.simulate.mimalloc import calls_of
        c0 = time.process_time()
        calls = list(calls_of(iter(rows)))
        print(f"  the designs' calls made once by CPython in {time.process_time() - c0:.2f} s "
              f"of CPU", flush=True)
    try:
        for r in range(1, rounds + 1):
            for d, job in zip(designs, jobs):
                c0 = time.process_time()
                if job[0] == "mimalloc" and calls is not None:
                    run = run_job(job, lambda: iter(calls), False, workload, sample_ms,
                                  park_after_ms)
                else:
                    run = run_job(job, lambda: iter(rows), timed_ops, workload, sample_ms,
                                  park_after_ms)
                cpu = time.process_time() - c0
                allocs[d] = run.counters["allocations"]
                hashes[("cpython", d)] = digest(run.as_json())
                best[("cpython", d)] = min(cpu, best.get(("cpython", d), cpu))
                print(f"  round {r} cpython {d}: {cpu:.2f} s, {allocs[d] / cpu:,.0f} "
                      f"allocations/s (load {load()})", flush=True)
            k0 = children_cpu()
            out = inp.run(jobs, workload, sample_ms, park_after_ms, quiet=True)
            whole = children_cpu() - k0
            for d, (doc, cpu) in zip(designs, out):
                hashes[("pypy", d)] = digest(doc)
                best[("pypy", d)] = min(cpu, best.get(("pypy", d), cpu))
                print(f"  round {r} pypy    {d}: {cpu:.2f} s, {allocs[d] / cpu:,.0f} "
                      f"allocations/s", flush=True)
            best[("pypy", "child")] = min(whole, best.get(("pypy", "child"), whole))
            print(f"  round {r} pypy child: {whole:.2f} s of CPU for {len(designs)} designs "
                  f"(load {load()})", flush=True)
    finally:
        inp.close()
    print(f"{what}, best of {rounds}: design, allocations, CPython, PyPy, ratio, same figures")
    total = {"cpython": 0.0, "pypy": 0.0}
    for d in designs:
        a, b = best[("cpython", d)], best[("pypy", d)]
        total["cpython"] += a
        total["pypy"] += b
        same = hashes[("cpython", d)] == hashes[("pypy", d)]
        print(f"  {d:14} {allocs[d]:>9,} {allocs[d] / a:>9,.0f}/s {allocs[d] / b:>9,.0f}/s "
              f"{a / b:5.2f}x  {'same ' + hashes[('cpython', d)] if same else 'DIFFER'}")
    n = sum(allocs.values())
    child = best[("pypy", "child")]
    print(f"  together: CPython {n / total['cpython']:,.0f}/s, PyPy {n / total['pypy']:,.0f}/s "
          f"inside the child, {n / child:,.0f}/s by the whole child's CPU "
          f"({child:.1f} s: {total['cpython'] / child:.2f}x)", flush=True)


def perl(args, tmp: Path) -> None:
    from purgecheck.simulate.program import load_program
    from purgecheck.simulate.workloads import Workload
    for keys in args.keys:
        program = load_program(perl_hash_recording(keys, tmp))
        c0 = time.process_time()
        ops = list(program.timed_ops())
        print(f"perl hash of {keys:,} keys: converted to timed ops by CPython in "
              f"{time.process_time() - c0:.2f} s", flush=True)
        w = Workload(program.name, "", lambda: iter(()), "park", 100.0)
        compare(f"perl hash of {keys:,} keys", ops, True, w, args.design, args.rounds,
                10.0, 10.0)


def bun_serve(args, tmp: Path) -> None:
    from purgecheck.simulate.workloads import make_workload
    for requests in args.requests:
        w = make_workload("bun-serve", idle_ms=200, requests=requests)
        calls = list(w.calls())
        compare(f"bun-serve, {requests:,} requests", calls, False, w, args.design,
                args.rounds, 50.0, None)


def replay(args, tmp: Path) -> None:
    """`purgecheck replay TRACE --version 2.23+` by each engine, rounds alternated, each run
    in a process of its own (bench.record.replay_process): the CPU of the whole replay
    (CPython's reading, and with `pypy` the child: its start, the conversion, the model),
    the peak RSS of the largest process, the system-call counts compared."""
    from purgecheck.bench.record import replay_process
    from purgecheck.record.synthetic import write_synthetic
    traces = [(f"perl hash of {k:,} keys", perl_hash_recording(k, tmp)) for k in args.keys]
    for calls in args.calls:
        write_synthetic(tmp / f"synthetic{calls}.rec", calls)
        traces.append((f"synthetic trace of {calls:,} calls", tmp / f"synthetic{calls}.rec"))
    for what, path in traces:
        best: dict[str, dict] = {}
        whole: dict[str, float] = {}
        counts, figures = set(), set()
        for r in range(1, args.rounds + 1):
            for engine in ("cpython", "pypy"):
                got = replay_process(path, engine)
                counts.add(digest(got["counts"]))
                rate = got["ops"] / got["cpu"]
                print(f"  {what}, round {r}, {engine:7}: {got['cpu']:7.2f} s, {rate:9,.0f} "
                      f"ops/s, peak {got['peak_kb'] / 1024:6,.0f} MB (load {load()})",
                      flush=True)
                if engine not in best or got["cpu"] < best[engine]["cpu"]:
                    best[engine] = got
                if args.whole:
                    cpu, doc = whole_command(path, engine)
                    figures.add(digest({k: v for k, v in doc.items()
                                        if k not in ("model_seconds", "engine")}))
                    print(f"  {what}, round {r}, {engine:7}: {cpu:7.2f} s, "
                          f"{got['ops'] / cpu:9,.0f} ops/s, the whole command (load {load()})",
                          flush=True)
                    whole[engine] = min(cpu, whole.get(engine, cpu))
        c, p = best["cpython"], best["pypy"]
        print(f"{what}: {c['ops']:,} ops, best of {args.rounds}: CPython "
              f"{c['ops'] / c['cpu']:,.0f} ops/s ({c['cpu']:.2f} s, peak "
              f"{c['peak_kb'] / 1024:,.0f} MB), PyPy engine {p['ops'] / p['cpu']:,.0f} ops/s "
              f"({p['cpu']:.2f} s, peak {p['peak_kb'] / 1024:,.0f} MB): "
              f"{c['cpu'] / p['cpu']:.2f}x; "
              f"{'the same counts' if len(counts) == 1 else 'COUNTS DIFFER'}", flush=True)
        if whole:
            print(f"  the whole command, best of {args.rounds}: CPython "
                  f"{c['ops'] / whole['cpython']:,.0f} ops/s ({whole['cpython']:.2f} s), PyPy "
                  f"engine {c['ops'] / whole['pypy']:,.0f} ops/s ({whole['pypy']:.2f} s); "
                  f"{'the same --json' if len(figures) == 1 else '--json DIFFERS'} but CPU "
                  f"seconds and engine", flush=True)


def whole_command(path: Path, engine: str) -> tuple[float, dict]:
    """`purgecheck replay PATH --version 2.23+ --engine E --json` in a process of its own:
    its CPU with its child's, and its `--json`."""
    import orjson
    k0 = children_cpu()
    out = subprocess.run([sys.executable, "-m", "purgecheck", "replay", str(path), "--version",
                          "2.23+", "--engine", engine, "--json"], capture_output=True,
                         check=True).stdout
    return children_cpu() - k0, orjson.loads(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench.pypy",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("perl", "bun-serve", "replay"))
    p.add_argument("--keys", type=int, nargs="+", default=[150_000],
                   help="perl's hash sizes (perl, replay: each)")
    p.add_argument("--calls", type=int, nargs="*", default=[],
                   help="replay: also a synthetic trace of each number of calls")
    p.add_argument("--requests", type=int, nargs="+", default=[20_000, 100_000])
    p.add_argument("--design", action="append",
                   help="a mimalloc design, or `glibc VERSION` (perl: the glibc side)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--whole", action="store_true",
                   help="replay: also the whole command's CPU, Python's start and imports "
                        "included")
    args = p.parse_args(argv)
    args.design = args.design or list(DEFAULT_DESIGNS)
    if args.what != "perl" and any(d.startswith("glibc ") for d in args.design):
        p.error("a glibc version is a design of `perl` only (bun-serve's calls are not ops)")
    from purgecheck.simulate.engine import pypy_path
    if pypy_path() is None:
        print("pypy3 is not on PATH (make setup installs it)", file=sys.stderr)
        return 2
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="purgecheck-bench-pypy-") as tmp:
        {"perl": perl, "bun-serve": bun_serve, "replay": replay}[args.what](args, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
