"""The `scenarios` engine of `purgecheck check`: every named scenario (the cases of the real
tests, purgecheck/scenarios.py) run on the model, every invariant checked after every op.
"""

from __future__ import annotations

import time

from model.invariants import load_registry
from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result


def scenario_checks(names: list[str] | None = None, first_failure: bool = False
                    ) -> tuple[dict[str, int], dict[str, Result]]:
    """Run scenarios; check every invariant with a predicate after every op; with
    `first_failure`, no scenario after the first that fails.

    Returns (steps checked per invariant, first failure per invariant)."""
    from model.invariants import check_world
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
        if first_failure and failures:
            break

        def after(op, world, sc=sc):
            for inv_id in stepwise:
                counts[inv_id] += 1
            for inv_id, reason in check_world(world):
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


@engine("scenarios", "every page invariant after every op of every named scenario")
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
    return out
