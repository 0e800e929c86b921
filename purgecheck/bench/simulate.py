"""Benchmark of the cost simulator: simulated allocations per second on the mimalloc model
per design (residency per OS page), per glibc version, and the time of `purgecheck simulate
--seeds`. Prints figures; asserts nothing.

    .venv/bin/python -m purgecheck.bench.simulate              every design, 20,000 requests
    .venv/bin/python -m purgecheck.bench.simulate --requests 5000

Rates are by the process's CPU time (steadier than the wall clock on a shared machine).
"""

from __future__ import annotations

import argparse
import gc
import time

from purgecheck.bench import Figure, against_aim

BENCH = "simulate"
TINY_REQUESTS = 300
AIM_ALLOCS = 100_000  # issue 29: allocations per CPU second, per design


def _cpu(fn):
    # the garbage of the runs before is collected first, not charged to this one: at the tiny
    # sizes a run is 20 ms and one full collection landing in it moved a figure by a third
    # (bench-compare's buffer-loop `off` 0.68x in one run, 0.96x in the next, on the same trees)
    gc.collect()
    c0 = time.process_time()
    out = fn()
    return out, time.process_time() - c0


def figures(tiny: bool = False, requests: int | None = None) -> list[Figure]:
    from purgecheck.simulate import glibc_simulator, glibc_workloads
    from purgecheck.simulate.claims import seed_claims
    from purgecheck.simulate.mimalloc import DESIGNS, simulate
    from purgecheck.simulate.workloads import make_workload

    requests = requests or (TINY_REQUESTS if tiny else 20_000)
    out = []
    for workload, params in (("bun-serve", {"requests": requests}),
                             ("buffer-loop", {"seconds": requests / 6_667})):
        w = make_workload(workload, idle_ms=200, **params)
        for design in DESIGNS:
            run, cpu = _cpu(lambda: simulate(w, design))
            n = run.counters["allocations"]
            out.append(Figure(BENCH, f"{workload}, {design}: allocations per second", n / cpu,
                              "allocs/s", f"{n:,.0f} allocations (malloc, a realloc that "
                                          f"moves), with their frees, parks and sweeps, by "
                                          f"CPU time; "
                                          + against_aim(n / cpu, AIM_ALLOCS, "allocs/s")))
    glibc = glibc_simulator()
    for name in glibc_workloads():
        runs, cpu = _cpu(lambda: glibc.simulate_glibc(name, **glibc.bench_params(name, tiny)))
        n = sum(r.counters.get("allocations", 0) for r in runs)
        out.append(Figure(BENCH, f"glibc {name}, every version: allocations per second",
                          n / cpu, "allocs/s", f"{n:,.0f} allocations over {len(runs)} "
                                               f"versions, by CPU time; "
                                               + against_aim(n / cpu, AIM_ALLOCS, "allocs/s")))
    out += recording_figures(tiny)
    out += engine_figures(tiny)
    scale = 0.02 if tiny else 1.0
    claims, cpu = _cpu(lambda: seed_claims(scale=scale))
    held, failed = (sum(c.verdict == v for c in claims) for v in ("holds", "fails"))
    out.append(Figure(BENCH, f"purgecheck simulate --seeds{'' if scale == 1 else ' (scaled)'}",
                      cpu, "s", f"{len(claims)} claims, {held} reproduced, {failed} fail, "
                                f"loads scaled by {scale:g}, CPU time"))
    return out


def recording_figures(tiny: bool = False) -> list[Figure]:
    """`purgecheck simulate TRACE` on a recording of a real program made now: the perl hash
    workload of the record benchmark (purgecheck/bench/record.py), the glibc side on every
    version, the mimalloc side per design (as the command runs them: 10 ms samples, a
    thread silent for 10 ms parks)."""
    import shutil
    import tempfile
    from pathlib import Path

    from purgecheck.bench.record import perl_hash_recording
    from purgecheck.simulate import glibc_simulator
    from purgecheck.simulate.mimalloc import DESIGNS, simulate
    from purgecheck.simulate.program import calls_of, load_program  # as older trees have it
    from purgecheck.simulate.workloads import Workload

    keys = 1_000 if tiny else 10_000
    what = f"recording of a perl hash of {keys:,} keys"
    if shutil.which("perl") is None:
        from purgecheck.bench import not_measured
        return [not_measured(BENCH, f"{what}, {side}: allocations per second", "allocs/s",
                             "not measured: no perl here")
                for side in ("glibc, every version", *DESIGNS)]
    with tempfile.TemporaryDirectory(prefix="purgecheck-bench-sim-") as tmp:
        program = load_program(perl_hash_recording(keys, Path(tmp)))
        w = Workload(program.name, "", lambda: iter(()), "park", 100.0)
        runs, cpu = _cpu(lambda: glibc_simulator().simulate_ops(w.name, program.timed_ops,
                                                                idle_ms=100))
        n = sum(r.counters["allocations"] for r in runs)
        out = [Figure(BENCH, f"{what}, glibc, every version: allocations per second",
                      n / cpu, "allocs/s", f"{n:,.0f} allocations over {len(runs)} versions, "
                                           f"by CPU time; "
                                           + against_aim(n / cpu, AIM_ALLOCS, "allocs/s"))]
        for d in DESIGNS:
            run, cpu = _cpu(lambda: simulate(w, d, sample_ms=10, park_after_ms=10,
                                             calls=calls_of(program.timed_ops())))
            n = run.counters["allocations"]
            out.append(Figure(BENCH, f"{what}, {d}: allocations per second", n / cpu,
                              "allocs/s", f"{n:,.0f} allocations, by CPU time; "
                                          + against_aim(n / cpu, AIM_ALLOCS, "allocs/s")))
    return out


AIM_KEYS = 150_000  # the perl hash of about 1 M calls (issue 29's aim's size)
ENGINE_DESIGN = "epoch"
# the designs the PyPy child runs, in this order (the first pays the JIT's warm-up)
ENGINE_DESIGNS = ("off", "epoch", "no-hold")


def engine_figures(tiny: bool = False) -> list[Figure]:
    """The aim's size on both engines (`simulate --engine`, purgecheck/simulate/engine.py):
    the perl hash recording of about 1 M calls, converted once by CPython, its `epoch` run by
    CPython here; `off`, `epoch` and `no-hold` run in turn by one pypy3 child, each design's
    rate by its run's CPU as the child measures it (the aim is per design: `off`, first,
    carries the JIT's warm-up), and the three together by the whole child's CPU (its start,
    reading the input, the warm-up: getrusage of the children). Not measured without pypy3
    or perl."""
    import shutil
    import tempfile
    from pathlib import Path

    from purgecheck.bench import not_measured
    from purgecheck.bench import children_cpu
    from purgecheck.bench.record import perl_hash_recording
    from purgecheck.simulate.mimalloc import simulate
    from purgecheck.simulate.program import calls_of, load_program
    from purgecheck.simulate.workloads import Workload

    keys = 1_000 if tiny else AIM_KEYS
    what = f"recording of a perl hash of {keys:,} keys"
    names = [f"{what}, {ENGINE_DESIGN}, cpython: allocations per second",
             *(f"{what}, {d}, pypy, in the child: allocations per second"
               for d in ENGINE_DESIGNS),
             f"{what}, the {len(ENGINE_DESIGNS)} designs, pypy, the whole child: "
             f"allocations per second"]
    try:
        from purgecheck.simulate.engine import Input, pypy_path
    except ImportError:  # bench.compare's base from before the engine: the rest still runs
        Input = pypy_path = None
    why = ("no engine in this tree" if Input is None else
           "no perl here" if shutil.which("perl") is None else
           "no pypy3 here (make setup installs it)" if pypy_path() is None else None)
    if why:
        return [not_measured(BENCH, n, "allocs/s", f"not measured: {why}") for n in names]
    with tempfile.TemporaryDirectory(prefix="purgecheck-bench-engine-") as tmp:
        program = load_program(perl_hash_recording(keys, Path(tmp)))
        ops = list(program.timed_ops())
        w = Workload(program.name, "", lambda: iter(()), "park", 100.0)
        run, cpu = _cpu(lambda: simulate(w, ENGINE_DESIGN, sample_ms=10, park_after_ms=10,
                                         calls=calls_of(iter(ops))))
        n = run.counters["allocations"]
        inp = Input(ops, True)
        try:
            k0 = children_cpu()
            runs = inp.run([("mimalloc", d) for d in ENGINE_DESIGNS], w, 10, 10, quiet=True)
            child = children_cpu() - k0
        finally:
            inp.close()
    out = [Figure(BENCH, names[0], n / cpu, "allocs/s",
                  f"{n:,.0f} allocations, by CPU time; "
                  + against_aim(n / cpu, AIM_ALLOCS, "allocs/s"))]
    for name, d, (doc, seconds) in zip(names[1:], ENGINE_DESIGNS, runs):
        a = doc["counters"]["allocations"]
        first = " (the child's first run: the JIT's warm-up)" if d == ENGINE_DESIGNS[0] else ""
        out.append(Figure(BENCH, name, a / seconds, "allocs/s",
                          f"{a:,.0f} allocations, by the run's CPU in the pypy3 child{first}; "
                          + against_aim(a / seconds, AIM_ALLOCS, "allocs/s")))
    total = sum(doc["counters"]["allocations"] for doc, _ in runs)
    out.append(Figure(BENCH, names[-1], total / child, "allocs/s",
                      f"{total:,.0f} allocations, by the whole child's CPU ({child:.1f} s: its "
                      f"start, reading the input, the warm-up); "
                      + against_aim(total / child, AIM_ALLOCS, "allocs/s")))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench.simulate",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20_000)
    args = p.parse_args(argv)
    for f in figures(requests=args.requests):
        print(f"{f.name:60} {f.value:>12,.1f} {f.unit:9} {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
