"""proofs/glibc_throttle.py: the RFC's counters never wrap, its condition is the seed's, the
2.23+ rule never trims a heap whose top is below trim_threshold; every twin is refuted with a
counterexample, including the model's named mutants rfc-ratio-le and rfc-no-halving."""

from __future__ import annotations

import session_cache

from proofs.glibc_throttle import PROOFS, TWINS, run_mutant_proofs, run_proofs
from purgecheck.mutants import MUTANTS, applied
from purgecheck.reports.results import exit_code


def APPLY(name):
    """What the prove engine passes: the tool's mutants, applied by name."""
    return applied(MUTANTS[name])


def test_proofs_hold():
    results, _ = session_cache.z3_runs("glibc proofs quick", lambda: run_proofs(quick=True))
    assert len(results) == sum(len(p.invariants) for p in PROOFS)
    assert exit_code(results) == 0, [(r.engine, r.status, r.detail) for r in results]
    assert {r.status for r in results} <= {"proved", "bounded"}
    assert {"GL-RFC-UINT16", "GL-RFC-CONDITION", "GL-TRIM-FLOOR"} == {r.invariant for r in results}


def test_every_twin_is_refuted_with_a_counterexample():
    results = run_mutant_proofs(apply_mutant=APPLY, quick=True)
    assert len(results) == sum(len(t.invariants) for t in TWINS)
    for r in results:
        assert r.status == "refuted-as-expected", (r.engine, r.detail)
        assert r.detail


def test_ratio_twin_counterexample_is_the_balanced_heap():
    r = run_mutant_proofs(apply_mutant=APPLY, quick=True, only="glibc-rfc-ratio-le")[0]
    assert "M=3, L=2" in r.detail


def test_model_mutants_are_killed_by_the_proofs():
    killed = {r.engine.split(":")[1]: r.status for r in run_mutant_proofs(apply_mutant=APPLY, quick=True)}
    assert killed["rfc-ratio-le"] == "refuted-as-expected"
    assert killed["rfc-no-halving"] == "refuted-as-expected"
    assert killed["glibc-2.23-no-threshold"] == "refuted-as-expected"
