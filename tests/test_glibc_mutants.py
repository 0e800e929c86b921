"""Every glibc invariant catches at least one mutant, and which engine kills which mutant:
the glibc engine's invariants (over the named workloads), the proofs' twins, the Hypothesis
machine, and strace conformance."""

from __future__ import annotations

import shutil

import pytest

from model.invariants import load_registry
from purgecheck.engines.glibc import conformance, invariant_checks
from purgecheck.mutants import MUTANTS, applied

# Mutants of the glibc model that its arena invariants judge (those of
# purgecheck/mutants/catalogue/strace.py only strace sees: tests/test_glibc_strace_mutants.py).
ARENA_CHECKS = {i.id for i in load_registry().values() if i.scope == "glibc-arena" and i.predicate}
GLIBC_MUTANTS = sorted(n for n, m in MUTANTS.items()
                       if m.patches and set(m.catches) <= ARENA_CHECKS
                       and all(p.module.startswith("model.glibc") for p in m.patches))


def test_the_glibc_mutants_are_registered():
    assert {"rfc-ratio-le", "rfc-no-halving"} <= set(GLIBC_MUTANTS)
    assert MUTANTS["rfc-ratio-le"].description == "the glibc RFC ratio compared with `<=`"


def test_unmutated_model_holds_everything():
    counts, failures = invariant_checks(quick=True)
    assert not failures, failures
    assert all(n > 1000 for n in counts.values())


@pytest.mark.parametrize("name", GLIBC_MUTANTS)
def test_glibc_engine_kills_mutant_with_its_named_invariants(name):
    """Each mutant's named invariants fail, with a replay: the runs stop where all of them
    have (1.4 to 2.2 s of CPU a mutant for the 48 runs; the engine's whole run, which the kill
    matrix makes, gives the same first failures)."""
    m = MUTANTS[name]
    with applied(m):
        _, failures = invariant_checks(quick=True, until=frozenset(m.catches))
    assert set(m.catches) <= set(failures), f"{name}: caught by {sorted(failures)}"
    r = failures[m.catches[0]]
    assert r.status == "fail" and r.replay.startswith("purgecheck glibc run ")


def test_every_glibc_arena_invariant_catches_some_mutant():
    invs = {i.id for i in load_registry().values() if i.scope == "glibc-arena" and i.predicate}
    caught = {c for n in GLIBC_MUTANTS for c in MUTANTS[n].catches}
    assert invs <= caught, f"no mutant for {sorted(invs - caught)}"


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace missing")
@pytest.mark.parametrize("name", ["glibc-2.23-no-threshold", "glibc-trim-not-doubled",
                                  "glibc-top-coalesce-skipped"])
def test_strace_conformance_kills_mutant(name):
    assert conformance(quick=True).status == "hold"
    with applied(MUTANTS[name]):
        r = conformance(quick=True)
    assert r.status == "fail" and "model" in r.detail and r.replay
