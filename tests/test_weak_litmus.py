"""The litmus oracles of the weak memory model (proofs/weak/memory.py, issue 31).

Each classic test is explored exhaustively; the weak outcome must be reachable exactly when
RC11 allows it (proofs/weak/litmus.py gives the verdicts and their sources). The states, final
states and distinct outcomes of each test are pinned, as GenMC pins its execution counts, so a
change in the size of a space is noticed. The deliberately broken models must fail: an
acquire that does not synchronise lets the MP, WRC, ISA2 and release-sequence outcomes
through, an RMW that is not atomic lets two increments both read 0.
"""

import pytest

from proofs.weak import litmus as L
from proofs.weak import memory as mm

# name: (states, final states, distinct outcomes) under RC11 without load buffering
PINNED = {
    "MP+rlx": (14, 4, 4),
    "MP+rel+acq": (13, 3, 3),
    "MP+rel+rlx": (14, 4, 4),
    "MP+rlx+acq": (14, 4, 4),
    "MP+sc": (16, 4, 3),
    "MP+fences": (22, 3, 3),
    "MP+relfence+rlx": (23, 4, 4),
    "SB+rlx": (14, 4, 4),
    "SB+rel+acq": (14, 4, 4),
    "SB+sc": (17, 4, 3),
    "SB+scfences": (26, 4, 3),
    "SB+acqrelfences": (23, 4, 4),
    "LB+rlx": (13, 3, 3),
    "LB+acq+rel": (13, 3, 3),
    "2+2W+rlx": (14, 4, 4),
    "2+2W+rel": (14, 4, 4),
    "2+2W+sc": (27, 10, 3),
    "CoRR": (9, 3, 3),
    "CoRR2": (281, 72, 72),
    "CoWR": (9, 3, 3),
    "CoWR-init": (3, 1, 1),
    "CoRW": (9, 3, 3),
    "CoWW": (3, 1, 1),
    "IRIW+rlx": (98, 16, 16),
    "IRIW+acq": (98, 16, 16),
    "IRIW+sc": (213, 40, 15),
    "WRC+rlx": (37, 8, 8),
    "WRC+rel+acq": (36, 7, 7),
    "ISA2+rlx": (52, 8, 8),
    "ISA2+rel+acq": (51, 7, 7),
    "FAA-FAA": (5, 2, 2),
    "CAS-CAS": (5, 2, 2),
    "RSEQ-RMW": (42, 9, 8),
    "RSEQ-PO": (21, 4, 4),
    "MP+rlx-rmw-flag": (14, 4, 4),
}


def test_every_test_is_pinned():
    assert set(PINNED) == set(L.TESTS)


@pytest.mark.parametrize("name", sorted(L.TESTS))
def test_litmus_outcome_is_rc11s(name):
    test = L.TESTS[name]
    weak, rep = L.run(test)
    verdict = "allowed" if test.allowed else "forbidden"
    assert weak == test.allowed, f"{name}: the weak outcome {test.weak} should be {verdict}"
    assert (rep.states, rep.finals, len(rep.outcomes)) == PINNED[name]
    assert rep.complete


def test_outcome_counts_are_the_literatures():
    # the distinct outcomes: all four of (r1, r2) for SB and MP when relaxed; SC removes
    # exactly the weak one; IRIW has 16 outcomes relaxed or acquire, 15 with seq_cst
    counts = {n: len(L.run(L.TESTS[n])[1].outcomes) for n in
              ("SB+rlx", "SB+sc", "MP+rlx", "MP+rel+acq", "IRIW+acq", "IRIW+sc")}
    assert counts == {"SB+rlx": 4, "SB+sc": 3, "MP+rlx": 4, "MP+rel+acq": 3,
                      "IRIW+acq": 16, "IRIW+sc": 15}


def test_acquire_that_does_not_synchronise_is_caught():
    broken = mm.MODELS["acquire-no-sync"]
    failed = {n for n, t in L.TESTS.items() if L.run(t, broken)[0] != t.allowed}
    assert {"MP+rel+acq", "MP+fences", "WRC+rel+acq", "ISA2+rel+acq", "RSEQ-RMW",
            "RSEQ-PO"} <= failed
    # it only ever lets more through: every test it fails has a forbidden weak outcome
    assert all(not L.TESTS[n].allowed for n in failed)


def test_rmw_that_is_not_atomic_is_caught():
    broken = mm.MODELS["rmw-not-atomic"]
    failed = {n for n, t in L.TESTS.items() if L.run(t, broken)[0] != t.allowed}
    assert failed == {"FAA-FAA", "CAS-CAS"}


def test_load_buffering_is_not_modelled():
    # RC11 forbids LB (po U rf acyclic); a model without promises cannot produce it at all,
    # whatever the orderings: the LB outcome needs a read of a write not yet made
    for name in ("LB+rlx", "LB+acq+rel"):
        assert not L.run(L.TESTS[name])[0]
