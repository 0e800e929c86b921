"""The replay of the epoch advance one atomic step at a time (model/epoch.py), and the
advance of sequential traces taken as one step. A part of Validator (replay.py)."""

from __future__ import annotations

from model.epoch import (MOVING, PC_CAS, PC_COMPARE, PC_DONE, PC_INCREMENT, PC_LOAD,
                         PC_READ_CLOCK, PC_READ_CLOCK2, PC_STORE, PC_WAIT, STEPS, AdvanceFrame,
                         begin_advance, fork_child_epoch, mi_holes_epoch_advance,
                         mi_holes_epoch_advance_interleaved)
from purgecheck.validate.common import Event, Rejection, STEP_PCS, show_start

import model.epoch as epoch_module  # spin_max is read at run time (engines may lower it)


class TwoReadings:
    """The clock of one advance whose two readings differ (a clock step between them)."""

    def __init__(self, first: int, second: int) -> None:
        self.readings = [first, second]
        self.now = first

    def read(self) -> int:
        self.now = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        return self.now


class AdvanceReplay:
    """The handlers of advance_step, epoch_advance and epoch_skip."""

    def on_advance_step(self, ev: Event, tid) -> None:
        f = self.frames.get(tid)
        pc = ev.pc
        if f is None or f.pc != pc or pc == PC_DONE:  # a new advance, or a step out of turn
            self.begin_advance(ev, tid, f)
        elif pc == PC_READ_CLOCK or pc == PC_READ_CLOCK2:  # the most frequent steps after
            value = ev.value  # the load, taken here: the trace says what the clock read
            if type(value) is int and self.clock_lo is not None and value >= self.clock_lo:
                self.clock_lo = value  # monotone, as expected
            else:
                value = self.clock(value, self.line, pc)
            STEPS[pc](self.st, f, value, self.interval)
            if f.pc == PC_COMPARE:  # a local step: taken at once
                STEPS[PC_COMPARE](self.st, f, value, self.interval)
        else:  # the thread's advance is at this step
            self.steps[pc](ev, tid, f)

    def begin_advance(self, ev: Event, tid, f: AdvanceFrame | None) -> None:
        """The load of start that begins an advance (the only step a thread with no advance
        in progress may take); a new frame is kept only if the model's load agrees."""
        if ev.pc != PC_LOAD or (f is not None and f.pc != PC_DONE) or not self.advancing \
                or not self.linearized:
            self.refuse_step(ev, tid, f)
        f = f or self.spare_frames.pop(tid, None)
        if f is None:
            f = begin_advance(self.interval)
        else:  # the thread's last frame, made new again (fewer objects for the collector)
            f.__dict__.update(self.new_frame)
        STEPS[PC_LOAD](self.st, f, 0, self.interval)
        if f.start != ev.value:
            raise Rejection(f"the load of start by thread {tid} returned {ev.value!r}, but "
                            f"start is {show_start(self.st.start)}")
        self.frames[tid] = f

    def refuse_step(self, ev: Event, tid, f: AdvanceFrame | None) -> None:
        """A step that cannot begin an advance: bad input, or a rejection that says why."""
        pc = ev.pc
        if not self.linearized:
            raise self.bad(self.line, "advance_step in a trace whose header does not say "
                                      '"linearized": true')
        if pc not in STEP_PCS:
            raise self.bad(self.line, f"advance_step: unknown pc {pc!r}; expected one of "
                                      f"{', '.join(STEP_PCS)}")
        if f is not None and not f.done:
            raise Rejection(f"thread {tid}'s advance is at {f.pc}, not {pc}")
        if pc != PC_LOAD:
            if f is not None and not f.advanced and f.spins == 0 and f.start != MOVING:
                raise Rejection(f"thread {tid}'s advance found the epoch not due (it began "
                                f"at {show_start(f.start)}, the clock read {f.now}, the "
                                f"interval is {self.interval} ms) and returned; the "
                                f"trace goes on to {pc}")
            raise Rejection(f"thread {tid} has no advance in progress: its next step is "
                            f"{PC_LOAD} of a new sweep, not {pc}")
        raise Rejection("the model does not advance the epoch: the hold is off "
                        "(purge_holes false or interval 0)")

    def step_cas(self, ev: Event, tid, f: AdvanceFrame) -> None:
        value = ev.value
        if type(value) is not bool:
            raise self.bad(self.line, f"advance_step cas: expected true or false, got {value!r}")
        st = self.st
        saved = self.save(f)
        STEPS[PC_CAS](st, f, 0, self.interval)
        if (f.pc == PC_INCREMENT) != value:
            self.restore(tid, saved)
            raise Rejection(
                f"thread {tid}'s CAS of start from {show_start(f.start)} to MOVING "
                f"{'won' if value else 'lost'} in the trace, but start is "
                f"{show_start(st.start)}, so the model's CAS "
                f"{'fails' if value else 'wins'}")

    def step_increment(self, ev: Event, tid, f: AdvanceFrame) -> None:
        st = self.st
        saved = self.save(f)
        STEPS[PC_INCREMENT](st, f, self.clock_lo or 0, self.interval)
        if ev.value != st.epoch:
            made = st.epoch
            self.restore(tid, saved)
            raise Rejection(f"thread {tid}'s increment made epoch {ev.value!r}; the model's "
                            f"makes {made}")
        self.incremented[tid] = st.epoch
        # the ghost history is not needed here; keep it bounded
        st.history.real_begin.pop(st.epoch - 3, None)

    def step_store(self, ev: Event, tid, f: AdvanceFrame) -> None:
        st = self.st
        saved = self.save(f)
        STEPS[PC_STORE](st, f, 0, self.interval)
        if st.start != ev.value:
            recorded = st.start
            self.restore(tid, saved)
            raise Rejection(f"thread {tid} recorded {ev.value!r} as the start of epoch "
                            f"{st.epoch}; the model records {show_start(recorded)} (its "
                            f"clock read after the increment was {f.now2})")
        st.history.recorded_begin.pop(st.epoch - 3, None)

    def step_wait(self, ev: Event, tid, f: AdvanceFrame) -> None:
        """The end of the bounded wait, with the last value loaded."""
        st, spins, spin_max = self.st, ev.spins, epoch_module.spin_max
        if type(spins) is not int or not 0 <= spins <= spin_max:
            raise self.bad(self.line, f"advance_step wait_moving: expected spins 0.."
                                      f"{spin_max}, got {spins!r}")
        if spins < spin_max and ev.value != st.start:
            raise Rejection(f"thread {tid}'s wait loaded {show_start(ev.value)}, but start "
                            f"is {show_start(st.start)}")
        saved = self.save(f)
        f.spins = spins
        STEPS[PC_WAIT](st, f, 0, self.interval)
        if not f.done:
            self.restore(tid, saved)
            raise Rejection(f"thread {tid} stopped waiting after {spins} spins while start "
                            f"is MOVING; the model waits up to {spin_max}")

    def save(self, f: AdvanceFrame) -> tuple:
        """What a step may change, so that a rejection shows the state before it."""
        return self.st.start, self.st.epoch, f.__dict__.copy()

    def restore(self, tid, saved: tuple) -> None:
        st = self.st
        if st.epoch != saved[1]:
            st.history.real_begin.pop(st.epoch, None)
        st.start, st.epoch = saved[0], saved[1]
        self.frames[tid].__dict__.update(saved[2])

    def on_epoch_advance(self, ev: Event, tid) -> None:
        thread = self.thread(ev.thread, self.line)
        got = (ev.epoch, ev.start)
        if self.linearized:  # the report of an advance whose steps were replayed
            f = self.frames.get(tid)
            if f is None or not f.done or not f.advanced:
                raise Rejection(f"epoch_advance by thread {thread.id}, but its advance "
                                f"{'has not moved the epoch' if f else 'never began'}")
            want = (self.incremented[tid], f.now2)
        else:  # the whole advance as one step, both clock reads at `start`
            st = self.st
            now = self.clock(ev.start, self.line, "epoch_advance")
            if not self.advancing:
                raise Rejection("epoch_advance, but the hold is off (the model never advances)")
            before = (st.start, st.epoch)
            f = mi_holes_epoch_advance(st, now, self.interval)
            for first in self.op_readings if not f.advanced else ():
                # an interleaved clock step (clock_at) may have come between the advance's
                # first reading and its second: the first is then an earlier reading of
                # this op, and only the second is `start`
                st.start, st.epoch = before
                f = mi_holes_epoch_advance_interleaved(st, TwoReadings(first, now),
                                                       self.interval, lambda pc: None)
                if f.advanced:
                    break
            want = (st.epoch, st.start)
            st.history.real_begin.pop(st.epoch - 3, None)  # ghost history: keep it bounded
            st.history.recorded_begin.pop(st.epoch - 3, None)
            if f.advanced and got == want:
                self.start_known = True
                self.clock_exact = True  # `start` is the virtual time now
                self.advanced_seq.add(thread.id)
                return
            st.start, st.epoch = before  # the report shows the state before the event
            if not f.advanced:
                raise Rejection(f"epoch_advance at {now} ms, but the epoch began at "
                                f"{show_start(before[0])}, less than the interval of "
                                f"{self.interval} ms before")
        if got != want:
            raise Rejection(f"epoch_advance says epoch {got[0]!r} began at {got[1]!r}; the "
                            f"model's advance made epoch {want[0]}, begun at {want[1]}")

    def on_fork(self, ev: Event, tid) -> None:
        """A fork's report of what its child holds (the ops fork, fork_at): the forked-child
        rule never leaves the child MOVING; outside a move the child holds the parent's
        epoch, and inside one the epoch being left or the one just begun."""
        self.thread(ev.thread, self.line)
        if ev.start == MOVING:
            raise Rejection(f"fork by thread {ev.thread}: the child still holds MOVING "
                            f"(_mi_page_purge_holes_forked_child records a new beginning)")
        if self.linearized:
            self.fork_at_lin(ev)
            return
        if not ev.moving and (ev.epoch != self.st.epoch
                              or (self.start_known and ev.start != self.st.start)):
            raise Rejection(f"fork by thread {ev.thread} outside an advance: the child holds "
                            f"epoch {ev.epoch} begun at {ev.start}, the parent epoch "
                            f"{self.st.epoch} begun at {show_start(self.st.start)}")
        if ev.moving and ev.epoch not in (self.st.epoch, self.st.epoch + 1):
            raise Rejection(f"fork by thread {ev.thread} during a move: the child holds epoch "
                            f"{ev.epoch}, not {self.st.epoch} or the next")

    def fork_at_lin(self, ev: Event) -> None:
        """A linearized fork (stress --scenario fork) is made under lin_lock, so the child is a
        copy of the state the events before it reached: it found MOVING exactly when the
        model's start is MOVING, and holds what the model's forked-child rule leaves there,
        its new beginning being a reading of the clock taken at the fork."""
        st = self.st
        if ev.moving != (st.start == MOVING):
            raise Rejection(f"fork by thread {ev.thread}: the child found MOVING "
                            f"{'held' if ev.moving else 'not held'}, but start is "
                            f"{show_start(st.start)}")
        now = self.clock(ev.start, self.line, "fork") if ev.moving else 0
        child = fork_child_epoch(st, now)
        if (ev.epoch, ev.start) != (child.epoch, child.start):
            raise Rejection(f"fork by thread {ev.thread}: the child holds epoch {ev.epoch} "
                            f"begun at {show_start(ev.start)}; the model's forked child holds "
                            f"epoch {child.epoch} begun at {show_start(child.start)}")

    def on_epoch_skip(self, ev: Event, tid) -> None:
        e = ev.epoch
        if type(e) is not int or e < self.st.epoch:
            raise Rejection(f"epoch_skip to epoch {e!r}, behind the current {self.st.epoch}")
        self.st.epoch = e
        self.st.start = self.clock_lo if self.clock_lo is not None else self.st.start
        self.start_known = False  # it began "now", a reading the trace does not show
