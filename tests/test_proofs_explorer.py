"""The interleaving explorer: the quick configurations match the manifest and hold every
invariant; each check it makes is shown to catch a mutant, with the shortest path."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from model.thread import MI_PARK_SWEEPS_MAX, PARK_SWEPT_SMALL, PARKED
from proofs import explorer as X
from proofs.explorer_configs import CONFIGS, QUICK, compare_with_manifest, load_manifest
from purgecheck.mutants import MUTANTS, applied


# park-1-cap is the costliest quick configuration (16 s of a CI run, a third of the module):
# its exploration is slow-tier here (and in `purgecheck prove --quick`, which `make check`
# runs); the cap's own check stays fast on the stalled park below (PK-DONE-WITHIN-MAX from an
# initial state under park-unbounded, and held by the real rule).
FAST_QUICK = [pytest.param(n, marks=pytest.mark.slow) if n == "park-1-cap" else n for n in QUICK]
MOVES_OF_BLOCK1 = ("xthread-park", "reclaim-alloc-park")  # the paths of issue 28, below


@functools.cache
def explored(name: str, mutant: str | None = None) -> tuple[X.Report, frozenset]:
    """CONFIGS[name] explored whole under `mutant`, once for the module (the explorer is
    deterministic and the tests only read its report: the quick test, the park's checks and
    the paths of issue 28 read the same run), with the moves of block 1 where MOVES_OF_BLOCK1
    names it: (actor, block 1's place before, after) of every transition that moves it."""
    seen: set[tuple[str, str, str]] = set()

    def on(action, s, ns):
        if s[8][0] != ns[8][0]:
            seen.add((X.actor_of(action), s[8][0], ns[8][0]))
    with applied(MUTANTS[mutant] if mutant else None):
        rep = X.explore(CONFIGS[name], on_transition=on if name in MOVES_OF_BLOCK1 else None)
    return rep, frozenset(seen)


@pytest.mark.parametrize("name", FAST_QUICK)
def test_quick_configuration_matches_the_manifest_and_holds(name):
    rep, _ = explored(name)
    assert rep.ok, {k: v.reason for k, v in rep.violations.items()}
    assert compare_with_manifest(rep) is None
    want = load_manifest()[name]
    assert (rep.states, rep.transitions, rep.depth) == \
        (want["states"], want["transitions"], want["depth"])


def test_manifest_names_every_configuration():
    assert set(CONFIGS) <= set(load_manifest())


def test_a_changed_state_space_is_reported():
    rep = X.explore(replace(CONFIGS["bare-1"], clock_bound=8))
    assert "state space changed" in compare_with_manifest(rep)


def test_symmetry_and_dead_locals_shrink_the_space_without_losing_a_violation():
    full = X.explore(replace(CONFIGS["bare-2"], reduce_dead=False))
    small, _ = explored("bare-2")
    assert full.ok and small.ok and small.states * 5 < full.states
    with applied(MUTANTS["no-cas-exclusion"]):
        reduced = X.explore(CONFIGS["bare-2"], stop_at_first=True)
    assert "EP-NO-SHORT-EPOCH" in reduced.violations


def test_park_configuration_checks_the_world_invariants():
    rep, _ = explored("park-1-short")
    for inv in ("HD-INTERVAL", "HD-YOUNG-KEPT", "PK-SPACING", "PK-DONE-TWO-EPOCHS",
                "PK-DONE-WITHIN-MAX", "PK-NO-STUCK-CYCLE", "EP-EPOCH-MOVES"):
        assert inv in rep.checked
    assert set(rep.not_applicable) == set(NOT_KEPT_BY_THE_EXPLORER)
    assert rep.graph_nodes > 0


# World invariants the explorer cannot judge, each for a reason: a new one is a decision.
NOT_KEPT_BY_THE_EXPLORER = {
    "AL-REALLOC-MOVES": "realloc is not among the explorer's actions",
    "PR-DISCARDED-BYTES-SUM": "one page and no process-wide counters: nothing to sum",
    "PR-PURGED-BLOCKS-SUM": "one page and no process-wide counters: nothing to sum",
    "PR-UNFORMED-BYTES-SUM": "one page and no process-wide counters: nothing to sum",
    "PR-FULL-SWEEPS-SUM": "no full sweep (the scavenger's sweeps skip nothing) and no counter",
    "PR-PARKED-COUNT-SUM": "one parked thread and no process-wide count of parks",
    "PR-ABANDONED-PAGES-SUM": "no abandoned map: the one page always has its owner",
}


@pytest.mark.parametrize("mutant,config,invariant,steps", [
    ("no-cas-exclusion", "bare-2", "EP-NO-SHORT-EPOCH", 15),
    ("start-before-increment", "bare-2", "EP-RECORDED-NOT-BEFORE-REAL", 12),
    ("wait-returns-at-once", "bare-2", "EP-EPOCH-MOVES", None),
    ("double-increment", "bare-1", "EP-ONE-PER-SWEEP", None),
    ("age-lt-1", "park-1-short", "HD-YOUNG-KEPT", None),
    ("stamp-never-written", "park-1-short", "HD-INTERVAL", None),
])
def test_mutant_is_found_with_a_shortest_path(mutant, config, invariant, steps):
    cfg = replace(CONFIGS[config], reduce_dead=False)
    with applied(MUTANTS[mutant]):
        rep = X.explore(cfg, stop_at_first=True)
    assert invariant in rep.violations, list(rep.violations)
    v = rep.violations[invariant]
    assert v.path[0][0] == "initial state"
    if steps is not None:
        assert len(v.path) - 1 == steps
    table = v.table(cfg)
    assert invariant in table and "shortest path" in table
    dot = X.to_dot(v, cfg)
    assert dot.startswith("digraph") and dot.count("->") == len(v.path) - 1


def test_stuck_park_cycle_is_found_when_due_time_and_progress_are_both_broken():
    cfg = replace(CONFIGS["park-1-short"], reduce_dead=False, ignore_due=True)
    with applied(MUTANTS["park-swept-reset"]):
        rep = X.explore(cfg, max_states=5_000)
    assert "PK-NO-STUCK-CYCLE" in rep.violations
    actions = [a for a, _ in rep.violations["PK-NO-STUCK-CYCLE"].path]
    assert actions.count("scavenger: end of sweep") >= 1
    path = rep.violations["PK-NO-STUCK-CYCLE"].path
    assert X.system_part(path[-1][1]) in {X.system_part(s) for _, s in path[:-1]}  # it closes


def test_no_stuck_cycle_with_the_due_time_kept():
    cfg = replace(CONFIGS["park-1-short"], reduce_dead=False)
    with applied(MUTANTS["park-swept-reset"]):
        rep = X.explore(cfg, max_states=20_000)
    assert "PK-NO-STUCK-CYCLE" not in rep.violations


def test_park_done_within_max_is_reported_in_a_state_that_breaks_it():
    """A park swept MI_PARK_SWEEPS_MAX times and still not done is a violation."""
    cfg = CONFIGS["park-1-short"]
    rec = (0, 1, 0, True, PARK_SWEPT_SMALL + 4)
    owner = (PARKED, PARK_SWEPT_SMALL + 5, 1, 0, 0, 0, (MI_PARK_SWEEPS_MAX, 0, None, rec), 3)
    s0 = X.initial_state(cfg)
    s = s0[:7] + (owner, s0[8])
    found = X.check_state(cfg, s0, s, [], [], set())
    assert [i for i, _ in found] == ["PK-DONE-WITHIN-MAX"]
    ok = s0[:7] + (owner[:1] + (1,) + owner[2:], s0[8])  # the same, done
    assert X.check_state(cfg, s0, ok, [], [], set()) == []


# No sweeper, so the epoch stays where it is and the page stays young: every sweep defers.
# The scavenger ignores the due time (a broken variant) so that six sweeps fit in 1 ms.
STALLED = X.Config("stalled", 0, interval=2, clock_bound=1, owner=True, parked=True,
                   ignore_due=True)


@pytest.mark.parametrize("reduce_dead", [True, False])
def test_park_done_within_max_is_reached_from_an_initial_state_under_a_mutant(reduce_dead):
    cfg = replace(STALLED, reduce_dead=reduce_dead)
    with applied(MUTANTS["park-unbounded"]):
        rep = X.explore(cfg, max_states=3_000)
    v = rep.violations["PK-DONE-WITHIN-MAX"]
    assert v.path[0][0] == "initial state"
    assert [a for a, _ in v.path].count("scavenger: end of sweep") == MI_PARK_SWEEPS_MAX
    # the real rule, and a park that ends at the cap only, are done at the sixth sweep
    for mutant in (None, "park-ignores-epochs"):
        with applied(MUTANTS[mutant] if mutant else None):
            rep = X.explore(cfg)
        assert rep.complete and "PK-DONE-WITHIN-MAX" not in rep.violations


@pytest.mark.parametrize("reduce_dead", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_park_spacing_is_judged_against_the_sweep_before(reduce_dead):
    """The record before the last is kept until the new one was judged (PK-SPACING reads
    its end), and its end is raised no later than the claim time minus the interval.
    Without the dead locals' reduction (the module's costliest run, 10 s of CPU at load 5) in
    the slow tier: test_reduced_and_unreduced_verdicts_agree holds the reduction to the
    unreduced verdicts in the fast one, clean and under the quick mutants."""
    cfg = replace(V_PARK, clock_bound=6, reduce_dead=reduce_dead)
    with applied(MUTANTS["sweep-last-before-work"]):
        rep = X.explore(cfg, stop_at_first=True, max_states=400_000)
    assert list(rep.violations) == ["PK-SPACING"]
    assert X.explore(replace(cfg, clock_bound=5)).ok


# -- the reductions hide no violation ---------------------------------------------------
# Small configurations that the explorer also runs without the reductions (dead locals,
# canonical frames, forgotten past times), whose verdicts must be the same under every
# mutant of what the explorer runs. A mutant whose step reads a local the reduction forgets
# makes the reduced run stop (ReductionError) rather than answer.
V_BARE = X.Config("v-bare", 2, interval=2, clock_bound=5)
V_PARK = X.Config("v-park", 1, interval=2, clock_bound=5, owner=True, parked=True)
EXPLORER_MUTANTS = [m.name for m in MUTANTS.values()
                    if any(p.module in ("model.epoch", "model.park", "model.stamp",
                                        "model.variants") for p in m.patches)]
UNBOUNDED = ("epoch-not-rate-limited",)  # the epoch moves without end: the space is infinite
QUICK_MUTANTS = ("no-cas-exclusion", "wait-returns-at-once", "double-increment", "age-lt-1",
                 "start-before-increment")


def verdicts(cfg, mutant, reduce_dead):
    with applied(MUTANTS[mutant] if mutant else None):
        try:
            rep = X.explore(replace(cfg, reduce_dead=reduce_dead),
                            max_states=20_000 if mutant in UNBOUNDED else None)
        except X.ReductionError:
            return "refused"
    return sorted(rep.violations)


def same_verdicts(cfg, mutant):
    full, reduced = verdicts(cfg, mutant, False), verdicts(cfg, mutant, True)
    if reduced == "refused":
        assert full, f"{mutant}: refused, though nothing is violated"
        return
    if mutant in UNBOUNDED:  # both cut at the same number of states: the reduced run
        assert set(full) <= set(reduced), mutant  # reaches further and hides nothing
        return
    assert reduced == full, mutant


@pytest.mark.parametrize("mutant", (None,) + QUICK_MUTANTS)
def test_reduced_and_unreduced_verdicts_agree(mutant):
    same_verdicts(V_BARE, mutant)
    if mutant in (None, "age-lt-1", "double-increment"):
        same_verdicts(V_PARK, mutant)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", EXPLORER_MUTANTS)
def test_reduced_and_unreduced_verdicts_agree_for_every_mutant(mutant):
    same_verdicts(V_BARE, mutant)
    same_verdicts(V_PARK, mutant)


def test_the_explorer_mutants_are_the_ones_it_runs():
    assert {"no-cas-exclusion", "start-before-increment", "park-unbounded",
            "sweep-last-before-work", "stamp-never-written"} <= set(EXPLORER_MUTANTS)


def test_a_step_that_reads_a_forgotten_local_stops_the_reduced_run():
    """start-before-increment stores the clock read before the increment, which the real
    advance never reads after its compare."""
    with applied(MUTANTS["start-before-increment"]):
        with pytest.raises(X.ReductionError, match="reads a local"):
            X.explore(V_BARE)


def test_stale_start_is_kept_when_the_compare_is_broken():
    """canonical_frame stands STALE_START for an old loaded start only while the model's
    compare finds both due; a compare that does not (here: never due) turns that off."""
    assert X.is_stale_start_sound(V_BARE)
    from purgecheck.mutants import Mutant, Patch
    never = Mutant("never-due", "", (), (Patch("model.epoch", "is_epoch_due",
                                               lambda start, now, interval: False),))
    with applied(never):
        assert not X.is_stale_start_sound(V_BARE)


def test_is_park_due_is_the_model_s_due_test():
    from model.park import is_park_due
    from model.thread import ThreadState
    t = ThreadState(1, holes_sweep_last=5)
    assert not is_park_due(t, 6, 2) and is_park_due(t, 7, 2)


def test_spin_max_is_restored_after_exploring():
    before = X.ep.spin_max
    X.explore(CONFIGS["bare-1"])
    assert X.ep.spin_max == before == 1000


def test_a_proof_whose_space_grows_past_twice_the_manifest_stops_and_fails(monkeypatch):
    """A proof explores at most twice the manifest's count of states: a space that grew
    past it is reported changed (a failure) there, and an infinite one (a broken model:
    epoch-not-rate-limited moves the epoch at every sweep) stops instead of running on for
    minutes, with what it found."""
    import proofs.explorer_configs as configs
    from proofs.catalogue import explorer_proof

    real = configs.load_manifest()["bare-2"]["states"]
    with applied(MUTANTS["epoch-not-rate-limited"]):
        out = explorer_proof("bare-2").run(True)
    assert out.status == "refuted" and out.detail.startswith("EP-NO-SHORT-EPOCH")
    states = int(out.figure.split()[0].replace(",", ""))
    assert states <= 2 * real
    monkeypatch.setattr(configs, "load_manifest", lambda: {"bare-2": {"states": 100}})
    out = explorer_proof("bare-2").run(True)
    assert out.status == "changed" and "more than 200 states (the manifest has 100)" \
        in out.detail


def test_a_proof_the_dead_locals_guard_stops_fails_with_its_reason():
    """start-before-increment reads a local the reduction forgets: the proof says so (a
    failure, not a crash); the twin runs unreduced and refutes it."""
    from proofs.catalogue import explorer_proof

    with applied(MUTANTS["start-before-increment"]):
        out = explorer_proof("bare-2").run(True)
    assert out.status == "reduction-refused" and "reads a local" in out.detail


def test_the_explorer_runs_the_models_mark_walked():
    """A walk's new swept_state comes from model.holes.mark_walked, so a mutant of it is what
    the explorer runs: walk-keeps-stamp breaks SW-WALK-SETS-STATE (when the explorer computed
    the state itself, it found nothing in this space). The clean model's side is the module's
    reduced run of park-1-short (the quick test's: 12,867 states, 1 s of CPU, where the
    unreduced run was 102,343 states and 2; the reduction is held to the unreduced verdicts on
    a bare and a park configuration, test_reduced_and_unreduced_verdicts_agree)."""
    cfg = replace(CONFIGS["park-1-short"], reduce_dead=False, graph=False)
    with applied(MUTANTS["walk-keeps-stamp"]):
        rep = X.explore(cfg, stop_at_first=True)
    assert "SW-WALK-SETS-STATE" in rep.violations
    clean, _ = explored("park-1-short")
    assert "SW-WALK-SETS-STATE" in clean.checked
    assert "SW-WALK-SETS-STATE" not in clean.violations


# -- the scavenger's claim and release, and what a held page leaves, are the model's -------

@pytest.mark.parametrize("reduce_dead", [True, False])
def test_the_explorer_runs_the_models_claim(reduce_dead):
    """The scavenger's claim is model.park.claim_parked_thread, so claim-forgets-progress
    (every sweep of a park taken for its first) is what the explorer runs: the park whose
    sweeps all defer is never done, PK-DONE-WITHIN-MAX (when the explorer read park_swept
    itself, this mutant changed nothing there). The scenario engine kills it too."""
    cfg = replace(STALLED, reduce_dead=reduce_dead)
    mutant = MUTANTS["claim-forgets-progress"]
    with applied(mutant):
        rep = X.explore(cfg, max_states=3_000)
    v = rep.violations["PK-DONE-WITHIN-MAX"]
    assert [a for a, _ in v.path].count("scavenger: end of sweep") == MI_PARK_SWEEPS_MAX
    assert "PK-DONE-WITHIN-MAX" not in X.explore(cfg).violations
    from purgecheck.engines.scenarios import scenario_checks
    with applied(mutant):
        _, failures = scenario_checks(["park-churn"])
    assert set(mutant.catches) <= set(failures)
    assert scenario_checks(["park-churn"])[1] == {}


def test_the_explorer_runs_the_models_release():
    """The end of a park's sweep is model.park.release_parked_thread: a release that stores
    the park's progress as NONE again leaves the park never done, in the explorer too."""
    from model.park import release_parked_thread
    from model.thread import PARK_SWEPT_NONE
    from purgecheck.mutants import Mutant, Patch

    def release_forgets(world, thread, swept, start_ms, deferred):
        record = release_parked_thread(world, thread, swept, start_ms, deferred)
        thread.park_swept = PARK_SWEPT_NONE
        return record

    forgets = Mutant("release-forgets", "", (), (Patch("model.park", "release_parked_thread",
                                                       release_forgets),))
    with applied(forgets):
        rep = X.explore(STALLED, max_states=3_000)
    assert "PK-DONE-WITHIN-MAX" in rep.violations


def test_the_explorer_asks_the_model_what_a_held_page_leaves():
    """Whether a held page leaves something (so that the park is not done) is
    model.sweep.has_held_memory: under park-unbounded the young page of STALLED is held and
    left at every sweep, past the cap (PK-DONE-WITHIN-MAX); where the model's test says a
    held page leaves nothing, the first sweep ends the park and there is no violation."""
    from purgecheck.mutants import Mutant, Patch
    nothing = Mutant("holds-nothing", "", (), (Patch("model.sweep", "has_held_memory",
                                                     lambda page: False),))
    with applied(MUTANTS["park-unbounded"]):
        assert "PK-DONE-WITHIN-MAX" in X.explore(STALLED, max_states=3_000).violations
        with applied(nothing):
            rep = X.explore(STALLED)
    assert rep.complete and rep.ok


# A sweeper that stops between its CAS and its store holds MOVING for good (digest 9.4): the
# epoch stands still, the owner's page stays young, and each park sweep, an interval after
# the one before, holds it. The cap (MI_PARK_SWEEPS_MAX) is what ends the park there; the
# configuration park-1-cap (one of `purgecheck prove`'s) has the intervals for it.
STALLED_MOVER = CONFIGS["park-1-cap"]


@pytest.mark.slow
def test_a_stalled_mover_leaves_the_park_to_the_cap_and_a_claim_that_forgets_never_ends_it():
    assert X.explore(STALLED_MOVER).ok
    with applied(MUTANTS["claim-forgets-progress"]):
        rep = X.explore(STALLED_MOVER, stop_at_first=True)
    # The MAX-th sweep that is not marked done breaks PK-DONE-EXACT's other side at the same
    # state (that invariant came after this test, which asked for PK-DONE-WITHIN-MAX alone)
    assert set(rep.violations) == {"PK-DONE-WITHIN-MAX", "PK-DONE-EXACT"}
    actions = [a for a, _ in rep.violations["PK-DONE-WITHIN-MAX"].path]
    assert actions.count("scavenger: end of sweep") == MI_PARK_SWEEPS_MAX
    assert "clock tick" in actions  # the real due time: each sweep an interval on


# -- the paths only the fuzz machines reached (issue 28) ------------------------------------

def _moves_of_block1(name: str) -> frozenset[tuple[str, str, str]]:
    """(actor, block 1's place before, after) of every transition that moves block 1."""
    return explored(name)[1]


def test_xthread_park_reaches_another_threads_free_collected_held_and_purged():
    moves = _moves_of_block1("xthread-park")
    assert ("other thread", X.LIVE, X.XFREE) in moves
    # the park's sweep collects it: held (young: on the free list) or walked at once
    assert ("scavenger", X.XFREE, X.FREE) in moves
    assert ("scavenger", X.XFREE, X.PURGED) in moves
    assert ("scavenger", X.FREE, X.PURGED) in moves


def test_reclaim_alloc_park_reaches_the_malloc_paths_collect_then_the_sweep():
    moves = _moves_of_block1("reclaim-alloc-park")
    assert ("other thread", X.LIVE, X.XFREE) in moves
    assert ("owner", X.XFREE, X.FREE) in moves  # malloc (collect, take) + free, one move
    assert ("scavenger", X.FREE, X.PURGED) in moves


@pytest.mark.parametrize("name", ["xthread-park", "reclaim-alloc-park"])
def test_a_collect_that_keeps_xthread_frees_is_caught_only_on_the_new_paths(name):
    """collect-keeps-xthread was killed by no explorer configuration before these (their
    owner never had another thread's free): the park configurations still hold under it.
    On the new ones the block is left on xthread_free beside the free list (or beside its
    new owner: the malloc path took it)."""
    assert explored("park-1-short", "collect-keeps-xthread")[0].ok
    with applied(MUTANTS["collect-keeps-xthread"]):
        rep = X.explore(CONFIGS[name], stop_at_first=True)
    assert rep.violations["PG-LIVE-NOT-FREE"].reason in (
        "a block is on the free lists twice", "blocks [1] are live and on a free list")
