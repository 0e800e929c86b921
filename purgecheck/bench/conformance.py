"""Figures of the conformance machinery, printed (never asserted): differential examples per
second with the persistent C driver, the instructions the allocation stamp adds to a
malloc+free in the C reference (valgrind --tool=callgrind, against the build without it), and
how fast the trace reader parses.

    .venv/bin/python -m purgecheck.bench.conformance            all three
    .venv/bin/python -m purgecheck.bench.conformance --only stamp
    .venv/bin/python -m purgecheck.bench.conformance --stress-script 3 | reference_c/build/driver_tsan

`make bench` (python -m purgecheck.bench) runs all three with the other benchmarks.
"""

from __future__ import annotations

import argparse
import io
import itertools
import re
import shutil
import subprocess
import sys
import time
from typing import Iterator

from purgecheck.bench import Figure, not_measured
from purgecheck.conformance import (CDriver, DriverError, compare, driver_path,
                                    stress_options_line, stress_script)

BENCH = "conformance"


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    import os
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_examples(n: int, seed: int) -> dict[str, float]:
    """Examples per second through model and C (the C driver runs while the model does, as
    in diff_script), with and without Hypothesis generating the scripts; wall and CPU time,
    since a busy machine stretches the wall clock. Returns the examples, their events and
    the seconds of each part."""
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
    return {"examples": len(examples), "events": events, "run_wall": run_wall,
            "run_cpu": run_cpu, "c_cpu": c_cpu, "gen_wall": gen_wall, "gen_cpu": gen_cpu}


def examples_figures(r: dict[str, float]) -> list[Figure]:
    k = r["examples"]
    note = f"{k:.0f} examples, {r['events'] / k:.0f} events each, persistent driver"
    return [
        Figure(BENCH, "differential examples, conformance alone", k / r["run_wall"],
               "examples/s", note + ", wall clock"),
        Figure(BENCH, "differential examples, CPU per example in Python (model, compare)",
               1000 * r["run_cpu"] / k, "ms", note),
        # /proc counts the driver's CPU in clock ticks (10 ms): at the tiny size (20 examples)
        # it may not reach one, and 0 is no measurement (test_bench failed on it at load 8)
        Figure(BENCH, "differential examples, CPU per example in the C driver",
               1000 * r["c_cpu"] / k, "ms", note) if r["c_cpu"] > 0 else
        not_measured(BENCH, "differential examples, CPU per example in the C driver", "ms",
                     f"not measured: the driver's CPU under one clock tick of /proc in {k:.0f} "
                     f"examples"),
        Figure(BENCH, "differential examples where each side has a core",
               k / max(r["run_cpu"], r["c_cpu"]), "examples/s", note + ", by CPU time"),
        Figure(BENCH, "differential examples with Hypothesis generating them",
               k / (r["run_wall"] + r["gen_wall"]), "examples/s", note + ", wall clock"),
        Figure(BENCH, "Hypothesis's generation, CPU per example", 1000 * r["gen_cpu"] / k,
               "ms", note),
    ]


def print_examples(r: dict[str, float]) -> None:
    k, events = r["examples"], r["events"]
    run_wall, run_cpu, c_cpu = r["run_wall"], r["run_cpu"], r["c_cpu"]
    print(f"differential examples ({k}, {events / k:.0f} events each, persistent driver, model "
          f"and C overlapped):")
    print(f"  conformance alone: {k / run_wall:.0f} examples/s wall; CPU per example: Python "
          f"(model, compare) {1000 * run_cpu / k:.2f} ms, C driver {1000 * c_cpu / k:.2f} ms "
          f"-> {k / max(run_cpu, c_cpu):.0f} examples/s where each side has a core")
    print(f"  with Hypothesis generating them: {k / (run_wall + r['gen_wall']):.0f} examples/s "
          f"wall (generation {1000 * r['gen_cpu'] / k:.2f} ms CPU per example)")


def callgrind_ir(binary: str, pairs: int) -> int:
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          binary, "--bench-stamp", str(pairs)], capture_output=True, text=True,
                         check=True).stderr
    m = re.search(r"Collected\s*:\s*(\d+)", out)
    if not m:
        raise RuntimeError(f"no 'Collected' line in callgrind's output:\n{out[-500:]}")
    return int(m.group(1))


def stamp_missing() -> str | None:
    """Why the stamp cannot be measured here (a tool or a build missing), or None."""
    if not shutil.which("valgrind"):
        return "valgrind is not installed (apt-get install valgrind)"
    for build in ("release", "nostamp"):
        try:
            driver_path(build)
        except DriverError as e:
            return str(e)
    return None


def measure_stamp(small: int = 20_000, large: int = 120_000) -> dict[str, float]:
    """Instructions per malloc+free of 128 KiB (a large page, behind the stamp's gate), with
    and without the stamp: the slope between two loop lengths, so start-up cancels out.
    Returns them per build ("release", "nostamp") and the pairs of the slope ("pairs")."""
    per: dict[str, float] = {"pairs": large - small}
    for build in ("release", "nostamp"):
        binary = str(driver_path(build))
        per[build] = (callgrind_ir(binary, large) - callgrind_ir(binary, small)) / (large - small)
    return per


def stamp_figures(per: dict[str, float] | None, why: str | None = None) -> list[Figure]:
    """The stamp's figures; with `per` None, rows that say why they were not measured."""
    rows = (("instructions per malloc+free of 128 KiB, with the stamp", "release"),
            ("instructions per malloc+free of 128 KiB, without it", "nostamp"),
            ("instructions the stamp adds to a malloc+free", "added"))
    if per is None:
        return [not_measured(BENCH, name, "instructions", f"not measured: {why}")
                for name, _ in rows]
    values = {**per, "added": per["release"] - per["nostamp"]}
    note = f"callgrind, slope over {per['pairs']:,.0f} pairs"
    return [Figure(BENCH, name, values[key], "instructions", note) for name, key in rows]


def print_stamp(per: dict[str, float]) -> None:
    print(f"instructions per malloc+free of 128 KiB (callgrind, {per['pairs']:,.0f} pairs): "
          f"with the stamp {per['release']:.1f}, without {per['nostamp']:.1f}: "
          f"the stamp adds {per['release'] - per['nostamp']:+.1f}")


READER_LABELS = ("all events", "without page observations")


def measure_reader(events: int) -> list[dict]:
    """Parse rate of the trace reader (into dicts, `Trace.events`) over a trace made of the
    scenarios' C traces one after the other, repeated to `events` events: once with every
    event, once without the page observations. Returns per label the events, the bytes and
    the wall and CPU seconds of the read."""
    from purgecheck.scenarios import SCENARIOS
    from purgecheck.formats.trace import read_trace, write_trace

    with CDriver() as driver:
        traces = [driver.run(sc.build(), sc.options) for sc in SCENARIOS.values()]
    header = traces[0][0]
    pages = [e for _, evs in traces for e in evs if e["ev"] == "page_new"]
    ids = {e["page"] for e in pages}
    body = [(h, [e for e in evs if e["ev"] != "page_new" and e.get("page", min(ids)) in ids])
            for h, evs in traces]
    ops = [(h, [e for e in evs if e["ev"] not in ("page_state", "resident")])
           for h, evs in body]
    out = []
    for label, sel in zip(READER_LABELS, (body, ops)):
        copies = events // sum(len(evs) for _, evs in sel) + 1
        buf = io.BytesIO()
        write_trace(buf, header, _renumber(pages) + list(itertools.islice(
            _forward(sel * copies, header["config"]["clock_start_ms"]), events)))
        data = buf.getvalue()
        t, c = time.perf_counter(), time.process_time()
        n = sum(1 for _ in read_trace(io.BytesIO(data)).events)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        out.append({"label": label, "events": n, "bytes": len(data), "wall": wall, "cpu": cpu})
    return out


def reader_figures(runs: list[dict]) -> list[Figure]:
    return [Figure(BENCH, f"trace reader into dicts, {r['label']}", r["events"] / r["cpu"] / 1e6,
                   "M events/s", f"{r['events']:,} events of the scenarios' C traces, "
                   f"{r['bytes'] / r['events']:.0f} B each, by CPU time") for r in runs]


def print_reader(runs: list[dict]) -> None:
    for r in runs:
        n, cpu = r["events"], r["cpu"]
        print(f"trace reader, {r['label']}: {n:,} events ({r['bytes'] / n:.0f} B each) in "
              f"{r['wall']:.2f} s wall / {cpu:.2f} s CPU = {n / cpu / 1e6:.2f} M events/s (CPU)")


def _forward(segments: list[tuple[dict, list[dict]]], start: int) -> Iterator[dict]:
    """The events of the traces one after the other, their clock readings moved so that
    time only moves forward from `start`: each trace's clock goes on from where the one
    before left it (each trace starts at its own `clock_start_ms`, and the reader rejects a
    clock that goes back where the header says it is monotone). A step back within a trace
    would become a step of 0 ms; an `epoch_advance`'s `start`, a clock reading, moves with
    the clock."""
    now = start
    for header, evs in segments:
        last = header["config"]["clock_start_ms"]  # this trace's own reading, not moved
        for e in evs:
            kind = e["ev"]
            if kind == "clock":
                now += max(0, e["now"] - last)
                last = e["now"]
                e = {**e, "now": now}
            elif kind == "epoch_advance" and type(e.get("start")) is int:
                e = {**e, "start": e["start"] + now - last}
            yield e


def _renumber(pages: list[dict]) -> list[dict]:
    """One page_new per page id (the scenarios reuse ids 1, 2, ...)."""
    seen, out = set(), []
    for e in pages:
        if e["page"] not in seen:
            seen.add(e["page"])
            out.append(e)
    return out


# The sizes: main()'s defaults, and the tiny ones of the test suite (a second or two).
FULL = {"examples": 500, "stamp": (20_000, 120_000), "events": 1_000_000}
TINY = {"examples": 20, "stamp": (2_000, 12_000), "events": 20_000}


def figures(tiny: bool = False) -> list[Figure]:
    """The figures main() prints, at its default sizes or at tiny ones. Without the C
    reference built, or valgrind for the stamp, their rows say so."""
    size = TINY if tiny else FULL
    try:
        driver_path("release")
    except DriverError as e:
        why = f"not measured: {e}"
        return [not_measured(BENCH, "differential examples, conformance alone", "examples/s",
                             why), *stamp_figures(None, str(e)),
                *(not_measured(BENCH, f"trace reader into dicts, {label}", "M events/s", why)
                  for label in READER_LABELS)]
    out = examples_figures(measure_examples(size["examples"], 0))
    why = stamp_missing()
    out += stamp_figures(None if why else measure_stamp(*size["stamp"]), why)
    return out + reader_figures(measure_reader(size["events"]))


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
    p.add_argument("--linearized-script", metavar="SEED|abandon-window",
                   help="print a linearized concurrent script (the stress script of SEED, or "
                        "the abandoned map's window) for `driver -` then `purgecheck validate`, "
                        "and stop")
    args = p.parse_args(argv)
    if args.linearized_script is not None:
        from purgecheck.conformance import linearized_script
        try:
            sys.stdout.write(linearized_script(args.linearized_script))
        except ValueError as e:
            p.error(f"--linearized-script: {e}")
        return 0
    if args.stress_script is not None:
        sys.stdout.write(stress_options_line() + "\n" + stress_script(args.stress_script))
        return 0
    if args.only in (None, "examples"):
        print_examples(measure_examples(args.examples, args.seed))
    if args.only in (None, "stamp"):
        why = stamp_missing()
        if why:
            print(f"stamp: {why}")
        else:
            print_stamp(measure_stamp())
    if args.only in (None, "reader"):
        print_reader(measure_reader(args.events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
