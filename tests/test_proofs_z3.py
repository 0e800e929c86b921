"""The Z3 proofs hold, their broken twins are refuted with readable counterexamples, and a
proof whose hypotheses contradict each other is reported as vacuous, never as proved.

The bounded model checks of the two broken advances (advance_z3.bmc, the costliest queries
here) are run once for the module: the twins' refutation and the tests of their traces read
the same run (bmc is deterministic: Z3 bounded by resource counts, docs/proofs.md).
"""

from __future__ import annotations

import pytest
import z3

import session_cache
from proofs import advance_z3, age_z3, hold_z3, unit_z3, walk_z3
from proofs.core import DIFFERS, PROVED, REFUTED, VACUOUS, Claim, check_claim
from purgecheck.mutants import MUTANTS, applied

MODULES = [unit_z3, walk_z3, age_z3, advance_z3, hold_z3]
BMC = session_cache.shared_bmc(advance_z3.bmc)  # unmutated runs only (test_proofs_cli reads them)


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.PROOF.name)
def test_proof_is_proved(mod):
    out, _ = session_cache.z3_runs(f"proof {mod.PROOF.name} quick", lambda: mod.PROOF.run(True))
    assert out.status == PROVED, out.detail
    assert out.claims >= 1


@pytest.mark.parametrize("twin", [t for m in MODULES for t in m.TWINS], ids=lambda t: t.name)
def test_broken_twin_is_refuted_with_a_counterexample(twin, monkeypatch):
    if twin.mutant:
        with applied(MUTANTS[twin.mutant]):
            out = twin.run(True)
    else:
        monkeypatch.setattr(advance_z3, "bmc", BMC)
        out = twin.run(True)
    if out.status == DIFFERS:  # a mutant of the model's function the proof encodes a copy of
        assert twin.mutant and "the model" in out.detail, out.detail
        return
    assert out.status == REFUTED, out.detail
    assert "counterexample" in out.detail or "trace" in out.detail


def test_vacuous_hypotheses_are_not_a_proof():
    x = z3.Int("x")
    assert check_claim(Claim("contradiction", [x > 1, x < 0], x == 5))[0] == VACUOUS


def test_advance_is_proved_for_six_sweepers_and_for_any_number():
    claims = advance_z3.explicit_claims(6) + advance_z3.parametric_claims()
    assert all(check_claim(c)[0] == PROVED for c in claims)
    assert any("any N" in c.label for c in claims)


def test_advance_twins_are_refuted_by_induction_too():
    """The inductive step itself fails for each broken advance (not only the trace)."""
    for broken in (advance_z3.NO_CAS, advance_z3.START_BEFORE):
        status = [check_claim(c)[0] for c in advance_z3.explicit_claims(2, broken)]
        assert REFUTED in status, broken


def test_no_cas_trace_shows_two_increments_in_one_epoch():
    depth, trace, epoch = BMC(2, advance_z3.NO_CAS)
    increments = [s for s in trace if s.action == "increment"]
    assert len(increments) == 2 and epoch == 2
    assert {s.actor for s in increments} == {"sweeper 0", "sweeper 1"}
    # both increments at the same clock reading: an epoch of 0 ms
    assert increments[0].values["clock"] == increments[1].values["clock"]


def test_start_before_increment_trace_records_a_start_before_the_increment():
    depth, trace, epoch = BMC(2, advance_z3.START_BEFORE)
    last = trace[-1].values
    assert trace[-1].action == "store_start"
    assert last["recorded(epoch)"] < last["began(epoch)"]


def test_hold_with_a_one_epoch_stale_read_discards_within_the_interval():
    out = hold_z3.run_hold_proof(True, stale_epochs=1)
    assert out.status == REFUTED
    assert "stale by 1" in out.detail and "< interval" in out.detail


def test_hold_proof_uses_the_models_age_function():
    """The hold and age proofs call model.epoch.is_epoch_young: breaking it breaks them."""
    with applied(MUTANTS["age-lt-1"]):
        assert hold_z3.run_hold_proof(True).status == REFUTED
        assert age_z3.run_age_proof(True).status == REFUTED
    assert hold_z3.run_hold_proof(True).status == PROVED


def test_unit_proof_covers_32_bit_and_every_os_page():
    labels = [c.label for a in unit_z3.TARGETS for o in (4096, 16384, 65536)
              for c in unit_z3.unit_claims(a, o)]
    assert any("32-bit, OS page 64 KiB" in x for x in labels)
    assert any("64-bit, OS page 4 KiB" in x for x in labels)


def test_every_proof_is_flipped_by_a_mutant_of_the_models_function():
    """Issue 28 (4): a proof is about the model's own function, so some mutant of the model
    (purgecheck.mutants, applied around the run) must flip it; the twins that name one are run
    above and in tests/test_glibc_proofs.py. The explorer's configurations all run the model's
    steps; its twins name mutants on five of them (proofs/catalogue.py)."""
    from proofs import glibc_throttle
    from proofs.catalogue import proofs, twins

    flipped = {t.proof for t in [*twins(False), *glibc_throttle.TWINS] if t.mutant}
    unflipped = [p.name for p in [*proofs(False), *glibc_throttle.PROOFS]
                 if p.engine != "explorer" and p.name not in flipped]
    assert unflipped == []
    assert any(t.mutant and t.engine == "explorer" for t in twins(False))
