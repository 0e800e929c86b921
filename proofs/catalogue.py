"""Every proof and every broken twin, by name: what `purgecheck prove` runs.

Z3 proofs (unit, walk, age, advance, hold), the explorer's configurations (one proof each)
and the CrossHair contracts; each proof's broken twins must be refuted.
"""

from __future__ import annotations

import time
from dataclasses import replace

from proofs import advance_z3, age_z3, hold_z3, unit_z3, walk_z3
from proofs.core import REFUTED, Outcome, Proof, Twin

Z3_MODULES = (unit_z3, walk_z3, age_z3, advance_z3, hold_z3)


def explorer_outcome(rep, manifest: bool = True, expected: tuple[str, ...] = ()) -> Outcome:
    from proofs.explorer_configs import compare_with_manifest

    if rep.violations:
        wanted = [i for i in expected if i in rep.violations]
        v = rep.violations[wanted[0]] if wanted else next(iter(rep.violations.values()))
        if expected and not wanted:  # refuted, but not by what the twin is about
            return Outcome("refuted-otherwise", rep.figure(), v.table(rep.config),
                           rep.seconds)
        return Outcome(REFUTED, rep.figure(), v.table(rep.config), rep.seconds)
    changed = compare_with_manifest(rep) if manifest else None
    if changed:
        return Outcome("changed", rep.figure(), changed + " (re-run `python -m "
                       "proofs.explorer_configs --write` if the change is meant)", rep.seconds)
    return Outcome("bounded", f"{rep.figure()}; {len(rep.checked)} invariants checked",
                   "", rep.seconds)


def explorer_proof(name: str) -> Proof:
    from proofs.explorer import PAGE_INVARIANTS, ReductionError, explore
    from proofs.explorer_configs import CONFIGS, load_manifest

    cfg = CONFIGS[name]
    # A space that grew past twice the manifest's count has changed: say so then, rather
    # than explore on (a broken model can make it infinite: epoch-not-rate-limited).
    want = load_manifest().get(name, {}).get("states")
    bound = 2 * want if want else None
    invs = ("EP-NO-SHORT-EPOCH", "EP-RECORDED-NOT-BEFORE-REAL", "EP-ONE-PER-SWEEP",
            "EP-EPOCH-MOVES")
    if cfg.parked:
        invs += ("HD-INTERVAL", "HD-YOUNG-KEPT", "PK-MAX-SWEEPS", "PK-DONE-TWO-EPOCHS",
                 "PK-SPACING", "SW-WALK-SETS-STATE", "PK-DONE-WITHIN-MAX")
    if cfg.owner:
        invs += PAGE_INVARIANTS
    if cfg.graph:
        invs += ("PK-NO-STUCK-CYCLE",)
    if cfg.fork:
        invs += ("EP-MOVING-HELD",)
    if cfg.clock_back:  # a clock that goes back: the two claimed for a monotone one say nothing
        invs = tuple(i for i in invs if i not in ("EP-NO-SHORT-EPOCH",
                                                  "EP-RECORDED-NOT-BEFORE-REAL"))
        invs += ("EP-BACK-IS-DUE",)
    def run(quick: bool) -> Outcome:
        t0 = time.perf_counter()
        try:
            rep = explore(cfg, max_states=bound)
        except ReductionError as e:  # the model read what a reduction forgets: no verdict
            return Outcome("reduction-refused", "stopped", str(e), time.perf_counter() - t0)
        if not rep.complete and not rep.violations:
            return Outcome("changed", rep.figure(), f"state space changed: more than "
                           f"{bound:,} states (the manifest has {want:,}); stopped there",
                           rep.seconds)
        return explorer_outcome(rep)
    return Proof(f"explore-{name}", invs, "explorer", run, cfg.describe())


def explorer_twin(name: str, base: str, invariants: tuple[str, ...], mutant: str,
                  summary: str, max_states: int | None = None, **changes) -> Twin:
    """The explorer on configuration `base` with `mutant` applied, without the dead-locals
    reduction (a mutant may read a local the real advance never reads again), stopping at
    the first violation (the shortest counterexample, breadth first). A twin with `max_states`
    explores that many states and then judges: one about the state graph (its ghosts grow
    without end), or one whose broken setting breaks another invariant first."""
    from proofs.explorer import explore
    from proofs.explorer_configs import CONFIGS

    cfg = replace(CONFIGS[base], name=name, reduce_dead=False, **changes)

    def run(quick: bool) -> Outcome:
        rep = explore(cfg, stop_at_first=max_states is None, max_states=max_states)
        return explorer_outcome(rep, manifest=False, expected=invariants)
    return Twin(name, f"explore-{base}", invariants, "explorer", run, summary, mutant=mutant)


def proofs(quick: bool) -> list[Proof]:
    from proofs import crosshair_contracts
    from proofs.explorer_configs import CONFIGS, QUICK

    out = [m.PROOF for m in Z3_MODULES]
    out += [explorer_proof(n) for n in (QUICK if quick else CONFIGS)]
    out.append(crosshair_contracts.PROOF)
    return out


def twins(quick: bool) -> list[Twin]:
    from proofs import crosshair_contracts

    out = [t for m in Z3_MODULES for t in m.TWINS]
    out += [
        explorer_twin("explore-no-cas-exclusion", "bare-2", ("EP-NO-SHORT-EPOCH",),
                      "no-cas-exclusion", "the explorer finds two sweepers moving the epoch"),
        explorer_twin("explore-start-before-increment", "bare-2",
                      ("EP-NO-SHORT-EPOCH", "EP-RECORDED-NOT-BEFORE-REAL"),
                      "start-before-increment", "the explorer finds a start recorded early"),
        # No sweeper (the epoch stays, every sweep defers) and a scavenger that ignores the
        # due time, so that more sweeps than the cap fit in the clock bound; that scavenger
        # breaks PK-SPACING first, so the twin explores a bound and then judges.
        explorer_twin("explore-park-unbounded", "park-1-short", ("PK-DONE-WITHIN-MAX",),
                      "park-unbounded", "the explorer finds a park swept a seventh time",
                      max_states=3_000, sweepers=0, interval=2, clock_bound=1,
                      ignore_due=True, graph=False),
        explorer_twin("explore-stuck-park", "park-1", ("PK-NO-STUCK-CYCLE",),
                      "park-swept-reset", "a scavenger that ignores the due time, with a park "
                      "that forgets its sweeps: swept for ever, never done",
                      max_states=20_000, ignore_due=True, graph=True),
        # the rare paths (issue 20): a fork's child left holding MOVING; a reading behind
        # the epoch's start that does not make the advance due
        explorer_twin("explore-fork-child-keeps-moving", "fork-2", ("EP-MOVING-HELD",),
                      "fork-child-keeps-moving", "the explorer finds a fork's child where "
                      "start is MOVING and no thread holds it"),
        explorer_twin("explore-clock-back-not-due", "clock-back-1", ("EP-BACK-IS-DUE",),
                      "clock-back-not-due", "the explorer finds an advance that read the "
                      "clock behind start and did not move the epoch"),
        # the paths only the fuzz machines reached (issue 28): another thread's free left on
        # xthread_free by the collect, at a park's sweep and on the malloc path of a page
        # taken back
        explorer_twin("explore-xthread-collect-keeps", "xthread-park", ("PG-LIVE-NOT-FREE",),
                      "collect-keeps-xthread", "the explorer finds another thread's free "
                      "on two lists after the park's sweep collected it"),
        explorer_twin("explore-reclaim-collect-keeps", "reclaim-alloc-park",
                      ("PG-LIVE-NOT-FREE",), "collect-keeps-xthread", "the explorer finds "
                      "a block handed out by the malloc path's collect and still on "
                      "xthread_free"),
    ]
    out += crosshair_contracts.TWINS
    return out
