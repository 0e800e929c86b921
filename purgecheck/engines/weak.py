"""The `weak` engine: the epoch advance, the park handoff and a fork over C11 weak memory.

Runs the weak explorer (proofs/weak/, docs/proofs.md "The epoch protocol under C11") on the
configurations that hold at the C reference's orderings (proofs.weak.configs.ENGINE_CONFIGS:
the advance, the park at the reference and from its acquire/release baseline, the fork beside
the advance; with the full budget the three-sweeper advance too), with the weakenings of
proofs.weak.configs.WEAKENED applied: on the clean model there are none; a weak mutant
(purgecheck/mutants/catalogue/weak.py) sets one. A violation fails the result of the property
it names, with the shortest counterexample's first lines.
"""

from __future__ import annotations

import time

from proofs.weak import configs as C
from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result

ENGINE = "weak"
# The property a configuration's result speaks for while it holds (it checks the others too).
HEADLINE = {"weak-adv-2": "EP-SEES-STARTED", "weak-adv-3": "EP-SEES-STARTED",
            "weak-park-2": "PK-HANDOFF-FRESH", "weak-park-2-acqrel": "PK-HANDOFF-FRESH",
            "weak-fork-2": "EP-MOVING-HELD"}
TIMELINE_LINES = 12  # of the counterexample, in the result's detail


def replay(name: str) -> str:
    """The command that prints the configuration's verdict (with the weakenings now applied,
    its counterexample's timeline)."""
    cfg = C.engine_config(name)
    weakened = {a: C.ordering_of(cfg, a) for a in C.weakened() if C.has_access(cfg, a)}
    return (".venv/bin/python -c \"from proofs.weak import configs as C; "
            + f"cfg = C.config({name!r}); "
            + "".join(f"cfg = C.checker(cfg).weaken(cfg, {a!r}, {o!r}); "
                      for a, o in weakened.items())
            + "print(C.checker(cfg).counterexample(cfg) or 'holds')\"")


def run_config(name: str) -> Result:
    import proofs.weak.registry  # noqa: F401  the ids the results name

    cfg = C.engine_config(name)
    t0 = time.perf_counter()
    res = C.checker(cfg).check(cfg)
    figure = f"{name}: {res.report.states:,} states"
    if res.ok:
        return Result(HEADLINE[name], ENGINE, "hold", figure, time.perf_counter() - t0)
    # the shortest counterexample's property: the first thing that goes wrong on it (a stale
    # read of the handoff before the purge it leads to)
    timeline = C.checker(cfg).counterexample(cfg) or res.report.violation
    detail = "\n".join(timeline.splitlines()[:TIMELINE_LINES])
    return Result(timeline.split(":")[0], ENGINE, "fail", figure, time.perf_counter() - t0,
                  detail=detail, replay=replay(name))


@engine(ENGINE, "the weak explorer (C11 without load buffering) on the epoch advance, the park "
                "handoff and a fork, at the reference's orderings or the judged weakening")
def run_weak(budget: Budget) -> list[Result]:
    names = C.ENGINE_CONFIGS if budget.quick else C.ENGINE_CONFIGS_FULL
    out = []
    for name in names:
        out.append(run_config(name))
        if budget.first_failure and not out[-1].ok:
            break
    return out
