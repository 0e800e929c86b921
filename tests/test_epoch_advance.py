"""The epoch and its advance, step by step (seed 000 change (2); digest section 7)."""

import pytest

from model import epoch as E
from model.clock import ClockError, VirtualClock
from model.epoch import (MOVING, AdvanceFrame, EpochState, advance_step, begin_advance,
                         compute_epoch_age, compute_interval, is_epoch_young,
                         mi_holes_epoch_advance, mi_page_purge_holes_forked_child)
from model.epoch_invariants import EpochView, no_short_epoch, recorded_not_before_real


def test_first_sweep_of_a_process_advances():
    st = EpochState()
    f = mi_holes_epoch_advance(st, now=1000, interval=100)
    assert f.advanced and st.epoch == 1 and st.start == 1000


def test_no_advance_before_the_interval_and_advance_at_it():
    st = EpochState()
    mi_holes_epoch_advance(st, 1000, 100)
    assert not mi_holes_epoch_advance(st, 1099, 100).advanced
    assert st.epoch == 1
    assert mi_holes_epoch_advance(st, 1100, 100).advanced
    assert st.epoch == 2 and st.start == 1100


def test_a_clock_that_went_backwards_advances():
    st = EpochState()
    mi_holes_epoch_advance(st, 1000, 100)
    assert mi_holes_epoch_advance(st, 990, 100).advanced
    assert st.epoch == 2


def test_interval_zero_turns_the_epoch_off():
    st = EpochState()
    assert begin_advance(compute_interval(0)).done
    assert compute_interval(-5) == 0 and compute_interval(10**9) == E.MI_HOLES_INTERVAL_MAX_MS
    assert st.epoch == 0


def run_until(st, f, pc, now, interval=100):
    while f.pc != pc:
        advance_step(st, f, now, interval)


def test_a_sweeper_that_finds_moving_waits_bounded_and_returns_on_the_old_epoch(monkeypatch):
    monkeypatch.setattr(E, "spin_max", 3)
    st = EpochState()
    a, b = begin_advance(100), begin_advance(100)
    run_until(st, a, E.PC_INCREMENT, 1000)  # a won the CAS and is preempted before the increment
    assert st.start == MOVING
    advance_step(st, b, 1000, 100)  # b loads MOVING
    assert b.pc == E.PC_WAIT
    while not b.done:
        advance_step(st, b, 1000, 100)
    assert b.spins == 3 and not b.advanced and st.epoch == 0


def test_the_loser_of_the_cas_does_not_increment():
    st = EpochState()
    a, b = begin_advance(100), begin_advance(100)
    for f in (a, b):
        run_until(st, f, E.PC_CAS, 1000)
    advance_step(st, a, 1000, 100)  # a claims
    advance_step(st, b, 1000, 100)  # b's CAS fails
    assert a.pc == E.PC_INCREMENT and b.pc == E.PC_WAIT


def test_the_recorded_start_is_read_after_the_increment():
    st = EpochState()
    f = begin_advance(100)
    run_until(st, f, E.PC_READ_CLOCK2, 1000)
    assert st.history.real_begin[1] == 1000
    run_until(st, f, E.PC_DONE, 1040)  # preempted 40 ms between increment and clock read
    assert st.start == 1040 and st.history.recorded_begin[1] == 1040
    assert recorded_not_before_real(EpochView(st, 100)) is None


def test_no_short_epoch_predicate_sees_a_short_epoch():
    st = EpochState()
    st.history.real_begin.update({1: 1000, 2: 1050})
    assert "lasted 50 ms" in no_short_epoch(EpochView(st, 100))
    assert no_short_epoch(EpochView(st, 100, monotone=False)) is None


def test_fork_child_records_a_new_start_when_moving_was_held():
    st = EpochState(start=MOVING, epoch=3)
    mi_page_purge_holes_forked_child(st, 5000)
    assert st.start == 5000
    st2 = EpochState(start=1200, epoch=3)
    mi_page_purge_holes_forked_child(st2, 5000)
    assert st2.start == 1200


@pytest.mark.parametrize("current,stamp,young", [
    (5, 5, True), (5, 4, True), (5, 3, False), (0, (1 << 32) - 1, True),
    ((1 << 32) + 1, 0, True), ((1 << 32) + 2, 0, False), (1 << 32, 0, True),
])
def test_age_is_modulo_2_32(current, stamp, young):
    assert is_epoch_young(current, stamp & 0xFFFFFFFF) is young
    assert compute_epoch_age(current, stamp) < (1 << 32)


def test_monotone_clock_refuses_to_go_back():
    c = VirtualClock(1000)
    with pytest.raises(ClockError):
        c.advance(-1)
    back = VirtualClock(1000, monotone=False)
    assert back.advance(-10) == 990


def test_frame_counts_increments():
    st = EpochState()
    f = AdvanceFrame()
    while not f.done:
        advance_step(st, f, 1000, 100)
    assert f.increments == 1
