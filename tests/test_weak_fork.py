"""A fork beside the epoch advance under the weak memory model (proofs/weak/fork.py, issue 31).

Pins the fork configurations of proofs/weak/manifest.json, shows the run is not vacuous (a copy
that holds MOVING, the forked-child rule recording a new beginning, the child moving the epoch
itself), the child's copy of memory (memory.fork_copies) on a message-passing pair, and the
broken variants the fork catches: the model's forked-child rule that misses the reset (mutant
fork-child-keeps-moving) and the increment without release (mutant weak-fetch-add-acquire),
which only the happens-before-closed copy shows (docs/proofs.md, "A fork under C11").
"""

import functools

import pytest

import session_cache

from proofs.weak import configs as C
from proofs.weak import fork as F
from proofs.weak import memory as mm
from proofs.weak.memory import ACQ, ACQ_REL, REL, RLX
from purgecheck.engines import weak
from purgecheck.mutants import MUTANTS, applied

FAST = ("weak-fork-2", "weak-fork-2-latest")


@functools.cache
def checked(name):
    return session_cache.weak_check(C.config(name))  # the weak engine's test reads it too


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in C.FORK_CONFIGS])
def test_manifest_counts(name):
    assert set(C.FORK_CONFIGS) <= set(C.load_manifest())
    assert C.manifest_entry(checked(name)) == C.load_manifest()[name]


@pytest.mark.parametrize("name", FAST)
def test_fork_holds_and_is_exercised(name):
    res = checked(name)
    assert res.ok and res.report.complete
    s = res.stats
    # a copy held MOVING, the rule stored a new beginning there, the parent reached epoch 2
    # and so did the child, by its own increments
    assert (s.forked_on_moving, s.child_recorded, s.epochs, s.child_epochs) == (True, True, 2, 2)


def _message_passing():
    """Thread 0 stores x = 1 relaxed, then y = 1 with `order_y`; thread 1 forks."""
    mem, ths = mm.initial_memory((0, 0)), (mm.initial_thread(2), mm.initial_thread(2))
    (mem, ths), = mm.store(mm.RC11, mem, ths, 0, 0, 1, RLX)
    return mem, ths


@pytest.mark.parametrize("order_y, copies", [
    (REL, {(0, 0), (1, 0), (1, 1)}),  # y = 1 released x = 1: no copy has y without x
    (RLX, {(0, 0), (1, 0), (0, 1), (1, 1)}),  # nothing orders them: either may be missing
])
def test_fork_copies_are_closed_under_happens_before(order_y, copies):
    mem, ths = _message_passing()
    (mem, ths), = [o for o in mm.store(mm.RC11, mem, ths, 0, 1, 1, order_y)]
    got = {tuple(m[0][x][-1][0] for x in (0, 1)) for m, _ in mm.fork_copies(mem, ths[1][0])}
    assert got == copies
    # the child reads the copy and nothing older: its view is each prefix's end
    assert all(view == tuple(len(loc) - 1 for loc in m[0]) for m, view in
               mm.fork_copies(mem, ths[1][0]))
    # the forker's own view is always kept; every write, when the copy is the latest
    assert {tuple(m[0][x][-1][0] for x in (0, 1))
            for m, _ in mm.fork_copies(mem, ths[0][0])} == {(1, 1)}
    assert [v for _, v in mm.fork_copies(mem, ths[1][0], latest_only=True)] == [(1, 1)]


def test_forked_child_that_keeps_moving_is_caught():
    # the model's rule (a mutant of it is what the forker runs) without the reset: the child
    # holds MOVING with no thread inside an advance
    with applied(MUTANTS["fork-child-keeps-moving"]):
        r = weak.run_config("weak-fork-2")
        tl = F.counterexample(C.FORK_CONFIGS["weak-fork-2"])
    assert r.status == "fail" and r.invariant == "EP-MOVING-HELD", r
    assert "fork: the child's copy holds start mo#1 = MOVING" in tl
    assert "VIOLATION: EP-MOVING-HELD" in tl


def test_increment_without_release_breaks_only_the_copy():
    # the relaxed increment's release half is what a fork needs: without it the child may copy
    # the new epoch and the start before the claim, and move the epoch again at once
    cfg = F.weaken(C.FORK_CONFIGS["weak-fork-2"], "fetch_add", ACQ)
    res = F.check(cfg)
    assert res.report.violation.startswith("EP-NO-SHORT-EPOCH")
    tl = F.counterexample(cfg)
    assert "fork: the child's copy holds start mo#0 = 0, epoch mo#1 = 1" in tl
    assert "0 ms < interval 2 ms" in tl
    # where every write is in the copy, or without a fork (test_weak_protocol), it holds
    latest = F.weaken(C.FORK_CONFIGS["weak-fork-2-latest"], "fetch_add", ACQ)
    assert F.check(latest).ok


def test_weak_engine_kills_the_fetch_add_mutant_on_the_fork_only():
    m = MUTANTS["weak-fetch-add-acquire"]
    with applied(m):
        assert weak.run_config("weak-adv-2").ok
        r = weak.run_config("weak-fork-2")
    assert r.status == "fail" and r.invariant in m.catches and "fetch_add" in r.replay


# The one-step weakenings at weak-fork-2: the advance's (as at weak-adv-2, but the increment's
# release) and the rule's store (the child has one thread until it creates more: nothing
# orders against it).
WEAKENINGS = {
    ("load_start", RLX): "EP-SEES-STARTED",
    ("cas", ACQ): "holds", ("cas", REL): "holds",
    ("cas_fail", RLX): "holds",
    ("fetch_add", ACQ): "EP-NO-SHORT-EPOCH", ("fetch_add", REL): "holds",
    ("store_start", RLX): "EP-SEES-STARTED",
    ("spin_load", RLX): "EP-SEES-STARTED",
    ("sweep_epoch", RLX): "holds",
    ("fork_store", RLX): "holds",
}


def test_unsafe_weakenings_of_the_fork():
    cfg = C.FORK_CONFIGS["weak-fork-2"]
    for (access, weaker), verdict in WEAKENINGS.items():
        if verdict != "holds":
            assert C.verdict(F.check(F.weaken(cfg, access, weaker))) == verdict


@pytest.mark.slow
def test_one_step_weakenings_of_the_fork():
    rows = C.weakenings(C.FORK_CONFIGS["weak-fork-2"], C.FORK_ACCESSES)
    assert {(r["access"], r["to"]): r["verdict"] for r in rows} == WEAKENINGS
    assert C.FORK_CONFIGS["weak-fork-2"].advance.fetch_add == ACQ_REL
