"""Benchmark of the interleaving explorer: states per second, and the largest configuration
checked exhaustively within 60 s on this machine. Prints figures; asserts nothing.

    .venv/bin/python -m purgecheck.bench.explorer            # every configuration
    .venv/bin/python -m purgecheck.bench.explorer --budget 30
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from proofs.explorer import Config, explore
from proofs.explorer_configs import BENCH_ONLY, CONFIGS


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per configuration")
    args = ap.parse_args(argv)
    print(f"explorer benchmark: {os.cpu_count()} cores, {args.budget:g} s per configuration, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'configuration':28} {'states':>11} {'transitions':>12} {'depth':>6} "
          f"{'seconds':>8} {'states/s':>9}  exhaustive  what")
    largest = {}
    for cfg in ladder():
        rep = explore(cfg, time_limit=args.budget)
        rate = rep.states / rep.seconds if rep.seconds else 0.0
        print(f"{cfg.name:28} {rep.states:>11,} {rep.transitions:>12,} {rep.depth:>6} "
              f"{rep.seconds:>8.1f} {rate:>9,.0f}  {'yes' if rep.complete else 'NO':10}  "
              f"{cfg.describe()}", flush=True)
        kind = "park" if cfg.parked else "bare"
        if rep.complete and rep.ok and cfg.reduce_dead:
            largest[kind] = cfg
    for kind, cfg in largest.items():
        print(f"largest {kind} configuration checked exhaustively within {args.budget:g} s: "
              f"{cfg.name} ({cfg.describe()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
