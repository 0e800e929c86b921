"""The validator: the replay's state, the loop that takes the events in order, what a
rejection shows, and the entry points (validate_stream, validate_file, the report).
The handlers live in pages.py, advance.py and sweeps.py, one part of the model each."""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import IO, Callable, Iterable

from model.epoch import (MOVING, PC_CAS, PC_INCREMENT, PC_READ_CLOCK, PC_READ_CLOCK2, PC_STORE,
                         PC_WAIT, AdvanceFrame, EpochState, advance_step, begin_advance,
                         compute_interval)
from model.page import Page
from model.alloc import mi_page_free_collect
from model.park import is_park_due, is_park_waiting, mi_theap_sweep_parked
from model.thread import RUNNING, ThreadState
from model.variants import SweepContext
from model.world import World
from purgecheck.formats.trace import (EVENT_TYPES, TraceError, clock_reading_error, event_dict,
                              kind_of, options_of, read_trace)
from purgecheck.validate.advance import AdvanceReplay
from purgecheck.validate.common import (COLLECT_OPS, CONFIG_TYPES, Event, LIST_OPS, MAIN_TID,
                                        OP, Rejection, SCAVENGER_TID, STAMP, TYPE_WORDS,
                                        describe_swept_state, show_start)
from purgecheck.validate.pages import Obligation, PageReplay
from purgecheck.validate.sweeps import Sweep, SweepReplay


@dataclass
class Verdict:
    """The outcome of validating one trace."""

    source: str
    accepted: bool
    events: int  # events replayed (all of them when accepted)
    line: int = 0  # the rejected event's line
    event: dict | None = None
    why: str = ""
    state: list[str] = field(default_factory=list)  # the model's state before the event
    enabled: list[str] = field(default_factory=list)  # what the model could do there
    stats: dict = field(default_factory=dict)


class Validator(PageReplay, AdvanceReplay, SweepReplay):
    """The model's state as the trace has driven it so far, and one handler per event."""

    def __init__(self, header: dict, source: str) -> None:
        self.source = source
        cfg = header["config"]
        producer = header.get("producer", {})
        if not isinstance(producer, dict):
            raise TraceError(source, 1, f"expected the header's producer to be an object, got "
                                        f"{producer!r}")
        for key, kind in CONFIG_TYPES.items():
            if type(cfg[key]) is not kind:
                raise TraceError(source, 1, f"the header's config: expected {key} to be "
                                            f"{TYPE_WORDS[kind]}, got {cfg[key]!r}")
        try:
            self.options = options_of(cfg)
            self.world = World(self.options)
        except (TypeError, ValueError, KeyError) as e:
            raise TraceError(source, 1, f"the header's config is not one the model takes: {e}")
        o = self.options
        for ok, what in ((o.purge_holes_full_every > 0, "full_every > 0"),
                         (o.os_page_size > 0 and not o.os_page_size & (o.os_page_size - 1),
                          "os_page_size a power of two"),
                         (cfg["arch"] in (32, 64), "arch 32 or 64"),
                         (o.first_block_offset >= 0, "first_block_offset >= 0"),
                         (cfg["clock"] in ("virtual", "real"), "clock virtual or real")):
            if not ok:
                raise TraceError(source, 1, f"the header's config: expected {what}")
        self.interval = compute_interval(self.options.purge_holes_min_interval)
        self.new_frame = vars(begin_advance(self.interval)).copy()
        self.full_every = self.options.purge_holes_full_every
        self.advancing = self.options.purge_holes and self.interval > 0
        self.linearized = producer.get("linearized") is True
        declared = producer.get("threads", [])  # else its op events introduce them
        if self.linearized and (not isinstance(declared, list)
                                or not all(type(t) is int for t in declared)):
            raise TraceError(source, 1, "expected the producer's threads as a list of integers: "
                                        '"threads": [1, 2, ...]')
        if cfg.get("clock") == "real" and not self.linearized:
            raise TraceError(source, 1, "a trace of real threads (config clock real) has no "
                                        "order the model can replay unless it is linearized: "
                                        'expected "linearized": true in the producer and lin '
                                        "numbers (reference_c/stress)")
        self.threads_declared = set(declared) if self.linearized else None
        self.tids_seen: set = set()
        self.line = 0
        self.event: Event | None = None
        self.replayed = 0
        self.st = EpochState()
        self.start_known = True  # st.start is exact (not after an epoch_skip)
        self.monotone = self.options.clock_monotone
        self.clock_lo: int | None = (self.options.clock_start_ms
                                     if cfg.get("clock") == "virtual" else None)
        self.threads: dict[int, ThreadState] = {}
        self.frames: dict[int | None, AdvanceFrame] = {}
        self.incremented: dict[int | None, int] = {}  # tid -> the epoch its advance made
        self.advanced_seq: set[int] = set()  # threads whose sweep advanced (file-order traces)
        self.sweeps: dict[int | None, Sweep] = {}
        # the last frame and the last sweep of each OS thread, to be used again
        self.spare_frames: dict[int | None, AdvanceFrame] = {}
        self.spare_sweeps: dict[int | None, Sweep] = {}
        self.last_deferred: dict[int, bool] = {}
        self.obligations: dict[int | None, Obligation] = {}
        self.pages: dict[int, Page] = {}
        self.gated: dict[int, bool] = {}  # page -> behind the stamp's gate (is_stamp_gated)
        # sweeps in one ms and epoch share one context, and its hold decisions (see decide)
        self.contexts: dict[tuple, tuple[SweepContext, dict]] = {}
        self.walked_capacity: dict[int, int] = {}
        # The free lists (the model's page.free, local_free, xthread_free) of the pages whose
        # lists the trace determines so far (see take_block and collect); in a linearized
        # trace the lin of the newest push on each page's xthread_free, and the pages pushed
        # on since the owner's last event on them.
        self.listed: set[int] = set()
        self.newest_push: dict[int, int] = {}
        self.unsettled: set[int] = set()
        self.pending_collect: set[int] = set()  # see settle_collect
        # a walk in progress: page -> the events the model's walk of it made, yet to be seen
        self.walks: dict[int, list[dict]] = {}
        self.model_runs: dict[tuple, tuple] = {}  # see run_model
        self.blocks_checked = 0
        # The scavenger's due times (check_park_due): where the clock of a sequential trace is
        # known exactly, and whether a sweep of the current scavenge op moved it.
        self.clock_exact = not self.linearized and cfg["clock"] == "virtual"
        self.pass_moved = False
        self.inside: set[tuple] = set()  # (page, capacity, k0, k1) whose units lie in blocks
        self.op_thread: int | None = None
        self.op_readings: list[int] = []  # the clock readings seen since the op began
        self.op_name: str | None = None
        self.untouched: dict[int, int] = {}
        # the handler of each kind of event, by its type (a KeyError here: a handler for a kind
        # the format does not have)
        self.handlers: dict[type, Callable[[Event, int | None], None]] = {
            EVENT_TYPES[name[3:]]: getattr(self, name) for name in dir(self)
            if name.startswith("on_")}
        self.steps = {PC_CAS: self.step_cas, PC_INCREMENT: self.step_increment,
                      PC_STORE: self.step_store, PC_WAIT: self.step_wait}
        self.count = 0  # events replayed
        self.next_progress = 1 << 20
        self.early: dict[int, tuple[int, Event]] = {}

    # -- helpers --------------------------------------------------------------------------

    def bad(self, line: int, msg: str) -> TraceError:
        return TraceError(self.source, line, msg)

    def thread(self, tid, line: int) -> ThreadState:
        """The state of a thread the trace has introduced (an op names it, or the header of a
        linearized trace lists it)."""
        t = self.threads.get(tid)
        if t is None:
            known = self.threads_declared if self.linearized else set()
            if type(tid) is not int or (tid not in known and tid != MAIN_TID):
                raise self.bad(line, f"an event for thread {tid!r}, which does not exist "
                                     f"(expected one the header lists or an op names)")
            t = self.threads[tid] = ThreadState(tid)
        return t

    def page(self, ev: Event, line: int) -> Page:
        page = self.pages.get(ev.page)
        if page is None:  # the reader has checked page_new; this is a retired id reused
            raise self.bad(line, f"an event for page {ev.page!r}, which does not exist")
        return page

    def clock(self, now, line: int, what: str) -> int:
        """A clock reading: never before the one before it, where the clock is monotone."""
        wrong = clock_reading_error(what, self.clock_lo, now, self.monotone)
        if wrong:
            raise self.bad(line, wrong)
        self.clock_lo = now
        return now

    def acting(self, tid) -> int | None:
        """The script thread an event is done by: the event's tid, else the current op's."""
        return tid if self.linearized else self.op_thread

    def require_owner(self, page: Page, tid, what: str) -> None:
        actor = self.acting(tid)
        if actor is not None and (page.abandoned or page.owner != actor):
            owner = "abandoned" if page.abandoned else f"owned by thread {page.owner}"
            raise Rejection(f"{what} on page {page.id} by thread {actor}, but the page is "
                            f"{owner}: only a page's owner allocates from it")

    def live(self, page: Page) -> Page:
        if page.retired:
            raise Rejection(f"page {page.id} went back to the arena (retire) before this event")
        return page

    # -- the script ---------------------------------------------------------------------------

    def on_op(self, ev: Event, tid) -> None:
        thread = ev.thread
        if thread is not None and type(thread) is not int:
            raise Rejection(f"an op of thread {thread!r}: threads are integers")
        self.op_thread, self.op_name = thread, ev.op
        self.op_readings = [] if self.clock_lo is None else [self.clock_lo]
        if ev.op in COLLECT_OPS:
            self.op_collects(thread)
        elif ev.op in LIST_OPS:
            self.listed.difference_update([pid for pid in self.listed
                                           if self.pages[pid].owner == thread])
        elif ev.op == "scavenger":  # its loop moves the virtual clock by what it finds due
            self.clock_exact = False
        elif ev.op == "scavenge":
            self.pass_moved = False
        if thread is not None and thread not in self.threads:
            self.threads[thread] = ThreadState(thread)  # an op introduces its thread
        if ev.op == "heap_delete" and thread is not None:
            # mi_heap_delete: the pages with live blocks move to the backing heap (thread 0)
            self.threads.setdefault(MAIN_TID, ThreadState(MAIN_TID))
            for page in self.pages.values():
                if page.owner == thread and not page.abandoned:
                    page.owner = MAIN_TID

    def op_collects(self, thread) -> None:
        """The `collect` and `walk` ops: mi_page_free_collect on each page of the thread's
        heap, after the op's event. In file order it is done before the next op, so now; in a
        linearized trace before the thread's next event, so at the page's next event, which
        is one of its own or comes after one (settle_collect). Pushes on the page before the
        op's event are in it; one between the op's event and the page's next event may or
        may not be: the page then leaves the check."""
        mine = [pid for pid in self.listed
                if self.pages[pid].owner == thread and not self.pages[pid].abandoned]
        if self.linearized:
            self.unsettled.difference_update(mine)
            self.pending_collect.update(mine)
        else:
            for pid in mine:
                mi_page_free_collect(self.pages[pid])

    def settle_collect(self, page: Page) -> None:
        """The collect a collect or walk op left pending on this page, at the page's next
        event (not a cross-thread push: on_free)."""
        if page.id in self.pending_collect:
            self.pending_collect.discard(page.id)
            if page.id in self.listed:
                mi_page_free_collect(page)

    def on_error(self, ev: Event, tid) -> None:
        pass  # a script error: the trace says so and ends

    def on_clock(self, ev: Event, tid) -> None:
        self.op_readings.append(self.clock(ev.now, self.line, "clock"))
        self.clock_exact = not self.linearized

    def on_scavenge(self, ev: Event, tid) -> None:
        """The due time a pass of the scavenger returned (mi_theap_sweep_parked: the ms until
        the next parked thread is due, null when none waits). Checked in sequential traces
        where the clock is known exactly and no sweep of the pass moved it (sweep_ms 0 or no
        sweep), so that every wait the pass took was taken at the present reading: then no
        waiting thread may be due, and the model's pass run now, which finds none due and
        sweeps nothing, returns the due time the trace must say."""
        if self.linearized or not self.clock_exact or self.pass_moved or self.interval <= 0:
            return
        now = self.clock_lo
        for t in self.threads.values():
            if is_park_waiting(t) and is_park_due(t, now, self.interval):
                raise Rejection(f"the scavenger's pass ends at {now} ms with thread {t.id} "
                                f"parked and due (its last park sweep ended at "
                                f"{t.holes_sweep_last} ms, the interval is {self.interval} "
                                f"ms), but it did not sweep it")
        view = types.SimpleNamespace(options=self.options, threads=self.threads,
                                     clock=types.SimpleNamespace(read=lambda: now))
        want = mi_theap_sweep_parked(view)
        if ev.due != want:
            raise Rejection(f"the scavenger's pass says the next park is due in {ev.due!r} ms; "
                            f"the model's pass at {now} ms says {want!r}")

    # -- driving ---------------------------------------------------------------------------------

    def replay(self, batches: Iterable[tuple[int, list[bytes], list]],
               progress: Callable[[int], None] | None = None) -> None:
        """Replay a trace's checked batches of typed events (purgecheck.formats.trace.Trace.batches)
        in order: file order, or `lin` order in a linearized trace. `self.replayed` counts the
        events. Raises Rejection, or TraceError for bad input."""
        if progress is not None:
            batches = self.reporting(batches, progress)
        try:
            if self.linearized:
                self.replay_in_lin_order(batches)
            else:
                self.replay_in_file_order(batches)
        finally:
            self.replayed = self.count

    def reporting(self, batches, progress: Callable[[int], None]):
        for batch in batches:
            yield batch
            if self.count >= self.next_progress:
                progress(self.count)
                self.next_progress = (self.count >> 20) + 1 << 20

    def replay_in_file_order(self, batches) -> None:
        handlers, obligations = self.handlers, self.obligations
        ev = first = line = None
        try:
            for first, _, evs in batches:
                for line, ev in enumerate(evs, first):
                    self.line = line
                    if obligations and None in obligations and type(ev) is not STAMP:
                        self.settle(None)
                    handlers[type(ev)](ev, None)
                self.count += len(evs)
        except (Rejection, TypeError, ValueError, KeyError, AttributeError):
            self.event = ev
            self.count += line - first  # the events of this batch before it
            raise

    def replay_in_lin_order(self, batches) -> None:
        """The hot loop of the validator, kept flat. Events come nearly in `lin` order (each
        thread writes its line right after taking its number): the few that come early wait
        in `self.early` for their turn. The numbers must be 0, 1, 2, ... with none missing or
        repeated; `expect`, the number whose turn it is, counts the events replayed."""
        handlers, obligations, seen, early = self.handlers, self.obligations, self.tids_seen, \
            self.early
        expect = self.count
        ev = None
        try:
            for first, _, evs in batches:
                for line, ev in enumerate(evs, first):
                    if ev.lin != expect:
                        self.hold_early(ev, line, expect)
                        continue
                    while True:  # this event, then those that waited for it
                        self.line = line
                        tid = ev.tid
                        if tid not in seen:
                            self.admit(tid, ev, line)
                        if obligations and tid in obligations and type(ev) is not STAMP:
                            self.settle(tid)
                        handlers[type(ev)](ev, tid)
                        expect += 1
                        if expect not in early:
                            break
                        line, ev = early.pop(expect)
                self.count = expect
        except (Rejection, TypeError, ValueError, KeyError, AttributeError):
            self.event = ev
            raise
        finally:
            self.count = expect
        if early:
            raise TraceError(self.source, 0, f"the trace lacks lin {expect} (it has "
                                             f"{len(early)} events after it): expected every "
                                             f"number from 0")

    def hold_early(self, ev: Event, line: int, expect: int) -> None:
        """An event before its turn waits for it (or is bad input)."""
        lin = ev.lin
        if lin is None or ev.tid is None:
            raise TraceError(self.source, line, f"expected integer lin and tid fields: the "
                                                f"header says the trace is linearized, got lin "
                                                f"{lin!r}, tid {ev.tid!r}")
        if lin < expect or lin in self.early:
            raise TraceError(self.source, line, f"lin {lin} appears twice: expected each "
                                                f"number once")
        self.early[lin] = (line, ev)

    def admit(self, tid, ev: Event, line: int) -> None:
        """The first event of an OS thread: one the header lists, main, the scavenger, or a
        script thread whose op this is."""
        if self.linearized and tid not in self.threads_declared \
                and tid not in (MAIN_TID, SCAVENGER_TID) \
                and not (type(ev) is OP and ev.thread == tid):
            raise self.bad(line, f"tid {tid!r} is not a thread of this trace: expected one "
                                 f"of {sorted(self.threads_declared)}, {MAIN_TID} (main) or "
                                 f"{SCAVENGER_TID} (scavenger)")
        self.tids_seen.add(tid)

    def finish(self) -> None:
        self.event = None
        for tid in list(self.obligations):
            self.settle(tid)
        open_ = [f"thread {s.thread}" for s in self.sweeps.values()]
        if open_ and self.linearized:
            raise Rejection(f"the trace ends inside a sweep ({', '.join(open_)})")

    # -- what the rejection shows ---------------------------------------------------------------

    def describe_state(self, ev: Event | None) -> list[str]:
        st = self.st
        out = [f"epoch {st.epoch}, start {show_start(st.start)}"
               f"{'' if self.start_known else ' (at least)'}, clock "
               f"{'unknown' if self.clock_lo is None else f'>= {self.clock_lo} ms'}, interval "
               f"{self.interval} ms, variant {self.options.variant}"]
        for tid, f in sorted(self.frames.items(), key=lambda kv: str(kv[0])):
            if not f.done:
                read = "" if f.start == MOVING or f.pc == PC_READ_CLOCK else f", read {f.now}"
                claimed = ", claimed" if f.pc in (PC_INCREMENT, PC_READ_CLOCK2, PC_STORE) else ""
                out.append(f"tid {tid}: advancing, at {f.pc} (loaded {show_start(f.start)}"
                           f"{read}{claimed})")
        for tid, s in sorted(self.sweeps.items(), key=lambda kv: str(kv[0])):
            held = [p for p, h in s.decided.items() if h]
            out.append(f"tid {tid}: sweeping thread {s.thread}'s heap in epoch {s.ctx.epoch}"
                       f"{' (handoff)' if s.ctx.in_handoff else ''}, holding pages {held}")
        for t in sorted(self.threads.values(), key=lambda t: t.id):
            if t.park_state != RUNNING or t.holes_sweep_seq:
                out.append(f"thread {t.id}: {t.park_state}, park_swept {t.park_swept}, sweeps "
                           f"{t.holes_sweep_seq}, last in epoch {t.holes_sweep_epoch}, "
                           f"deferred {t.holes_sweep_deferred}")
        pid = ev.page if ev else None
        if pid in self.pages:
            p = self.pages[pid]
            out.append(f"page {pid}: {p.geom.kind.value}, blocks of {p.block_size} B, "
                       f"{p.capacity}/{p.reserved} formed, owner "
                       f"{'abandoned' if p.abandoned else p.owner}"
                       f"{', retired' if p.retired else ''}, swept_state "
                       f"{describe_swept_state(p.swept_state)}")
        return out

    def preview(self, f: AdvanceFrame) -> str:
        """The next step of an advance, taken by the model on copies: what it would do."""
        st, g = EpochState(self.st.start, self.st.epoch), dataclasses.replace(f)
        now = self.clock_lo or 0
        advance_step(st, g, now, self.interval)
        if f.pc in (PC_READ_CLOCK, PC_READ_CLOCK2):
            return f"{f.pc} (any reading >= {self.clock_lo}; at {now} it goes on to {g.pc})"
        return {PC_CAS: f"cas -> {'won' if g.pc == PC_INCREMENT else 'lost'}",
                PC_INCREMENT: f"increment -> epoch {st.epoch}",
                PC_STORE: f"store_start {show_start(st.start)}",
                PC_WAIT: f"wait_moving -> {'done' if g.done else 'spin (start is MOVING)'}",
                }.get(f.pc, f.pc)

    def enabled(self, ev: Event | None) -> list[str]:
        """What the model could do next on the OS thread of the rejected event."""
        tid = ev.tid if (ev and self.linearized) else None
        who = f"tid {tid}" if self.linearized else "the trace"
        f = self.frames.get(tid)
        if f is not None and not f.done:
            return [f"{who}: advance_step {self.preview(f)}"]
        out = []
        ob = self.obligations.get(tid)
        if ob is not None:
            out.append(f"{who}: stamp page {ob[0]} (epoch read {ob[1]}..{self.st.epoch})")
        sweep = self.sweeps.get(tid)
        if sweep is not None:
            out.append(f"{who}: sweep_page/walk/discard on pages of thread {sweep.thread} or "
                       f"abandoned ones, held as the hold rule says; idle (ends the sweep)")
        else:
            if self.linearized and self.advancing:
                out.append(f"{who}: advance_step load_start (a sweep begins; start is "
                           f"{show_start(self.st.start)})")
            if tid == SCAVENGER_TID:
                waiting = [f"thread {t.id} from {t.holes_sweep_last + self.interval} ms"
                           for t in self.threads.values() if is_park_waiting(t)]
                out.append(f"{who}: the sweep of a parked thread whose park is not done, once "
                           f"it is due ({', '.join(waiting) or 'none waits'})")
            else:
                out.append(f"{who}: malloc/free/extend on the pages its thread owns, "
                           f"park/unpark")
        return out


def validate_stream(f: IO[bytes], source: str, progress: Callable[[int], None] | None = None
                    ) -> Verdict:
    """Validate one trace from a binary file. Raises TraceError for bad input."""
    trace = read_trace(f, source)
    v = Validator(trace.header, source)
    try:
        v.replay(trace.batches(), progress)
        v.finish()
    except Rejection as r:
        ev = v.event
        return Verdict(source, False, v.replayed, v.line, event_dict(ev) if ev else None, r.why,
                       v.describe_state(ev), v.enabled(ev))
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # a field of a wrong kind
        kind = kind_of(v.event) if v.event else ""
        raise TraceError(source, v.line, f"a field of this {kind} event has a value of the "
                                         f"wrong kind ({type(e).__name__}: {e})") from None
    return Verdict(source, True, v.replayed, stats={"threads": len(v.threads), "pages": len(v.pages),
                                           "epochs": v.st.epoch,
                                           "blocks_checked": v.blocks_checked})


def validate_file(path: str, progress: Callable[[int], None] | None = None) -> Verdict:
    """Validate a trace file. Raises TraceError for bad input, OSError if unreadable."""
    with open(path, "rb") as f:
        return validate_stream(f, path, progress)


def format_verdict(v: Verdict) -> str:
    import orjson
    if v.accepted:
        return f"accepted: {v.events:,} events of {v.source} replayed on the model"
    shown = orjson.dumps(v.event).decode() if v.event else "(the end of the trace)"
    out = [f"{v.source}:{v.line}: rejected: event {v.events} is not explained by the model",
           f"  event:   {shown}", f"  why:     {v.why}", "  the model's state before it:"]
    out += [f"    {s}" for s in v.state]
    out.append("  enabled there:")
    out += [f"    {s}" for s in v.enabled]
    return "\n".join(out)


def verdict_doc(v: Verdict) -> dict:
    return dataclasses.asdict(v)
