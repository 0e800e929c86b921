"""What the invariant docs count as showing that a check can fail, beside the mutants that name
an invariant: the proofs' broken twins refuted on it, and for CF-TRACE-EQUAL the C mutants
whose traces diverge. Each twin the docs list is refuted by a test of `make test`, and no
invariant is left unshown."""

from __future__ import annotations

from purgecheck.engines import load_engines

# First, in their order: engines register the invariants only they check, and their mutants,
# and the docs list them as registered (test_docs.py compares with the committed docs).
load_engines()

import test_glibc_proofs  # noqa: E402
import test_proofs_cli  # noqa: E402
import test_proofs_z3  # noqa: E402

from model.invariants import load_registry  # noqa: E402
from proofs import crosshair_contracts  # noqa: E402
from purgecheck.docs.facts import Facts, Source, collect_twins  # noqa: E402
from purgecheck.docs.md import Links  # noqa: E402
from purgecheck.docs.pages import _invariant_section  # noqa: E402
from purgecheck.mutants import MUTANTS, TRACE_INVARIANT, is_c_trace_mutant  # noqa: E402
from purgecheck.engines.prove import run_twins  # noqa: E402

REGISTRY = load_registry()


def facts_without_designs(twins=None) -> Facts:
    """The registries alone (the rejected designs take a run of every scenario: test_docs.py)."""
    invs = sorted(REGISTRY.values(), key=lambda i: i.id)
    return Facts(invs, {i.id: Source(i.implements, None, None) for i in invs},
                 sorted(MUTANTS.values(), key=lambda m: m.name), {}, [], [], [], [],
                 collect_twins() if twins is None else twins)


def section(facts: Facts, inv_id: str) -> str:
    return "\n".join(_invariant_section(facts, REGISTRY[inv_id], Links(page="invariants.md")))


# CrossHair's twins that test_proofs_cli runs as the twin does (its run, its mutant applied):
# the broken contract (test_crosshair_falsifies_the_broken_contract) and the contracts on the
# model without the modulo (test_crosshair_checks_the_mutated_model_in_its_own_process)
CROSSHAIR_ELSEWHERE = {"contract-age-without-modulo": (crosshair_contracts.run_broken, None),
                       "contracts-age-no-modulo": (crosshair_contracts.run_contracts,
                                                   "age-no-modulo")}


def test_every_twin_the_docs_list_is_refuted_by_a_test():
    """The Z3 modules' twins are run by test_proofs_z3, the glibc throttle's by
    test_glibc_proofs, two of CrossHair's by test_proofs_cli; the rest (the explorer's, one of
    CrossHair's) run here, as `prove` runs them."""
    twins = collect_twins()
    assert {t.name: (t.run, t.mutant) for t in twins if t.name in CROSSHAIR_ELSEWHERE} == \
        CROSSHAIR_ELSEWHERE
    assert callable(test_proofs_cli.test_crosshair_falsifies_the_broken_contract)
    assert callable(test_proofs_cli.test_crosshair_checks_the_mutated_model_in_its_own_process)
    elsewhere = {t.name for m in test_proofs_z3.MODULES for t in m.TWINS} | \
        {t.name for t in test_glibc_proofs.TWINS} | set(CROSSHAIR_ELSEWHERE)
    rest = [t.name for t in twins if t.name not in elsewhere]
    assert {"explore-no-cas-exclusion", "explore-stuck-park",
            "contracts-unit-os-page"} <= set(rest)
    results = run_twins(quick=True, only=rest)
    assert sorted(r.engine.split(":", 1)[1] for r in results) == sorted(rest)
    for r in results:
        assert r.status == "refuted-as-expected", (r.engine, r.detail)


def test_a_refuted_twin_is_listed_and_counts_as_shown():
    facts = facts_without_designs()
    text = section(facts, "PF-UNIT-MAP")
    assert "**Refuted broken twins**" in text and "`last-block-off-by-one` (" in text
    assert ", z3)" in text and "Not yet shown" not in text
    bare = facts_without_designs(twins=[])
    assert not bare.is_shown("PF-UNIT-MAP")
    assert "**Not yet shown to catch anything**" in section(bare, "PF-UNIT-MAP")


def test_the_proof_only_invariants_each_have_a_refuted_twin():
    facts = facts_without_designs()
    for inv in ("EP-AGE-MOD", "PF-UNIT-MAP", "GL-RFC-CONDITION", "GL-RFC-UINT16",
                "GL-TRIM-FLOOR"):
        assert facts.twins_of(inv), inv


def test_trace_invariant_lists_every_sequential_c_mutant_and_no_race():
    facts = facts_without_designs()
    listed = facts.c_mutants_of(TRACE_INVARIANT)
    assert {m.name for m in listed} == {n for n, m in MUTANTS.items()
                                        if m.c_switch and not m.needs_concurrency}
    assert "purged-left-on-list" in {m.name for m in listed}
    assert not {"epoch-plain-read", "no-cas-exclusion"} & {m.name for m in listed}
    text = section(facts, TRACE_INVARIANT)
    assert "**Broken in the C reference**" in text
    assert all(f"[`{m.name}`]" in text and f"(`{m.c_switch}`)" in text for m in listed)
    assert facts.c_mutants_of("PG-UNIT") == []
    assert not is_c_trace_mutant(MUTANTS["epoch-plain-read"])


def test_no_invariant_is_left_unshown():
    """The project standard: each invariant is shown to catch a mutant or broken variant."""
    facts = facts_without_designs()
    unshown = {i for i in REGISTRY if not facts.is_shown(i)}
    assert not unshown, sorted(unshown)
