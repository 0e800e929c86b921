"""The interleaving explorer: the quick configurations match the manifest and hold every
invariant; each check it makes is shown to catch a mutant, with the shortest path."""

from __future__ import annotations

from dataclasses import replace

import pytest

from model.thread import MI_PARK_SWEEPS_MAX, PARK_SWEPT_SMALL, PARKED
from proofs import explorer as X
from proofs.explorer_configs import CONFIGS, QUICK, compare_with_manifest, load_manifest
from purgecheck.mutants import MUTANTS, applied


@pytest.mark.parametrize("name", QUICK)
def test_quick_configuration_matches_the_manifest_and_holds(name):
    rep = X.explore(CONFIGS[name])
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
    small = X.explore(CONFIGS["bare-2"])
    assert full.ok and small.ok and small.states * 5 < full.states
    with applied(MUTANTS["no-cas-exclusion"]):
        reduced = X.explore(CONFIGS["bare-2"], stop_at_first=True)
    assert "EP-NO-SHORT-EPOCH" in reduced.violations


def test_park_configuration_checks_the_world_invariants():
    rep = X.explore(CONFIGS["park-1-short"])
    for inv in ("HD-INTERVAL", "HD-YOUNG-KEPT", "PK-SPACING", "PK-DONE-TWO-EPOCHS",
                "PK-DONE-WITHIN-MAX", "PK-NO-STUCK-CYCLE", "EP-EPOCH-MOVES"):
        assert inv in rep.checked
    assert rep.not_applicable == []
    assert rep.graph_nodes > 0


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
    """A park swept MI_PARK_SWEEPS_MAX times and still not done (what the mutant
    park-unbounded reaches when the epoch is stalled for six intervals) is a violation."""
    cfg = CONFIGS["park-1-short"]
    rec = (0, 1, 0, True, PARK_SWEPT_SMALL + 4)
    owner = (PARKED, PARK_SWEPT_SMALL + 5, 1, 0, 0, 0, (MI_PARK_SWEEPS_MAX, 0, rec), 3)
    s0 = X.initial_state(cfg)
    s = s0[:7] + (owner, s0[8])
    found = X.check_state(cfg, s0, s, [], [], set())
    assert [i for i, _ in found] == ["PK-DONE-WITHIN-MAX"]
    ok = s0[:7] + (owner[:1] + (1,) + owner[2:], s0[8])  # the same, done
    assert X.check_state(cfg, s0, ok, [], [], set()) == []


def test_spin_max_is_restored_after_exploring():
    before = X.ep.spin_max
    X.explore(CONFIGS["bare-1"])
    assert X.ep.spin_max == before == 1000
