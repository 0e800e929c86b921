"""The park handoff under the weak memory model (proofs/weak/park.py, issue 31).

Pins the park configurations of proofs/weak/manifest.json, shows the properties are not
vacuous (a park swept twice, a page held and a page purged, the owner back from a swept park),
and pins the verdict of each one-step weakening of the handoff's accesses: at the C reference's
orderings and from the acquire/release baseline (docs/proofs.md, "The park handoff under
C11"). The weakenings that fail run in the fast tier; the table of all of them is slow.
"""

import functools

import pytest

import session_cache

from proofs.weak import configs as C
from proofs.weak import memory as mm
from proofs.weak import park as K
from proofs.weak.memory import ACQ, ACQ_REL, REL, RLX

FAST = ("weak-park-2", "weak-park-2-acqrel")


@functools.cache
def checked(name):
    return session_cache.weak_check(C.config(name))  # the weak engine's test reads it too


@pytest.mark.parametrize("name", FAST)
def test_manifest_counts(name):
    assert C.manifest_entry(checked(name)) == C.load_manifest()[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in C.PARK_CONFIGS if n not in FAST])
def test_manifest_counts_slow(name):
    assert C.manifest_entry(C.check(name)) == C.load_manifest()[name]


def test_every_park_configuration_is_in_the_manifest():
    assert set(C.PARK_CONFIGS) <= set(C.load_manifest())


def test_handoff_holds_and_is_exercised():
    res = checked("weak-park-2")
    assert res.ok and res.report.complete
    s = res.stats
    assert (s.park_sweeps, s.purged, s.held, s.unparked_after_sweep) == (2, True, True, True)


def test_a_sweeper_beside_the_park_shows_the_relaxed_stamp():
    # another sweeper moves the epoch: the owner's relaxed stamp may be stale even though it
    # came back through the park (finding 3 of the advance, through the handoff)
    v = C.load_manifest()["weak-park-3"]["verdict"]
    assert v == "HD-INTERVAL"


# The unsafe one-step weakenings: (access, weaker) -> (baseline configuration, property)
UNSAFE = {
    ("unpark_cas", REL): ("weak-park-2", "PK-HANDOFF-FRESH"),
    ("release_state", RLX): ("weak-park-2", "HD-INTERVAL"),
    ("park_cas", ACQ): ("weak-park-2-acqrel", "PK-HANDOFF-FRESH"),
    ("claim_cas", REL): ("weak-park-2-acqrel", "PK-HANDOFF-FRESH"),
}


@pytest.mark.parametrize("access,weaker", list(UNSAFE))
def test_unsafe_weakening_fails(access, weaker):
    base, prop = UNSAFE[access, weaker]
    cfg = K.weaken(C.PARK_CONFIGS[base], access, weaker)
    # the weak engine's run under the weak mutant of this weakening explores this cfg too
    # (test_weak_engines.py): once a session
    res = session_cache.weak_check(cfg, K)
    assert res.report.violation.startswith(prop)
    # the shortest path may meet the stale read before its effect
    tl = session_cache.weak_counterexample(cfg, K)
    assert tl.split(":")[0] in (prop, "PK-HANDOFF-FRESH")
    assert "VIOLATION" in tl and "[reads " in tl


def test_broken_memory_model_fails_the_handoff():
    cfg = C.PARK_CONFIGS["weak-park-2"]
    from dataclasses import replace
    res = K.check(replace(cfg, model=mm.MODELS["acquire-no-sync"]))
    assert not res.ok


@pytest.mark.slow
@pytest.mark.parametrize("base", C.PARK_WEAKEN_CONFIGS)
def test_one_step_weakenings_of_the_handoff(base):
    rows = C.weakenings(C.PARK_CONFIGS[base], C.PARK_ACCESSES)
    failing = {(r["access"], r["to"]) for r in rows if r["verdict"] != "holds"}
    # at the reference the seq_cst accesses hide the park's and the claim's (finding 6); from
    # the baseline all four of the handoff's edges fail
    want = {k for k, (b, _) in UNSAFE.items() if b == base or base == "weak-park-2-acqrel"}
    assert failing == want
    assert len(rows) == 19  # every access has a one-step weaker ordering
