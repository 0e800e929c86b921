"""Benchmark of the weak-memory checks (issue 31): states and time of the weak explorer on the
three-sweeper advance, on the park handoff and on a fork beside the advance, beside the
sequentially consistent explorer on the same configurations (its interval, clock bound, owner
program, fork), and Relacy's iterations per second on the C reference. Prints figures; asserts
nothing.

    .venv/bin/python -m purgecheck.bench.weak          # weak-adv-3, weak-park-2(-acqrel), weak-fork-2
    .venv/bin/python -m purgecheck.bench.weak --tiny   # weak-adv-2 (what the tests run)
"""

from __future__ import annotations

import argparse
import subprocess
import time

from proofs.explorer import explore
from proofs.weak import configs as C
from purgecheck.bench import Figure, not_measured

BENCH = "weak"
FULL = ("weak-adv-3", "weak-park-2", "weak-park-2-acqrel", "weak-fork-2")
TINY = ("weak-adv-2",)
RELACY_ITERATIONS = {True: 5_000, False: 300_000}


def weak_figures(name: str) -> list[Figure]:
    t0 = time.perf_counter()
    res = C.check(name)
    dt = time.perf_counter() - t0
    note = f"{res.config.describe()}; verdict {C.verdict(res)}"
    sc = explore(C.sc_twin(name))
    return [Figure(BENCH, f"{name}: states", res.report.states, "states", note),
            Figure(BENCH, f"{name}: seconds", dt, "s", "wall time, exhaustive"),
            Figure(BENCH, f"{name}: states per second", res.report.states / dt, "states/s"),
            Figure(BENCH, f"{name}, sequentially consistent explorer: states", sc.states,
                   "states", f"proofs/explorer.py, the same shape; {sc.seconds:.2f} s")]


def relacy_figure(tiny: bool) -> Figure:
    from purgecheck.engines.relacy import binary

    name = "relacy: park at the reference, iterations per second"
    path, n = binary(""), RELACY_ITERATIONS[tiny]
    if not path.exists():
        return not_measured(BENCH, name, "iterations/s",
                            "not measured: reference_c/build/relacy_check is not built "
                            "(make setup installs relacy-dev; make -C reference_c)")
    t0 = time.perf_counter()
    subprocess.run([str(path), "park", str(n)], capture_output=True, check=True)
    return Figure(BENCH, name, n / (time.perf_counter() - t0), "iterations/s",
                  f"{n:,} iterations of the random scheduler")


def figures(tiny: bool = False) -> list[Figure]:
    out = []
    for name in TINY if tiny else FULL:
        out += weak_figures(name)
    return out + [relacy_figure(tiny)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args(argv)
    for f in figures(args.tiny):
        print(f"{f.name:<60} {f.value:>14,.2f} {f.unit:<12} {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
