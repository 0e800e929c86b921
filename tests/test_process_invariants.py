"""The process-wide hole statistics equal the sum of the pages' after every op (model/
process_invariants.py), on every scenario; each sum is broken by a mutant that resets a page
but not the process (purgecheck/mutants/catalogue/process.py), at the op that does it."""

from __future__ import annotations

import pytest

from purgecheck.engines.scenarios import scenario_checks
from purgecheck.mutants import MUTANTS, applied

SUMS = ("PR-DISCARDED-BYTES-SUM", "PR-PURGED-BLOCKS-SUM", "PR-UNFORMED-BYTES-SUM")


def test_the_sums_hold_after_every_op_of_every_scenario():
    counts, failures = scenario_checks()
    assert not failures
    assert all(counts[s] > 1000 for s in SUMS)


@pytest.mark.parametrize("mutant,scenario,line_op", [
    ("unpurge-all-keeps-stats", "heap-destroy", "heap_destroy"),
    ("unpurge-all-keeps-stats", "heap-delete", "free"),  # the page became free first
    ("unpurge-counted-up-only", "reuse-after-purge", "malloc"),
    ("tail-reuse-keeps-stats", "unformed-tail", "malloc"),
])
def test_a_mutant_that_resets_a_page_but_not_the_process_is_caught_at_its_op(
        mutant, scenario, line_op):
    with applied(MUTANTS[mutant]):
        _, failures = scenario_checks([scenario])
    caught = set(failures) & set(MUTANTS[mutant].catches)
    assert caught, failures
    assert any(line_op in failures[i].detail for i in caught), \
        [failures[i].detail for i in caught]
    # the per-page accounting alone does not see it
    assert not {"PG-ACCOUNTING", "PG-UNPURGE-ALL-RESETS"} & set(failures)
