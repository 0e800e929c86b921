"""The properties of the protocol under C11 that the registry did not have (issue 31).

Judged by the weak explorer (proofs/weak/protocol.py, park.py) and, on the C reference, by
Relacy (reference_c/relacy/check.cpp): no single model state can judge them (scope "weak"),
so they have no predicate. The weak mutants (purgecheck/mutants/catalogue/weak.py) name them.
"""

from __future__ import annotations

from model.invariants import REGISTRY, Invariant, register

SCOPE = "weak"

INVARIANTS = (Invariant(
    "EP-SEES-STARTED",
    "A sweep whose epoch advance returned having read a recorded start (its own store, a start "
    "that was not due, or the spin seeing the mark go) reads, at its epoch read, the epoch that "
    "began there or a later one.",
    "seed 000 (2): \"A sweeper that finds the mark waits for it, bounded, so that it sees the "
    "new epoch\"; digest 7: load_acquire(start), store_release(start, now2)",
    "model.epoch.advance_step", scope=SCOPE),
    Invariant(
    "PK-HANDOFF-FRESH",
    "What the scavenger reads of a parked thread after its claim (park_swept, the page's "
    "swept_state and blocks), and what the owner reads of its page after it leaves the park, "
    "is the latest value written: the park and the release of a sweep synchronise the two.",
    "seed 000 (2): \"a page that reaches a sweeper does so through a release that the sweeper "
    "acquired (the park, the claim of an abandoned page)\"; \"Stamps are written by the owner "
    "of a page only, never while a sweep has the page\"",
    "model.park.claim_parked_thread", scope=SCOPE))

for _inv in INVARIANTS:
    if _inv.id not in REGISTRY:  # importing twice (e.g. under a test reloader) is harmless
        register(_inv)
