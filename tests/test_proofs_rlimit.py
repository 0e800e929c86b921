"""Proof verdicts do not depend on the machine's load: every Z3 query is bounded by Z3's
resource count (proofs.core.Z3_RLIMIT), an undecided one is reported as unknown with Z3's
reason (never as vacuous, proved or refuted), and every query of the proofs decides well
inside the limit. CrossHair runs by a count of paths (proofs/crosshair_run.py)."""

from __future__ import annotations

import io

import pytest
import z3

import session_cache

from proofs import core, glibc_throttle, hold_z3
from proofs.core import PROVED, UNKNOWN, VACUOUS, Claim, check_claim, proof_result, run_claims
from purgecheck.reports.results import exit_code, print_table


def _hard() -> Claim:
    """A claim Z3 needs some thousands of resource units for (the hold proof's)."""
    return hold_z3.hold_claims()[0]


def test_a_query_that_runs_out_is_unknown_with_z3s_reason():
    status, model, reason = check_claim(_hard(), rlimit=50)
    assert status == UNKNOWN and model is None
    assert "resource" in reason  # Z3's own words: "max. resource limit exceeded"


def test_hypotheses_z3_cannot_decide_are_unknown_not_vacuous():
    x, y = z3.Ints("x y")
    claim = Claim("hard hypotheses", [x * x * x + y * y * y == 1729, x > 1, y > 1, x != y], x > 0)
    assert check_claim(claim, rlimit=5)[0] == UNKNOWN
    assert check_claim(Claim("contradiction", [x > 1, x < 0], x == 5))[0] == VACUOUS


def test_the_same_query_decides_with_the_limit_in_place():
    assert check_claim(_hard())[0] == PROVED


def test_unknown_is_reported_as_such_and_fails_the_run(monkeypatch):
    monkeypatch.setattr(core, "Z3_RLIMIT", 50)
    out = run_claims([_hard()], lambda c, m: "", "test")
    assert out.status == UNKNOWN
    assert "max. resource limit exceeded" in out.detail and "rlimit 50" in out.detail
    r = proof_result("HD-INTERVAL", hold_z3.PROOF, out, twin=False)
    assert r.status == UNKNOWN and not r.ok and exit_code([r]) == 1
    text = io.StringIO()
    print_table([r], "t", file=text)
    assert "1 of them unknown" in text.getvalue()


def test_a_twin_that_runs_out_is_unknown_not_refuted(monkeypatch):
    monkeypatch.setattr(core, "Z3_RLIMIT", 50)
    twin = glibc_throttle.TWINS[2]  # glibc-trim-no-threshold
    r = proof_result("GL-TRIM-FLOOR", twin, twin.run(True), twin=True)
    assert r.status == UNKNOWN and not r.ok


def test_the_costliest_proof_queries_decide_far_inside_the_limit():
    """The costliest proofs' queries (measured: glibc-trim-floor 3.3 M, the ratio 1.2 M,
    hold 0.46 M) use at most a tenth of the limit: resource counts, not seconds. Their runs
    are test_glibc_proofs' and test_proofs_z3's (every glibc proof, and hold), made once in
    the session with their counts; a query that ran out would show the limit's count and fail
    here (test_a_query_that_runs_out_is_unknown_with_z3s_reason: it stops there)."""
    from proofs.glibc_throttle import run_proofs

    _, glibc = session_cache.z3_runs("glibc proofs quick", lambda: run_proofs(quick=True))
    _, hold = session_cache.z3_runs(f"proof {hold_z3.PROOF.name} quick",
                                    lambda: hold_z3.PROOF.run(True))
    assert glibc and hold, "no Z3 query ran"
    assert max(glibc + hold) * 10 <= core.Z3_RLIMIT


@pytest.mark.slow
def test_every_z3_query_of_every_proof_and_twin_decides_far_inside_the_limit():
    from proofs.catalogue import proofs, twins
    from purgecheck.mutants import MUTANTS, applied

    items = [p for p in [*proofs(False), *twins(False), *glibc_throttle.PROOFS,
                         *glibc_throttle.TWINS] if p.engine == "z3"]
    with core.unlimited() as used:
        for p in items:
            with applied(MUTANTS[p.mutant] if getattr(p, "mutant", None) else None):
                p.run(False)
    assert max(used) * 10 <= core.Z3_RLIMIT
