"""The `scenarios` engine of `purgecheck check`: every named scenario (the cases of the real
tests, purgecheck/scenarios.py) run on the model, every invariant checked after every op.
"""

from __future__ import annotations

import time

import purgecheck.realtests.checks  # noqa: F401  registers the real tests' checks (RT-*)
from model.invariants import load_registry
from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result


def scenario_checks(names: list[str] | None = None, first_failure: bool = False,
                    until: set[str] | None = None) -> tuple[dict[str, int], dict[str, Result]]:
    """Run scenarios; check every invariant with a predicate after every op; with
    `first_failure`, no scenario after the first that fails; with `until`, none after every
    invariant of it has failed (a mutant's test: the invariants it must be caught by).

    Returns (steps checked per invariant, first failure per invariant)."""
    from model.invariants import HeldPages, check_world
    from purgecheck.runner import run_ops
    from purgecheck.scenarios import SCENARIOS

    counts = {i.id: 0 for i in load_registry().values()
              if i.predicate and i.scope in ("page", "world", "epoch", "final")}
    finals = [i for i in load_registry().values() if i.predicate and i.scope == "final"]
    stepwise = [k for k in counts if k not in {i.id for i in finals}]
    failures: dict[str, Result] = {}
    for sc in SCENARIOS.values():
        if names is not None and sc.name not in names:
            continue
        if first_failure and failures or until and until <= failures.keys():
            break

        def after(op, world, sc=sc, held=HeldPages()):
            for inv_id in stepwise:
                counts[inv_id] += 1
            for inv_id, reason in check_world(world, held):
                failures.setdefault(inv_id, Result(
                    inv_id, "scenarios", "fail", "",
                    detail=f"scenario {sc.name}, line {op.line} ({op.render()}): {reason}",
                    replay=f"purgecheck scenario {sc.name}"))

        try:
            run = run_ops(sc.ops(), sc.options, after_step=after, source=f"scenario:{sc.name}")
            if "liveness" in sc.tags:
                for inv in finals:
                    counts[inv.id] += 1
                    reason = inv.predicate(run.world)
                    if reason:
                        failures.setdefault(inv.id, Result(
                            inv.id, "scenarios", "fail", "",
                            detail=f"scenario {sc.name}, at the end: {reason}",
                            replay=f"purgecheck scenario {sc.name}"))
        except Exception as e:  # a broken rule may crash the model later on
            failures.setdefault("MODEL-RAN", Result(
                "MODEL-RAN", "scenarios", "fail", "",
                detail=f"scenario {sc.name} stopped: {type(e).__name__}: {e}",
                replay=f"purgecheck scenario {sc.name}"))
    return counts, failures


def case_check_results(engine_name: str, traces: dict[str, tuple], grids: dict[str, dict],
                       first_failure: bool = False) -> list[Result]:
    """One Result per case check of purgecheck/realtests/checks.py (invariant RT-*): every scenario
    that declares it, on the traces given ({scenario: (header, events)}), and the unit grids
    ({grid: purgecheck.arith.run_grid's result}); with `first_failure`, none after one fails."""
    from purgecheck.arith import GRIDS
    from purgecheck.realtests.checks import CHECKS, invariant_id, run_checks
    from purgecheck.scenarios import SCENARIOS

    side = "model" if engine_name == "scenarios" else "C"
    held: dict[str, int] = {c: 0 for c in CHECKS}
    on_grid: dict[str, str] = {}
    failed: dict[str, Result] = {}
    for name, (header, events) in traces.items():
        if first_failure and failed:
            break
        for check, problems in run_checks(SCENARIOS[name].checks, header, events).items():
            if problems:
                failed.setdefault(check, Result(
                    invariant_id(check), engine_name, "fail", "",
                    detail=f"scenario {name} ({side}): {problems[0]}",
                    replay=f"purgecheck scenario {name}" if side == "model" else
                    f"purgecheck diff --scenario {name}"))
            held[check] += 1
    for grid, run in grids.items():
        check = GRIDS[grid].check
        problems = run[side][check] + ([f"C differs from the model at {run['diff']}"]
                                       if run.get("diff") else [])
        if problems:
            failed.setdefault(check, Result(invariant_id(check), engine_name, "fail", "",
                                            detail=f"grid {grid} ({side}): {problems[0]}",
                                            replay=f"reference_c/build/driver --arith {grid}"))
        on_grid[check] = grid
    return [failed.get(c) or Result(invariant_id(c), engine_name, "hold",
                                    f"the {on_grid[c]} grid" if c in on_grid else
                                    f"{n} scenario{'s' if n != 1 else ''}")
            for c, n in held.items() if n or c in failed or c in on_grid]


def model_case_checks(first_failure: bool = False) -> list[Result]:
    """The case checks on the model's trace of every scenario that declares some, and on the
    model's unit grids."""
    from purgecheck.arith import GRIDS, run_grid
    from purgecheck.formats.trace import model_trace
    from purgecheck.scenarios import SCENARIOS

    traces = {}
    for sc in SCENARIOS.values():
        if sc.checks:
            try:
                traces[sc.name] = model_trace(sc.ops(), sc.options, source=f"scenario:{sc.name}")
            except Exception as e:  # a broken rule may crash the model: the check fails
                return [Result("MODEL-RAN", "scenarios", "fail", "",
                               detail=f"scenario {sc.name} stopped: {type(e).__name__}: {e}",
                               replay=f"purgecheck scenario {sc.name}")]
    grids = {g: run_grid(g, driver=False) for g in GRIDS}
    return case_check_results("scenarios", traces, grids, first_failure)


@engine("scenarios", "every page invariant after every op of every named scenario, and the "
                     "real tests' case checks on their traces")
def run_scenarios(budget: Budget) -> list[Result]:
    t0 = time.perf_counter()
    counts, failures = scenario_checks(first_failure=budget.first_failure)
    dt = time.perf_counter() - t0
    out = []
    for inv_id, n in counts.items():
        r = failures.get(inv_id) or Result(inv_id, "scenarios", "hold", "")
        r.figure = f"{n:,} steps" if inv_id != "HD-GOES-WITHIN-TWO" else f"{n} liveness schedules"
        r.seconds = dt / max(1, len(counts))
        out.append(r)
    if budget.first_failure and any(not r.ok for r in out):
        return out
    t0 = time.perf_counter()
    cases = model_case_checks(budget.first_failure)
    for r in cases:
        r.seconds = (time.perf_counter() - t0) / max(1, len(cases))
    return out + cases
