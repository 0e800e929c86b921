"""The walk's step 2 in one pass (model.holes.todo_units): while is_unit_todo is the model's
own rule, the walk takes the units it accepts from the live blocks in one pass instead of
asking it unit by unit (a third of a simulated load's time). At every walk of every page
scenario and of simulated loads (large pages under no-hold; bun-serve's medium pages of
small objects) the one pass gives exactly the units the rule accepts; a one-pass form that
counts purged blocks as live is caught; a mutant that replaces is_unit_todo is still asked."""

from __future__ import annotations

import model.holes as holes
from purgecheck.formats.ops import parse_script
from purgecheck.runner import run_ops
from purgecheck.scenarios import SCENARIOS
from purgecheck.simulate.mimalloc import simulate
from purgecheck.simulate.workloads import make_workload


def walks_compared(monkeypatch, run) -> tuple[int, list[str]]:
    """Run `run()` with every walk's todo set compared with the rule's, unit by unit."""
    one_pass = holes.todo_units
    seen: list[str] = []
    count = 0

    def compared(page, free_set):
        nonlocal count
        got = one_pass(page, free_set)
        want = {k for k in range(page.units.bits) if holes.is_unit_todo(page, k, free_set)}
        count += 1
        if got != want:
            seen.append(f"page {page.id}: one pass {sorted(got ^ want)[:8]} apart from the rule")
        return got

    monkeypatch.setattr(holes, "todo_units", compared)
    run()
    return count, seen


def every_scenario() -> None:
    for sc in SCENARIOS.values():
        run_ops(parse_script(sc.build()), sc.options)


def loads() -> None:
    simulate(make_workload("typed-arrays", allocations=300, idle_ms=300), "no-hold")
    simulate(make_workload("bun-serve", requests=3000, small=16384, small_per_request=2),
             "no-hold")


def test_the_one_pass_equals_the_rule_at_every_walk_of_every_scenario(monkeypatch):
    count, seen = walks_compared(monkeypatch, every_scenario)
    assert count > 50 and seen == []


def test_the_one_pass_equals_the_rule_at_every_walk_of_simulated_loads(monkeypatch):
    count, seen = walks_compared(monkeypatch, loads)
    assert count > 60 and seen == []  # 73 walks, medium pages among them


def test_a_one_pass_that_counts_purged_blocks_live_is_caught(monkeypatch):
    """Broken: a purged block keeps its units from the walk as a live one would."""
    def purged_live(page, free_set):
        mask = 0
        for i in range(page.capacity):
            if i not in free_set:
                for k in page.units.units_of_block(i):
                    if 0 <= k < page.units.bits:
                        mask |= 1 << k
        return mask

    monkeypatch.setattr(holes, "live_units_mask", purged_live)
    _, seen = walks_compared(monkeypatch, every_scenario)
    assert seen


def test_a_replaced_rule_is_asked_unit_by_unit(monkeypatch):
    """The mutants replace is_unit_todo: the walk must then use theirs, not the one pass."""
    asked = []

    def rule(page, k, free_set):
        asked.append(k)
        return holes._MODEL_RULE[0](page, k, free_set)

    monkeypatch.setattr(holes, "is_unit_todo", rule)
    every_scenario()
    assert asked


def test_a_mutant_of_the_rule_reaches_the_walk():
    """The mutants' patching rebinds every name of the function it replaces; the walk's own
    record of the rule must not follow, or a mutant would be compared with itself."""
    from purgecheck.mutants import MUTANTS
    from purgecheck.mutants.patching import applied
    with applied(MUTANTS["unit-next-to-live"]):
        assert holes.is_unit_todo is not holes._MODEL_RULE[0]
    assert holes.is_unit_todo is holes._MODEL_RULE[0]
