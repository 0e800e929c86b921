"""Every page invariant is shown to fail on a deliberately broken copy of the model.

A check that cannot fail proves nothing (DESIGN.md: "Every check can fail"). Each mutant of
purgecheck.mutants breaks one rule of seed 000 change (1); here the scenario engine runs the
seed's page scenarios under it, and every invariant the mutant names in `catches` must report
it, while the clean model reports nothing, before and after.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from model.invariants import load_registry
from purgecheck.engines import load_engines
from purgecheck.engines.scenarios import scenario_checks
from purgecheck.mutants import MUTANTS, applied
from purgecheck.scenarios import SCENARIOS

load_engines()  # engines and their modules may add invariants and mutants
REGISTRY = load_registry()
PAGE_INVARIANTS = sorted(i.id for i in REGISTRY.values()
                         if i.scope == "page" and i.predicate is not None)
# Mutants judged by page invariants alone; the others belong to the epoch and hold suites.
PAGE_MUTANTS = sorted(name for name, m in MUTANTS.items()
                      if m.catches and all(c in PAGE_INVARIANTS for c in m.catches))
PAGE_SCENARIOS = [name for name, sc in SCENARIOS.items() if "page" in sc.tags]


def module_bindings() -> dict[tuple[str, str], int]:
    """id() of every function and class bound in a loaded project module: a patch that leaks
    shows as a changed id."""
    return {(name, attr): id(val)
            for name, mod in list(sys.modules.items())
            if mod is not None and name.split(".")[0] in ("model", "purgecheck")
            for attr, val in list(vars(mod).items()) if callable(val)}


def same_bindings(before: dict, now: dict) -> bool:
    return {k: now.get(k) for k in before} == before


def test_the_clean_model_fails_no_invariant():
    """Every scenario, every invariant after every op (3.5 s of CPU): one run for the page
    invariants, the exact ones (test_exact_invariants) and the process-wide sums
    (test_process_invariants), whose tests of the clean model were this run each."""
    from test_process_invariants import SUMS

    counts, failures = scenario_checks()
    assert failures == {}, {k: r.detail for k, r in failures.items()}
    for inv in PAGE_INVARIANTS:
        assert counts[inv] > 0, f"{inv} was never checked"
    for inv in ("AL-REALLOC-MOVES", "PK-DONE-EXACT") + SUMS:
        assert counts[inv] > 1000, (inv, counts[inv])


def test_every_page_invariant_has_a_mutant():
    """An invariant without a mutant that it catches fails the suite."""
    caught = {c for name in PAGE_MUTANTS for c in MUTANTS[name].catches}
    missing = [inv for inv in PAGE_INVARIANTS if inv not in caught]
    assert not missing, f"page invariants no mutant is expected to break: {missing}"


def test_every_mutant_names_registered_invariants():
    load_engines()  # engines register the invariants only they check (proofs, conformance)
    registry = load_registry()
    for name, m in MUTANTS.items():
        unknown = [c for c in m.catches if c not in registry]
        assert not unknown, f"mutant {name} names unknown invariants {unknown}"


@pytest.mark.parametrize("name", PAGE_MUTANTS)
def test_mutant_is_caught_and_leaves_nothing_behind(name):
    m = MUTANTS[name]
    before = module_bindings()
    with applied(m):
        _, failures = scenario_checks(PAGE_SCENARIOS, until=set(m.catches))
        patched = module_bindings()
    missed = [c for c in m.catches if c not in failures]
    assert not missed, f"mutant {name} ({m.description}) was not caught by {missed}"
    for inv in m.catches:
        r = failures[inv]
        assert r.status == "fail" and r.replay.startswith("purgecheck scenario ")
    assert not same_bindings(before, patched), f"mutant {name} changed nothing"
    # Leaving the block restores every binding, and the model is clean again.
    assert same_bindings(before, module_bindings())
    caught_in = sorted({f.replay.removeprefix("purgecheck scenario ") for f in failures.values()})
    _, after = scenario_checks(caught_in)  # the scenarios that caught it pass once it is gone
    assert after == {}, f"after {name}: {sorted(after)}"


def test_applied_undoes_modules_imported_inside_the_block():
    """A module first imported while a mutant is applied binds the replacement with its own
    `from ... import`; leaving the block must put the original back there as well."""
    m = MUTANTS["malloc-head-kept"]
    patch = m.patches[0]
    original = getattr(importlib.import_module(patch.module), patch.attr)
    saved = sys.modules.pop("model.heap")
    try:
        with applied(m):
            fresh = importlib.import_module("model.heap")
            assert fresh.mi_page_malloc is patch.replacement
        assert fresh.mi_page_malloc is original
    finally:
        # the package's attribute too: the fresh import rebound `model.heap` to the fresh
        # module, and a later `import model.heap; model.heap.X = ...` (tests/test_full_pages.py
        # patches so) would patch that one, not the module the other tests' functions live in
        sys.modules["model.heap"] = saved
        sys.modules["model"].heap = saved
    assert importlib.import_module("model.heap").mi_page_malloc is original
    import model.heap
    assert model.heap is saved


def test_applied_undoes_on_an_exception():
    m = MUTANTS["accounting-skipped"]
    before = module_bindings()
    with pytest.raises(RuntimeError):
        with applied(m):
            raise RuntimeError("boom")
    assert same_bindings(before, module_bindings())
