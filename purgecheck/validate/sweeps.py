"""The replay of sweeps (model/sweep.py: the hold, the outcome of each page, what a sweep
leaves) and of the park handoff (model/park.py: the scavenger's claim, due time and the
park's progress), and the observations of page state. A part of Validator (replay.py)."""

from __future__ import annotations

from model.epoch import PC_DONE, AdvanceFrame, is_epoch_due
from model.geometry import mi_page_can_purge_holes
from model.page import MI_PAGE_SWEPT_NONE, Page, is_stamp
from model.park import claim_parked_thread, end_park_sweep, is_park_due, is_park_waiting
from model.thread import (PARK_SWEPT_DONE, PARK_SWEPT_NONE, PARKED, RUNNING, SWEEPING,
                          ThreadState)
from model.variants import TWO_UNTOUCHED, SweepContext, is_page_held
from purgecheck.validate.common import (Event, HANDOFF_OPS, OUTCOMES, Rejection, KNOWN_OUTCOMES,
                                        describe_blocks, describe_swept_state, show_start)


class Sweep:
    """A sweep in progress on one OS thread: from its sweep_begin to its idle."""

    __slots__ = ("thread", "ctx", "held", "decided", "holds", "defers", "walked", "lin")

    def __init__(self, thread: int, ctx: SweepContext, held: dict) -> None:
        self.thread = thread
        self.ctx = ctx
        self.held = held  # swept_state -> is_page_held in this context (see Validator.decide)
        self.decided: dict[int, bool] = {}  # page -> held
        self.holds = False  # it has held a page
        self.defers: int | None = None  # a held page with free blocks on its known lists
        self.walked: set[int] = set()
        self.lin: int | None = None  # its sweep_begin's (the collects come after it)


class SweepReplay:
    """The handlers of sweep_begin, sweep_page, idle, pending, park, unpark, park_sweep and
    the observations."""

    def on_sweep_begin(self, ev: Event, tid) -> None:
        t = self.threads.get(ev.thread) or self.thread(ev.thread, self.line)
        sweeps = self.sweeps
        if tid in sweeps:
            raise Rejection(f"a sweep of thread {t.id} begins while the one of thread "
                            f"{sweeps[tid].thread} on the same OS thread has not ended")
        linearized = self.linearized
        handoff = (tid != t.id) if linearized else self.op_name in HANDOFF_OPS
        if handoff:
            if not is_park_waiting(t):
                raise Rejection(f"the scavenger sweeps thread {t.id}, which is "
                                f"{t.park_state}{' and done' if t.park_swept == PARK_SWEPT_DONE else ''}: "
                                f"it claims only parked threads whose park is not done")
        f = self.frames.get(tid)  # the advance this sweep began with
        if self.advancing and (f is None or f.pc != PC_DONE or not linearized):
            self.check_advance_before_sweep(t, tid, f)
        epoch = self.st.epoch
        seq = t.holes_sweep_seq + 1
        full = seq % self.full_every == 0
        if ev.seq != seq or ev.full != full or ev.epoch != epoch:
            raise Rejection(f"sweep_begin of thread {t.id}: the model's is sweep {seq} "
                            f"({'full' if full else 'not full'}) in epoch {epoch}, the "
                            f"trace's sweep {ev.seq!r} (full {ev.full!r}) in epoch "
                            f"{ev.epoch!r}")
        now = ev.now
        if now is None:
            now = self.clock_lo
        elif type(now) is int and self.clock_lo is not None and now >= self.clock_lo:
            self.clock_lo = now  # monotone, as expected
        else:
            now = self.clock(now, self.line, "sweep_begin")
        if handoff:
            self.check_park_due(t, ev.now if ev.now is not None
                                else self.clock_lo if self.clock_exact else None)
        # Checked: the sweep begins.
        if f is not None:
            del self.frames[tid]
            self.spare_frames[tid] = f
        if handoff:
            claim_parked_thread(t)  # its progress is read at the park_sweep event
        if not linearized:
            self.advanced_seq.discard(t.id)
        t.holes_sweep_seq, t.holes_sweep_full, t.holes_sweep_epoch = seq, full, epoch
        if t.epoch_seen < epoch:
            t.epoch_seen = epoch
        t.holes_sweep_deferred = False
        key = (now, epoch, handoff, full)
        known = self.contexts.get(key)
        if known is None:
            if len(self.contexts) > 64:
                self.contexts.clear()
            known = self.contexts[key] = (SweepContext(now if now is not None else 0, epoch,
                                                       self.interval, handoff, full), {})
        sweep = self.spare_sweeps.pop(tid, None)
        if sweep is None:
            sweep = sweeps[tid] = Sweep(t.id, *known)
        else:  # the OS thread's last sweep, made new again (fewer objects to collect)
            sweep.thread, (sweep.ctx, sweep.held), sweep.holds = t.id, known, False
            sweep.defers = None
            sweep.decided.clear()
            sweep.walked.clear()
            sweeps[tid] = sweep
        sweep.lin = ev.lin

    def check_park_due(self, t: ThreadState, now: int | None) -> None:
        """The scavenger claims a parked thread only when it is due, an interval after the
        END of its last park sweep (model.park.is_park_due). `t.holes_sweep_last` is no later
        than that end (park_sweep_ended), and `now` (a reading of this sweep, or the exact
        virtual time) no earlier than the reading the scavenger decided on, so a thread not
        due by these two was not due when it was claimed. None: the time is not known."""
        if now is not None and self.interval > 0 and not is_park_due(t, now, self.interval):
            raise Rejection(f"the scavenger sweeps thread {t.id} at {now} ms, but its last park "
                            f"sweep ended at {t.holes_sweep_last} ms or later: the model sweeps "
                            f"a parked thread again only {self.interval} ms after the end of "
                            f"its last sweep")

    def park_sweep_ended(self, t: ThreadState) -> None:
        """holes_sweep_last, taken after the work of a handoff sweep (model.park
        record_sweep_last), as the trace bounds it from below: in a linearized trace the
        last reading before the sweep's idle event (the scavenger reads the clock after it);
        in a sequential one the virtual time, which the work moved by sweep_ms."""
        if self.clock_lo is None:
            return
        if not self.linearized and self.options.sweep_ms:
            self.clock_lo += self.options.sweep_ms
            self.pass_moved = True
        t.holes_sweep_last = self.clock_lo

    def check_advance_before_sweep(self, t: ThreadState, tid, f: AdvanceFrame | None) -> None:
        """Each sweep advances the epoch first (mi_holes_sweep_begin). `f`: the advance of
        this OS thread (linearized traces)."""
        if self.linearized:
            if f is None or not f.done:
                raise Rejection(f"sweep_begin of thread {t.id} before its advance "
                                f"{'finished (at ' + f.pc + ')' if f else 'began'}")
            return
        if t.id in self.advanced_seq:
            return
        # No epoch_advance: the model agrees if the clock can read a time at which the epoch
        # is not due: no earlier than the last reading, where the clock is monotone.
        if self.start_known and self.monotone and self.clock_lo is not None:
            now = max(self.clock_lo, self.st.start)
            if is_epoch_due(self.st.start, now, self.interval):
                raise Rejection(f"the sweep of thread {t.id} does not move the epoch, but it "
                                f"began at {show_start(self.st.start)} and the clock reads "
                                f"{self.clock_lo} ms at least: the model's advance moves it "
                                f"(interval {self.interval} ms)")

    def sweep_of(self, tid, kind: str) -> Sweep:
        sweep = self.sweeps.get(tid)
        if sweep is None:
            raise Rejection(f"{kind} outside a sweep (no sweep_begin on this thread before it)")
        return sweep

    def decide(self, sweep: Sweep, page: Page) -> bool:
        """The hold decision for this page in this sweep (made once: two-untouched counts).
        In the other designs is_page_held reads nothing but the page's swept_state and the
        sweep's context, so sweeps that share a context share its decisions too."""
        held = sweep.decided.get(page.id)
        if held is None:
            if not (page.owner == sweep.thread or page.abandoned):
                raise Rejection(f"the sweep of thread {sweep.thread} reaches page {page.id}, "
                                f"owned by thread {page.owner}: a sweep takes its own heap's "
                                f"pages and the abandoned ones")
            variant = self.options.variant
            if variant == TWO_UNTOUCHED:
                held = is_page_held(variant, page, sweep.ctx, self.untouched)
            else:
                held = sweep.held.get(page.swept_state)
                if held is None:
                    held = sweep.held[page.swept_state] = is_page_held(
                        variant, page, sweep.ctx, self.untouched)
            sweep.decided[page.id] = held
            if held:
                sweep.holds = True
            if self.pending_collect:
                self.settle_collect(page)
            if (page.local_free or page.xthread_free) and page.id in self.listed:
                # sweep_pages collects a page before its sweep, after the sweep began
                self.collect(page, self.linearized and self.newest_push[page.id] > sweep.lin)
            if held and page.free and page.id in self.listed:
                sweep.defers = page.id  # a held page with free blocks: the sweep defers them
        return held

    def describe_hold(self, page: Page, sweep: Sweep) -> str:
        return (f"it carries {describe_swept_state(page.swept_state)} and the sweep runs in "
                f"epoch {sweep.ctx.epoch} (variant {self.options.variant})")

    def on_sweep_page(self, ev: Event, tid) -> None:
        sweep = self.sweeps.get(tid) or self.sweep_of(tid, "sweep_page")
        page = self.pages.get(ev.page)
        if page is None or page.retired:
            page = self.live(self.page(ev, self.line))
        outcome = ev.outcome
        if outcome not in KNOWN_OUTCOMES:
            raise self.bad(self.line, f"sweep_page: unknown outcome {outcome!r}; expected one "
                                      f"of {', '.join(OUTCOMES)}")
        if outcome == "off" or outcome == "all-free":
            if self.pending_collect:
                self.settle_collect(page)
            if page.id in self.listed:  # no hold decision: the page's first event in the sweep
                self.collect(page, self.linearized and self.newest_push[page.id] > sweep.lin)
            if outcome == "all-free":
                return  # before the hold
            o = self.options
            if o.purge_holes and o.purge_delay >= 0:
                raise Rejection(f"page {page.id} swept as 'off', but purge_holes is on")
            return
        held = self.decide(sweep, page)
        if (outcome == "held") != held:
            raise Rejection(f"page {page.id} is {outcome} by the sweep of thread "
                            f"{sweep.thread}, but the model {'holds' if held else 'does not hold'}"
                            f" it: {self.describe_hold(page, sweep)}")
        if outcome == "held":
            return
        if outcome == "unchanged":
            state = page.swept_state
            if sweep.ctx.full or is_stamp(state) or state == MI_PAGE_SWEPT_NONE \
                    or page.id in sweep.walked:
                why = ("the sweep is full" if sweep.ctx.full else "the sweep walked it"
                       if page.id in sweep.walked else
                       f"it carries {describe_swept_state(state)}")
                raise Rejection(f"page {page.id} skipped as unchanged, but {why}")
        elif outcome == "ineligible":
            if mi_page_can_purge_holes(page.geom):
                raise Rejection(f"page {page.id} swept as ineligible, but it can purge holes")
        elif page.id not in sweep.walked:  # walked or incomplete
            raise Rejection(f"page {page.id} swept as {outcome} without a walk event")

    def on_idle(self, ev: Event, tid) -> None:
        sweep = self.sweeps.get(tid) or self.sweep_of(tid, "idle")
        ctx = sweep.ctx
        if ev.thread != sweep.thread or ev.epoch != ctx.epoch or ev.handoff != ctx.in_handoff \
                or ev.full != ctx.full:
            self.thread(ev.thread, self.line)  # a thread that does not exist is bad input
            raise Rejection(f"the idle event says thread {ev.thread!r}, epoch {ev.epoch!r}, "
                            f"handoff {ev.handoff!r}, full {ev.full!r}; the sweep it ends is "
                            f"thread {sweep.thread}, epoch {ctx.epoch}, handoff "
                            f"{ctx.in_handoff}, full {ctx.full}")
        deferred = ev.deferred is True
        if deferred and not sweep.holds:
            raise Rejection(f"the sweep of thread {sweep.thread} says it left blocks behind "
                            f"(deferred), but it held no page")
        if not deferred and sweep.defers is not None:
            page = self.pages[sweep.defers]
            raise Rejection(f"the sweep of thread {sweep.thread} says it left nothing behind "
                            f"(deferred false), but it held page {page.id}, whose free list "
                            f"holds {describe_blocks(page.free)}: the model defers them")
        self.threads[sweep.thread].holes_sweep_deferred = deferred
        if ctx.in_handoff:
            self.park_sweep_ended(self.threads[sweep.thread])
        self.last_deferred[sweep.thread] = deferred
        self.spare_sweeps[tid] = self.sweeps.pop(tid)

    def on_pending(self, ev: Event, tid) -> None:
        t = self.thread(ev.thread, self.line)
        if t.park_state != RUNNING and self.linearized:
            return  # a parked thread's read races with the scavenger's sweep of its heap
        if ev.value != t.holes_sweep_deferred:
            raise Rejection(f"mi_on_thread_idle_pending of thread {t.id} says {ev.value!r}; "
                            f"its last sweep {'left' if t.holes_sweep_deferred else 'did not leave'}"
                            f" blocks behind")

    # -- the park handoff (model/park.py) -------------------------------------------------------

    def on_park(self, ev: Event, tid) -> None:
        t = self.thread(ev.thread, self.line)
        if t.park_state != RUNNING:
            raise Rejection(f"thread {t.id} parks, but it is {t.park_state}")
        t.park_state, t.park_swept, t.park_reclaim = PARKED, PARK_SWEPT_NONE, False

    def on_unpark(self, ev: Event, tid) -> None:
        t = self.thread(ev.thread, self.line)
        if t.park_state != PARKED:
            raise Rejection(f"thread {t.id} leaves its park, but it is {t.park_state}"
                            f"{': a sweep has its heap' if t.park_state == SWEEPING else ''}")
        t.park_state = RUNNING

    def on_park_sweep(self, ev: Event, tid) -> None:
        t = self.thread(ev.thread, self.line)
        if t.park_state != SWEEPING:
            raise Rejection(f"park_sweep of thread {t.id}, which no sweep has claimed "
                            f"(it is {t.park_state})")
        deferred = self.last_deferred.get(t.id)
        if (ev.epoch, ev.deferred) != (t.holes_sweep_epoch, deferred):
            raise Rejection(f"park_sweep of thread {t.id} says epoch {ev.epoch!r}, deferred "
                            f"{ev.deferred!r}; its sweep ran in epoch {t.holes_sweep_epoch} "
                            f"and said deferred {deferred}")
        swept, park_epoch = t.park_swept, t.holes_park_epoch
        nxt = end_park_sweep(t, swept, bool(deferred))
        if (nxt == PARK_SWEPT_DONE) != (ev.done is True):
            t.holes_park_epoch, park_epoch = park_epoch, t.holes_park_epoch
            t.park_swept = swept
            raise Rejection(f"park_sweep of thread {t.id} says done {ev.done!r}; the model's "
                            f"park is {'done' if nxt == PARK_SWEPT_DONE else 'not done'} (sweep "
                            f"{1 if swept == PARK_SWEPT_NONE else swept}, epochs "
                            f"{park_epoch}..{t.holes_sweep_epoch}, deferred {deferred})")
        t.park_state = PARKED

    # -- observations ---------------------------------------------------------------------------

    def on_page_state(self, ev: Event, tid) -> None:
        page = self.page(ev, self.line)
        state = ev.swept_state
        if ev.capacity != page.capacity or ev.reserved != page.reserved \
                or ev.unit != page.unit:
            raise Rejection(f"page {page.id} is observed with capacity {ev.capacity!r} of "
                            f"{ev.reserved!r}, unit {ev.unit!r}; the model has "
                            f"{page.capacity} of {page.reserved}, unit {page.unit}")
        mine = page.swept_state
        if is_stamp(mine) or mine == MI_PAGE_SWEPT_NONE:
            ok = state == mine
        else:
            ok = type(state) is int and state >> 32 == self.walked_capacity.get(page.id)
        if not ok:
            raise Rejection(f"page {page.id} is observed with swept_state "
                            f"{describe_swept_state(state)}; the model's is "
                            f"{describe_swept_state(mine)}")

    def on_resident(self, ev: Event, tid) -> None:
        self.page(ev, self.line)

    def on_holes_stats(self, ev: Event, tid) -> None:
        """The process-wide counters: an observation the replay does not judge."""
