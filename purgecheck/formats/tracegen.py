"""Large linearized traces for the benchmark of `validate` and `diff`: millions of events.

The generator plays the C reference's `stress` run (reference_c/stress.c and its scenarios,
stress_*.c) in virtual time:
sweeper threads that allocate from a large page of their own and sweep without a pause, now
and then one that goes quiet so that its page ages and is walked, and a thread that parks and
that the scavenger sweeps. Their atomic steps are interleaved at random (seeded), the clock
moves one ms every so many events, and now and then a line is written one place late, as
threads write theirs. The protocol is the seed's, played step for step with the model's
predicates; `purgecheck validate` accepts what it writes (the tests check that).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import IO, Iterator

import orjson

import model.epoch as epoch_module  # spin_max is read at run time (engines may lower it)
from model.epoch import (MOVING, PC_INCREMENT, PC_READ_CLOCK, EpochState, advance_step,
                         begin_advance, is_epoch_young)
from model.park import end_park_sweep, is_park_due
from model.thread import PARK_SWEPT_DONE, PARK_SWEPT_NONE, ThreadState
from model.world import Options
from purgecheck.formats.trace import FORMAT, VERSION, config_of

GENERATION = 3  # bumped when what it writes changes (bench/traces.py makes its trace again)
BLOCK = 256 * 1024  # a large-page block: the page has 16, the first 4 are formed
SCAVENGER = -1
FULL_EVERY = 64
# The page of each thread: block 0 stays live, blocks 1..3 are the free ones; their units
# (16 KiB each) are 16..63, the unformed tail [1 MiB, 4 MiB) is discarded on its own.
FREE_RUN = (16, 64)
TAIL = (1 << 20, 3 << 20)

EV_MALLOC = b'{"ev":"malloc","page":%d,"block":%d,"zero":false,"src":"%s","lin":%d,"tid":%d}\n'
EV_FREE = b'{"ev":"free","page":%d,"block":%d,"thread":"owner","lin":%d,"tid":%d}\n'
EV_STAMP = b'{"ev":"stamp","page":%d,"epoch":%d,"lin":%d,"tid":%d}\n'
EV_STEP = b'{"ev":"advance_step","pc":"%s","value":%s,"lin":%d,"tid":%d}\n'
EV_WAIT = b'{"ev":"advance_step","pc":"wait_moving","value":%d,"spins":%d,"lin":%d,"tid":%d}\n'
EV_ADVANCED = b'{"ev":"epoch_advance","thread":%d,"epoch":%d,"start":%d,"lin":%d,"tid":%d}\n'
EV_BEGIN = (b'{"ev":"sweep_begin","thread":%d,"seq":%d,"full":%s,"epoch":%d,"now":%d,'
            b'"lin":%d,"tid":%d}\n')
EV_SWEPT = b'{"ev":"sweep_page","page":%d,"outcome":"%s","lin":%d,"tid":%d}\n'
EV_IDLE = (b'{"ev":"idle","thread":%d,"epoch":%d,"handoff":%s,"deferred":%s,"full":%s,'
           b'"lin":%d,"tid":%d}\n')
EV_TAIL = b'{"ev":"discard_tail","page":%d,"addr":%d,"size":%d,"ok":true,"lin":%d,"tid":%d}\n'
EV_DISCARD = (b'{"ev":"discard","page":%d,"k0":%d,"k1":%d,"addr":%d,"size":%d,"ok":true,'
              b'"lin":%d,"tid":%d}\n')
EV_WALK = b'{"ev":"walk","page":%d,"complete":true,"runs":%s,"dropped":%d,"lin":%d,"tid":%d}\n'
EV_UNPURGE = (b'{"ev":"unpurge","page":%d,"k0":%d,"k1":%d,"reuse":true,"blocks":3,'
              b'"lin":%d,"tid":%d}\n')
EV_PARK = b'{"ev":"park","thread":%d,"lin":%d,"tid":%d}\n'
EV_UNPARK = b'{"ev":"unpark","thread":%d,"lin":%d,"tid":%d}\n'
EV_PARK_SWEEP = (b'{"ev":"park_sweep","thread":%d,"epoch":%d,"deferred":%s,"done":%s,'
                 b'"lin":%d,"tid":%d}\n')
BOOL = {True: b"true", False: b"false"}


@dataclass
class PageSim:
    id: int
    stamp: int | None = None  # the epoch of its stamp; None: NONE or walked
    walked: bool = False
    purged: bool = False  # blocks 1..3 discarded
    tail_discarded: bool = False
    # its free lists, as model/alloc.py keeps them: blocks 1..3 go round through them
    free: list[int] = field(default_factory=list)
    local_free: list[int] = field(default_factory=list)


@dataclass
class Sim:
    """The shared state of the run and the writer of its events."""

    interval: int
    rng: random.Random
    lin: int = 0
    clock: int = 1_000
    st: EpochState = field(default_factory=EpochState)  # the process-wide epoch
    stopping: bool = False
    lines: list[bytes] = field(default_factory=list)
    threads: dict[int, ThreadState] = field(default_factory=dict)
    pages: dict[int, PageSim] = field(default_factory=dict)

    def ev(self, fmt: bytes, *args) -> bytes:
        """One event of thread args[-1], numbered now: what it reports happens here."""
        line = fmt % (*args[:-1], self.lin, args[-1])
        self.lin += 1
        return line

    # -- one thread's steps, each a generator of lines (None: it waits) ---------------------

    def advance(self, tid: int, thread: int) -> Iterator[bytes | None]:
        """mi_holes_epoch_advance: the model's atomic steps (model/epoch.py), one per line,
        each taken when the thread is scheduled, with the clock of that moment."""
        st, f = self.st, begin_advance(self.interval)
        advance_step(st, f, self.clock, self.interval)
        yield self.ev(EV_STEP, b"load_start", b"%d" % f.start, tid)
        if f.pc == PC_READ_CLOCK:
            advance_step(st, f, self.clock, self.interval)
            yield self.ev(EV_STEP, b"read_clock", b"%d" % f.now, tid)
            advance_step(st, f, self.clock, self.interval)  # compare: a local step
            if f.done:
                return  # not due
            advance_step(st, f, self.clock, self.interval)
            yield self.ev(EV_STEP, b"cas", BOOL[f.pc == PC_INCREMENT], tid)
            if f.pc == PC_INCREMENT:
                advance_step(st, f, self.clock, self.interval)
                epoch = st.epoch  # the epoch this thread made (others may move it later)
                yield self.ev(EV_STEP, b"increment", b"%d" % epoch, tid)
                advance_step(st, f, self.clock, self.interval)
                yield self.ev(EV_STEP, b"read_clock_again", b"%d" % f.now2, tid)
                advance_step(st, f, self.clock, self.interval)
                yield self.ev(EV_STEP, b"store_start", b"%d" % f.now2, tid)
                yield self.ev(EV_ADVANCED, thread, epoch, f.now2, tid)
                return
        advance_step(st, f, self.clock, self.interval)  # wait_moving: spin while MOVING
        while not f.done:
            yield None
            advance_step(st, f, self.clock, self.interval)
        spin_max = epoch_module.spin_max
        yield self.ev(EV_WAIT, st.start if f.spins < spin_max else MOVING, f.spins, tid)

    def sweep(self, tid: int, thread: int) -> Iterator[bytes | None]:
        """mi_on_thread_idle of `thread`'s heap (one page), run by `tid`; returns deferred."""
        yield from self.advance(tid, thread)
        t = self.threads[thread]
        t.holes_sweep_seq += 1
        full = t.holes_sweep_seq % FULL_EVERY == 0
        t.holes_sweep_epoch = epoch = self.st.epoch
        yield self.ev(EV_BEGIN, thread, t.holes_sweep_seq, BOOL[full], epoch, self.clock, tid)
        p = self.pages[thread]
        p.free += p.local_free  # the sweep collects the page first
        p.local_free = []
        if p.stamp is not None and is_epoch_young(epoch, p.stamp):
            deferred = not p.purged or not p.tail_discarded
            yield self.ev(EV_SWEPT, p.id, b"held", tid)
        else:
            deferred = False
            if not p.tail_discarded:
                p.tail_discarded = True
                yield self.ev(EV_TAIL, p.id, TAIL[0], TAIL[1], tid)
            if p.walked and not full:
                yield self.ev(EV_SWEPT, p.id, b"unchanged", tid)
            else:
                if p.purged:
                    yield self.ev(EV_WALK, p.id, b"[]", 0, tid)
                else:
                    k0, k1 = FREE_RUN
                    yield self.ev(EV_DISCARD, p.id, k0, k1, k0 * 16384, (k1 - k0) * 16384, tid)
                    yield self.ev(EV_WALK, p.id, b"[[%d,%d]]" % FREE_RUN, 3, tid)
                p.purged, p.walked, p.stamp = True, True, None
                p.free = []  # every free block (1..3) lies in the discarded units
                yield self.ev(EV_SWEPT, p.id, b"walked", tid)
        yield self.ev(EV_IDLE, thread, epoch, BOOL[tid != thread], BOOL[deferred], BOOL[full],
                      tid)
        return deferred

    def allocate(self, tid: int) -> Iterator[bytes | None]:
        """Take the block mi_page_malloc takes (the head of the free list; after a collect
        when it is empty; unpurged if the blocks were discarded), stamp when the epoch is
        new, free it (on local_free)."""
        p = self.pages[tid]
        if p.purged:
            p.purged, p.walked, p.stamp = False, False, None
            yield self.ev(EV_UNPURGE, p.id, *FREE_RUN, tid)
            p.free, src = [1, 2, 3], b"unpurge"  # pushed back in order at the head
        elif p.free:
            src = b"free"
        else:
            p.free, p.local_free, src = p.local_free, [], b"collect"
        block = p.free.pop(0)
        yield self.ev(EV_MALLOC, p.id, block, src, tid)
        if p.stamp != self.st.epoch:  # the relaxed read, under lin_lock: the current epoch
            p.stamp = self.st.epoch
            p.walked = False
            yield self.ev(EV_STAMP, p.id, self.st.epoch, tid)
        p.local_free.insert(0, block)
        yield self.ev(EV_FREE, p.id, block, tid)

    def new_page(self, tid: int) -> Iterator[bytes]:
        self.threads[tid] = ThreadState(tid)
        self.pages[tid] = p = PageSim(tid)
        yield self.ev(b'{"ev":"page_new","page":%d,"page_kind":"large","block_size":%d,'
                      b'"reserved":16,"unit":16384,"lin":%d,"tid":%d}\n', p.id, BLOCK, tid)
        yield self.ev(b'{"ev":"extend","page":%d,"first":0,"count":4,"lin":%d,"tid":%d}\n',
                      p.id, tid)
        yield self.ev(EV_MALLOC, p.id, 0, b"extend", tid)
        p.free = [1, 2, 3]
        p.stamp = self.st.epoch
        yield self.ev(EV_STAMP, p.id, self.st.epoch, tid)

    # -- the threads ------------------------------------------------------------------------

    def sweeper(self, tid: int, quiet_every: int) -> Iterator[bytes | None]:
        """Allocate and sweep without a pause; one iteration in `quiet_every` starts a quiet
        spell of sweeps without allocations, long enough for the page to age and be walked."""
        yield from self.new_page(tid)
        quiet = 0
        while not self.stopping:
            if quiet:
                quiet -= 1
            else:
                yield from self.allocate(tid)
                if self.rng.randrange(quiet_every) == 0:
                    quiet = 40
            yield from self.sweep(tid, tid)

    def parker(self, tid: int) -> Iterator[bytes | None]:
        """Allocate, park, wait until the scavenger has finished the park, come back."""
        yield from self.new_page(tid)
        t = self.threads[tid]
        while not self.stopping:
            yield from self.allocate(tid)
            if self.stopping:  # the scavenger may have ended: no new park
                return
            t.park_state, t.park_swept = "parked", PARK_SWEPT_NONE
            yield self.ev(EV_PARK, tid, tid)
            while t.park_swept != PARK_SWEPT_DONE or t.park_state != "parked":
                yield None
            t.park_state = "running"
            yield self.ev(EV_UNPARK, tid, tid)

    def scavenger(self, parked: list[int], early: int = 0) -> Iterator[bytes | None]:
        """_mi_theap_sweep_parked on its own thread: each parked thread that is not done and
        is due (an interval after the end of its last sweep) is claimed and swept. `early`:
        a broken scavenger that takes a thread as due that many ms too soon (the tests)."""
        while not (self.stopping and all(self.threads[p].park_state == "running"
                                         for p in parked if p in self.threads)):
            for pid in parked:
                t = self.threads.get(pid)
                if t is None or t.park_state != "parked" or t.park_swept == PARK_SWEPT_DONE \
                        or not is_park_due(t, self.clock + early, self.interval):
                    continue  # (early: the clock read as that much later)
                t.park_state = "sweeping"
                swept = t.park_swept
                deferred = yield from self.sweep(SCAVENGER, pid)
                t.holes_sweep_last = self.clock
                end_park_sweep(t, swept, deferred)
                line = self.ev(EV_PARK_SWEEP, pid, t.holes_sweep_epoch, BOOL[deferred],
                               BOOL[t.park_swept == PARK_SWEPT_DONE], SCAVENGER)
                t.park_state = "parked"  # released with the event, as park.c does
                yield line
            yield None


def header(interval: int, threads: list[int], seed: int) -> dict:
    options = Options(purge_holes_min_interval=interval, clock_start_ms=0)
    return {"format": FORMAT, "version": VERSION, "config": config_of(options, clock="real"),
            "producer": {"name": "tracegen", "linearized": True, "threads": threads,
                         "seed": seed}}


def generate(f: IO[bytes], events: int, seed: int = 0, sweepers: int = 4, parkers: int = 1,
             interval: int = 10, steps_per_ms: int = 40, quiet_every: int = 200,
             late_every: int = 100, scavenger_early: int = 0) -> int:
    """Write a linearized trace of about `events` events to `f`; returns how many. The run
    stops taking new iterations at `events` and lets every thread finish what it began."""
    rng = random.Random(seed)
    sim = Sim(interval, rng)
    sweeper_ids = list(range(1, sweepers + 1))
    parker_ids = list(range(sweepers + 1, sweepers + parkers + 1))
    f.write(orjson.dumps(header(interval, sweeper_ids + parker_ids, seed)) + b"\n")
    running = [sim.sweeper(t, quiet_every) for t in sweeper_ids]
    running += [sim.parker(t) for t in parker_ids]
    if parkers:
        running.append(sim.scavenger(parker_ids, scavenger_early))
    late: bytes | None = None
    buf: list[bytes] = []
    written = 0
    pick = rng.randrange
    steps = 0
    while running:
        i = pick(len(running))
        steps += 1
        if not steps % steps_per_ms:  # time passes whether a thread writes or waits
            sim.clock += 1
        try:
            line = next(running[i])
        except StopIteration:
            running.pop(i)
            continue
        if line is None:
            continue
        written += 1
        if written >= events:
            sim.stopping = True
        if late is not None:  # a line one place late, as a thread that was preempted
            buf.append(line)
            buf.append(late)
            late = None
        elif not pick(late_every):
            late = line
        else:
            buf.append(line)
        if len(buf) >= 4096:
            f.write(b"".join(buf))
            buf.clear()
    if late is not None:
        buf.append(late)
    buf.append(b'{"ev":"end","events":%d,"lin":%d,"tid":0}\n' % (written, sim.lin))
    f.write(b"".join(buf))
    return written


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="python -m purgecheck.formats.tracegen",
                                description="Write a large linearized trace (see the module "
                                            "docstring).",
                                epilog="example: python -m purgecheck.formats.tracegen 10000000 "
                                       "/tmp/big.jsonl && purgecheck validate /tmp/big.jsonl")
    p.add_argument("events", type=int)
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    with open(args.out, "wb") as f:
        n = generate(f, args.events, args.seed)
    print(f"{args.out}: {n:,} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
