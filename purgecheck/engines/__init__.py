"""The engines `purgecheck check` runs, each turning the registry into results.

An engine is a function of a `Budget` (how hard to try) returning one Result per invariant it
checks. Other modules add theirs with `@engine(...)`; `check` runs them all in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from model.invariants import load_registry
from purgecheck.results import Result


@dataclass(frozen=True)
class Budget:
    """How much an engine may do: `quick` for the test suite, full for `make check`."""

    quick: bool = False
    seed: int = 0
    # A mutant being judged (purgecheck.mutants): the model side is patched in-process by the
    # caller; engines that run the C reference pass `Mutant.c_switch` to it.
    mutant: str | None = None


@dataclass(frozen=True)
class Engine:
    name: str
    description: str
    run: Callable[[Budget], list[Result]]


ENGINES: dict[str, Engine] = {}


def engine(name: str, description: str):
    def wrap(fn: Callable[[Budget], list[Result]]):
        ENGINES[name] = Engine(name, description, fn)
        return fn
    return wrap


def load_engines() -> dict[str, Engine]:
    """Import every module that registers an engine (optional ones may be absent)."""
    import importlib

    for mod in ENGINE_MODULES:
        importlib.import_module(mod)
    return ENGINES


# Modules that register engines, in the order `check` runs them.
ENGINE_MODULES = [
    "purgecheck.engines",
    "purgecheck.engines.glibc",
    "purgecheck.engines.fuzz",
    "purgecheck.engines.conformance",
    "purgecheck.engines.validate",
    "purgecheck.engines.prove",
    "purgecheck.engines.sanitizers",
]


def scenario_checks(names: list[str] | None = None) -> tuple[dict[str, int], dict[str, Result]]:
    """Run scenarios; check every invariant with a predicate after every op.

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
    counts, failures = scenario_checks()
    dt = time.perf_counter() - t0
    out = []
    for inv_id, n in counts.items():
        r = failures.get(inv_id) or Result(inv_id, "scenarios", "hold", "")
        r.figure = f"{n:,} steps" if inv_id != "HD-GOES-WITHIN-TWO" else f"{n} liveness schedules"
        r.seconds = dt / max(1, len(counts))
        out.append(r)
    return out
