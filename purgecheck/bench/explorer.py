"""Benchmark of the interleaving explorer: states per second, and the largest configuration
checked exhaustively within 60 s on this machine. Prints figures; asserts nothing.

    .venv/bin/python -m purgecheck.bench.explorer            # every configuration
    .venv/bin/python -m purgecheck.bench.explorer --budget 30

`make bench` (python -m purgecheck.bench) runs it with the other benchmarks, at 10 s per
configuration unless told (--explorer-budget).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from typing import Iterator

from proofs.explorer import Config, Report, explore
from proofs.explorer_configs import BENCH_ONLY, CONFIGS
from purgecheck.bench import Figure

BENCH = "explorer"
BUDGET = 60.0  # seconds per configuration, main()'s default
BENCH_BUDGET = 10.0  # the same in `python -m purgecheck.bench` (`make bench`)
TINY = ("bare-1", "bare-2", "park-1-short")  # the tiny size: each a second or less
TINY_BUDGET = 2.0


def ladder() -> list[Config]:
    """Configurations in increasing size: the bare advance with more sweepers, then the
    park configurations; and the bare advance without the dead-locals reduction (symmetry
    only), for scale."""
    bare = [CONFIGS[n] for n in ("bare-1", "bare-2", "bare-3", "bare-4")]
    bare.append(Config("bare-5", sweepers=5))
    parks = [CONFIGS[n] for n in ("park-1-short", "park-1", "park-2", "park-3")]
    parks += list(BENCH_ONLY.values())
    unreduced = [replace(CONFIGS[n], name=f"{n} (symmetry only)", reduce_dead=False)
                 for n in ("bare-2", "bare-3", "park-1-short")]
    return bare + unreduced + parks


def run(configs: list[Config], budget: float) -> Iterator[tuple[Config, Report]]:
    """Each configuration explored within `budget` seconds (checked every 100,000 states)."""
    for cfg in configs:
        yield cfg, explore(cfg, time_limit=budget)


def rate(rep: Report) -> float:
    return rep.states / rep.seconds if rep.seconds else 0.0


def largest(results: list[tuple[Config, Report]]) -> dict[str, tuple[Config, Report]]:
    """Per kind (bare, park), the largest configuration of the ladder (which runs in
    increasing size) checked exhaustively, with the dead-locals reduction and no violation."""
    out = {}
    for cfg, rep in results:
        if rep.complete and rep.ok and cfg.reduce_dead:
            out["park" if cfg.parked else "bare"] = (cfg, rep)
    return out


def figures(tiny: bool = False, budget: float | None = None) -> list[Figure]:
    """States per second of each configuration and the largest of each kind exhausted: the
    whole ladder within `budget` seconds each (BENCH_BUDGET by default, not main()'s 60 s),
    or with `tiny` the three smallest configurations."""
    if budget is None:
        budget = TINY_BUDGET if tiny else BENCH_BUDGET
    configs = [c for c in ladder() if c.name in TINY] if tiny else ladder()
    results = list(run(configs, budget))
    out = []
    for cfg, rep in results:
        verdict = f"{'exhaustive' if rep.complete else 'NOT exhaustive'} within {budget:g} s"
        if not rep.ok:
            verdict += ", violations: " + ", ".join(rep.violations)
        out.append(Figure(BENCH, f"{cfg.name}: states per second", rate(rep), "states/s",
                          f"{rep.states:,} states in {rep.seconds:.1f} s, {verdict}; "
                          f"{cfg.describe()}"))
    for kind, (cfg, rep) in largest(results).items():
        out.append(Figure(BENCH, f"largest {kind} configuration exhausted within {budget:g} s",
                          rep.states, "states", f"{cfg.name} ({cfg.describe()}); {budget:g} s "
                                                f"per configuration here, {BUDGET:g} s in "
                                                f"python -m purgecheck.bench.explorer"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=BUDGET, help="seconds per configuration")
    args = ap.parse_args(argv)
    print(f"explorer benchmark: {os.cpu_count()} cores, {args.budget:g} s per configuration, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'configuration':28} {'states':>11} {'transitions':>12} {'depth':>6} "
          f"{'seconds':>8} {'states/s':>9}  exhaustive  what")
    results = []
    for cfg, rep in run(ladder(), args.budget):
        results.append((cfg, rep))
        print(f"{cfg.name:28} {rep.states:>11,} {rep.transitions:>12,} {rep.depth:>6} "
              f"{rep.seconds:>8.1f} {rate(rep):>9,.0f}  {'yes' if rep.complete else 'NO':10}  "
              f"{cfg.describe()}", flush=True)
    for kind, (cfg, _) in largest(results).items():
        print(f"largest {kind} configuration checked exhaustively within {args.budget:g} s: "
              f"{cfg.name} ({cfg.describe()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
