"""Paths only the fuzz machines reached (issue 28 (6)), now named scenarios: cross-thread
frees followed by a park's sweeps, an abandoned page reclaimed, allocated from and swept, a
park whose thread leaves and parks again. Each holds on the model (their case checks also on
the C reference: tests/test_realtests.py) and kills a mutant on its own path."""

from __future__ import annotations

import pytest

from purgecheck.engines.scenarios import scenario_checks
from purgecheck.mutants import MUTANTS, applied


@pytest.mark.parametrize("scenario,mutant", [
    ("xthread-then-park", "collect-keeps-xthread"),
    ("abandon-reclaim-sweep", "stamp-never-written"),
    ("abandon-reclaim-sweep", "no-hold-inline"),
    ("park-again", "park-done-first"),
])
def test_the_scenario_holds_and_kills_a_mutant_on_its_path(scenario, mutant):
    counts, failures = scenario_checks([scenario])
    assert not failures and counts["PG-COUNT"] > 10
    with applied(MUTANTS[mutant]):
        _, failures = scenario_checks([scenario])
    assert failures, f"{mutant} survives {scenario}"
