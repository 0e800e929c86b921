"""Figures of the conformance machinery, printed (never asserted): differential examples per
second with the persistent C driver, the instructions the allocation stamp adds to a
malloc+free in the C reference (valgrind --tool=callgrind, against the build without it), and
how fast the trace reader parses.

    .venv/bin/python -m purgecheck.bench_conformance            all three
    .venv/bin/python -m purgecheck.bench_conformance --only stamp
    .venv/bin/python -m purgecheck.bench_conformance --stress-script 3 | reference_c/build/driver_tsan
"""

from __future__ import annotations

import argparse
import io
import re
import resource
import shutil
import subprocess
import sys
import time

from purgecheck.conformance import CDriver, compare, driver_path, stress_options_line, stress_script


def bench_examples(n: int, seed: int) -> None:
    """Examples per second through model and C, and where the time goes."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    from purgecheck.ops import parse_script
    from purgecheck.trace import model_trace
    from stateful_tests.differential import differential_examples

    spent = {"model": 0.0, "C": 0.0, "compare": 0.0}
    count = [0, 0]
    with CDriver() as driver:
        @hypothesis_seed(seed)
        @settings(max_examples=n, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(differential_examples())
        def one(example):
            options, text = example
            t0 = time.perf_counter()
            model = model_trace(parse_script(text), options)
            t1 = time.perf_counter()
            c = driver.run(text, options)
            t2 = time.perf_counter()
            assert compare(model[0], model[1], c[0], c[1]) is None
            t3 = time.perf_counter()
            spent["model"] += t1 - t0
            spent["C"] += t2 - t1
            spent["compare"] += t3 - t2
            count[0] += 1
            count[1] += len(model[1])

        t = time.perf_counter()
        one()
        total = time.perf_counter() - t
    own = sum(spent.values())
    print(f"differential examples: {count[0]} in {total:.2f} s = {count[0] / total:.0f} "
          f"examples/s with Hypothesis generating them ({count[1] / count[0]:.0f} events each)")
    print(f"  without generation: {count[0] / own:.0f} examples/s "
          + ", ".join(f"{k} {1000 * v / count[0]:.2f} ms" for k, v in spent.items())
          + " per example")


def callgrind_ir(binary: str, pairs: int) -> int:
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          binary, "--bench-stamp", str(pairs)], capture_output=True, text=True,
                         check=True).stderr
    m = re.search(r"Collected\s*:\s*(\d+)", out)
    if not m:
        raise RuntimeError(f"no 'Collected' line in callgrind's output:\n{out[-500:]}")
    return int(m.group(1))


def bench_stamp(small: int = 20_000, large: int = 120_000) -> None:
    """Instructions per malloc+free of 128 KiB (a large page, behind the stamp's gate), with
    and without the stamp: the slope between two loop lengths, so start-up cancels out."""
    if not shutil.which("valgrind"):
        print("stamp: valgrind is not installed (apt-get install valgrind)")
        return
    per = {}
    for build in ("release", "nostamp"):
        binary = str(driver_path(build))
        per[build] = (callgrind_ir(binary, large) - callgrind_ir(binary, small)) / (large - small)
    print(f"instructions per malloc+free of 128 KiB (callgrind, {large - small:,} pairs): "
          f"with the stamp {per['release']:.1f}, without {per['nostamp']:.1f}: "
          f"the stamp adds {per['release'] - per['nostamp']:+.1f}")


def bench_reader(events: int) -> None:
    """Parse rate of the trace reader over a trace made of the scenarios' C traces."""
    from purgecheck.scenarios import SCENARIOS
    from purgecheck.trace import read_trace, write_trace

    with CDriver() as driver:
        traces = [driver.run(sc.build(), sc.options) for sc in SCENARIOS.values()]
    header = traces[0][0]
    pages = [e for _, evs in traces for e in evs if e["ev"] == "page_new"]
    ids = {e["page"] for e in pages}
    body = [e for _, evs in traces for e in evs if e["ev"] != "page_new" and
            e.get("page", min(ids)) in ids]
    ops = [e for e in body if e["ev"] not in ("page_state", "resident")]
    for label, sel in (("all events", body), ("without page observations", ops)):
        buf = io.BytesIO()
        write_trace(buf, header, pages[:1] and _renumber(pages) + sel * (events // len(sel) + 1))
        data = buf.getvalue()
        t, c = time.perf_counter(), time.process_time()
        n = sum(1 for _ in read_trace(io.BytesIO(data)).events)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        print(f"trace reader, {label}: {n:,} events ({len(data) / n:.0f} B each) in {wall:.2f} s "
              f"wall / {cpu:.2f} s CPU = {n / cpu / 1e6:.2f} M events/s (CPU), "
              f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def _renumber(pages: list[dict]) -> list[dict]:
    """One page_new per page id (the scenarios reuse ids 1, 2, ...)."""
    seen, out = set(), []
    for e in pages:
        if e["page"] not in seen:
            seen.add(e["page"])
            out.append(e)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench_conformance",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=("examples", "stamp", "reader"))
    p.add_argument("--examples", type=int, default=500, help="differential examples (500)")
    p.add_argument("--events", type=int, default=1_000_000, help="events for the reader")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stress-script", type=int, metavar="SEED",
                   help="print the stress script of SEED (for a sanitizer build) and stop")
    args = p.parse_args(argv)
    if args.stress_script is not None:
        sys.stdout.write(stress_options_line() + "\n" + stress_script(args.stress_script))
        return 0
    if args.only in (None, "examples"):
        bench_examples(args.examples, args.seed)
    if args.only in (None, "stamp"):
        bench_stamp()
    if args.only in (None, "reader"):
        bench_reader(args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
