"""The park handoff: a thread parks, the scavenger sweeps its heaps (digest section 8).

Seed 000, change (2): "a park in which such blocks were left is therefore not marked as done
... it is swept again purge_holes_min_interval after the END of the sweep before
(holes_sweep_last is written after the work now) ... until a sweep BEGAN two epochs on from
the first sweep of the park ... MI_PARK_SWEEPS_MAX = 6 whatever happens."
"""

from __future__ import annotations

from model.drivers import mi_on_thread_idle
from model.epoch import EPOCH_MODULUS, compute_interval
from model.thread import (MI_PARK_SWEEPS_MAX, PARK_SWEPT_DONE, PARK_SWEPT_NONE,
                          PARK_SWEPT_SMALL, PARKED, RUNNING, SWEEPING, ParkSweep, ThreadState)


def mi_on_thread_idle_start(world, tid: int) -> bool:
    """The owner parks: reset the park's progress, RUNNING -> PARKED (one more thread in
    subproc->parked_count), wake the scavenger."""
    thread = world.thread(tid)
    if thread.park_state != RUNNING:
        return False
    thread.park_reclaim = False
    thread.park_swept = PARK_SWEPT_NONE
    thread.park_sweeps = []
    thread.park_state = PARKED
    world.subproc.parked_count += 1
    world.log.append({"ev": "park", "thread": tid})
    return True


def mi_on_thread_idle_end(world, tid: int) -> bool:
    """The owner comes back: PARKED -> RUNNING, one thread fewer in parked_count. (A sweep in progress would be asked to stop
    with park_reclaim and waited for; sweeps are atomic in the sequential model.)"""
    thread = world.thread(tid)
    if thread.park_state == SWEEPING:
        thread.park_reclaim = True
        return False
    if thread.park_state != PARKED:
        return False
    thread.park_state = RUNNING
    world.subproc.parked_count -= 1
    world.log.append({"ev": "unpark", "thread": tid})
    return True


def compute_park_sweeps(swept: int) -> int:
    """How many sweeps this park has had, counting the one that just ended."""
    return 1 if swept == PARK_SWEPT_NONE else swept - PARK_SWEPT_SMALL + 2


def compute_park_next(thread: ThreadState, swept: int, deferred: bool) -> int:
    """park_swept after a sweep: DONE unless the sweep left something and the park is still
    young (the sweep began less than two epochs after the park's first) and under the cap."""
    if not deferred:
        return PARK_SWEPT_DONE
    sweeps = compute_park_sweeps(swept)
    age = (thread.holes_sweep_epoch - thread.holes_park_epoch) % EPOCH_MODULUS
    if age < 2 and sweeps < MI_PARK_SWEEPS_MAX:
        return PARK_SWEPT_SMALL + sweeps - 1
    return PARK_SWEPT_DONE


def is_park_due(thread: ThreadState, now: int, interval: int) -> bool:
    """A parked thread is swept again `interval` ms after the END of its last sweep
    (holes_sweep_last, written after the work)."""
    return now - thread.holes_sweep_last >= interval


def is_park_waiting(thread: ThreadState) -> bool:
    """The scavenger looks at a thread that is parked and whose park is not done; it passes
    over the others (digest 8: "skip a thread whose park_swept == DONE")."""
    return thread.park_state == PARKED and thread.park_swept != PARK_SWEPT_DONE


def claim_parked_thread(thread: ThreadState) -> int:
    """The scavenger claims a thread that is waiting (is_park_waiting) and due (seed 000 (2):
    "the loop claims the next one in the list that is"): the CAS park_state PARKED ->
    SWEEPING, which cannot fail here, as nothing runs between the test and it. Returns
    park_swept as the claim found it (the park's progress, which release_parked_thread moves
    on) and clears holes_sweep_deferred for the sweep to set (digest 8: "claim with CAS
    PARKED -> SWEEPING, then: swept = park_swept; clear deferred")."""
    thread.park_state = SWEEPING
    thread.holes_sweep_deferred = False
    return thread.park_swept


def release_parked_thread(world, thread: ThreadState, swept: int, start_ms: int,
                          deferred: bool) -> ParkSweep:
    """The end of a claimed sweep that began at `start_ms` and found the park at `swept`:
    holes_sweep_last taken after the work (record_sweep_last), the park's progress
    (end_park_sweep), then the release, park_state -> PARKED (digest 8: "holes_sweep_last =
    now taken AFTER the work ... store park_swept = next; store state PARKED"). `world`
    needs only a clock; `deferred`: whether the sweep left something (holes_sweep_deferred).
    Returns the sweep's ghost record, which it appends to thread.park_sweeps."""
    record_sweep_last(world, thread, start_ms)
    end_park_sweep(thread, swept, deferred)
    record = ParkSweep(start_ms, world.clock.read(), thread.holes_sweep_epoch, deferred,
                       thread.park_swept)
    thread.park_sweeps.append(record)
    thread.park_state = PARKED
    return record


def sweep_parked_thread(world, thread: ThreadState) -> None:
    """Claim (PARKED -> SWEEPING), do the idle work, record the end time, store the next
    park_swept, release (-> PARKED)."""
    swept = claim_parked_thread(thread)
    start = world.clock.read()
    summary = mi_on_thread_idle(world, thread.id, in_handoff=True)
    world.clock.advance(world.options.sweep_ms)  # the work takes virtual time
    release_parked_thread(world, thread, swept, start, summary.deferred)
    world.log.append({"ev": "park_sweep", "thread": thread.id, "epoch": thread.holes_sweep_epoch,
                      "deferred": summary.deferred,
                      "done": thread.park_swept == PARK_SWEPT_DONE})


def end_park_sweep(thread: ThreadState, swept: int, deferred: bool) -> int:
    """The park's progress after a sweep that found it at `swept`: the first sweep records
    the epoch the park began in, then park_swept moves on (compute_park_next). Returns it."""
    if swept == PARK_SWEPT_NONE:
        thread.holes_park_epoch = thread.holes_sweep_epoch
    thread.park_swept = compute_park_next(thread, swept, deferred)
    return thread.park_swept


def record_sweep_last(world, thread: ThreadState, start_ms: int) -> None:
    """holes_sweep_last is taken AFTER the work (not at `start_ms`), so the next sweep of
    this park is an interval after the end of this one."""
    thread.holes_sweep_last = world.clock.read()


def mi_theap_sweep_parked(world) -> int | None:
    """One pass of the scavenger over the parked threads. Returns the time until the next
    thread is due (the scavenger sleeps that long), or None when nothing is waiting."""
    interval = compute_interval(world.options.purge_holes_min_interval)
    due: int | None = None
    for tid in sorted(world.threads):
        thread = world.threads[tid]
        if not is_park_waiting(thread):
            continue
        if not is_park_due(thread, world.clock.read(), interval):
            wait = interval - (world.clock.read() - thread.holes_sweep_last)
            due = wait if due is None else min(due, wait)
            continue
        sweep_parked_thread(world, thread)
        if thread.park_swept != PARK_SWEPT_DONE:
            wait = max(0, interval - (world.clock.read() - thread.holes_sweep_last))
            due = wait if due is None else min(due, wait)
    return due


def run_scavenger(world, duration_ms: int) -> int:
    """The scavenger loop for `duration_ms` of virtual time: sweep, sleep until due.
    Returns the number of passes."""
    end = world.clock.read() + duration_ms
    passes = 0
    while world.clock.read() <= end:
        due = mi_theap_sweep_parked(world)
        passes += 1
        if due is None or world.clock.read() + due > end:
            break
        world.clock.advance(due)
    world.clock.set(max(world.clock.read(), end))
    return passes
