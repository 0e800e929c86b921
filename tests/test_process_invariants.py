"""The process-wide counters equal the sum of their parts after every op (model/
process_invariants.py), on every scenario: the hole statistics over the pages, the full sweeps
and the parked threads over the threads, the abandoned pages over the pages. Each sum is broken
by a mutant that moves a page or a thread but not the process (purgecheck/mutants/catalogue/
process.py), at the op that does it."""

from __future__ import annotations

import pytest

from purgecheck.engines.scenarios import scenario_checks
from purgecheck.mutants import MUTANTS, applied

SUMS = ("PR-DISCARDED-BYTES-SUM", "PR-PURGED-BLOCKS-SUM", "PR-UNFORMED-BYTES-SUM",
        "PR-FULL-SWEEPS-SUM", "PR-PARKED-COUNT-SUM", "PR-ABANDONED-PAGES-SUM")


# The sums hold after every op of every scenario, each checked more than 1,000 times:
# test_page_mutants.test_the_clean_model_fails_no_invariant (one run of them all).


@pytest.mark.parametrize("mutant,scenario,line_op", [
    ("unpurge-all-keeps-stats", "heap-destroy", "heap_destroy"),
    ("unpurge-all-keeps-stats", "heap-delete", "free"),  # the page became free first
    ("unpurge-counted-up-only", "reuse-after-purge", "malloc"),
    ("tail-reuse-keeps-stats", "unformed-tail", "malloc"),
    ("full-sweep-uncounted", "full-sweep", "idle"),
    ("unpark-keeps-parked-count", "park-handoff", "unpark"),
    ("reclaim-keeps-abandoned-count", "abandon-reclaim-sweep", "reclaim"),
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


EVERY_PATH = """\
1 malloc a 131072
1 malloc b 131072
2 malloc c 131072
2 malloc d 262144
1 park
2 free a
clock 200
scavenge
2 abandon
1 unpark
1 reclaim c
1 free d
1 idle
clock 200
1 idle
1 heap_delete
3 malloc e 131072
3 heap_destroy
"""


def test_the_sums_hold_after_parks_exits_reclaims_and_heap_release():
    """One script through each op that moves a process-wide counter: a park and its sweep,
    a thread's exit (abandon), a reclaim, a page given back by a sweep, heap delete and
    destroy; every sum is judged after each op, and each counter moved."""
    from model.invariants import check_world
    from purgecheck.formats.ops import parse_script
    from purgecheck.runner import run_ops

    seen = {"parked": 0, "abandoned": 0}

    def after(op, world):
        bad = [(i, r) for i, r in check_world(world) if i.startswith("PR-")]
        assert not bad, (op.render(), bad)
        seen["parked"] = max(seen["parked"], world.subproc.parked_count)
        seen["abandoned"] = max(seen["abandoned"], world.subproc.pages_abandoned)

    run = run_ops(parse_script(EVERY_PATH, source="every-path"), after_step=after)
    assert seen == {"parked": 1, "abandoned": 2}
    assert run.world.subproc.parked_count == 0 and run.world.subproc.pages_abandoned == 0
