"""Invariants of the epoch protocol (seed 000, change (2); digest section 7).

Their predicates take an `EpochView`: the shared epoch state with its ghost history, the
interval, whether the clock is monotone, and the advance calls in flight or finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.epoch import AdvanceFrame, EpochState
from model.invariants import invariant


@dataclass
class EpochView:
    state: EpochState
    interval: int
    monotone: bool = True
    frames: list[AdvanceFrame] = field(default_factory=list)


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
