"""The broken rules of issue 20 are killed by the model's own engines too, not by the
comparison with the C reference alone (issue 20, second round).

Each mutant breaks a rule the model judges with an invariant over a ghost record, stated
from the digest's words (model/walk_invariants.py, model/epoch_invariants.py):
- rebuild-keeps-order: PG-WALK-REVERSES (digest 3, step 3: the kept blocks pushed on a new
  head come out reversed);
- purged-straddler-live: PG-WALK-TAKES-EVERY-FREE-UNIT (digest 3, step 2: free-listed or
  purged);
- fork-child-keeps-moving: EP-MOVING-HELD (no thread of a fork's child holds MOVING);
- clock-back-not-due: EP-BACK-IS-DUE (a reading behind start makes the advance due).
The scenarios engine reaches each through its named scenario, and the fuzz engine's machines
through their alphabet (the epoch machine's fork and clock_back between the steps of an
advance; the page machine's free beside a purged straddler; the park machine's sweeps), both
at `make test`'s budget (quick: 20 examples a machine, seed 0, as purgecheck.engines.fuzz).
The explorer reaches the two epoch ones in its configurations fork-2 and clock-back-1 (in
`prove --quick`), whose moves are opt-in so that the other configurations keep their spaces.
"""

from __future__ import annotations

import pytest

from proofs.explorer import Config, explore
from proofs.explorer_configs import CONFIGS, compare_with_manifest
from purgecheck import reach
from purgecheck.engines.fuzz import budgets
from purgecheck.engines.scenarios import scenario_checks
from purgecheck.engines import Budget
from purgecheck.fuzz import run_machine
from purgecheck.mutants import MUTANTS, applied

# mutant -> (the invariant it breaks, the scenario that reaches it, the machine that does)
CASES = {
    "rebuild-keeps-order": ("PG-WALK-REVERSES", "walk-order", "park"),
    "purged-straddler-live": ("PG-WALK-TAKES-EVERY-FREE-UNIT", "purged-straddler", "page"),
    "fork-child-keeps-moving": ("EP-MOVING-HELD", "fork-while-moving", "epoch"),
    "clock-back-not-due": ("EP-BACK-IS-DUE", "clock-back", "epoch"),
}
QUICK_EXAMPLES = budgets(Budget(quick=True))[0]


@pytest.mark.parametrize("mutant", CASES)
def test_the_scenario_holds_clean_and_fails_the_invariant_under_the_mutant(mutant):
    inv, scenario, _ = CASES[mutant]
    counts, failures = scenario_checks([scenario])
    assert counts[inv] > 0 and not failures, failures
    with applied(MUTANTS[mutant]):
        _, failures = scenario_checks([scenario])
    assert inv in failures, sorted(failures)
    assert f"scenario {scenario}" in failures[inv].detail


@pytest.mark.parametrize("mutant", CASES)
def test_a_fuzz_machine_kills_the_mutant_at_the_quick_budget(mutant):
    inv, _, machine = CASES[mutant]
    run = run_machine(machine, mutant=mutant, profile="ci", examples=QUICK_EXAMPLES, seed=0,
                      shrink=False)
    assert run.failure is not None and run.failure.invariant == inv, \
        run.failure and (run.failure.invariant, run.failure.reason)
    assert inv in MUTANTS[mutant].catches


def test_each_mutant_names_the_model_invariant_that_catches_it_and_breaks_the_c_side_too():
    for mutant, (inv, _, _) in CASES.items():
        assert MUTANTS[mutant].catches == (inv,)
        assert MUTANTS[mutant].c_switch  # CF-TRACE-EQUAL: the conformance engine's kill


@pytest.mark.parametrize("config, mutant, inv", [
    ("fork-2", "fork-child-keeps-moving", "EP-MOVING-HELD"),
    ("clock-back-1", "clock-back-not-due", "EP-BACK-IS-DUE")])
def test_the_explorer_holds_its_rare_path_configuration_and_refutes_the_mutant(
        config, mutant, inv):
    rep = explore(CONFIGS[config])
    assert rep.ok and rep.complete and compare_with_manifest(rep) is None, rep.violations
    assert inv in rep.checked
    with applied(MUTANTS[mutant]):
        broken = explore(CONFIGS[config], stop_at_first=True)
    assert list(broken.violations) == [inv]
    path = [action for action, _ in broken.violations[inv].path]
    assert ("fork (the child)" if config == "fork-2" else "clock steps back") in path


def test_the_rare_path_moves_are_opt_in_and_refused_where_unsound():
    assert not any(c.fork or c.clock_back for n, c in CONFIGS.items()
                   if not n.startswith(("fork-", "clock-back-")))
    with pytest.raises(ValueError, match="sweepers only"):
        Config("x", sweepers=1, owner=True, parked=True, fork=True)
    with pytest.raises(ValueError, match="reduce_dead=False"):
        Config("x", sweepers=1, clock_back=1)


def test_the_reach_table_shows_the_explorer_reaching_the_rare_paths_and_not_under_mutants():
    fork = "a fork while MOVING is held: the child records a new start"
    back = "a clock that goes back makes the advance due"
    counts = reach.explorer_reach()
    assert counts[fork] > 0 and counts[back] > 0
    assert counts["a clock reading between the steps of an advance"] > 0
    assert counts["walk discards a run of free units"] is None  # not the explorer's
    with applied(MUTANTS["fork-child-keeps-moving"]):
        assert reach.explorer_reach(["fork-2"])[fork] == 0  # the child keeps MOVING
    with applied(MUTANTS["clock-back-not-due"]):
        assert reach.explorer_reach(["clock-back-1"])[back] == 0


@pytest.mark.slow
def test_a_split_explorer_run_reports_the_rare_path_violations_as_the_single_one_does():
    """The explorer over Dask (purgecheck.cluster.explorer) takes the edge verdicts of the
    calls judged as they end (EP-BACK-IS-DUE) under their own id, as explore does."""
    from purgecheck.cluster.client import dask_client
    from purgecheck.cluster.explorer import explore_on

    with dask_client(workers=2) as client:
        for config, mutant, inv in (("clock-back-1", "clock-back-not-due", "EP-BACK-IS-DUE"),
                                    ("fork-2", "fork-child-keeps-moving", "EP-MOVING-HELD")):
            split = explore_on(client, CONFIGS[config], mutant=mutant)
            with applied(MUTANTS[mutant]):
                alone = explore(CONFIGS[config])
            assert inv in alone.violations
            assert {k: (v.reason, v.path) for k, v in split.violations.items()} == \
                {k: (v.reason, v.path) for k, v in alone.violations.items()}
            assert (split.states, split.transitions) == (alone.states, alone.transitions)
