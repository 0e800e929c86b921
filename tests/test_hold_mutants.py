"""Each invariant of the epoch, the hold and the park is shown to catch a broken rule.

The mutants are defined in purgecheck/mutants/catalogue/hold.py; the scenario engine (every invariant
after every op of every named scenario) must report each one through the invariants it names.
"""

import pytest

from purgecheck.engines.scenarios import scenario_checks
from purgecheck.mutants import MUTANTS, applied

HOLD_MUTANTS = ["age-lt-1", "age-no-modulo", "stamp-never-written", "walk-keeps-stamp",
                "park-done-first", "park-unbounded", "park-ignores-epochs",
                "sweep-last-before-work", "epoch-not-rate-limited", "double-increment",
                "no-hold-inline", "fork-child-keeps-moving", "clock-back-not-due"]


# The clean model passes every scenario: test_page_mutants.test_the_clean_model_fails_no_invariant
# (one run of every scenario for the suite).


@pytest.mark.parametrize("name", HOLD_MUTANTS)
def test_mutant_is_caught_by_the_invariants_it_names(name):
    m = MUTANTS[name]
    with applied(m):
        _, failures = scenario_checks(until=set(m.catches))
    assert set(m.catches) <= set(failures), (name, sorted(failures))
    for inv in m.catches:
        assert failures[inv].replay.startswith("purgecheck scenario ")
    caught_in = sorted({f.replay.removeprefix("purgecheck scenario ") for f in failures.values()})
    _, after = scenario_checks(caught_in)  # the scenarios that caught it pass once it is gone
    assert after == {}, "the mutant leaked out of its with-block"


def test_every_hold_park_and_epoch_invariant_has_a_mutant():
    from model.invariants import load_registry
    ids = {i for i, inv in load_registry().items()
           if inv.predicate and i.split("-")[0] in ("HD", "PK", "SW", "EP")}
    caught = {c for n in HOLD_MUTANTS for c in MUTANTS[n].catches}
    # EP-RECORDED-NOT-BEFORE-REAL needs a preemption between the increment and the clock
    # read, which only the interleaving explorer produces (mutant start-before-increment).
    assert ids - caught <= {"EP-RECORDED-NOT-BEFORE-REAL"}


def test_a_first_kill_run_stops_the_scenarios_at_the_first_that_fails():
    """Budget.first_failure (a first-kill matrix's mutant run): the scenarios after the first
    failing one are not run, and what failed is what the whole run reports first."""
    with applied(MUTANTS["age-lt-1"]):
        all_counts, every = scenario_checks()
        counts, first = scenario_checks(first_failure=True)
    assert first and set(first) <= set(every)
    assert all(first[i].detail == every[i].detail for i in first)
    assert sum(counts.values()) < sum(all_counts.values())
