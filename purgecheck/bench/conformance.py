"""Figures of the conformance machinery, printed (never asserted): differential examples per
second with the persistent C driver, the instructions the allocation stamp adds to a
malloc+free in the C reference (valgrind --tool=callgrind, against the build without it), and
how fast the trace reader parses.

    .venv/bin/python -m purgecheck.bench.conformance            all three
    .venv/bin/python -m purgecheck.bench.conformance --only stamp
    .venv/bin/python -m purgecheck.bench.conformance --stress-script 3 | reference_c/build/driver_tsan
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import time

from purgecheck.conformance import CDriver, compare, driver_path, stress_options_line, stress_script


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    import os
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_examples(n: int, seed: int) -> None:
    """Examples per second through model and C (the C driver runs while the model does, as
    in diff_script), with and without Hypothesis generating the scripts; wall and CPU time,
    since a busy machine stretches the wall clock."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    from purgecheck.conformance import diff_script
    from stateful_tests.differential import differential_examples

    examples: list = []

    @hypothesis_seed(seed)
    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(differential_examples())
    def generate(example):
        examples.append(example)

    wall, cpu = time.perf_counter(), time.process_time()
    generate()
    gen_wall, gen_cpu = time.perf_counter() - wall, time.process_time() - cpu
    events = 0
    with CDriver() as driver:
        c0 = _cpu_of(driver.proc.pid)
        wall, cpu = time.perf_counter(), time.process_time()
        for options, text in examples:
            r = diff_script(text, options, driver)
            assert r.equal, r.divergence
            events += len(r.model[1])
        run_wall, run_cpu = time.perf_counter() - wall, time.process_time() - cpu
        c_cpu = _cpu_of(driver.proc.pid) - c0
    k = len(examples)
    print(f"differential examples ({k}, {events / k:.0f} events each, persistent driver, model "
          f"and C overlapped):")
    print(f"  conformance alone: {k / run_wall:.0f} examples/s wall; CPU per example: Python "
          f"(model, compare) {1000 * run_cpu / k:.2f} ms, C driver {1000 * c_cpu / k:.2f} ms "
          f"-> {k / max(run_cpu, c_cpu):.0f} examples/s where each side has a core")
    print(f"  with Hypothesis generating them: {k / (run_wall + gen_wall):.0f} examples/s wall "
          f"(generation {1000 * gen_cpu / k:.2f} ms CPU per example)")


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
              f"wall / {cpu:.2f} s CPU = {n / cpu / 1e6:.2f} M events/s (CPU)")


def _renumber(pages: list[dict]) -> list[dict]:
    """One page_new per page id (the scenarios reuse ids 1, 2, ...)."""
    seen, out = set(), []
    for e in pages:
        if e["page"] not in seen:
            seen.add(e["page"])
            out.append(e)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench.conformance",
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
