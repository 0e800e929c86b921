"""The scavenger's due time on real threads: park sweeps made slow by a test hook
(`stress --park-work-us`, reference_c/linearize.c mi_park_work_delay), so that the C switch
`sweep_last_before_work` is caught by `purgecheck validate` on the real clock too.

Seed 000, change (2): a park is "swept again purge_holes_min_interval after the END of the
sweep before (holes_sweep_last is written after the work now)". On real threads a sweep's work
takes less than the clock's millisecond, so the end taken before the work reads the same
millisecond as the end taken after it. The hook sleeps at the end of each park sweep's work and
then reports a clock reading before the sweep's `idle` event: the bound validate takes for the
end of the work (docs/validation.md, "The scavenger's due times").

One parked thread and a delay of one interval: under the switch the scavenger finds the park
due again as soon as the sweep ends and sweeps it within microseconds, an interval too early,
whatever the load (two parked threads would space each other's sweeps by a sweep's work).
Only lower bounds on time are asserted.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from purgecheck.conformance import BUILD_DIR
from purgecheck.validate import validate_file
from purgecheck.engines.validate import INTERVAL_MS, SLOW_PARKS, STRESS, StressRun, run_stress

PARK_WORK_US = int(SLOW_PARKS[SLOW_PARKS.index("--park-work-us") + 1])  # an interval
SCAVENGER_TID = -1


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)


def run_slow_parks(tmp_path: Path, build: str = "release", mutant: str | None = None
                   ) -> StressRun:
    """The park handoff with one parked thread (three parks) whose park sweeps are slow: the
    validate engine's run (SLOW_PARKS)."""
    return run_stress(tmp_path, scenario="park", ms=0, interval=INTERVAL_MS, mutant=mutant,
                      build=build, max_ms=50_000, more=SLOW_PARKS)


def scavenger_events(run: StressRun) -> list[dict]:
    lines = run.trace.read_bytes().splitlines()
    events = [orjson.loads(line) for line in lines[1:]]
    return sorted((e for e in events if e.get("tid") == SCAVENGER_TID), key=lambda e: e["lin"])


@pytest.mark.parametrize("build", ["release", "tsan"])
def test_slow_park_sweeps_on_real_threads_are_accepted(tmp_path, build):
    """The clean build with the hook: the C checks hold, TSan reports nothing, and validate
    accepts the trace. The hook's reading lies the delay after its sweep's first reading, and
    at least one park is swept again (deferred), so the due-time check has a sweep to judge."""
    run = run_slow_parks(tmp_path, build)
    assert "ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, f"{run.stderr[-3000:]}\nreplay: {run.replay()}"
    assert run.summary["parks"] == 3 and not run.failed_checks, run.summary
    header = orjson.loads(run.trace.read_bytes().split(b"\n", 1)[0])
    assert header["producer"]["park_work_us"] == PARK_WORK_US
    v = validate_file(str(run.trace))
    assert v.accepted, f"{v.source}:{v.line}: {v.why}\nreplay: {run.replay()}"
    events = scavenger_events(run)
    began = ended = resweeps = 0
    for before, ev in zip(events, events[1:]):
        if ev["ev"] == "sweep_begin":
            began = ev["now"]
        elif ev["ev"] == "idle":
            assert ev["handoff"] and before["ev"] == "clock", (before, ev)
            assert before["now"] >= began + PARK_WORK_US // 1000, (began, before)
            ended += 1
        elif ev["ev"] == "park_sweep":
            resweeps += not ev["done"]
    assert ended >= 3 and resweeps >= 1, (ended, resweeps)


@pytest.mark.parametrize("build", ["release", "tsan"])
def test_sweep_last_before_work_is_rejected_on_real_threads(tmp_path, build):
    """The end of a park sweep taken before its work: the scavenger sweeps the park again an
    interval after the sweep's beginning, less than an interval after its end. The C checks
    (the park gets done, its blocks go) do not see it; validate rejects the trace at that
    sweep_begin with the due-time reason."""
    run = run_slow_parks(tmp_path, build, mutant="sweep_last_before_work")
    assert "ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0 and not run.failed_checks, run.stderr[-3000:]
    v = validate_file(str(run.trace))
    assert not v.accepted, f"accepted\nreplay: {run.replay()}"
    assert v.event["ev"] == "sweep_begin" and v.event["tid"] == SCAVENGER_TID, v.event
    assert "its last park sweep ended at" in v.why, f"{v.why}\nreplay: {run.replay()}"
    # what the scavenger could do there: sweep the park once it is due, later than it did
    due = [e for e in v.enabled if e.startswith(f"tid {SCAVENGER_TID}: the sweep of a parked")]
    assert len(due) == 1 and "(thread 1 from " in due[0], v.enabled
    assert int(due[0].split("(thread 1 from ")[1].split(" ms")[0]) > v.event["now"], due


def test_park_work_us_usage():
    exe = str(STRESS["release"])
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
    assert "--park-work-us US" in help_text and "--mutant sweep_last_before_work" in help_text
    proc = subprocess.run([exe, "--park-work-us", "soon"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("stress: --park-work-us: expected a non-negative integer")
