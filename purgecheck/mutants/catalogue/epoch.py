"""Mutants of the epoch advance that only an interleaving finds (seed 000, change (2)).

The seed's own test: "Both fail when the exclusion in _mi_page_purge_holes_epoch_advance is
removed and when the start of an epoch is recorded early." Each replaces one step of
model.epoch.STEPS (by program counter), so the explorer, which runs the model's steps, runs
the broken advance; the Z3 advance proof has the same two as broken twins.
"""

from __future__ import annotations

import proofs.registry  # noqa: F401  registers EP-EPOCH-MOVES and PK-NO-STUCK-CYCLE, named below
from model.epoch import MOVING, PC_CAS, PC_DONE, PC_INCREMENT, PC_STORE, PC_WAIT
from purgecheck.mutants.patching import Patch, mutant


def _claim_without_cas(st, f, now, interval):
    """Broken: the claim is a plain store of MOVING; every sweeper that found the epoch due
    goes on to increment it."""
    st.start = MOVING
    f.pc = PC_INCREMENT


def _store_first_reading(st, f, now, interval):
    """Broken: the new epoch's start is the clock read before the increment (the compare's
    reading), not a reading taken after it."""
    st.start = f.now
    st.history.recorded_begin[st.epoch] = f.now
    f.pc = PC_DONE


mutant("no-cas-exclusion", "the advance claims the move with a plain store, not a CAS",
       ("EP-NO-SHORT-EPOCH",),
       Patch("model.epoch", "STEPS", _claim_without_cas, key=PC_CAS),
       c_switch="no_cas_exclusion", needs_concurrency=True)
mutant("start-before-increment",
       "the new epoch's start is recorded from the clock read before the increment",
       ("EP-NO-SHORT-EPOCH", "EP-RECORDED-NOT-BEFORE-REAL"),
       Patch("model.epoch", "STEPS", _store_first_reading, key=PC_STORE),
       c_switch="start_before_increment", needs_concurrency=True)


def _park_forgets(thread, swept, deferred):
    """Broken: a sweep that left something marks the park as not swept yet, so the park
    never counts its sweeps and never ages (its first sweep is always the last one)."""
    from model.thread import PARK_SWEPT_DONE, PARK_SWEPT_NONE
    return PARK_SWEPT_NONE if deferred else PARK_SWEPT_DONE


mutant("park-swept-reset", "a park that was left something forgets its sweeps (park_swept "
       "back to NONE)", ("PK-NO-STUCK-CYCLE",),
       Patch("model.park", "compute_park_next", _park_forgets))


def _wait_returns_at_once(st, f, now, interval):
    """Broken: a sweeper that finds MOVING returns at once instead of waiting (bounded) for
    the new epoch, so it sweeps on the old one although the epoch was due."""
    f.pc = PC_DONE


mutant("wait-returns-at-once", "a sweeper that finds the move in progress does not wait for it",
       ("EP-EPOCH-MOVES",),
       Patch("model.epoch", "STEPS", _wait_returns_at_once, key=PC_WAIT),
       seen_by_one="only a sweeper that arrives while another holds MOVING shows it: the "
       "explorer interleaves the model's steps there; the scenarios' ops do not interleave two "
       "sweepers' advances, the "
       "C reference has no switch for it, and the weak explorer and Relacy run encodings of "
       "their own (proofs/weak, protocol.h) that this patch of the model does not touch")


# -- the rare paths of the advance, reached by the ops fork_at and clock_at (issue 20) ---------


def _forked_child_keeps_moving(st, now):
    """Broken: the child of a fork taken while another thread held MOVING keeps MOVING, so
    every sweeper of the child waits on a move that never ends and the epoch never moves
    there again."""


def _back_is_not_due(start, now, interval):
    """Broken: only `now - start >= interval` is due; a clock that went back before the
    epoch's start (digest 7: that too makes the advance due) leaves the epoch where it is."""
    return now - start >= interval


mutant("fork-child-keeps-moving", "the child of a fork during MOVING does not record a new "
       "epoch start", ("EP-MOVING-HELD",),
       Patch("model.epoch", "mi_page_purge_holes_forked_child", _forked_child_keeps_moving),
       c_switch="fork_child_keeps_moving")
mutant("clock-back-not-due", "a clock that went back before the epoch's start does not make "
       "the advance due", ("EP-BACK-IS-DUE",),
       Patch("model.epoch", "is_epoch_due", _back_is_not_due),
       c_switch="clock_back_not_due")
