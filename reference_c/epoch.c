/* epoch.c: the clock the sweep reads and the process-wide epoch (model/clock.py, epoch.py).
 *
 * Seed 000, change (2): "mi_holes_epoch_advance: read the time the epoch began; if that is
 * the interval ago, claim the move with a CAS of that time to a MOVING mark; increment the
 * epoch; read the clock AGAIN and store that as the time the new epoch began." The epoch is
 * a C11 atomic; the claim is a strong CAS; the new beginning is a store-release. The advance
 * itself is protocol.h's, shared with the Relacy build (reference_c/relacy/).
 */
#include <time.h>

#include "purge.h"

/* Test hook: added to every reading of the real clock, so that a test can step the clock
 * back (stress --scenario clock-back: the seed's "a clock going backwards" in the advance).
 * 0 in every other run. */
_Atomic int64_t mi_clock_offset_ms;

/* Integer milliseconds: the virtual clock of the op script, or CLOCK_MONOTONIC (plus the
 * test's offset). */
int64_t mi_clock_now(void) {
    if (!mi_world->opt.clock_real) return atomic_load_explicit(&mi_world->vclock, memory_order_relaxed);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000
           + atomic_load_explicit(&mi_clock_offset_ms, memory_order_relaxed);
}

/* The op `clock MS` on the virtual clock; false when a monotone clock would go back. */
bool mi_clock_advance(int64_t ms) {
    if (ms < 0 && mi_world->opt.clock_monotone) return false;
    atomic_fetch_add(&mi_world->vclock, ms);
    return true;
}

/* clamp(purge_holes_min_interval, 0, 3600000); <= 0 turns the epoch (and the hold) off. */
int64_t mi_compute_interval(int64_t min_interval) {
    if (min_interval < 0) return 0;
    return min_interval > MI_HOLES_INTERVAL_MAX_MS ? MI_HOLES_INTERVAL_MAX_MS : min_interval;
}

/* (uint32)(current_epoch - stamp): ages are differences modulo 2^32. */
uint32_t mi_compute_epoch_age(uint64_t current, uint64_t stamp) { return (uint32_t)(current - stamp); }

/* Seed 000: "a large page whose epoch is the current one or the one before keeps its free
 * blocks". */
bool mi_is_epoch_young(uint64_t current, uint64_t stamp) {
    if (mi_mutant == M_AGE_LT_1) return mi_compute_epoch_age(current, stamp) < 1;
    if (mi_mutant == M_AGE_NO_MODULO) return (int64_t)current - (int64_t)stamp < 2;
    if (mi_mutant == M_AGE_SIGNED32) return (int32_t)mi_compute_epoch_age(current, stamp) < 2;
    return mi_compute_epoch_age(current, stamp) < 2;
}

/* The epoch has lasted the interval, or the clock went backwards (protocol.h). */
bool mi_is_epoch_due(int64_t start, int64_t now, int64_t interval) {
    return mi_proto_is_epoch_due(start, now, interval);
}

/* _mi_page_purge_holes_epoch_advance (digest 7), on the world's epoch: protocol.h, where each
 * atomic access is one step of model/epoch.py; in a linearized trace it is made under lin_lock
 * with the advance_step event that reports it. */
mi_advance_t mi_holes_epoch_advance(int64_t interval) {
    return mi_proto_epoch_advance(&mi_world->epoch_start, &mi_world->epoch, interval);
}

/* Fork: in the child, if another thread held MOVING, record a new beginning (protocol.h). */
void mi_page_purge_holes_forked_child(void) {
    mi_proto_forked_child(&mi_world->epoch_start, mi_clock_now());
}

/* The op `epoch_skip COUNT`: COUNT epochs pass untouched; the current one begins now. */
void mi_epoch_skip(int64_t count) {
    uint64_t e = atomic_fetch_add(&mi_world->epoch, (uint64_t)count) + (uint64_t)count;
    atomic_store_explicit(&mi_world->epoch_start, mi_clock_now(), memory_order_release);
    tr_begin("epoch_skip");
    tr_u64("epoch", e);
    tr_end();
}
