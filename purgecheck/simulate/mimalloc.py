"""A workload on the mimalloc model under one design: what the purge rule costs.

The program's calls go to the model's own rules (model.heap mi_heap_malloc / mi_free /
mi_realloc, model.drivers mi_on_thread_idle, model.park for the park handoff and its
scavenger); the cost is read off the model's memory (model.memory: per OS page, as mincore
reports it), never measured. Time is virtual: the workload's timestamps set the model's
clock, and the idle behaviour of the workload (workloads.IDLE_BEHAVIOURS) decides who sweeps
when. Seed 000 (2): "a busy thread puts each new epoch in its pages within the interval and
keeps its buffers for good. After the last allocation the free space goes back between one
and two intervals later, where something sweeps that often."

Outside the seed, and the same for every design: a page whose blocks are all free goes back
to the arena (mi_page_retire), and the arena gives its memory back `purge_delay` ms later
(mimalloc's ordinary purge, not hole purging; counted as `arena_purges`, apart from the
discards of the rule under review). With `arena_reuse` (Options) the arena hands a retired
page's addresses to the next page of that size, and what its purge dropped faults in again
there (counted as refaults: the faults of the `before` design); without it (the default)
memory a new page takes is never counted as a refault.

The scavenger is a thread of its own (seed 000 (2): "the scavenger for the parked ones"): a
park wakes it, and with `scavenger_late_ms` it comes a random time later (exponential, that
mean: a woken thread on a busy machine), by when the thread may have unparked; it sweeps
only the threads that are still parked. With `scavenger_reach` instead, a park is swept at
once with that probability and otherwise not at all (the scavenger came after the thread
left): the fraction of parks the real scavenger reaches, which `purgecheck measure` counts
(its passes per turn of the loop, purgecheck/measure/turns.py); a loop whose turns do not
block (setImmediate) is parked for microseconds and is seldom reached.

With `scavenger_coalesced` (and `scavenger_late_ms`), the wake is the fork's own
(scavenger.c, `_mi_scavenger_wake` and the scavenger's loop): a park sets the scavenger's
wake flag and wakes it only when the flag was clear; a pass clears it as it begins, so the
parks that come while a pass is pending are answered by that one pass, and the pass sweeps
only a thread that is still parked when it runs (theap.c, `_mi_theap_sweep_parked` claims
with a CAS from PARKED): a pass after the owner has left its park sweeps nothing.

With `sweeper_every_ms`, another thread of the process sweeps inline (mi_on_thread_idle:
its own empty heap and the abandoned pages) every so many ms, at a phase of its own, a fifth
of that at random later each time: Bun's worker threads (the real strace shows JITWorker's
discards). Its sweeps end epochs too (seed 000 (2): "Any number of threads sweep at the same
time"), so the epochs no longer fall on the sweeps of the event loop's thread.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import replace
from fractions import Fraction
from typing import Iterable, Iterator

from model.drivers import mi_on_thread_idle, mi_on_thread_idle_pending
from model.heap import Ptr, mi_free, mi_heap_malloc, mi_realloc
from model.live_pages import track_live_pages
from model.park import mi_on_thread_idle_end, mi_on_thread_idle_start, mi_theap_sweep_parked
from model.thread import RUNNING
from model.variants import VARIANTS
from model.world import Options, World
from purgecheck.simulate.result import DesignRun, Sample
from purgecheck.simulate.workloads import Call, Workload

OFF = "off"  # hole purging off (MIMALLOC_PURGE_HOLES=0): bun-dev3-v2, the seed's "before"
DESIGNS = (OFF, *VARIANTS)  # off, then the seed's choice and the designs it rejected
DESIGN_NAMES = {
    OFF: "purging off (before)",
    "epoch": "the epoch (the seed's rule)",
    "no-hold": "the unit without the hold, (1) without (2)",
    "clock": "the clock stamp (the PR's first version)",
    "handoff-only": "deferring in the handoff only",
    "two-untouched": "the second untouched sweep",
    "floor": "the epoch and the floor of later versions (Bun 1.4.4 as shipped)",
}
FLOOR = "floor"  # later versions, not in the seed (digest 6.3): the epoch rule plus the floor
# Bun 1.4.4's floor (MIMALLOC_VERBOSE=1 bun -e 1): purge_holes_large_floor 4096 KiB, 256 epochs
FLOOR_BYTES = 4096 * 1024
FLOOR_EPOCHS = 256
INF = float("inf")
OTHER_SWEEPER = 1_000  # the thread id of the other sweeper (sweeper_every_ms)
POOL_IDLE_MS = 100  # Bun's thread pool sweeps once after 100 ms without work
INLINE_EVERY_MS = 100  # Bun's Windows loop sweeps inline at most every 100 ms
# The series of a run is thinned past this many samples (every other one goes and the interval
# doubles, as glibc.py's runs do): a long run or a small --sample-ms costs a bounded series,
# not one sample per step of a trace's 10^12 ms. Far above the seeds' runs (7,000 at 5 ms).
MAX_SAMPLES = 20_000
# The background actors, each a timer kind with its handler Simulation._on_<kind>.
TIMERS = ("scavenger", "sweeper", "pool", "park_after", "inline_again", "purge", "idle_turn")


def design_options(design: str, base: Options | None = None) -> Options:
    """The model's options for a design: a variant of model.variants, or purging off."""
    base = base or Options()
    if design == OFF:
        return replace(base, purge_holes=False)
    if design == FLOOR:
        return replace(base, variant="epoch", purge_holes_large_floor=FLOOR_BYTES,
                       purge_holes_large_floor_epochs=FLOOR_EPOCHS)
    if design not in VARIANTS:
        raise ValueError(f"unknown design {design!r}; expected one of {', '.join(DESIGNS)}")
    return replace(base, variant=design)


class Simulation:
    """The model world under one design, driven by calls in virtual time."""

    def __init__(self, design: str, idle: str, options: Options | None = None,
                 sample_ms: float = 50.0, park_after_ms: float | None = None,
                 scavenger_late_ms: float = 0.0, seed: int = 0,
                 scavenger_reach: float | None = None,
                 sweeper_every_ms: float | None = None,
                 scavenger_coalesced: bool = False) -> None:
        self.design = design
        self.scavenger_late_ms = scavenger_late_ms
        self.scavenger_reach = scavenger_reach
        self.scavenger_coalesced = scavenger_coalesced
        self.wake_pending = False  # the scavenger's wake flag (scavenger_coalesced)
        self.sweeper_every_ms = sweeper_every_ms
        self.rng = random.Random(seed)
        self.idle = idle
        self.world = World(design_options(design, options))
        self.clock, self.resident = self.world.clock, self.world.mem.resident  # read per call
        self.opts = self.world.options
        self.interval = self.opts.purge_holes_min_interval
        self.sample_ms = sample_ms
        self.park_after_ms = park_after_ms
        self.ptrs: dict[int, Ptr] = {}
        self.t = float(self.world.clock.now)
        self.t0 = self.t
        self.samples: list[Sample] = []
        self.next_sample = self.t
        self.events = 0  # calls and background actions so far: a sample after none is a copy
        self.sampled_after = -1  # `events` at the last sample computed
        # timers: (due time, seq, kind, thread); kinds: scavenger, pool, park_after, purge
        self.timers: list[tuple[float, int, str, int]] = []
        # The park after silence (park_after_ms): a thread parks when its last call is
        # park_after_ms old. `silence` holds, per thread, when that is for its last call and
        # the seq of the first call with that due: the (due, seq) a timer set at every call
        # would park it at, in the order of the heap (issue 29, fifteenth round: a timer a
        # call, all but the last a no-op, was a tenth of a recording's run). One timer per
        # thread is armed at a time (`silence_armed`, its due); _on_park_after sets it again
        # for the thread's last call when calls came since. A timer set at a call goes in a
        # FIFO beside the heap (due in the order set: a call's time plus the same silence),
        # one set again in the heap; advance_to takes the earlier of the two heads by
        # (due, seq). tests/test_simulate_silence.py checks the parks against a timer a call.
        self.silence: dict[int, tuple[float, int]] = {}
        self.silence_armed: dict[int, float] = {}
        self.silences: deque[tuple[float, int, str, int]] = deque()
        self.on_timer = {kind: getattr(self, f"_on_{kind}") for kind in TIMERS}
        self.seq = 0
        self.scavenger_due: float | None = None
        self.last_call: dict[int, float] = {}
        self.last_inline: dict[int, float] = {}
        self.pool_swept: set[int] = set()
        self.allocations = 0
        self.requests = 0
        self.arena_purges = 0
        self.arena_purged_bytes = 0
        self.retired_seen: set[int] = set()
        self.purge_pending: list[int] = []  # retired pages the next arena purge looks at
        self.purge_due: float | None = None  # the arena's expiry (arena_purge_runs)
        # the resident OS pages of live blocks, kept as blocks live and die and as pages
        # gain and lose residency (model.live_pages): a sample reads it. Recounting the live
        # blocks of the pages changed since the sample before was a third of a large
        # recording's run.
        self.live = track_live_pages(self.world)
        self.load_end = self.t
        self.at_load_end: dict[str, float] = {}
        self.rss_peak = 0  # resident OS pages at most
        # Resident memory over time (resident OS pages x ms), exactly: a span of time ends
        # where the count of resident pages changes, and adds count x length as fractions,
        # so the figure does not depend on how often the clock moved in between (the float
        # sum of a product at every step of the clock rounded a million times on a
        # recording; fifteenth round). `area_pages` resident since `area_since`. The sum is
        # kept as area_num / area_den: every float time is an integer over a power of two, so
        # the largest denominator seen is a multiple of each, and a span adds with integer
        # products and no gcd (a Fraction's sum took 5 to 10 % of a bun-serve run).
        self.area_num, self.area_den = 0, 1
        self.area_pages = 0
        self.area_since = self.t

    # -- time ----------------------------------------------------------------------------

    def _timer(self, due: float, kind: str, thread: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (due, self.seq, kind, thread))

    def _next_timer(self) -> tuple[float, int, str, int] | None:
        """The timer due first, of the heap's and the silences' (not taken)."""
        timers, silences = self.timers, self.silences
        if not silences:
            return timers[0] if timers else None
        if not timers:
            return silences[0]
        return timers[0] if timers[0][:2] < silences[0][:2] else silences[0]

    def _set_clock(self, t: float) -> None:
        resident = len(self.resident)  # what the events at self.t left, until t
        if resident != self.area_pages:
            self.area_num, self.area_den = self._area_to(self.t)
            self.area_pages, self.area_since = resident, self.t
        self.t = t
        now = int(t)
        if now > self.clock.now:
            self.clock.set(now)

    def advance_to(self, t: float) -> None:
        """Run what happens in the background until `t`: samples, the scavenger, the pool's
        sweep, parks after silence, the arena's purge of retired pages."""
        timers = self.timers
        on = self.on_timer
        while True:
            first = self._next_timer()
            due = first[0] if first is not None else INF
            if self.next_sample <= due:
                if self.next_sample > t:
                    break
                self._set_clock(max(self.t, self.next_sample))
                self._sample()
                self.next_sample += self.sample_ms
                if len(self.samples) > MAX_SAMPLES:
                    self.samples = self.samples[::2]
                    self.sample_ms *= 2
                    self.next_sample = self.t0 + self.samples[-1].t_ms + self.sample_ms
                continue
            if due > t:
                break
            self.events += 1
            self._set_clock(max(self.t, due))
            if self.silences and first is self.silences[0]:
                _, _, kind, thread = self.silences.popleft()
            else:
                _, _, kind, thread = heapq.heappop(timers)
            on[kind](thread)
        if t > self.t:
            self._set_clock(t)

    # -- the program's calls -------------------------------------------------------------

    def call(self, c: Call) -> None:
        t_ms, th, op, name, size, request = c  # one unpacking, not six attribute reads
        t = self.t0 + t_ms
        timers, silences = self.timers, self.silences
        if t >= self.next_sample or (timers and timers[0][0] <= t) or \
                (silences and silences[0][0] <= t):
            self.advance_to(t)  # something of the background is due first
        elif t > self.t:
            self._set_clock(t)
        self.events += 1
        world = self.world
        thread = world.threads.get(th) or world.thread(th)
        if op == "malloc":
            if thread.park_state != RUNNING:
                mi_on_thread_idle_end(world, th)
            self.ptrs[name] = mi_heap_malloc(world, world.heaps.get(th) or world.heap(th), size)
            if self.opts.retire_cycles:
                self._note_sweep()  # the kept pages it counted down and retired (model.retire)
            self.allocations += 1
            self.load_end = self.t
        elif op == "free":
            if thread.park_state != RUNNING:
                mi_on_thread_idle_end(world, th)
            ptr = self.ptrs.pop(name)
            mi_free(world, ptr, th)
            if world.pages[ptr.page].retired:
                self._note_retired(ptr.page)
        elif op == "realloc":
            if thread.park_state != RUNNING:
                mi_on_thread_idle_end(world, th)
            old = self.ptrs[name]
            self.ptrs[name] = new = mi_realloc(world, world.heap(th), old, size)
            if new != old:
                self.allocations += 1
                self.load_end = self.t
                self._note_retired(old.page)
        elif op == "loop":
            self._loop_idle(th, in_call=True)
        else:
            raise ValueError(f"unknown op {op!r} in a workload call")
        if request:
            self.requests += int(request)
        if op != "loop":
            self.last_call[th] = self.t
            if self.pool_swept:
                self.pool_swept.discard(th)
            if self.idle == "pool":
                self._timer(self.t + POOL_IDLE_MS, "pool", th)
            if self.park_after_ms is not None:
                self._silence_from(th)
        world.log.clear()  # the model's event log: the simulator keeps counters only
        resident = len(self.resident)  # only a call writes: the peak is after one
        if resident > self.rss_peak:
            self.rss_peak = resident

    def _loop_idle(self, th: int, in_call: bool = False) -> None:
        """The thread's loop has nothing to do: park, or sweep inline at most every 100 ms.
        `in_call`: at a `loop` call of the program (not a park after silence)."""
        if self.idle == "park":
            self._park(th, in_call=in_call)
        elif self.idle == "inline":
            if self.t - self.last_inline.get(th, -1e18) >= INLINE_EVERY_MS:
                self._inline(th)

    def _park(self, th: int, for_good: bool = False, in_call: bool = False) -> None:
        """The thread parks; `for_good`: it blocks until the end (the idle after the load),
        where any scavenger reaches it (a park the scavenger missed included)."""
        if mi_on_thread_idle_start(self.world, th) or for_good:
            self._wake_scavenger(for_good, in_call)

    def _inline(self, th: int) -> None:
        mi_on_thread_idle(self.world, th)
        self.last_inline[th] = self.t
        self._note_sweep()

    # -- background actors -----------------------------------------------------------------

    def _wake_scavenger(self, for_good: bool = False, in_call: bool = False) -> None:
        """A park wakes the scavenger: a pass now, or `compute_scavenger_late` later (if none
        is due sooner); with `scavenger_reach`, a pass now or none for this park.

        A pass now at a park of a `loop` call (`in_call`) runs at once, not as a timer: such
        a timer would be the next thing of the background at the next call (everything due
        at or before now has run, the next sample is later, and the rest of the call writes
        nothing), so it would run with the world as it is now and at this time."""
        if self.scavenger_reach is not None and not for_good and \
                self.rng.random() >= self.scavenger_reach:
            return
        if self.scavenger_coalesced:
            if self.wake_pending:
                return  # the flag is set: the pass to come answers this park too
            self.wake_pending = True
        at = self.t + (0.0 if self.scavenger_reach is not None
                       else self.compute_scavenger_late())
        if self.scavenger_due is None or self.scavenger_due > at:
            self.scavenger_due = at
            if in_call and at == self.t:
                self.events += 1  # as the timer's pop would count it
                self._on_scavenger(0)
            else:
                self._timer(at, "scavenger")

    def compute_scavenger_late(self) -> float:
        """How late the woken scavenger runs: 0 with `scavenger_late_ms` 0 (the sweep at the
        instant of the park), else exponential with that mean. The scavenger is a thread of
        its own (seed 000 (2): "Any number of threads sweep at the same time (the scavenger
        for the parked ones ...)"); on a busy machine a woken thread runs late, and a park
        that ended before it runs is not swept (the claim needs PARKED, digest 8)."""
        if self.scavenger_late_ms <= 0:
            return 0.0
        return self.rng.expovariate(1.0 / self.scavenger_late_ms)

    def _on_scavenger(self, _thread: int) -> None:
        if self.scavenger_due is None or self.t < self.scavenger_due:
            return  # a pass superseded by an earlier one
        self.wake_pending = False  # a pass clears the wake flag as it begins
        due = mi_theap_sweep_parked(self.world)
        self._note_sweep()
        self.world.log.clear()
        if due is None:
            self.scavenger_due = None
        else:
            self.scavenger_due = self.t + max(due, 1)
            self._timer(self.scavenger_due, "scavenger")

    def _on_sweeper(self, th: int) -> None:
        """Another thread sweeps inline, then again `sweeper_every_ms` (and up to a fifth of
        it) later."""
        self._inline(th)
        self.world.log.clear()
        every = self.sweeper_every_ms or 0.0
        self._timer(self.t + every + self.rng.uniform(0, every / 5), "sweeper", th)

    def _on_pool(self, th: int) -> None:
        if th in self.pool_swept or self.t - self.last_call.get(th, self.t) < POOL_IDLE_MS:
            return
        mi_on_thread_idle(self.world, th)
        self.pool_swept.add(th)
        self._note_sweep()
        self.world.log.clear()

    def _silence_from(self, th: int) -> None:
        """A call of thread `th` (at self.t): its silence runs from now, and ends at its idle
        point park_after_ms later unless it calls again (_on_park_after)."""
        self.seq += 1
        due = self.t + self.park_after_ms
        last = self.silence.get(th)
        if last is None or last[0] != due:  # calls with the same due park at the first's seq
            self.silence[th] = (due, self.seq)
        if th not in self.silence_armed:
            self.silence_armed[th] = due
            self.silences.append((due, self.seq, "park_after", th))

    def _on_park_after(self, th: int) -> None:
        """A thread silent for park_after_ms comes to its idle point: it parks, or sweeps
        inline, as its idle behaviour says (a trace of a real program has no `loop` calls).
        A thread that called since the timer was set is not silent (the check fails, as it
        did for a timer set at each of its calls); its timer is set again for its last
        call's silence, at that call's (due, seq)."""
        armed = self.silence_armed.pop(th)
        if self.t - self.last_call.get(th, self.t) >= (self.park_after_ms or 0):
            self._loop_idle(th)
        due, seq = self.silence[th]
        if due != armed:
            self.silence_armed[th] = due
            heapq.heappush(self.timers, (due, seq, "park_after", th))

    def schedule_idle_turns(self, turns: int, idle_ms: float) -> None:
        """The event loop's `turns` turns in the idle after the load (Workload.idle_turns),
        evenly spaced: the measured count at the measured mean spacing, `idle_ms / (turns +
        1)` from the park the load ended in, each other and the idle's end. Each is a thread
        of the program waking and coming to its idle point again (_on_idle_turn)."""
        for th in sorted(self.last_call):  # the program's threads: the ones that made calls
            for k in range(1, turns + 1):
                self._timer(self.t + k * idle_ms / (turns + 1), "idle_turn", th)

    def _on_idle_turn(self, th: int) -> None:
        """A turn of the event loop in the idle: a timer of the runtime woke it (the real
        loop's `epoll_pwait2` returns; purgecheck/measure/turns.py), it does its timers' work
        and comes to its idle point again. Where it parks (Bun's loop on Linux), it leaves
        its park (`mi_on_thread_idle_end`) and parks again (`mi_on_thread_idle_start`, seed
        000 (2): the park handoff), which wakes the scavenger; the park lasts until the next
        turn, hundreds of ms, so the scavenger's pass reaches it. The pass's idle work is a
        collect, which counts the kept pages down (`mi_theap_collect`: `_mi_theap_collect_retired`,
        model.retire) or, with hole purging, frees them: one more such collect a turn. Where
        it sweeps inline (Bun's Windows loop), it sweeps as at any idle point, at most every
        100 ms."""
        if self.idle == "park":
            if self.world.thread(th).park_state != RUNNING:
                mi_on_thread_idle_end(self.world, th)
            self._park(th, for_good=True)
        else:
            self._loop_idle(th)
        self.world.log.clear()

    def _on_inline_again(self, th: int) -> None:
        """The inline caller about to block for good: again an interval after the call
        before, while mi_on_thread_idle_pending says so."""
        if mi_on_thread_idle_pending(self.world, th):
            self._inline(th)
            self.world.log.clear()
            self._timer(self.t + self.interval, "inline_again", th)

    def _note_retired(self, pid: int) -> None:
        if pid in self.retired_seen:  # noted before
            return
        page = self.world.pages.get(pid)
        if page is not None and page.retired:  # (None: forgotten since its purge, _forget)
            self.retired_seen.add(pid)
            if not self.opts.arena_purge_runs:
                self._timer(self.t + self.opts.purge_delay, "purge", pid)
                return
            self.purge_pending.append(pid)
            if self.purge_due is None:  # mi_arena_schedule_purge: an expiry only when none is set
                self.purge_due = self.t + self.opts.purge_delay
                self._timer(self.purge_due, "purge", 0)

    def _note_sweep(self) -> None:
        """After a sweep, read off the model's event log before it is cleared: the pages it
        retired (mi_page_retire's `retire` event), whose memory the arena purges later.
        (Looking at every page not yet retired instead cost a pass over the live pages at
        every park.)"""
        for e in self.world.log:
            if e["ev"] == "retire":
                self._note_retired(e["page"])

    def _on_purge(self, pid: int) -> None:
        """The arena gives a retired page's memory back (the same for every design), unless a
        new page took its addresses since (arena_reuse); what it drops faults in again when
        a later page of the arena writes there. With `arena_purge_runs`, every page retired
        since the last purge goes at once, a call per run of adjacent pages
        (purge_retired_runs)."""
        if self.opts.arena_purge_runs:
            self.purge_retired_runs()
            return
        if pid not in self.world.pages:  # forgotten: its purge was made (_forget)
            return
        g = self.world.pages[pid].geom
        self._forget([pid])
        if g.slice_start in self.world.arena.in_use:
            return
        mem = self.world.mem
        resident = mem.release(g.slice_start, g.area_size)
        if resident:
            if self.opts.arena_reuse:
                mem.dropped.update(resident)
            resident = len(resident)
            self.arena_purges += 1
            self.arena_purged_bytes += resident * mem.os_page_size

    def _forget(self, pids: list[int]) -> None:
        """Retired pages whose arena purge came (done, or not needed: a new page took their
        range) leave World.pages: nothing reaches them again. Their range is in the purge
        just made or in a new page's; a retired page has no block, no queue, no place in the
        abandoned map (model.heap.mi_page_retire), and the simulator found it through its
        `retire` event, once. Kept, a retired page was about 4 KB: 2 GB on a 10 M-call trace
        whose live blocks never pass 256 (docs/simulate-guide.md, thirteenth round).
        Its id leaves `retired_seen` too (collect_forced reads it, to purge what was not
        purged yet), and without `arena_reuse` its OS pages leave `Memory.dropped`: no page
        takes the range again, so none of them is written, or refaults, again (fourteenth
        round: both grew with the pages ever made). The figures are the same
        (tests/simulate_figures.py, tests/test_simulate_bounded.py)."""
        pages, seen, mem = self.world.pages, self.retired_seen, self.world.mem
        forget_dropped = not self.opts.arena_reuse
        for pid in pids:
            g = pages.pop(pid).geom
            seen.discard(pid)
            if forget_dropped and mem.dropped:
                mem.dropped.difference_update(mem.os_pages(g.slice_start, g.area_size))

    def purge_retired_runs(self) -> None:
        """mimalloc v3's arena purge (arena.c: mi_arena_schedule_purge, mi_arena_try_purge and
        its visitor): the arena has one expiry, set `purge_delay` after the first slices
        scheduled since the last purge; when it passes, the scheduled slices that no page took
        again are purged, each maximal run of adjacent ones with one call (the real calls of
        0.8 to 1.4 MiB, docs/measure.md). A call's length is the run's, as strace counts it;
        one whose memory is no longer resident at all is not made (nothing was written there
        since an earlier purge)."""
        self.purge_due = None
        pages, in_use = self.world.pages, self.world.arena.in_use
        ranges = sorted((pages[pid].geom.slice_start, pages[pid].geom.area_size)
                        for pid in self.purge_pending if pages[pid].geom.slice_start not in in_use)
        self._forget(self.purge_pending)
        self.purge_pending = []
        mem = self.world.mem
        start = end = None
        dropped: set[int] = set()
        for addr, size in [*ranges, (None, 0)]:
            if addr is not None and addr == end:
                end += size
            else:
                if start is not None:
                    resident = mem.release(start, end - start)
                    if resident:
                        dropped |= resident
                        self.arena_purges += 1
                        self.arena_purged_bytes += end - start
                start, end = addr, (addr or 0) + size
        if self.opts.arena_reuse:
            mem.dropped.update(dropped)

    # -- what it costs -----------------------------------------------------------------------

    def _area_to(self, t: float) -> tuple[int, int]:
        """The resident area up to `t` (area_pages resident since area_since), exactly, as a
        numerator and a power of two."""
        (n1, d1), (n0, d0) = t.as_integer_ratio(), self.area_since.as_integer_ratio()
        den = max(d1, d0, self.area_den)
        span = n1 * (den // d1) - n0 * (den // d0)
        return self.area_num * (den // self.area_den) + self.area_pages * span, den

    def resident_area(self) -> Fraction:
        """Resident OS pages x ms from the start to now, exactly."""
        return Fraction(*self._area_to(self.t))

    def live_resident_pages(self) -> int:
        """Resident OS pages that hold part of a live allocation (model.live_pages: kept as
        the model goes; `recount_live_resident` is the plain definition)."""
        return self.live.count()

    def _sample(self) -> None:
        if self.events == self.sampled_after and self.samples:  # nothing ran since: the same
            self.samples.append(replace(self.samples[-1], t_ms=self.t - self.t0))
            return
        self.sampled_after = self.events
        mem = self.world.mem
        rss = len(mem.resident) * mem.os_page_size
        free = rss - self.live_resident_pages() * mem.os_page_size
        self.samples.append(Sample(self.t - self.t0, rss, free, mem.discard_calls,
                                   mem.discarded_bytes))

    def collect_forced(self) -> None:
        """`mi_collect(true)` (model.retire mi_theap_collect_forced), then the arena's forced
        purge of what went back to it (`_mi_arenas_collect(force_purge=true)`): at once, not
        `purge_delay` later. mimalloc collects the calling thread's heap only; the workloads
        that end so (Workload.collect_at_end) allocate on the loop's thread alone, so every
        heap is that one."""
        from model.retire import mi_theap_collect_forced
        for heap in list(self.world.heaps.values()):
            mi_theap_collect_forced(self.world, heap)
        self._note_sweep()
        self.world.log.clear()
        if self.opts.arena_purge_runs:
            self.purge_retired_runs()
        else:
            for pid in sorted(self.retired_seen):
                self._on_purge(pid)

    def end_load(self) -> None:
        """The last call: note the figures under load, then the threads go idle for good."""
        mem = self.world.mem
        self._sample()
        self.events += 1  # the threads park below
        self.at_load_end = {"t": self.t, "discards": mem.discard_calls,
                            "discards_large": mem.discard_calls_large,
                            "arena_purges": self.arena_purges,
                            "arena_bytes": self.arena_purged_bytes,
                            "bytes": mem.discarded_bytes, "refaults": mem.refaults,
                            "rss": self.samples[-1].resident,
                            "free": self.samples[-1].free_resident}
        for th in list(self.world.threads):
            if self.idle == "park":
                self._park(th, for_good=True)
            elif self.idle == "inline":
                self._timer(max(self.t, self.last_inline.get(th, self.t) + self.interval),
                            "inline_again", th)

    def counters(self) -> dict[str, float]:
        mem = self.world.mem
        load = self.at_load_end
        last = self.samples[-1]
        floor = min(s.free_resident for s in self.samples if s.t_ms >= load["t"] - self.t0)
        reached = next(s.t_ms for s in self.samples
                       if s.t_ms >= load["t"] - self.t0 and s.free_resident == floor)
        load_end_ms = self.load_end - self.t0
        return {
            "allocations": self.allocations,
            "requests": self.requests,
            "discards_load": load["discards"],
            "discards_load_large": load["discards_large"],
            "discarded_bytes_load": load["bytes"],
            "discards_idle": mem.discard_calls - load["discards"],
            "discarded_bytes_idle": mem.discarded_bytes - load["bytes"],
            "refaults": mem.refaults,
            "refaults_per_request": mem.refaults / self.requests if self.requests else 0.0,
            "refaults_per_1k_allocs": 1000 * mem.refaults / max(1, self.allocations),
            "rss_load_end": load["rss"],
            "free_resident_load_end": load["free"],
            "rss_end": last.resident,
            "free_resident_end": last.free_resident,
            "ms_to_floor": max(0.0, reached - load_end_ms),
            "arena_purges": self.arena_purges,
            "arena_purged_bytes": self.arena_purged_bytes,
            "arena_purges_load": load["arena_purges"],
            "arena_purged_bytes_load": load["arena_bytes"],
            # everything given back, hole purging's discards and the arena's purges alike
            "discards": mem.discard_calls + self.arena_purges,
            "discarded_bytes": mem.discarded_bytes + self.arena_purged_bytes,
            "rss_peak": self.rss_peak * mem.os_page_size,
            "rss_mb_s": float(self.resident_area() * mem.os_page_size / 1000 / (1 << 20)),
        }


ALLOCATING_OPS = ("malloc", "calloc", "memalign", "valloc", "pvalloc")  # glibc's


def calls_of(timed_ops: Iterable[tuple]) -> Iterator[Call]:
    """The mimalloc side's calls of a program's timed ops (purgecheck/simulate/program.py:
    (ms, GlibcOp) pairs; here, apart from program.py's readers, so that the simulator's
    engine under PyPy, purgecheck/simulate/engine.py, imports no numpy): every allocating op is a malloc of its block, a realloc
    of a block not live a malloc, a realloc to 0 bytes a free; threads keep their numbers;
    start, join, mallopt and malloc_trim have no mimalloc call. Each Call is made with
    tuple.__new__ (the named tuple's own __new__ is a Python call per call)."""
    live: set[int] = set()
    new = tuple.__new__
    for t, op in timed_ops:
        name = op.name
        if name in ALLOCATING_OPS:
            block = op.args[0]
            live.add(block)
            yield new(Call, (t, op.thread, "malloc", block, max(1, op.args[-1]), False))
        elif name == "free":
            block = op.args[0]
            if block in live:
                live.discard(block)
                yield new(Call, (t, op.thread, "free", block, 0, False))
        elif name == "realloc":
            block, size = op.args
            if block not in live:
                if size:
                    live.add(block)
                    yield new(Call, (t, op.thread, "malloc", block, size, False))
            elif size == 0:
                live.discard(block)
                yield new(Call, (t, op.thread, "free", block, 0, False))
            else:
                yield new(Call, (t, op.thread, "realloc", block, size, False))
        elif name == "loop":
            yield Call(t, op.thread, "loop", request=op.args[0])


def simulate(workload: Workload, design: str, options: Options | None = None,
             sample_ms: float = 50.0, park_after_ms: float | None = None,
             calls: Iterable[Call] | None = None, scavenger_late_ms: float = 0.0,
             seed: int = 0, scavenger_reach: float | None = None,
             sweeper_every_ms: float | None = None,
             scavenger_coalesced: bool = False) -> DesignRun:
    """Run `workload` (or the given `calls`, with the workload's idle behaviour) on the model
    under `design`; the figures of DesignRun's counters."""
    sim = Simulation(design, workload.idle, options, sample_ms, park_after_ms,
                     scavenger_late_ms, seed, scavenger_reach, sweeper_every_ms,
                     scavenger_coalesced)
    if sweeper_every_ms:
        sim._timer(sim.t + sim.rng.uniform(0, sweeper_every_ms), "sweeper", OTHER_SWEEPER)
    stream: Iterator[Call] = iter(calls if calls is not None else workload.calls())
    for c in stream:
        sim.call(c)
    if workload.collect_at_end:
        sim.collect_forced()
    sim.end_load()
    sim.schedule_idle_turns(workload.idle_turns, workload.idle_ms)
    sim.advance_to(sim.t + workload.idle_ms)
    sim._sample()
    return DesignRun(workload.name, "mimalloc", design, sim.counters(), sim.samples,
                     load_end_ms=sim.load_end - sim.t0, end_ms=sim.t - sim.t0)
