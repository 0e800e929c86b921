"""The `conformance` engine of `purgecheck check`: the model against the C reference.

Every seed scenario under every design of the seed, differential fuzzing, the C mutants (each
must make the C trace diverge from the clean model's), and the sanitizer builds. Quick budget:
the scenarios under the chosen design only, a few fuzz examples, one stress run under TSan.
"""

from __future__ import annotations

import dataclasses
import sys
import time

from model.invariants import Invariant, register
from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result

ENGINE = "conformance"

register(Invariant(
    "CF-TRACE-EQUAL",
    "On every op script, the C reference on real memory (mmap, madvise(MADV_DONTNEED), "
    "mincore, C11 atomics) writes the trace the model predicts: the same events in the same "
    "order, the same free lists and discarded runs, the same epochs and park states, and the "
    "same resident OS pages after every sweep.",
    "DESIGN \"Real parts\"; seed 000 (1) and (2) as the model states them",
    "purgecheck.conformance.diff_script", scope="conformance"))
register(Invariant(
    "CF-SANITIZERS-CLEAN",
    "The C reference runs the seed scenarios under ASan+UBSan with the model's traces, and "
    "concurrent stress scripts (real threads, real clock, the scavenger thread sweeping "
    "parked threads, cross-thread frees) under TSan, without a report.",
    "seed 000: \"ctest passes in: ... ASAN, UBSAN (C++), TSAN\"",
    "reference_c/driver.c", scope="conformance"))


def _scenarios(driver, variants: list[str], c_traces: dict | None = None) -> tuple[Result, dict]:
    """Every scenario under every variant in `variants`; returns the result and the model
    traces of the epoch design (reused by the mutant runs). `c_traces` receives the C
    reference's trace of each scenario that declares case checks (its own options)."""
    from purgecheck.conformance import diff_script, format_divergence, replay_command
    from purgecheck.scenarios import SCENARIOS

    t0, runs, events, cache = time.perf_counter(), 0, 0, {}
    for variant in variants:
        for sc in SCENARIOS.values():
            options = dataclasses.replace(sc.options, variant=variant)
            r = diff_script(sc.build(), options, driver, source=f"scenario:{sc.name}")
            runs += 1
            events += len(r.model[1])
            if variant == "epoch":
                cache[sc.name] = r.model
                if sc.checks and c_traces is not None and options == sc.options:
                    c_traces[sc.name] = r.c
            if not r.equal:
                return Result("CF-TRACE-EQUAL", ENGINE, "fail", f"{runs} scripts",
                              time.perf_counter() - t0,
                              detail=f"scenario {sc.name}, variant {variant}: "
                                     f"{format_divergence(r.divergence).splitlines()[0]}",
                              replay=replay_command(f"--scenario {sc.name}", options,
                                                    sc.options)), cache
    figure = f"{len(SCENARIOS)} scenarios x {len(variants)} design(s), {events:,} events"
    return Result("CF-TRACE-EQUAL", ENGINE, "hold", figure, time.perf_counter() - t0), cache


def _case_checks(c_traces: dict, first_failure: bool) -> list[Result]:
    """The real tests' case checks (RT-*) on the C reference's traces of the scenarios that
    declare them, and on its unit grids (whose lines must also be the model's)."""
    from purgecheck.arith import GRIDS, run_grid
    from purgecheck.engines.scenarios import case_check_results

    t0 = time.perf_counter()
    out = case_check_results(ENGINE, c_traces, {g: run_grid(g, True) for g in GRIDS},
                             first_failure)
    for r in out:
        r.seconds = (time.perf_counter() - t0) / max(1, len(out))
    return out


def _fuzz(driver, examples: int, seed: int) -> Result:
    from stateful_tests.differential import run_fuzz

    t0 = time.perf_counter()

    def progress(run):
        if run.examples % 200 == 0:
            print(f"  conformance fuzz: {run.examples}/{examples} examples, {run.events:,} "
                  f"events", file=sys.stderr)

    run = run_fuzz(driver, examples, seed, progress=progress if examples >= 400 else None)
    return _fuzz_result(run, f"{ENGINE}-fuzz", seed, time.perf_counter() - t0)


def _fuzz_result(run, engine_name: str, seed: int, dt: float) -> Result:
    """A differential run's result: the first divergence with its replay, or the scripts,
    events and what they reached (every op, every event kind: Coverage.summary)."""
    if run.failure:
        detail, _, replay = run.failure.rpartition("replay: ")
        more = f" ({run.divergences} scripts diverged)" if run.divergences > 1 else ""
        return Result("CF-TRACE-EQUAL", engine_name, "fail", f"{run.examples} scripts", dt,
                      detail=detail.strip().splitlines()[0] + more, replay=replay.strip())
    return Result("CF-TRACE-EQUAL", engine_name, "hold",
                  f"{run.examples:,} scripts, {run.events:,} events (seed {seed}); "
                  f"{run.coverage.summary()}", dt)


# make check's campaign: scripts from the fuzzer's alphabet without Hypothesis, for this long
# (PURGECHECK_CAMPAIGN_SECONDS overrides it: `make nightly` runs 600 s;
# tests/test_conformance_campaign.py's slow tier runs 100,000 scripts)
CAMPAIGN_SECONDS = 30.0


def _campaign(driver, seed: int) -> Result:
    import os

    from stateful_tests.differential import run_campaign

    seconds = float(os.environ.get("PURGECHECK_CAMPAIGN_SECONDS", CAMPAIGN_SECONDS))

    def progress(run):
        if run.examples % 1000 == 0:
            print(f"  conformance campaign: {run.examples} scripts, {run.divergences} "
                  f"divergences", file=sys.stderr)

    run = run_campaign(driver, 10**9, seed, seconds=seconds, progress=progress)
    return _fuzz_result(run, f"{ENGINE}-campaign", seed, run.seconds)


def _mutants(driver, cache: dict) -> Result:
    """Each mutant with a C switch must make the C trace differ from the clean model's on
    some scenario: the check can fail."""
    from purgecheck.conformance import diff_script
    from purgecheck.mutants import MUTANTS, TRACE_INVARIANT, is_c_trace_mutant
    from purgecheck.scenarios import SCENARIOS

    t0, survivors = time.perf_counter(), []
    mutants = [m for m in MUTANTS.values() if is_c_trace_mutant(m)]
    for m in mutants:
        if not any(not diff_script(sc.build(), sc.options, driver, mutant=m.name,
                                   model_cached=cache[sc.name]).equal
                   for sc in SCENARIOS.values()):
            survivors.append(m.name)
    dt = time.perf_counter() - t0
    if survivors:
        return Result(TRACE_INVARIANT, f"{ENGINE}-mutants", "fail",
                      f"{len(mutants) - len(survivors)}/{len(mutants)} killed", dt,
                      detail=f"no scenario tells these C mutants from the model: "
                             f"{', '.join(survivors)}",
                      replay="purgecheck diff --scenario NAME --mutant " + survivors[0])
    return Result(TRACE_INVARIANT, f"{ENGINE}-mutants", "killed",
                  f"{len(mutants)}/{len(mutants)} C mutants diverge", dt)


def _sanitizers(quick: bool, seed: int) -> Result:
    """Scenarios under ASan+UBSan (traces equal to the model's), stress under TSan."""
    from purgecheck.conformance import (CDriver, diff_script, run_stress, stress_script)
    from purgecheck.scenarios import SCENARIOS

    t0 = time.perf_counter()
    names = ["every-third", "park-handoff", "abandoned-two-parks"] if quick else list(SCENARIOS)
    with CDriver("asan") as asan:
        for name in names:
            sc = SCENARIOS[name]
            if not diff_script(sc.build(), sc.options, asan).equal:
                return Result("CF-SANITIZERS-CLEAN", ENGINE, "fail", "", time.perf_counter() - t0,
                              detail=f"scenario {name}: the ASan build's trace differs",
                              replay=f"purgecheck diff --scenario {name} --build asan")
        report = asan.close()
    if report:
        return Result("CF-SANITIZERS-CLEAN", ENGINE, "fail", "", time.perf_counter() - t0,
                      detail=report.splitlines()[0], replay="reference_c/build/driver_asan")
    stress = [seed] if quick else [seed + k for k in range(4)]
    for s in stress:
        ok, detail = run_stress("tsan", stress_script(s))
        if not ok:
            return Result("CF-SANITIZERS-CLEAN", ENGINE, "fail", "", time.perf_counter() - t0,
                          detail=f"stress seed {s}: {detail}",
                          replay=f"python -m purgecheck.bench.conformance --stress-script {s}")
    return Result("CF-SANITIZERS-CLEAN", ENGINE, "hold",
                  f"{len(names)} scenarios (ASan+UBSan), {len(stress)} stress runs (TSan)",
                  time.perf_counter() - t0)


def parts(budget: Budget) -> list[str]:
    """The engine's independent parts, in the order of a whole run's results, so that a
    cluster spreads them over its workers (the campaign alone is a minute) and a first-kill
    matrix stops a mutant's run at the first that fails."""
    return ["scenarios", "fuzz"] + ([] if budget.quick else ["campaign", "mutants"]) + \
        ["sanitizers"]


def _model_traces() -> dict:
    """The model's traces of every scenario under the epoch design (what the scenarios part
    keeps for the mutants part), for the mutants part run alone."""
    from purgecheck.formats.ops import parse_script
    from purgecheck.formats.trace import model_trace
    from purgecheck.scenarios import SCENARIOS

    return {name: model_trace(parse_script(sc.build(), f"scenario:{name}"), sc.options,
                              source=f"scenario:{name}")
            for name, sc in SCENARIOS.items()}


@engine(ENGINE, "the model against the C reference on real memory: scenarios x designs, "
                "differential fuzzing, C mutants, sanitizer builds", parts=parts)
def run_conformance(budget: Budget) -> list[Result]:
    from model.variants import VARIANTS
    from purgecheck.conformance import CDriver, DriverError

    want = [budget.part] if budget.part else parts(budget)
    out: list[Result] = []
    try:
        with CDriver() as driver:
            variants = ["epoch"] if budget.quick else list(VARIANTS)
            cache: dict | None = None
            if "scenarios" in want:
                c_traces: dict = {}
                scenarios, cache = _scenarios(driver, variants, c_traces)
                out.append(scenarios)
                out += _case_checks(c_traces, budget.first_failure)
            if "fuzz" in want:
                out.append(_fuzz(driver, 25 if budget.quick else 1000, budget.seed))
            if "campaign" in want:
                out.append(_campaign(driver, budget.seed))
            if "mutants" in want and (cache is None or out[0].ok):
                out.append(_mutants(driver, _model_traces() if cache is None else cache))
        if "sanitizers" in want:
            out.append(_sanitizers(budget.quick, budget.seed))
    except DriverError as e:
        return [Result("CF-TRACE-EQUAL", ENGINE, "error", "", detail=str(e),
                       replay="make -C reference_c")]
    return out
