"""Two-sided rules: where the seed gives an exact rule the invariant checks both sides, and a
mutant that stays on the safe side of it (a realloc that never moves down, a park marked done
while it still holds young blocks) is caught by the exact invariant."""

from __future__ import annotations

import pytest

from purgecheck.docs.exactness import EXACTNESS
from model.invariants import load_registry
from purgecheck.engines import load_engines
from purgecheck.engines.scenarios import scenario_checks
from purgecheck.mutants import MUTANTS, applied


@pytest.mark.parametrize("mutant,invariant,alone", [
    ("realloc-keeps-small", "AL-REALLOC-MOVES", True),
    ("park-done-first", "PK-DONE-EXACT", False),
    ("park-ignores-epochs", "PK-DONE-EXACT", False),
])
def test_the_exact_side_catches_a_safe_mutant(mutant, invariant, alone):
    with applied(MUTANTS[mutant]):  # the whole run when no other invariant may see it
        _, failures = scenario_checks(until=None if alone else {invariant})
    assert invariant in failures
    if alone:  # no bound of the registry sees it
        assert set(failures) == {invariant}


# The exact invariants hold on every scenario, each checked after more than 1,000 ops:
# test_page_mutants.test_the_clean_model_fails_no_invariant (one run of them all).


def test_every_invariant_is_listed_as_exact_or_a_bound_with_why():
    load_engines()
    registry = load_registry()
    missing = [i for i in registry if i not in EXACTNESS]
    assert missing == []
    for inv_id, (kind, why) in EXACTNESS.items():
        assert inv_id in registry, f"{inv_id} is listed but not registered"
        assert kind in ("exact", "bound") and len(why) > 20, inv_id
