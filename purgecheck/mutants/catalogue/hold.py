"""Mutants of the epoch, the hold and the park handoff (seed 000, change (2)).

Each breaks one rule the seed relies on; `catches` names the invariants that report it in
the scenario engine (the interleaving explorer has mutants of its own for the advance).
"""

from __future__ import annotations

from model.epoch import EPOCH_MODULUS, step_increment
from model.park import compute_park_sweeps
from model.thread import PARK_SWEPT_DONE, PARK_SWEPT_NONE, PARK_SWEPT_SMALL, SWEEPING
from purgecheck.mutants.patching import Patch, mutant


def _young_lt1(current, stamp):
    return (current - stamp) % EPOCH_MODULUS < 1


def _young_no_modulo(current, stamp):
    return current - stamp < 2


def _stamp_never(page, epoch):
    return False


def _walk_keeps_stamp(page):
    pass


def _park_done_first(thread, swept, deferred):
    return PARK_SWEPT_DONE


def _park_unbounded(thread, swept, deferred):
    if not deferred:
        return PARK_SWEPT_DONE
    sweeps = compute_park_sweeps(swept)
    return PARK_SWEPT_SMALL + sweeps - 1


def _park_ignores_epochs(thread, swept, deferred):
    if not deferred:
        return PARK_SWEPT_DONE
    sweeps = compute_park_sweeps(swept)
    return PARK_SWEPT_SMALL + sweeps - 1 if sweeps < 6 else PARK_SWEPT_DONE


def _sweep_last_before_work(world, thread, start_ms):
    thread.holes_sweep_last = start_ms


def _always_due(start, now, interval):
    return True


def _increment_twice(st, f, now, interval):
    step_increment(st, f, now, interval)
    st.epoch += 1
    st.history.real_begin[st.epoch] = now
    f.increments += 1


def _inline_no_hold(variant, page, ctx, untouched):
    from model.variants import is_held_by_epoch
    return ctx.in_handoff and is_held_by_epoch(page, ctx)


mutant("age-lt-1", "the hold compares age < 1: a page stamped in the previous epoch goes",
       ("HD-YOUNG-KEPT", "HD-INTERVAL"),
       Patch("model.epoch", "is_epoch_young", _young_lt1), c_switch="age_lt_1")
mutant("age-no-modulo", "age compared without the modulo 2^32",
       ("HD-YOUNG-KEPT",),
       Patch("model.epoch", "is_epoch_young", _young_no_modulo), c_switch="age_no_modulo")
mutant("stamp-never-written", "the allocation path never writes the stamp",
       ("HD-INTERVAL",),
       Patch("model.stamp", "mi_page_stamp", _stamp_never), c_switch="stamp_never_written")
mutant("walk-keeps-stamp", "a complete walk does not overwrite the stamp with (capacity,used)",
       ("SW-WALK-SETS-STATE",),
       Patch("model.holes", "mark_walked", _walk_keeps_stamp), c_switch="walk_keeps_stamp")
mutant("park-done-first", "the park is marked done after its first sweep",
       ("HD-GOES-WITHIN-TWO", "PK-DONE-EXACT"),
       Patch("model.park", "compute_park_next", _park_done_first), c_switch="park_done_first")
mutant("park-unbounded", "no bound on park sweeps (neither the cap nor the two epochs)",
       ("PK-MAX-SWEEPS", "PK-DONE-TWO-EPOCHS"),
       Patch("model.park", "compute_park_next", _park_unbounded), c_switch="park_unbounded")
mutant("park-ignores-epochs", "the park ends only at the cap, not two epochs on",
       ("PK-DONE-TWO-EPOCHS", "PK-DONE-EXACT"),
       Patch("model.park", "compute_park_next", _park_ignores_epochs),
       c_switch="park_ignores_epochs")
mutant("sweep-last-before-work", "holes_sweep_last is taken before the work",
       ("PK-SPACING",),
       Patch("model.park", "record_sweep_last", _sweep_last_before_work),
       c_switch="sweep_last_before_work")
mutant("epoch-not-rate-limited", "the advance does not wait for the interval",
       ("EP-NO-SHORT-EPOCH",),
       Patch("model.epoch", "is_epoch_due", _always_due), c_switch="epoch_not_rate_limited")
mutant("double-increment", "the advance increments the epoch twice",
       ("EP-ONE-PER-SWEEP", "EP-NO-SHORT-EPOCH"),
       Patch("model.epoch", "STEPS", _increment_twice, key="increment"),
       c_switch="double_increment")
mutant("no-hold-inline", "no hold in the inline path (the hold in the handoff only)",
       ("HD-YOUNG-KEPT", "HD-INTERVAL"),
       Patch("model.variants", "is_page_held", _inline_no_hold), c_switch="no_hold_inline")


def _claim_forgets_progress(thread):
    """Broken: the claim hands the sweep PARK_SWEPT_NONE, not the park_swept it found, so
    every sweep of a park is taken for its first (its count and its first epoch start
    again)."""
    thread.park_state = SWEEPING
    thread.holes_sweep_deferred = False
    return PARK_SWEPT_NONE


mutant("claim-forgets-progress", "the scavenger's claim takes every sweep of a park for its "
       "first (park_swept read as NONE)", ("PK-MAX-SWEEPS", "PK-DONE-TWO-EPOCHS"),
       Patch("model.park", "claim_parked_thread", _claim_forgets_progress))


# -- found only by long differential fuzzing before issue 20 -----------------------------------


def _young_signed32(current, stamp):
    """Broken: the age is a signed 32-bit difference, so a page left for 2^31 epochs or more
    (an epoch_skip) reads as negative, i.e. young, and is held again instead of swept."""
    half = EPOCH_MODULUS // 2  # arithmetic only, so the Z3 proofs can run it symbolically
    return (current - stamp + half) % EPOCH_MODULUS - half < 2


mutant("age-signed32", "the age of a stamp is compared as a signed 32-bit difference",
       ("EP-AGE-MOD", "CF-TRACE-EQUAL"),
       Patch("model.epoch", "is_epoch_young", _young_signed32), c_switch="age_signed32")
