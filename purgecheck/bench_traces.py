"""Benchmark: `purgecheck validate` and `purgecheck diff --traces` on a generated trace of ten
million events (purgecheck/tracegen.py): events per second and peak memory of each.

Figures are printed, never asserted (DESIGN.md: speed goes in benchmarks). Each command runs
in a child process of its own, so that its peak resident memory is its own. Events per second
is given by the wall clock and by the process's CPU time (on a machine others load, the CPU
figure is the steadier one). `diff` runs twice: on the trace and itself (every line equal in
bytes, as the model's and the C reference's are: checked once), and on a one-million-event
trace and its twin, whose keys come in another order (no line equal in bytes: both sides
decoded, checked and compared as dicts, the slow way). `--profile` adds the top functions of
each on the one-million-event trace.

    python -m purgecheck.bench_traces                 # 10 M events, trace kept in /tmp
    python -m purgecheck.bench_traces --events 2000000 --profile
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

CHILD = r"""
import resource, sys, time, orjson
from purgecheck.cli import main
argv = sys.argv[1:]
t0, c0 = time.perf_counter(), time.process_time()
rc = main(argv)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sys.stderr.write(orjson.dumps({"rc": rc, "wall": wall, "cpu": cpu, "rss": rss}).decode() + "\n")
"""

PROFILE = r"""
import cProfile, pstats, sys
from purgecheck.cli import main
cProfile.run("main(sys.argv[1:])", "/tmp/purgecheck-bench.prof")
pstats.Stats("/tmp/purgecheck-bench.prof").sort_stats("tottime").print_stats(12)
"""


def ensure_trace(path: Path, events: int, seed: int) -> int:
    """Generate the trace unless a file of that many events is there already."""
    from purgecheck.tracegen import GENERATION, generate
    stamp = path.with_suffix(".count")
    made = f"{events} {seed} {GENERATION}"
    if path.exists() and stamp.exists() and stamp.read_text() == made:
        return sum(1 for _ in open(path, "rb")) - 2
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        n = generate(f, events, seed)
    stamp.write_text(made)
    print(f"generated {n:,} events in {time.perf_counter() - t0:.1f} s "
          f"({path.stat().st_size / 1e6:.0f} MB): {path}")
    return n


def measure(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True)
    last = proc.stderr.strip().splitlines()[-1]
    return orjson.loads(last)


def profile(argv: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-c", PROFILE, *argv], capture_output=True,
                          text=True)
    return proc.stdout


def ensure_twin(path: Path) -> Path:
    """The same trace with the keys of every event in reverse order: equal to it in
    canonical form, but not one event line equal in bytes (diff's slow path throughout)."""
    twin = path.with_name(path.stem + "-twin.jsonl")
    if twin.exists() and twin.stat().st_mtime >= path.stat().st_mtime:
        return twin
    with open(path, "rb") as f, open(twin, "wb") as out:
        out.write(f.readline())
        for line in f:
            out.write(orjson.dumps(dict(reversed(orjson.loads(line).items()))) + b"\n")
    return twin


def row(name: str, n: int, argv: list[str]) -> None:
    r = measure(argv)
    status = "" if r["rc"] == 0 else f"  (exit {r['rc']})"
    print(f"{name:<44} {n:>12,} {r['wall']:>8.1f} {n / r['wall']:>11,.0f} "
          f"{n / r['cpu']:>11,.0f} {r['rss'] / 1e6:>8.0f}{status}")


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench_traces",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", default="/tmp/purgecheck-bench-trace.jsonl",
                   help="where the generated trace is kept (reused when it matches)")
    p.add_argument("--profile", action="store_true",
                   help="also print the top functions of each on a 1 M-event trace")
    a = p.parse_args(args)
    path = Path(a.trace)
    n = ensure_trace(path, a.events, a.seed)
    small = path.with_name(path.stem + "-1m.jsonl")
    n_small = ensure_trace(small, min(a.events, 1_000_000), a.seed)
    twin = ensure_twin(small)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<44} {'events':>12} {'wall s':>8} {'ev/s wall':>11} {'ev/s cpu':>11} "
          f"{'peak MB':>8}")
    row("validate", n, ["validate", str(path), "--quiet"])
    row("diff --traces (the same file twice)", n, ["diff", "--traces", str(path), str(path)])
    row("diff --traces (1 M, against its twin)", n_small,
        ["diff", "--traces", str(small), str(twin)])
    if a.profile:
        for name, argv in (("validate", ["validate", str(small), "--quiet"]),
                           ("diff", ["diff", "--traces", str(small), str(twin)])):
            print(f"\n-- profile of {name} on {small} --")
            print(profile(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
