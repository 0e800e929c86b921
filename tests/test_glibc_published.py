"""GL-PUBLISHED: each glibc version's model makes the madvise calls published for it on seed
001's bench-free (2.21: 1024 with the stack's; the RFC: twice; 2.23+: no heap tail), and a
version whose rule is broken is caught."""

from __future__ import annotations

from model.invariants import load_registry
from purgecheck.engines.glibc import PUBLISHED, published_check
from purgecheck.mutants import MUTANTS, applied


def test_every_version_makes_the_published_calls():
    r = published_check(quick=True)
    assert r.status == "hold" and r.invariant == "GL-PUBLISHED"
    assert {v for v, _, _ in PUBLISHED} == {"2.21", "rfc-2015", "2.23+"}
    assert "GL-PUBLISHED" in load_registry()


def test_2_23_without_its_threshold_check_is_caught():
    with applied(MUTANTS["glibc-2.23-no-threshold"]):
        r = published_check(quick=True)
    assert r.status == "fail"
    assert "2.23+: 1023 heap_madvise calls, published 0" in r.detail
    assert "GL-PUBLISHED" in MUTANTS["glibc-2.23-no-threshold"].catches


def test_a_model_that_stops_is_a_failure_not_a_crash():
    """Found by make check's kill matrix: glibc-shrink-keeps-size stops the model on
    bench-free, which crashed the engine instead of failing the check."""
    with applied(MUTANTS["glibc-shrink-keeps-size"]):
        r = published_check(quick=True)
    assert r.status == "fail" and "the model stopped" in r.detail
