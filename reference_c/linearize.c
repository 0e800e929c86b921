/* linearize.c: a trace of the concurrent mode that the model can replay (docs/validation.md).
 *
 * Real threads have no order the model can predict, so `purgecheck validate` replays the
 * trace in the order of its "lin" numbers and asks whether the model can take each event as
 * a step. That works only if the lin order is an order in which the shared accesses really
 * happened. Two rules make it so:
 *   - every event takes its lin number from one process-wide counter (tr_end does it), so events
 *     that are ordered by happens-before (program order, a release the other side acquired)
 *     are ordered by lin as well;
 *   - each access to the epoch's shared state (load, CAS, increment, store of `start`, the
 *     epoch read of a stamp or of a sweep's begin) and each clock read of the advance is made
 *     under lin_lock together with the event that reports it, so that racing accesses, which
 *     happens-before does not order, are ordered by lin exactly as they took effect.
 * The lock only serialises single atomic steps; it never spans two of them, so every
 * interleaving of the advance's steps can still happen.
 */
#include <time.h>

#include "purge.h"

bool tr_linearized;
_Thread_local int tr_tid = -1;
_Atomic int64_t tr_lin;
static pthread_mutex_t lin_mutex = PTHREAD_MUTEX_INITIALIZER;

void lin_lock(void) {
    if (tr_linearized) pthread_mutex_lock(&lin_mutex);
}

void lin_unlock(void) {
    if (tr_linearized) pthread_mutex_unlock(&lin_mutex);
}

/* One atomic step of mi_holes_epoch_advance, named by the model's program counter
 * (model/epoch.py PC_*), with the value it read or wrote. Only linearized traces have them;
 * the caller holds lin_lock. */
static void step_begin(const char *pc) {
    tr_begin("advance_step");
    tr_str("pc", pc);
}

void lin_step(const char *pc, int64_t value) {
    if (!tr_linearized) return;
    step_begin(pc);
    tr_int("value", value);
    tr_end();
}

void lin_step_bool(const char *pc, bool value) {
    if (!tr_linearized) return;
    step_begin(pc);
    tr_bool("value", value);
    tr_end();
}

/* The end of the bounded wait on MOVING: the last value loaded and how many loads before it
 * saw MOVING (the loads in between change nothing, so they are not events). */
void lin_step_wait(int spins, int64_t value) {
    if (!tr_linearized) return;
    step_begin("wait_moving");
    tr_int("value", value);
    tr_int("spins", spins);
    tr_end();
}

/* Test hook: a sweeper sleeps mi_advance_delay_us at one point of the advance, when the
 * epoch it is leaving is even, so that the races of the advance are hit every time:
 *   - before the CAS (after the clock read found the epoch due): without the CAS's exclusion
 *     two sweepers that both found it due both claim it and both move the epoch;
 *   - before the increment (after the CAS won): with the start recorded from the first clock
 *     read, the epoch begins (the increment) the delay later than recorded, so the next one,
 *     whose sweeper is not delayed, comes early;
 *   - before the store of the new start (after the increment): MOVING is held on the new
 *     epoch (stress --scenario fork places its forks there too).
 * Every other epoch, so that a delayed epoch is followed by one that is not. The correct code
 * is unaffected apart from the delay. */
void (*mi_advance_hook)(const char *pc);

_Atomic int64_t mi_advance_delay_us;
_Atomic int mi_advance_delay_at;

static void sleep_us(int64_t us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* The point a sweeper is sleeping at now (-1: none), for a test that places something in
 * the window the delay holds open (stress --scenario fork). */
_Atomic int mi_advance_delaying = -1;

void mi_advance_delay(int at) {
    int64_t us = atomic_load_explicit(&mi_advance_delay_us, memory_order_relaxed);
    if (us <= 0 || at != atomic_load_explicit(&mi_advance_delay_at, memory_order_relaxed)
        || atomic_load_explicit(&mi_world->epoch, memory_order_relaxed) % 2) return;
    atomic_store(&mi_advance_delaying, at);
    sleep_us(us);
    atomic_store(&mi_advance_delaying, -1);
}

/* Test hook: the work of each sweep of a parked heap (mi_on_thread_idle with in_handoff) takes
 * mi_park_work_delay_us longer: the sweep sleeps after its pages, before its idle event, so
 * the end of the work, where the clean code reads the clock for holes_sweep_last, comes the
 * delay after the sweep's first clock reading. On the real clock a sweep's work is far
 * shorter than the clock's millisecond, so the mutant sweep_last_before_work (the time taken
 * before the work) records the same millisecond as the clean code; with the delay it records
 * a time the delay too early, and the scavenger sweeps the park again early.
 * After the sleep the hook reads the clock and reports the reading (a `clock` event, one step
 * under lin_lock as the `clock` op of the driver), so that the trace bounds the end of the
 * work from below (purgecheck/validate/sweeps.py park_sweep_ended: the last reading before the
 * sweep's idle event) as the virtual clock's sweep_ms does in a sequential trace. */
_Atomic int64_t mi_park_work_delay_us;

void mi_park_work_delay(void) {
    int64_t us = atomic_load_explicit(&mi_park_work_delay_us, memory_order_relaxed);
    if (us <= 0) return;
    sleep_us(us);
    lin_lock();
    tr_begin("clock");
    tr_int("now", mi_clock_now());
    tr_end();
    lin_unlock();
}

/* Test hook: mi_heap_abandon sleeps mi_abandon_delay_us between publishing a page in the
 * abandoned map and its `abandon` event, holding open the window in which another thread's
 * sweep could take the page from the map. The two are one lin step (heap.c), so the other
 * sweeps wait for the step, and a traced sweep of the page always follows its abandon; with
 * the map published outside the step (before 2026-12-05) the window let a sweep of the page
 * precede it (tests/test_concurrent.py). */
_Atomic int64_t mi_abandon_delay_us;

void mi_abandon_delay(void) {
    int64_t us = atomic_load_explicit(&mi_abandon_delay_us, memory_order_relaxed);
    if (us > 0) sleep_us(us);
}
