"""The `fuzz` engine of `purgecheck check`: the state machines with a budget.

Every machine runs against the design the seed chose, and each rejected design must be caught
by one of them with a defect the seed names for it. One row per invariant the machines check,
and one per rejected design.
"""

from __future__ import annotations

import time

from model.invariants import load_registry
from model.variants import EPOCH
from purgecheck.engines import Budget, engine
from purgecheck.fuzz import MACHINES, FuzzRun, run_machine
from purgecheck.reports.results import Result
import stateful_tests.shadow  # noqa: F401  registers the shadow's checks (scope "fuzz")

# The defects the seed names for each rejected design (registry ids). The `clock` design is
# rejected for a cost, a clock read on every allocation of a large page, which no invariant
# states: the machines find nothing there, which `purgecheck fuzz --variant clock` shows.
EXPECTED_DEFECTS = {
    "no-hold": ("HD-YOUNG-KEPT", "HD-INTERVAL"),  # "discarded and refaulted 3 GB in 20 s"
    "handoff-only": ("HD-YOUNG-KEPT", "HD-INTERVAL"),  # "left the inline path purging"
    "two-untouched": ("HD-INTERVAL", "HD-GOES-WITHIN-TWO"),  # "two sweeps within a ms"
}
CHECKED_BY = {"page": ("page", "world", "epoch", "fuzz"), "epoch": ("page", "world", "epoch"),
              "park": ("page", "world", "epoch", "final")}


def budgets(budget: Budget) -> tuple[int, int]:
    """Examples per machine for the chosen design, and at most per machine for a rejected one
    (the runs are derandomized: the same examples every time)."""
    return (20, 150) if budget.quick else (1000, 600)


@engine("fuzz", "Hypothesis state machines (page, epoch, park): every invariant after every "
                "step; each rejected design caught")
def run_fuzz(budget: Budget) -> list[Result]:
    clean, hunt = budgets(budget)
    seed = budget.seed
    out = [*chosen_design_rows([run_machine(m, EPOCH, profile="ci", examples=clean, seed=seed)
                                for m in MACHINES])]
    for variant, defects in EXPECTED_DEFECTS.items():
        out.append(rejected_design_row(variant, defects, hunt, seed, shrink=not budget.quick))
    return out


def chosen_design_rows(runs: list[FuzzRun]) -> list[Result]:
    """One row per invariant the machines check: held, with what covered it, or the first
    failure with its program and replay command."""
    registry = load_registry()
    rows: dict[str, Result] = {}
    cover: dict[str, list] = {}  # id -> [examples, steps, machines]
    for r in runs:
        for inv in registry.values():
            if inv.scope in CHECKED_BY[r.machine]:
                c = cover.setdefault(inv.id, [0, 0, []])
                c[0], c[1] = c[0] + r.examples, c[1] + r.steps
                c[2].append(r.machine)
                rows.setdefault(inv.id, Result(inv.id, "fuzz", "hold", "")).seconds += \
                    r.seconds / len(registry)
        f = r.failure
        if f is not None:
            row = rows.setdefault(f.invariant, Result(f.invariant, "fuzz", "fail", ""))
            if row.status != "fail":
                row.status = "fail"
                row.detail = f"{r.machine} machine: {f.reason}\n{f.program}"
                row.replay = r.replay_command()
    for inv_id, row in rows.items():
        ex, steps, machines = cover.get(inv_id, (0, 0, []))
        row.figure = f"{ex:,} examples, {steps:,} steps ({', '.join(machines)})"
    return list(rows.values())


def rejected_design_row(variant: str, defects: tuple[str, ...], examples: int, seed: int,
                        shrink: bool) -> Result:
    """The first machine that catches `variant` with one of `defects`; not-refuted if none."""
    t0 = time.perf_counter()
    tried = []
    for machine in MACHINES:
        r = run_machine(machine, variant, profile="ci", examples=examples, seed=seed,
                        shrink=shrink)
        tried.append(f"{machine}: {r.failure.invariant if r.failure else 'nothing'}")
        if r.failure is not None and r.failure.invariant in defects:
            return Result(r.failure.invariant, f"fuzz:{variant}", "refuted-as-expected",
                          f"{machine} machine, example {r.found_after}",
                          time.perf_counter() - t0, f"{r.failure.reason}\n{r.failure.program}",
                          r.replay_command())
    return Result(defects[0], f"fuzz:{variant}", "not-refuted",
                  f"{len(MACHINES)} machines, {examples} examples each",
                  time.perf_counter() - t0,
                  f"no machine found {' or '.join(defects)} ({'; '.join(tried)})",
                  f"purgecheck fuzz --variant {variant} --examples {examples * 10}")
