"""The process-wide epoch and its advance, as atomic steps an interleaving engine can preempt.

Seed 000, change (2): "mi_holes_epoch_advance: read the time the epoch began; if that is the
interval ago, claim the move with a CAS of that time to a MOVING mark; increment the epoch;
read the clock AGAIN and store that as the time the new epoch began. The epoch begins for
everybody else at the increment, so its recorded beginning is never before its real one".
Digest section 7 gives the real code's order, which `advance_step` follows one atomic
access at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MOVING = -(1 << 63)  # INT64_MIN: the mark of an advance in progress
MI_HOLES_INTERVAL_MAX_MS = 3_600_000  # purge_holes_min_interval is clamped to [0, 1 h]
MI_EPOCH_SPIN_MAX = 1000  # pauses a sweeper waits on MOVING before it carries on
EPOCH_MODULUS = 1 << 32  # stamps keep 32 bits of the epoch


@dataclass
class EpochHistory:
    """Ghost state: for each epoch e >= 1, when it really began (the increment) and what start
    was recorded for it. Epoch 0 began with the process."""

    real_begin: dict[int, int] = field(default_factory=dict)
    recorded_begin: dict[int, int] = field(default_factory=dict)


@dataclass
class EpochState:
    """`{ _Atomic int64 start; _Atomic uintptr epoch }`, both 0 at start (digest 7)."""

    start: int = 0
    epoch: int = 0
    history: EpochHistory = field(default_factory=EpochHistory)


# Program counters of one call of the advance, one per atomic access.
PC_LOAD = "load_start"
PC_READ_CLOCK = "read_clock"
PC_COMPARE = "compare"
PC_CAS = "cas"
PC_INCREMENT = "increment"
PC_READ_CLOCK2 = "read_clock_again"
PC_STORE = "store_start"
PC_WAIT = "wait_moving"
PC_DONE = "done"
# The steps of one call in order, before each of which another thread may act (the ops
# fork_at and clock_at place a fork or a clock reading there): not the wait, not done.
ADVANCE_PCS = (PC_LOAD, PC_READ_CLOCK, PC_COMPARE, PC_CAS, PC_INCREMENT, PC_READ_CLOCK2,
               PC_STORE)


@dataclass
class AdvanceFrame:
    """The locals of one sweeper inside `_mi_page_purge_holes_epoch_advance`."""

    pc: str = PC_LOAD
    start: int = 0
    now: int = 0
    now2: int = 0
    spins: int = 0
    increments: int = 0  # ghost: how many times this call moved the epoch
    advanced: bool = False
    due: bool | None = None  # ghost: the compare's verdict (None: not compared yet)

    @property
    def done(self) -> bool:
        return self.pc == PC_DONE


def compute_interval(purge_holes_min_interval: int) -> int:
    """`clamp(purge_holes_min_interval, 0, 3600000)`; <= 0 turns the epoch (and hold) off."""
    return max(0, min(purge_holes_min_interval, MI_HOLES_INTERVAL_MAX_MS))


def compute_epoch_age(current: int, stamp: int) -> int:
    """`(uint32)(current_epoch - stamp)`: ages are differences modulo 2^32 (digest 7)."""
    return (current - stamp) % EPOCH_MODULUS


def is_epoch_young(current: int, stamp: int) -> bool:
    """Seed 000: "a large page whose epoch is the current one or the one before keeps its
    free blocks"."""
    return compute_epoch_age(current, stamp) < 2


def is_epoch_due(start: int, now: int, interval: int) -> bool:
    """The compare step: the epoch has lasted the interval, or the clock went backwards."""
    return not (now >= start and now - start < interval)


def step_load(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    f.start = st.start  # load_acquire
    f.pc = PC_WAIT if f.start == MOVING else PC_READ_CLOCK


def step_read_clock(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    f.now = now
    f.pc = PC_COMPARE


def step_compare(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    f.due = is_epoch_due(f.start, f.now, interval)
    f.pc = PC_CAS if f.due else PC_DONE


def step_cas(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    """CAS_strong(start: f.start -> MOVING): the claim that excludes other sweepers."""
    if st.start == f.start:
        st.start = MOVING
        f.pc = PC_INCREMENT
    else:
        f.pc = PC_WAIT


def step_increment(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    st.epoch += 1
    st.history.real_begin[st.epoch] = now
    f.increments += 1
    f.advanced = True
    f.pc = PC_READ_CLOCK2


def step_read_clock_again(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    f.now2 = now
    f.pc = PC_STORE


def step_store(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    """store_release(start, now2): the new epoch's recorded beginning, read AFTER the
    increment."""
    st.start = f.now2
    st.history.recorded_begin[st.epoch] = f.now2
    f.pc = PC_DONE


def step_wait(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    """Spin (bounded) while another sweeper holds MOVING, then return either way."""
    if st.start != MOVING or f.spins >= spin_max:
        f.pc = PC_DONE
    else:
        f.spins += 1


spin_max = MI_EPOCH_SPIN_MAX  # engines lower it to keep state spaces small

STEPS = {
    PC_LOAD: step_load, PC_READ_CLOCK: step_read_clock, PC_COMPARE: step_compare,
    PC_CAS: step_cas, PC_INCREMENT: step_increment, PC_READ_CLOCK2: step_read_clock_again,
    PC_STORE: step_store, PC_WAIT: step_wait,
}


def advance_step(st: EpochState, f: AdvanceFrame, now: int, interval: int) -> None:
    """One atomic step of one sweeper's advance, at clock reading `now`."""
    STEPS[f.pc](st, f, now, interval)


def begin_advance(interval: int) -> AdvanceFrame:
    """A new call; with the hold off (interval <= 0) it returns at once."""
    return AdvanceFrame(pc=PC_LOAD if interval > 0 else PC_DONE)


def mi_holes_epoch_advance(st: EpochState, now: int, interval: int) -> AdvanceFrame:
    """The whole advance without preemption (what one sweeper alone does)."""
    f = begin_advance(interval)
    while not f.done:
        advance_step(st, f, now, interval)
    return f


def mi_holes_epoch_advance_interleaved(st: EpochState, clock, interval: int,
                                       before_step) -> AdvanceFrame:
    """The advance one step at a time, with `before_step(pc)` called before each step: what
    another thread does in between (a fork, the clock moving, also backwards). Each clock
    step reads `clock` when it runs, so a reading placed before it is what it sees."""
    f = begin_advance(interval)
    while not f.done:
        before_step(f.pc)
        advance_step(st, f, clock.read() if f.pc in (PC_READ_CLOCK, PC_READ_CLOCK2) else clock.now,
                     interval)
    return f


def fork_child_epoch(st: EpochState, now: int) -> EpochState:
    """What the child of a fork holds: a copy of the epoch, with the forked-child rule
    applied (the parent goes on as it was)."""
    child = EpochState(st.start, st.epoch, EpochHistory(dict(st.history.real_begin),
                                                         dict(st.history.recorded_begin)))
    mi_page_purge_holes_forked_child(child, now)
    return child


def mi_page_purge_holes_forked_child(st: EpochState, now: int) -> None:
    """Fork: in the child, if another thread held MOVING, record a new beginning."""
    if st.start == MOVING:
        st.start = now
        st.history.recorded_begin[st.epoch] = now
