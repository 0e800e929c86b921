"""The replay of pages and blocks (model/page.py, alloc.py, holes.py, stamp.py): page_new,
extend, malloc, free and the other ops on blocks, the walk, unpurge and the unformed tail,
and the stamp a malloc behind the gate owes. A part of Validator (replay.py)."""

from __future__ import annotations

from typing import Any, Callable

from model.geometry import mi_page_can_purge_holes
from model.page import (EPOCH_MASK, MI_PAGE_SWEPT_NONE, MI_PAGE_SWEPT_STAMP_TAG, Page,
                        encode_stamp, encode_walked, is_stamp, stamp_epoch)
from model.alloc import mi_page_free_collect
from model.holes import mi_page_purge_holes_walk, mi_page_unpurge_run
from model.stamp import is_stamp_gated, read_epoch_relaxed
from model.thread import ThreadState
from model.variants import CLOCK
from purgecheck.validate.common import (Event, MAIN_TID, Rejection, WALK, describe_blocks,
                                        describe_swept_state)
from purgecheck.validate.sweeps import Sweep


# A malloc on a page behind the stamp's gate: the model then stores the epoch it read, unless
# the page carries that stamp already (model/world.py after_malloc). (page, epoch when the
# allocation took its block: the read is no older, line)
Obligation = tuple[int, int, int]


class PageReplay:
    """The handlers of page and block events, and what they follow of the page's lists."""

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
            page.on_lists.update(range(want[0], want[0] + want[1]))
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
                page.on_lists.discard(i)
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
        page.on_lists.discard(ev.block)
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
                page.on_lists.add(i)
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
                page.on_lists.add(i)
                self.unsettled.discard(page.id)
            else:  # mi_free_xthread: pushed on xthread_free, under lin_lock with this event
                page.xthread_free.insert(0, i)
                page.on_lists.add(i)
                if self.linearized:  # else nothing races: the trace's order is the order
                    self.newest_push[page.id] = ev.lin
                    self.unsettled.add(page.id)

    def on_double_free(self, ev: Event, tid) -> None:
        self.page(ev, self.line)

    def on_realloc(self, ev: Event, tid) -> None:
        self.block(self.live(self.page(ev, self.line)), ev)

    def on_aligned(self, ev: Event, tid) -> None:
        """The address a malloc_aligned hands out (after its malloc): inside the block it
        took. Where in the block is the op's alignment's business, which the trace does not
        carry: `diff` compares the offset with the model's."""
        page = self.live(self.page(ev, self.line))
        self.block(page, ev)
        if type(ev.offset) is not int or not 0 <= ev.offset < page.block_size:
            raise Rejection(f"an aligned address {ev.offset!r} bytes into block {ev.block} of "
                            f"page {page.id}, whose blocks are {page.block_size} bytes")

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
        page.relist()
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
