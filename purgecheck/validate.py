"""Trace validation: a trace is accepted when the model can reproduce it, event by event.

A run on real threads has no order the model can predict, so it is checked the way TLA+
trace validation checks an implementation: each event is replayed as a transition of the
model (model/epoch.py's atomic steps of the advance, the stamp, the hold, the park handoff),
with the nondeterminism (which sweeper won the CAS, what the clock read, which epoch a read
returned) resolved by what the trace says; the first event that no enabled transition
explains is the rejection. Linearized traces (the concurrent C runs, reference_c/stress.c)
are replayed in the order of their `lin` numbers; other traces in file order, with each
advance taken as one step. docs/validation.md says what is checked and what is not.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable

from model.epoch import (MOVING, PC_CAS, PC_COMPARE, PC_DONE, PC_INCREMENT, PC_LOAD,
                         PC_READ_CLOCK, PC_READ_CLOCK2, PC_STORE, PC_WAIT, STEPS, AdvanceFrame,
                         EpochState, advance_step, begin_advance, compute_interval,
                         is_epoch_due, mi_holes_epoch_advance)
from model.geometry import mi_page_can_purge_holes
from model.page import (EPOCH_MASK, MI_PAGE_SWEPT_NONE, MI_PAGE_SWEPT_STAMP_TAG, Page,
                        encode_stamp, encode_walked, is_stamp, stamp_epoch)
from model.alloc import mi_page_free_collect
from model.holes import mi_page_purge_holes_walk, mi_page_unpurge_run
from model.park import (claim_parked_thread, end_park_sweep, is_park_due, is_park_waiting,
                        mi_theap_sweep_parked)
from model.stamp import is_stamp_gated, read_epoch_relaxed
from model.thread import PARK_SWEPT_DONE, PARK_SWEPT_NONE, PARKED, RUNNING, SWEEPING, ThreadState
from model.variants import CLOCK, TWO_UNTOUCHED, SweepContext, is_page_held
from model.world import World
from purgecheck.trace import (EVENT_TYPES, TraceError, event_dict, kind_of, options_of,
                              read_trace)

import model.epoch as epoch_module  # spin_max is read at run time (engines may lower it)

STEP_PCS = (PC_LOAD, PC_READ_CLOCK, PC_CAS, PC_INCREMENT, PC_READ_CLOCK2, PC_STORE, PC_WAIT)
OUTCOMES = ("off", "all-free", "held", "ineligible", "unchanged", "walked", "incomplete")
_OUTCOMES = frozenset(OUTCOMES)
HANDOFF_OPS = frozenset({"scavenge", "scavenger"})
# Ops that collect their heap's pages with no event of their own (runner.py; `walk` then walks
# those that can purge holes, with events), and one that drops its heap's lists unseen.
COLLECT_OPS = frozenset({"collect", "walk"})
LIST_OPS = frozenset({"heap_destroy"})
SCAVENGER_TID = -1  # the label of the scavenger thread in linearized traces (linearize.c)
# The header's config as the replay reads it (purgecheck/trace.py CONFIG_KEYS).
CONFIG_TYPES = {"page_kinds": dict, "os_page_size": int, "arch": int, "first_block_offset": int,
                "interval_ms": int, "purge_holes": bool, "full_every": int, "purge_delay": int,
                "variant": str, "stale_epochs": int, "sweep_ms": int, "clock": str,
                "clock_monotone": bool, "clock_start_ms": int, "observe": str}
TYPE_WORDS = {dict: "an object", int: "an integer", bool: "true or false", str: "a string"}
MAIN_TID = 0
Event = Any  # a typed event: an instance of one of purgecheck.trace.EVENT_TYPES
OP, STAMP, WALK = EVENT_TYPES["op"], EVENT_TYPES["stamp"], EVENT_TYPES["walk"]


class Rejection(Exception):
    """The first event no transition of the model explains."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


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


# A malloc on a page behind the stamp's gate: the model then stores the epoch it read, unless
# the page carries that stamp already (model/world.py after_malloc). (page, epoch when the
# allocation took its block: the read is no older, line)
Obligation = tuple[int, int, int]


class Validator:
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
        if type(now) is not int:
            raise self.bad(line, f"{what}: expected an integer clock reading in ms, got {now!r}")
        if self.monotone and self.clock_lo is not None and now < self.clock_lo:
            raise self.bad(line, f"{what}: the clock went back from {self.clock_lo} to {now} ms, "
                                 f"but the header's config has clock_monotone true")
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
        self.clock(ev.now, self.line, "clock")
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

    # -- pages and blocks -----------------------------------------------------------------------

    def on_page_new(self, ev: Event, tid) -> None:
        pid = ev.page
        if pid in self.pages:
            raise self.bad(self.line, f"page {pid} is introduced twice (page_new)")
        bs = ev.block_size
        if type(bs) is not int or bs <= 0:
            raise self.bad(self.line, f"page_new: expected a positive block_size, got {bs!r}")
        owner = self.acting(tid)
        self.world.arena.next_id = pid  # the trace names the page; the model forms it
        page = self.world.new_page(self.world.heap(owner if owner is not None else MAIN_TID), bs)
        self.world.log.clear()
        page.log = []
        self.pages[pid] = page
        self.gated[pid] = is_stamp_gated(page)
        self.listed.add(pid)
        self.newest_push[pid] = -1
        self.unsettled.discard(pid)
        self.pending_collect.discard(pid)
        self.walks.pop(pid, None)
        want = (page.geom.kind.value, page.reserved, page.unit)
        got = (ev.page_kind, ev.reserved, ev.unit)
        if want != got:
            raise Rejection(f"page {pid} of blocks of {bs} B: the model forms a {want[0]} page "
                            f"of {want[1]} blocks with a purge unit of {want[2]} B, the trace "
                            f"a {got[0]} page of {got[1]} blocks and a unit of {got[2]} B")

    def on_extend(self, ev: Event, tid) -> None:
        from model.alloc import compute_extend_count
        page = self.live(self.page(ev, self.line))
        self.require_owner(page, tid, "extend")
        want = (page.capacity, compute_extend_count(page))
        if (ev.first, ev.count) != want:
            raise Rejection(f"extend of page {page.id}: the model forms {want[1]} blocks from "
                            f"block {want[0]}, the trace {ev.count!r} from {ev.first!r}")
        if self.pending_collect:
            self.settle_collect(page)
        if page.id in self.listed:
            # mi_page_malloc extends only when the free list is empty after a collect and
            # no unit is purged (it would bring those back first)
            self.collect(page, page.id in self.unsettled)
            if page.id in self.listed and page.free:
                raise Rejection(f"page {page.id} forms new blocks, but the model's free list "
                                f"holds {describe_blocks(page.free)}: it takes one of those")
            if page.id in self.listed and page.purged:
                raise Rejection(f"page {page.id} forms new blocks, but units "
                                f"{page.purged_units()[:8]} are purged: the model unpurges "
                                f"the lowest run of them first")
            self.unsettled.discard(page.id)
            page.free.extend(range(want[0], want[0] + want[1]))
        page.capacity += want[1]

    def block(self, page: Page, ev: Event) -> int:
        i = ev.block
        if type(i) is not int or not 0 <= i < page.capacity:
            raise Rejection(f"block {i!r} of page {page.id}: the page has formed "
                            f"{page.capacity} blocks")
        return i

    def on_malloc(self, ev: Event, tid) -> None:
        page = self.pages.get(ev.page)
        i = ev.block
        actor = tid if self.linearized else self.op_thread
        if page is None or page.retired or type(i) is not int or not 0 <= i < page.capacity \
                or (actor is not None and (page.owner != actor or page.abandoned)):
            page = self.live(self.page(ev, self.line))  # the slow way, to say what is wrong
            self.require_owner(page, tid, "malloc")
            self.block(page, ev)
        if self.pending_collect:
            self.settle_collect(page)
        if page.id in self.listed:
            free = page.free
            if ev.src == "free" and free and free[0] == i:  # the common case, checked
                del free[0]
                self.blocks_checked += 1
                if self.unsettled:
                    self.unsettled.discard(page.id)
            else:
                self.take_block(page, ev)
        if self.gated[page.id]:
            self.obligations[tid] = (page.id, self.st.epoch, self.line)

    def collect(self, page: Page, racing: bool) -> None:
        """mi_page_free_collect (the model's): xthread_free before local_free, appended to
        free. The exchange has no event: it comes after the collecting thread's last event
        on the page (the owner's; a sweep's sweep_begin). `racing`: a push came after that
        event, so it may or may not have been taken: the lists are no longer known."""
        if racing and page.xthread_free:
            self.listed.discard(page.id)
            return
        mi_page_free_collect(page)

    def take_block(self, page: Page, ev: Event) -> None:
        """The block mi_page_malloc takes (model/alloc.py): the head of `free`; when `free`
        is empty, after a collect; when the collect found nothing, the first block the unpurge
        or the extend before this event put there (follow_unpurge, on_extend)."""
        pid, src = page.id, ev.src
        if src == "collect":
            if page.free:
                raise Rejection(f"a malloc from page {page.id} collects its free lists, but the "
                                f"model's free list holds {describe_blocks(page.free)}")
            self.collect(page, pid in self.unsettled)
            if pid not in self.listed:
                return
        elif src != "free" and src != "extend" and src != "unpurge":
            raise self.bad(self.line, f"malloc: unknown src {src!r}; expected free, collect, "
                                      f"unpurge or extend")
        if not page.free or page.free[0] != ev.block:
            raise Rejection(f"a malloc from page {page.id} takes block {ev.block!r} ({src}); the "
                            f"model takes the head of its free list: "
                            f"{describe_blocks(page.free)}")
        del page.free[0]
        self.unsettled.discard(pid)  # the owner's event: every push so far came before it
        self.blocks_checked += 1

    def on_free(self, ev: Event, tid) -> None:
        page = self.pages.get(ev.page)
        i = ev.block
        actor = tid if self.linearized else self.op_thread
        if page is not None and not page.retired and type(i) is int and 0 <= i < page.capacity \
                and ev.thread == "owner" and (actor is None or (page.owner == actor
                                                                  and not page.abandoned)):
            if self.pending_collect:
                self.settle_collect(page)
            if page.id in self.listed:  # mi_free_local: pushed on local_free
                page.local_free.insert(0, i)
                if self.unsettled:
                    self.unsettled.discard(page.id)
            return  # the owner's free (the common case), all checked
        page = self.live(self.page(ev, self.line))
        self.block(page, ev)
        if ev.thread == "owner":
            self.require_owner(page, tid, "a free by the owner")
        elif actor is not None and actor == page.owner and not page.abandoned:
            raise Rejection(f"thread {actor} frees block {ev.block} of its own page "
                            f"{page.id} as another thread would (xthread_free)")
        if page.id in self.pending_collect and ev.thread != "owner":
            self.pending_collect.discard(page.id)  # a push racing with the op's collect
            self.listed.discard(page.id)
        elif self.pending_collect:
            self.settle_collect(page)
        if page.id in self.listed:
            if ev.thread == "owner":
                page.local_free.insert(0, i)
                self.unsettled.discard(page.id)
            else:  # mi_free_xthread: pushed on xthread_free, under lin_lock with this event
                page.xthread_free.insert(0, i)
                if self.linearized:  # else nothing races: the trace's order is the order
                    self.newest_push[page.id] = ev.lin
                    self.unsettled.add(page.id)

    def on_double_free(self, ev: Event, tid) -> None:
        self.page(ev, self.line)

    def on_realloc(self, ev: Event, tid) -> None:
        self.block(self.live(self.page(ev, self.line)), ev)

    def on_retire(self, ev: Event, tid) -> None:
        self.live(self.page(ev, self.line)).retired = True
        self.listed.discard(ev.page)

    def on_abandon(self, ev: Event, tid) -> None:
        page = self.live(self.page(ev, self.line))
        page.abandoned, page.owner = True, -1
        self.listed.discard(page.id)  # its next owner collects at a time the trace does not show

    def on_reclaim(self, ev: Event, tid) -> None:
        page = self.live(self.page(ev, self.line))
        if not page.abandoned:
            raise Rejection(f"reclaim of page {page.id}, which is not abandoned")
        self.thread(ev.thread, self.line)
        page.abandoned, page.owner = False, ev.thread

    # -- the walk, unpurge and the unformed tail ---------------------------------------------------

    def in_sweep(self, page: Page, tid) -> Sweep | None:
        """The sweep this page event belongs to, after the hold decision has let it in."""
        sweep = self.sweeps.get(tid)
        if sweep is None:
            return None  # a `walk` op: no hold
        if self.decide(sweep, page):
            raise Rejection(f"the sweep of thread {sweep.thread} touches page {page.id}, which "
                            f"the model holds: {self.describe_hold(page, sweep)}")
        return sweep

    def run_model(self, step: Callable[[Page], Any], page: Page) -> list[dict]:
        """The model's walk or unpurge of a page: the events it makes, and the free list
        and purged units it leaves on the page. They depend on nothing but those two and the
        page's shape (model/holes.py), so a run from the same lists is taken again (the
        residency and the discard accounting it would also change the replay does not
        keep)."""
        key = (step, page.block_size, page.capacity, tuple(page.free), page.purged)
        known = self.model_runs.get(key)
        if known is None:
            page.log = []
            step(page)
            known = (page.log, tuple(page.free), page.purged)
            page.log = []
            if len(self.model_runs) > 4096:
                self.model_runs.clear()
            self.model_runs[key] = known
        events, free, page.purged = known
        page.free = list(free)
        return list(events)

    def follow_walk(self, page: Page, ev: Event) -> None:
        """A discard or the walk event of a listed page: the model's walk of the page
        (mi_page_purge_holes_walk, run at the first of them on the lists the replay has)
        discards these runs, drops these blocks and ends so. A discard that failed in the
        trace (ok false) the model cannot foresee: the page leaves the check."""
        pid = page.id
        expected = self.walks.get(pid)
        if expected is None:
            before = page.free[:]
            expected = self.walks[pid] = self.run_model(mi_page_purge_holes_walk, page)
            expected.append({"ev": "before", "free": before})  # for the report
        want = expected.pop(0) if len(expected) > 1 else {}
        if type(ev) is WALK:
            got = {"ev": "walk", "complete": ev.complete, "runs": ev.runs, "dropped": ev.dropped}
            what = f"discards runs {ev.runs!r} and drops {ev.dropped!r} blocks"
        elif ev.ok is not True:
            self.listed.discard(pid)
            del self.walks[pid]
            return
        else:
            got = {"ev": "discard", "k0": ev.k0, "k1": ev.k1}
            what = f"discards units {ev.k0!r}..{ev.k1!r}"
        if any(want.get(k) != v for k, v in got.items()):
            walk = next((e for e in expected if e["ev"] == "walk"), want)
            raise Rejection(f"the walk of page {pid} {what}; the model's walk of its free "
                            f"blocks {describe_blocks(expected[-1]['free'])} discards runs "
                            f"{walk.get('runs')} and drops {walk.get('dropped')} blocks")
        if type(ev) is WALK:
            del self.walks[pid]

    def on_discard(self, ev: Event, tid) -> None:
        page = self.live(self.page(ev, self.line))
        self.in_sweep(page, tid)
        if not mi_page_can_purge_holes(page.geom):
            raise Rejection(f"a discard on page {page.id}, which cannot purge holes "
                            f"({page.geom.kind.value}, {page.reserved} blocks)")
        k0, k1 = ev.k0, ev.k1
        if type(k0) is not int or type(k1) is not int or not 0 <= k0 < k1 <= page.units.bits:
            raise Rejection(f"a discard of units {k0!r}..{k1!r} of page {page.id}, which has "
                            f"{page.units.bits} units")
        key = (page.id, page.capacity, k0, k1)  # a page's geometry never changes
        if key not in self.inside:
            for k in range(k0, k1):
                if not page.units.is_unit_inside_blocks(k, page.capacity):
                    raise Rejection(f"unit {k} of page {page.id} is discarded but does not lie "
                                    f"wholly inside its {page.capacity} formed blocks")
            if len(self.inside) > 4096:
                self.inside.clear()
            self.inside.add(key)
        if self.pending_collect:
            self.settle_collect(page)
        if page.id in self.listed:
            self.follow_walk(page, ev)

    def on_walk(self, ev: Event, tid) -> None:
        page = self.live(self.page(ev, self.line))
        sweep = self.in_sweep(page, tid)
        if sweep is not None:
            sweep.walked.add(page.id)
        if self.pending_collect:
            self.settle_collect(page)
        if page.id in self.listed:
            self.follow_walk(page, ev)
        if ev.complete is True:  # mark_walked: (capacity, used) replaces a stamp
            page.swept_state = encode_walked(page.capacity, 0)
            self.walked_capacity[page.id] = page.capacity

    def on_discard_tail(self, ev: Event, tid) -> None:
        self.in_sweep(self.live(self.page(ev, self.line)), tid)

    def on_reuse_tail(self, ev: Event, tid) -> None:
        self.live(self.page(ev, self.line))

    def on_unpurge(self, ev: Event, tid) -> None:
        page = self.live(self.page(ev, self.line))
        page.swept_state = MI_PAGE_SWEPT_NONE
        if self.pending_collect:
            self.settle_collect(page)
        if page.id in self.listed:
            self.follow_unpurge(page, ev)

    def follow_unpurge(self, page: Page, ev: Event) -> None:
        """The unpurge of a malloc (the only one outside a walk, whose failed discards end
        the check): mi_page_malloc collects, finds the free list still empty, and brings
        back the lowest run of purged units (mi_page_unpurge_run): these units, so many
        blocks, pushed on the free list for the malloc that follows."""
        pid = page.id
        self.collect(page, pid in self.unsettled)
        if pid not in self.listed:
            return
        if page.free:
            raise Rejection(f"a malloc from page {pid} unpurges units, but the model's free "
                            f"list holds {describe_blocks(page.free)}")
        events = self.run_model(mi_page_unpurge_run, page)
        if not events:
            raise Rejection(f"a malloc from page {pid} unpurges units {ev.k0!r}..{ev.k1!r}, "
                            f"but the model's page has no purged unit")
        want = events[0]
        if (want["k0"], want["k1"], want["blocks"]) != (ev.k0, ev.k1, ev.blocks):
            raise Rejection(f"a malloc from page {pid} unpurges units {ev.k0!r}..{ev.k1!r} "
                            f"({ev.blocks!r} blocks); the model's lowest purged run is "
                            f"{want['k0']}..{want['k1']} ({want['blocks']} blocks)")
        self.unsettled.discard(pid)

    def on_unpurge_all(self, ev: Event, tid) -> None:
        self.live(self.page(ev, self.line)).swept_state = MI_PAGE_SWEPT_NONE
        self.listed.discard(ev.page)

    # -- the stamp ------------------------------------------------------------------------------

    def stamp_range(self, ob: Obligation, t: ThreadState) -> tuple[int, int]:
        """The epochs the stamp's relaxed read may return: not older than `stale_epochs`
        before the epoch at the allocation, nor than one this thread has seen; not newer than
        the current one."""
        return read_epoch_relaxed(ob[1], t.epoch_seen, self.options.stale_epochs), self.st.epoch

    def on_stamp(self, ev: Event, tid) -> None:
        ob = self.obligations.pop(tid, None)
        page = self.live(self.page(ev, self.line))
        if ob is None or ob[0] != page.id:
            raise Rejection(f"a stamp of page {page.id} with no allocation from it just before "
                            f"(the allocating side stamps after taking a block)")
        value = ev.epoch
        if type(value) is not int:
            raise self.bad(self.line, f"stamp: expected an integer epoch, got {value!r}")
        t = self.thread(self.acting(tid), self.line) if self.acting(tid) is not None else None
        if self.options.variant == CLOCK:
            self.clock(value, self.line, "stamp (a clock reading in the clock design)")
        elif t is not None:
            lo, hi = self.stamp_range(ob, t)
            if self.linearized and not self.options.stale_epochs:
                lo = hi  # read under lin_lock with this event: the epoch of this moment
            if not lo <= value <= hi:
                raise Rejection(f"page {page.id} is stamped with epoch {value}, but the read "
                                f"of the epoch returns {lo}..{hi} here (the epoch is {hi}, "
                                f"stale_epochs {self.options.stale_epochs}, thread {t.id} has "
                                f"seen {t.epoch_seen})")
            t.epoch_seen = value
        stamp = encode_stamp(value)
        if page.swept_state == stamp:
            raise Rejection(f"page {page.id} already carries the stamp of epoch {value}: the "
                            f"model writes a stamp only when it differs")
        page.swept_state = stamp

    def settle(self, tid) -> None:
        """The allocation before this event wrote no stamp: the model agrees only if the
        page carries the stamp of an epoch the read could return."""
        ob = self.obligations.pop(tid)
        page = self.pages[ob[0]]
        if page.swept_state == MI_PAGE_SWEPT_STAMP_TAG | (self.st.epoch & EPOCH_MASK):
            return  # it carries the current epoch's stamp (the common case)
        if self.options.variant == CLOCK and is_stamp(page.swept_state):
            return
        actor = self.acting(tid)
        if actor is None:
            return
        lo, hi = self.stamp_range(ob, self.thread(actor, self.line))
        if is_stamp(page.swept_state):  # is there an epoch in lo..hi with these 32 bits?
            if lo + ((stamp_epoch(page.swept_state) - lo) & EPOCH_MASK) <= hi:
                return
        raise Rejection(f"the allocation from page {page.id} at line {ob[2]} wrote no stamp, "
                        f"but the page carries {describe_swept_state(page.swept_state)} and "
                        f"the model stamps it with the epoch it reads ({lo}..{hi})")

    # -- the advance, one atomic step at a time (model/epoch.py) -----------------------------------

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

    def on_epoch_skip(self, ev: Event, tid) -> None:
        e = ev.epoch
        if type(e) is not int or e < self.st.epoch:
            raise Rejection(f"epoch_skip to epoch {e!r}, behind the current {self.st.epoch}")
        self.st.epoch = e
        self.st.start = self.clock_lo if self.clock_lo is not None else self.st.start
        self.start_known = False  # it began "now", a reading the trace does not show

    # -- the sweeps ------------------------------------------------------------------------------

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
        if outcome not in _OUTCOMES:
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

    # -- driving ---------------------------------------------------------------------------------

    def replay(self, batches: Iterable[tuple[int, list[bytes], list]],
               progress: Callable[[int], None] | None = None) -> None:
        """Replay a trace's checked batches of typed events (purgecheck.trace.Trace.batches)
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
            out.append(f"{who}: malloc/free/extend on the pages its thread owns, park/unpark")
        return out


def show_start(start) -> str:
    return "MOVING" if start == MOVING else f"{start!r}"


def describe_blocks(blocks: list[int]) -> str:
    shown = ", ".join(map(str, blocks[:8]))
    return f"[{shown}{', ...' if len(blocks) > 8 else ''}]" if blocks else "nothing"


def describe_swept_state(state) -> str:
    if state == MI_PAGE_SWEPT_NONE:
        return "NONE"
    if type(state) is not int:
        return repr(state)
    if is_stamp(state):
        return f"the stamp of epoch {stamp_epoch(state)}"
    return f"walked(capacity={state >> 32})"


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
