"""The `sanitizers` engine: the C reference's TSan build on real threads, with the mutant under
judgement switched on in C, so that a defect only a sanitizer sees (a data race) is caught.

Seed 000: "ctest passes in: ... ASAN, UBSAN (C++), TSAN". The conformance engine runs the
sanitizer builds of the clean reference; this engine runs reference_c/build/stress_tsan (the
seed's concurrent tests: sweepers beside the thread under test, and the park handoff with the
scavenger thread) with `--mutant <c_switch>` when the kill matrix judges a mutant that has one,
and fails on any sanitizer report. The C checks of stress itself are the validate engine's.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result

ENGINE = "sanitizers"
INVARIANT = "CF-SANITIZERS-CLEAN"
INTERVAL_MS = 2  # short epochs: the sweepers move the epoch many times in a short run
MAX_MS = 3_000  # the stress program's liveness waits, bounded for a mutant that stalls them
# What a sanitizer writes on stderr when it reports (TSan's warning, ASan's and UBSan's errors).
REPORT = re.compile(r"WARNING: ThreadSanitizer|ERROR: \w*Sanitizer|runtime error:")
ACCESS = re.compile(r"^\s+(.+?) of size (\d+) at \S+ by (.+?)(?: \(.*\))?:$")
FRAME = re.compile(r"^\s+#0 (\S+) (\S+?):(\d+)")


def describe_report(stderr: str) -> str | None:
    """The first report in `stderr` in one line: its kind, and each access with the function,
    file and line where it happened; None when there is no report."""
    lines = stderr.splitlines()
    start = next((n for n, line in enumerate(lines) if REPORT.search(line)), None)
    if start is None:
        return None
    kind = re.sub(r"\s*\(pid=\d+\)", "", lines[start].split("Sanitizer: ", 1)[-1]).strip()
    accesses = []
    for n in range(start + 1, min(len(lines) - 1, start + 40)):
        if lines[n].startswith("SUMMARY") or lines[n].startswith("====="):
            break
        access, frame = ACCESS.match(lines[n]), FRAME.match(lines[n + 1])
        if access and frame:
            what, size, who = access.groups()
            func, path, line = frame.groups()
            accesses.append(f"{what.lower()} of {size} bytes by {who} in {func} "
                            f"({Path(path).name}:{line})")
    return "; ".join([kind] + accesses)


def command(scenario: str, ms: int, switch: str | None) -> str:
    """The stress run again, from the project root."""
    words = ["reference_c/build/stress_tsan", "--scenario", scenario, "--ms", str(ms),
             "--interval", str(INTERVAL_MS), "--max-ms", str(MAX_MS)]
    return " ".join(words + (["--mutant", switch] if switch else []))


def run_tsan(scenario: str, ms: int, switch: str | None) -> Result:
    """One run of stress_tsan; fails with the report when TSan reports anything."""
    from purgecheck.engines.validate import run_stress

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="purgecheck-tsan-") as tmp:
        try:
            run = run_stress(Path(tmp), scenario=scenario, ms=ms, interval=INTERVAL_MS,
                             mutant=switch, build="tsan", traced=False, max_ms=MAX_MS)
        except FileNotFoundError as e:
            return Result(INVARIANT, ENGINE, "error", "", detail=str(e),
                          replay="make -C reference_c")
    dt = time.perf_counter() - t0
    report = describe_report(run.stderr)
    if report is not None:
        return Result(INVARIANT, ENGINE, "fail", f"stress {scenario} under TSan", dt,
                      detail=f"{scenario}: {report}", replay=command(scenario, ms, switch))
    if run.returncode not in (0, 1):  # 1: a C check failed, the validate engine's business
        return Result(INVARIANT, ENGINE, "error", "", dt,
                      detail=f"stress_tsan exited {run.returncode}: "
                             f"{run.stderr.strip()[-300:]}", replay=command(scenario, ms, switch))
    figure = f"stress {scenario} under TSan, {run.summary.get('epochs', 0)} epochs"
    return Result(INVARIANT, ENGINE, "hold", figure + (f", switch {switch}" if switch else ""),
                  dt)


def switch_of(mutant: str | None) -> str | None:
    """The C switch of the mutant under judgement (None: the clean reference)."""
    from purgecheck.mutants import MUTANTS

    m = MUTANTS.get(mutant) if mutant else None
    return m.c_switch if m else None


@engine(ENGINE, "the C reference's TSan build on real threads (stress), with the judged "
                "mutant's C switch: no sanitizer report")
def run_sanitizers(budget: Budget) -> list[Result]:
    ms = 100 if budget.quick else 400
    switch = switch_of(budget.mutant)
    out = []
    for scenario in ("sweepers", "park"):
        r = run_tsan(scenario, ms, switch)
        out.append(r)
        if not r.ok:
            break
    return out
