"""The `validate` engine of `purgecheck check`: the seed's concurrent tests on real threads
(reference_c/build/stress), their linearized traces replayed on the model, and the advance's
broken variants shown failing both ways; and the op-script driver's concurrent mode,
linearized, with a thread's exit while others sweep (CF-LINEARIZED-RUNS).

Seed 000, tests: "sweepers at the same time ... Both fail when the exclusion in
_mi_page_purge_holes_epoch_advance is removed and when the start of an epoch is recorded
early." Each broken variant runs with an injected delay at the step where its race lies
(reference_c/linearize.c), so the race is hit in every run.

Issue 20's rare paths run on real threads too (RARE): a real fork while a sweeper holds
MOVING (seed 000 (2), _mi_page_purge_holes_forked_child), the clock going back inside an
advance (digest 7), and the walk's order and units on every thread at once (digest 3).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from model.invariants import Invariant, register
from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result

ROOT = Path(__file__).resolve().parents[2]  # the project: purgecheck/engines/validate.py
STRESS = {"release": ROOT / "reference_c" / "build" / "stress",
          "tsan": ROOT / "reference_c" / "build" / "stress_tsan"}
ENGINE = "validate"
INTERVAL_MS = 10
DELAY_US = 4000  # of a 10 ms interval: the race window of the broken variants
# Check (b)'s power is its sweeps during which the epoch moved (a page aged by one epoch, which
# a hold of one epoch too short discards: age_lt_1 fails at nearly every one). A run of 80 ms
# had about 20 of them idle and none at times under a loaded CI, where age-lt-1 survived; so
# the run goes on until it had this many (--max-ms at the most), not for a time alone.
MIN_CROSSINGS = {True: 10, False: 40}  # by budget.quick
# The park handoff with one parked thread whose park sweeps' work lasts an interval (the test
# hook of reference_c/linearize.c): the end of a sweep taken before its work is an interval
# early, which the due-time check of validate sees on the real clock (docs/validation.md).
SLOW_PARKS = ("--parked", "1", "--cycles", "3", "--park-work-us", str(INTERVAL_MS * 1000))
# The advance's broken variants: C switch, where the delay goes, the check that must fail.
BROKEN = {"no_cas_exclusion": "cas", "start_before_increment": "increment"}
# The rare paths and the walk on real threads (stress --scenario fork, clock-back, walks): the
# invariant each C check stands for, with the trace's validation (docs/validation.md).
RARE = {"fork": {"EP-MOVING-HELD": ("m", "n")},
        "clock-back": {"EP-BACK-IS-DUE": ("i",)},
        "walks": {"PG-WALK-REVERSES": ("j",), "PG-WALK-TAKES-EVERY-FREE-UNIT": ("k",)}}


register(Invariant(
    "CF-LINEARIZED-RUNS",
    "A concurrent run of the C reference's op scripts (each script thread an OS thread, the "
    "real scavenger thread; cross-thread frees, parks, walks, reallocs and a thread's exit "
    "whose pages the others sweep meanwhile), traced linearized, is a run of the model: "
    "`purgecheck validate` takes each of its events as a step in lin order.",
    "seed 000 (1): \"Abandoned large pages in the abandoned map are swept like the others\"; "
    "DESIGN \"Real parts\"",
    "reference_c/linearize.c", scope="linearized"))

# The op-script part: the abandoned map's window held open 2 ms a page (run again until its
# sweeps overlap the exit: 0 overlaps in 1 of 5 runs on a quiet machine, 2026-12-05), and a
# stress script.
OP_SCRIPT_OPS = 1500
WINDOW_TRIES = 8


@dataclass
class StressRun:
    """One run of reference_c/build/stress: its verdicts, figures and trace."""

    returncode: int
    summary: dict
    stderr: str
    trace: Path | None
    command: list[str] = field(default_factory=list)

    @property
    def failed_checks(self) -> list[str]:
        """The C checks that failed: a, b (sweepers), c, d (park), liveness."""
        return [k for k, n in self.summary.get("violations", {}).items() if n]

    def replay(self) -> str:
        """The run again, its trace in run.jsonl, and the validation of it."""
        words, skip = [], False
        for w in self.command[1:]:
            if skip or w == "--summary":
                skip = not skip
                continue
            words.append("run.jsonl" if w == str(self.trace) else w)
        return (f"reference_c/build/{Path(self.command[0]).name} {' '.join(words)}"
                f"{' && purgecheck validate run.jsonl' if self.trace else ''}")


def run_stress(out_dir: Path, scenario: str = "sweepers", ms: int = 150,
               interval: int = INTERVAL_MS, mutant: str | None = None, delay_us: int = 0,
               delay_at: str = "cas", until_violation: bool = False, build: str = "release",
               traced: bool = True, max_ms: int = 10_000, name: str = "run",
               more: tuple[str, ...] = (), min_crossings: int = 0) -> StressRun:
    """Run the stress program; the trace goes to out_dir/<name>.jsonl. `more`: further
    arguments (e.g. SLOW_PARKS)."""
    from purgecheck.cbuild import BuildError, ensure_current

    exe = STRESS[build]
    try:  # the binary of the sources checked out (purgecheck/cbuild.py)
        ensure_current(exe)
    except BuildError as e:
        raise FileNotFoundError(str(e)) from None
    trace = out_dir / f"{name}.jsonl" if traced else None
    summary = out_dir / f"{name}.summary.json"
    cmd = [str(exe), "--scenario", scenario, "--ms", str(ms), "--interval", str(interval),
           "--max-ms", str(max_ms), "--summary", str(summary)]
    if trace:
        cmd += ["--trace", str(trace)]
    if mutant:
        cmd += ["--mutant", mutant]
    if delay_us:
        cmd += ["--delay-us", str(delay_us), "--delay-at", delay_at]
    if min_crossings:
        cmd += ["--min-crossings", str(min_crossings)]
    if until_violation:
        cmd.append("--until-violation")
    cmd += more
    env = {"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"} if build == "tsan" else None
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max_ms / 1000 + 60,
                          env=env)
    doc = orjson.loads(summary.read_bytes()) if summary.exists() else {}
    return StressRun(proc.returncode, doc, proc.stderr, trace, cmd)


def _result(invariant: str, ok: bool, figure: str, seconds: float, detail: str = "",
            replay: str = "") -> Result:
    return Result(invariant, ENGINE, "hold" if ok else "fail", figure, seconds,
                  detail="" if ok else detail, replay="" if ok else replay)


def _what_failed(run: StressRun, verdict, with_stderr: bool = False) -> list[str]:
    """What went wrong in a run that should pass: its C checks, the validation of its trace."""
    why = []
    if run.returncode != 0:
        tail = f": {run.stderr.strip()[-300:]}" if with_stderr else ""
        why.append(f"the C checks failed ({run.failed_checks}){tail}")
    if not verdict.accepted:
        why.append(f"the trace was rejected at line {verdict.line}: {verdict.why}")
    return why


def _rare_figure(scenario: str, run: StressRun, verdict) -> str:
    got = run.summary
    what = {"fork": f"{got.get('forks_before_increment', 0)} + "
                    f"{got.get('forks_after_increment', 0)} forks while MOVING was held "
                    f"(before + after the increment), {got.get('forks_quiet', 0)} outside a move",
            "clock-back": f"{got.get('clock_backs', 0)} steps of the clock back",
            "walks": f"{got.get('walks', 0):,} walks checked, "
                     f"{verdict.stats.get('blocks_checked', 0):,} mallocs on the model's lists"
            }[scenario]
    return f"{what}, {verdict.events:,} events"


def run_rare(tmp: Path, ms: int, switch: str | None) -> list[Result]:
    """The rare paths on real threads (a fork while a sweeper holds MOVING, the clock going
    back in an advance) and the walk's order and units on every thread at once: each C check
    holds and the trace validates. A C check fails whatever the model says, so that the
    kill matrix, which patches the model too, sees the C variant."""
    from purgecheck.validate import validate_file

    out = []
    for scenario, checks in RARE.items():
        t0 = time.perf_counter()
        run = run_stress(tmp, scenario=scenario, ms=ms, mutant=switch, name=scenario)
        verdict = validate_file(str(run.trace))
        figure = _rare_figure(scenario, run, verdict)
        seconds = time.perf_counter() - t0
        for invariant, letters in checks.items():
            failed = [c for c in letters if run.summary.get("violations", {}).get(c)]
            why = [f"C check ({c}) failed" for c in failed]
            if run.returncode not in (0, 1):
                why.append(f"stress exited {run.returncode}: {run.stderr.strip()[-300:]}")
            elif run.returncode == 1 and not run.failed_checks:
                why.append(f"stress failed: {run.stderr.strip()[-300:]}")
            if not verdict.accepted:
                why.append(f"the trace was rejected at line {verdict.line}: {verdict.why}")
            out.append(_result(invariant, not why, figure, seconds, "; ".join(why),
                               run.replay()))
            seconds = 0.0
    return out


def run_op_scripts(tmp: Path, seed: int, switch: str | None) -> Result:
    """The driver's concurrent mode, linearized (purgecheck/conformance.py run_linearized):
    the abandoned map's window (abandon_window_script: a thread's exit while two others sweep)
    and the stress script of `seed`, each trace validated on the model (CF-LINEARIZED-RUNS).
    The window's script runs again (WINDOW_TRIES at most) until its sweeps overlapped the
    exit, which the scheduler decides: a run whose sweepers finished first, or started late,
    tests nothing there, and a kill that hung on it would change with the machine's load.
    Under a C switch the driver runs the mutant, so that the kill matrix sees it here."""
    from purgecheck.conformance import abandon_overlaps, linearized_script, run_linearized
    from purgecheck.validate import validate_file

    t0 = time.perf_counter()

    def run(name: str):
        """One script run and validated: its verdict and trace, or the failing Result."""
        path = tmp / f"op-script-{name}.jsonl"
        proc = run_linearized(linearized_script(name, OP_SCRIPT_OPS), path, mutant=switch)
        verdict = validate_file(str(path))
        why = []
        if proc.returncode != 0:
            why.append(f"the driver exited {proc.returncode}: "
                       f"{proc.stderr.decode(errors='replace').strip()[-300:]}")
        if not verdict.accepted:
            why.append(f"the trace was rejected at line {verdict.line}: {verdict.why}")
        if not why:
            return verdict, path, None
        replay = (f"python -m purgecheck.bench.conformance --linearized-script {name} | "
                  f"reference_c/build/driver - > t.jsonl; purgecheck validate t.jsonl"
                  + (f" (with mutant={switch} on the %options line)" if switch else ""))
        return verdict, path, _result("CF-LINEARIZED-RUNS", False, "", time.perf_counter() - t0,
                                      f"script {name}: " + "; ".join(why), replay)

    events = overlaps = scripts = 0
    for name in ["abandon-window"] * WINDOW_TRIES + [str(seed)]:
        if name == "abandon-window" and overlaps:
            continue
        verdict, path, failed = run(name)
        if failed:
            return failed
        events, scripts = events + verdict.events, scripts + 1
        if name == "abandon-window":
            overlaps = abandon_overlaps(path)
    return _result("CF-LINEARIZED-RUNS", True,
                   f"{scripts} scripts, {events:,} events, {overlaps:,} sweeps of an "
                   f"abandoned page during the exit", time.perf_counter() - t0)


@engine(ENGINE, "concurrent C runs on real threads: their traces validated on the model; "
                "the broken advances rejected; forks while MOVING is held, a clock going "
                "back, the walk's order; the op-script driver's concurrent mode")
def run_validate(budget: Budget) -> list[Result]:
    from purgecheck.validate import validate_file

    ms = 80 if budget.quick else 400
    switch = None
    if budget.mutant:
        from purgecheck.mutants import MUTANTS
        m = MUTANTS.get(budget.mutant)
        switch = m.c_switch if m else None
    out: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="purgecheck-validate-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        # A mutant under judgement (the kill matrix) runs on the C side by its switch; one of
        # the broken advances gets its delay, so that its race is hit, and runs until a C
        # check fails (10 s at the most): on a loaded machine a run of `ms` may end before
        # the watcher has seen the race's double move, and the model the matrix patches
        # with the same broken rule accepts the trace.
        broken = switch in BROKEN
        clean = run_stress(tmp, ms=ms, mutant=switch, name="sweepers",
                           delay_us=DELAY_US if broken else 0,
                           delay_at=BROKEN.get(switch, "cas"), until_violation=broken,
                           min_crossings=MIN_CROSSINGS[budget.quick])
        verdict = validate_file(str(clean.trace))
        why = _what_failed(clean, verdict, with_stderr=True)
        broken_ok, broken_why = [], []
        for variant, at in BROKEN.items():
            run = run_stress(tmp, ms=ms, mutant=variant, delay_us=DELAY_US, delay_at=at,
                             until_violation=True, max_ms=10_000, name=variant)
            v = validate_file(str(run.trace))
            caught = run.returncode == 1 and run.failed_checks and not v.accepted
            (broken_ok if caught else broken_why).append(
                f"{variant}: C {'failed ' + str(run.failed_checks) if run.returncode == 1 else 'passed'}, "
                f"trace {'rejected' if not v.accepted else 'accepted'}")
        dt = time.perf_counter() - t0
        figure = (f"{verdict.events:,} events, {clean.summary.get('epochs', 0)} epochs; "
                  f"{len(broken_ok)}/{len(BROKEN)} broken advances caught")
        out.append(_result("EP-NO-SHORT-EPOCH", not why and not broken_why, figure, dt,
                           "; ".join(why + broken_why), clean.replay()))
        out.append(_result("HD-YOUNG-KEPT", clean.returncode == 0 and verdict.accepted,
                           f"{clean.summary.get('checked_b', 0):,} sweeps checked (b), "
                           f"{clean.summary.get('crossed_b', 0):,} across an epoch's move", 0.0,
                           "; ".join(why), clean.replay()))
        if budget.first_failure and any(not r.ok for r in out):
            return out
        out += run_rare(tmp, ms, switch)
        if budget.first_failure and any(not r.ok for r in out):
            return out
        t0 = time.perf_counter()
        park = run_stress(tmp, scenario="park", ms=ms, mutant=switch, name="park")
        pv = validate_file(str(park.trace))
        why = _what_failed(park, pv)
        out.append(_result("PK-DONE-TWO-EPOCHS", not why,
                           f"{park.summary.get('parks', 0)} parks, {pv.events:,} events",
                           time.perf_counter() - t0, "; ".join(why), park.replay()))
        t0 = time.perf_counter()
        slow = run_stress(tmp, scenario="park", ms=0, mutant=switch, name="slow-parks",
                          more=SLOW_PARKS)
        sv = validate_file(str(slow.trace))
        why = _what_failed(slow, sv)
        out.append(_result("PK-SPACING", not why,
                           f"{slow.summary.get('parks', 0)} parks with park sweeps of "
                           f"{INTERVAL_MS} ms, {sv.events:,} events",
                           time.perf_counter() - t0, "; ".join(why), slow.replay()))
        if budget.first_failure and any(not r.ok for r in out):
            return out
        out.append(run_op_scripts(tmp, budget.seed, switch))
    return out
