"""Every benchmark, one table of figures (`make bench`). Figures are printed, never asserted.

    .venv/bin/python -m purgecheck.bench                    every benchmark, `make bench`'s sizes
    .venv/bin/python -m purgecheck.bench --full             cluster and record at their own sizes
    .venv/bin/python -m purgecheck.bench --tiny             every benchmark at a tiny size
    .venv/bin/python -m purgecheck.bench --only fuzz --only explorer
    .venv/bin/python -m purgecheck.bench --json             the figures as JSON (for CI)

`make bench`'s sizes are each benchmark's own defaults (`python -m purgecheck.bench.NAME`),
except where the table's notes say: the explorer gets 10 s per configuration (its own default
60 s, --explorer-budget), the traces benchmark a trace of a million events (its own ten
million), and the two benchmarks with a `STANDARD` dict run at those sizes: cluster (its kill
matrix on one mutant in three, its explorer ladder as far as park-2) and record (a recorder's
loop of 200,000 pairs, a long replay of 2 M calls). `--full` (`make bench-full`) runs those two
at their own sizes; the cluster benchmark alone took 886 s so.

A figure that cannot be measured here (valgrind not installed, the C reference not
built) is a row that says why; a benchmark that fails is a row that says how, and the exit
status is 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

from purgecheck.bench import BENCHMARKS, Figure, not_measured


def run(names: list[str], tiny: bool, explorer_budget: float | None = None,
        full: bool = False) -> list[Figure]:
    """The figures of each benchmark named, in order; progress on stderr. A module's STANDARD
    sizes apply unless `full` or `tiny`."""
    out: list[Figure] = []
    for name in names:
        print(f"bench: {name}{' (tiny)' if tiny else ''} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"purgecheck.bench.{name}")
            if name == "explorer":
                figs = module.figures(tiny, budget=explorer_budget)
            else:
                sizes = {} if full or tiny else getattr(module, "STANDARD", {})
                figs = module.figures(tiny, **sizes)
        except Exception as e:  # the row says so; main() exits 1
            figs = [not_measured(name, "the benchmark", "",
                                 f"failed: {type(e).__name__}: {e}".splitlines()[0])]
        out += figs
        print(f"bench: {name}: {len(figs)} figures in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr, flush=True)
    return out


def failed(figs: list[Figure]) -> list[Figure]:
    return [f for f in figs if not f.measured and f.note.startswith("failed")]


def value_text(v: float) -> str:
    if v != v:  # NaN: not measured
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def table(figs: list[Figure]) -> str:
    rows = [("benchmark", "figure", "value", "unit", "note")]
    rows += [(f.bench, f.name, value_text(f.value), f.unit, f.note) for f in figs]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"{b:<{w[0]}}  {n:<{w[1]}}  {v:>{w[2]}}  {u:<{w[3]}}  {note}".rstrip()
             for b, n, v, u, note in rows]
    lines.insert(1, "  ".join("-" * k for k in w) + "  ----")
    return "\n".join(lines)


def _load(avg: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in avg)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench",
                                description=__doc__.split("\n\n")[0],
                                epilog="benchmarks: " + ", ".join(BENCHMARKS))
    p.add_argument("--tiny", action="store_true",
                   help="every benchmark at a tiny size (seconds in all; what the tests run)")
    p.add_argument("--only", action="append", choices=BENCHMARKS, metavar="NAME",
                   help="run only this benchmark (repeatable): " + ", ".join(BENCHMARKS))
    p.add_argument("--full", action="store_true",
                   help="the cluster and record benchmarks at their own full sizes (the "
                        "cluster's alone about 15 minutes; `make bench-full`)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--explorer-budget", type=float, metavar="SECONDS",
                   help="the explorer's seconds per configuration (10; 2 with --tiny)")
    args = p.parse_args(argv)
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    cores, before, t0 = os.cpu_count(), os.getloadavg(), time.perf_counter()
    if args.full and args.tiny:
        p.error("--full and --tiny: choose one")
    figs = run(names, args.tiny, args.explorer_budget, args.full)
    after, seconds = os.getloadavg(), time.perf_counter() - t0
    bad = failed(figs)
    if args.json:
        print(json.dumps({"machine": {"cores": cores, "load_before": list(before),
                                      "load_after": list(after)},
                          "tiny": args.tiny, "full": args.full, "seconds": round(seconds, 1),
                          "benchmarks": names, "failed": sorted({f.bench for f in bad}),
                          "figures": [f.as_json() for f in figs]}, indent=1, allow_nan=False))
    else:
        sizes = ("tiny sizes" if args.tiny else "full sizes" if args.full else
                 "make bench's sizes, smaller than each benchmark's own: see the notes")
        print(f"purgecheck benchmarks ({sizes}): "
              f"{cores} cores, load average {_load(before)} before, {_load(after)} after "
              f"(1, 5, 15 min); {seconds:.0f} s in all")
        print(table(figs))
    for f in bad:
        print(f"bench: {f.bench} failed: {f.note}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
