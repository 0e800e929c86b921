"""The glibc model's mutants that only strace conformance sees (GL-STRACE-CONFORMANCE): each
leaves every arena invariant holding, and `compare` against the real glibc under strace fails
under it and passes without it."""

from __future__ import annotations

import shutil

import pytest

from purgecheck.glibc.compare import compare
from purgecheck.engines.glibc import conformance, invariant_checks
from purgecheck.glibc.workloads import FIXED_32M_128K, WORKLOADS
from purgecheck.mutants import MUTANTS, applied

STRACE_MUTANTS = sorted(n for n, m in MUTANTS.items() if "GL-STRACE-CONFORMANCE" in m.catches)
needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace missing")


def test_there_is_a_strace_only_mutant():
    assert "glibc-regrow-mprotects" in STRACE_MUTANTS


@pytest.mark.parametrize("name", STRACE_MUTANTS)
def test_the_arena_invariants_cannot_see_it(name):
    """Why strace is the judge: the arenas are the same, only the predicted calls differ."""
    with applied(MUTANTS[name]):
        _, failures = invariant_checks(quick=True)
    assert failures == {}


@needs_strace
def test_compare_fails_under_regrow_mprotects_and_passes_without():
    """Seed 001's loop with the heap shrunk on every free (trim_threshold 128 KiB): each
    regrowth is into pages the heap had, so glibc makes no mprotect there."""
    script = WORKLOADS["bench-free"].script(quick=True)
    clean = compare(script, "bench-free", FIXED_32M_128K, versions=[])
    assert clean.ok, clean.mismatches
    with applied(MUTANTS["glibc-regrow-mprotects"]):
        broken = compare(script, "bench-free", FIXED_32M_128K, versions=[])
    assert not broken.ok
    assert [m.split(":")[0] for m in broken.mismatches] == ["heap_mprotect"]
    model = broken.predicted[broken.installed]["heap_mprotect"]
    assert model > broken.measured.counts["heap_mprotect"] == clean.measured.counts[
        "heap_mprotect"]


@needs_strace
@pytest.mark.parametrize("name", STRACE_MUTANTS)
def test_glibc_engine_reports_it_as_strace_conformance(name):
    assert conformance(quick=True).status == "hold"
    with applied(MUTANTS[name]):
        r = conformance(quick=True)
    assert (r.invariant, r.status) == ("GL-STRACE-CONFORMANCE", "fail")
    assert "model" in r.detail and r.replay
