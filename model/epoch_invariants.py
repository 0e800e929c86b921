"""Invariants of the epoch protocol (seed 000, change (2); digest section 7).

Their predicates take an `EpochView`: the shared epoch state with its ghost history, the
interval, whether the clock is monotone, and the advance calls in flight or finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.epoch import (MOVING, PC_INCREMENT, PC_READ_CLOCK2, PC_STORE, AdvanceFrame,
                         EpochState)
from model.invariants import invariant


@dataclass
class EpochView:
    state: EpochState
    interval: int
    monotone: bool = True
    frames: list[AdvanceFrame] = field(default_factory=list)
    # what the child of each fork held after the forked-child rule (no advance is in flight
    # there: the thread that forked was not in one, and the others do not exist in the child)
    forks: list[EpochState] = field(default_factory=list)


@invariant("EP-NO-SHORT-EPOCH",
           "No epoch is shorter than the interval: with a monotone clock, epoch e+1 really "
           "begins (its increment) at least `interval` ms after epoch e really began (epoch 0 "
           "begins at time 0, as start = 0).",
           "seed 000 (2): \"No epoch is shorter than the interval, whoever looks and wherever "
           "a sweeper is preempted; that is what the rule rests on.\"",
           "model.epoch.step_cas", scope="epoch")
def no_short_epoch(v: EpochView) -> str | None:
    if not v.monotone or v.interval <= 0:
        return None
    begins = v.state.history.real_begin
    for e in sorted(begins):
        prev = 0 if e == 1 else begins.get(e - 1)
        if prev is not None and begins[e] - prev < v.interval:
            return f"epoch {e - 1} lasted {begins[e] - prev} ms < interval {v.interval} ms " \
                   f"(began {prev}, epoch {e} began {begins[e]})"
    return None


@invariant("EP-RECORDED-NOT-BEFORE-REAL",
           "With a monotone clock, the recorded start of an epoch is never before its real "
           "start (the increment); a clock that goes back between the increment and the "
           "second reading records an earlier start, which the advance then treats as due.",
           "seed 000 (2): \"The epoch begins for everybody else at the increment, so its "
           "recorded beginning is never before its real one\"",
           "model.epoch.step_store", scope="epoch")
def recorded_not_before_real(v: EpochView) -> str | None:
    if not v.monotone:
        return None
    h = v.state.history
    for e, rec in h.recorded_begin.items():
        real = h.real_begin.get(e)
        if real is not None and rec < real:
            return f"epoch {e} recorded as beginning at {rec} ms, before its increment at " \
                   f"{real} ms"
    return None


@invariant("EP-ONE-PER-SWEEP",
           "One sweep moves the epoch by at most one.",
           "seed 000 (2): \"one sweep ends one epoch at the most\"",
           "model.epoch.mi_holes_epoch_advance", scope="epoch")
def one_per_sweep(v: EpochView) -> str | None:
    for n, f in enumerate(v.frames):
        if f.increments > 1:
            return f"sweeper {n} moved the epoch {f.increments} times in one advance"
    return None


# The steps of an advance that holds the claim: after its CAS took MOVING, up to its store.
HOLDING_PCS = (PC_INCREMENT, PC_READ_CLOCK2, PC_STORE)


@invariant("EP-MOVING-HELD",
           "MOVING is held only by an advance in flight between its CAS and its store, in "
           "every process: in the child of a fork, where no thread is inside an advance, "
           "start is never MOVING (the forked-child rule records a new beginning).",
           "seed 000 (2), the fork: _mi_page_purge_holes_forked_child \"if another thread "
           "held MOVING, record a new beginning\" (digest 7): else every sweeper of the child "
           "waits on a move that never ends and the epoch never moves there again",
           "model.epoch.mi_page_purge_holes_forked_child", scope="epoch")
def moving_held(v: EpochView) -> str | None:
    for n, child in enumerate(v.forks):
        if child.start == MOVING:
            return f"the child of fork {n} holds MOVING in epoch {child.epoch}, and no " \
                   f"thread of it is inside an advance"
    if v.state.start == MOVING and not any(f.pc in HOLDING_PCS for f in v.frames):
        return f"start is MOVING in epoch {v.state.epoch} and no advance in flight holds it"
    return None


@invariant("EP-BACK-IS-DUE",
           "An advance whose clock reading is behind the start it loaded finds the epoch due "
           "(and goes on to claim the move), whatever the interval.",
           "digest 7, the compare: due when the interval has passed \"or the clock went "
           "backwards\" (a reading before start)",
           "model.epoch.is_epoch_due", scope="epoch")
def back_is_due(v: EpochView) -> str | None:
    for f in v.frames:
        if f.due is False and f.start != MOVING and f.now < f.start:
            return f"an advance read {f.now} ms, before the epoch's start {f.start} ms, " \
                   f"and found the epoch not due"
    return None
