/* epoch.c: the clock the sweep reads and the process-wide epoch (model/clock.py, epoch.py).
 *
 * Seed 000, change (2): "mi_holes_epoch_advance: read the time the epoch began; if that is
 * the interval ago, claim the move with a CAS of that time to a MOVING mark; increment the
 * epoch; read the clock AGAIN and store that as the time the new epoch began." The epoch is
 * a C11 atomic; the claim is a strong CAS; the new beginning is a store-release.
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

/* The epoch has lasted the interval, or the clock went backwards. */
bool mi_is_epoch_due(int64_t start, int64_t now, int64_t interval) {
    if (mi_mutant == M_EPOCH_NOT_RATE_LIMITED) return true;
    if (mi_mutant == M_CLOCK_BACK_NOT_DUE) return now - start >= interval;   /* broken: back is not due */
    return !(now >= start && now - start < interval);
}

/* Before each step: what the script placed there (the driver's fork_at, clock_at). */
static inline void at_step(const char *pc) {
    if (mi_advance_hook) mi_advance_hook(pc);
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* _mi_page_purge_holes_epoch_advance (digest 7). One call moves the epoch by at most one.
 * Each atomic access (and each clock read) is one step of model/epoch.py; in a linearized
 * trace it is made under lin_lock with the advance_step event that reports it. */
mi_advance_t mi_holes_epoch_advance(int64_t interval) {
    mi_world_t *w = mi_world;
    mi_advance_t r = {false, 0, 0};
    if (interval <= 0) return r;
    at_step("load_start");
    lin_lock();
    int64_t start = atomic_load_explicit(&w->epoch_start, memory_order_acquire);
    lin_step("load_start", start);
    lin_unlock();
    if (start != MI_MOVING) {
        at_step("read_clock");
        lin_lock();
        int64_t now = mi_clock_now();
        lin_step("read_clock", now);
        lin_unlock();
        at_step("compare");
        if (!mi_is_epoch_due(start, now, interval)) return r;
        mi_advance_delay(MI_DELAY_BEFORE_CAS);
        at_step("cas");
        lin_lock();
        bool won;
        if (mi_mutant == M_NO_CAS_EXCLUSION) {   /* broken: a plain store claims it */
            atomic_store_explicit(&w->epoch_start, MI_MOVING, memory_order_release);
            won = true;
        } else {
            won = atomic_compare_exchange_strong_explicit(&w->epoch_start, &start, MI_MOVING,
                                                          memory_order_acq_rel, memory_order_acquire);
        }
        lin_step_bool("cas", won);
        lin_unlock();
        if (won) {
            mi_advance_delay(MI_DELAY_BEFORE_INCREMENT);
            at_step("increment");
            /* The epoch begins for everybody else at the increment ... */
            lin_lock();
            r.epoch = atomic_fetch_add_explicit(&w->epoch, 1, memory_order_acq_rel) + 1;
            lin_step("increment", (int64_t)r.epoch);
            lin_unlock();
            if (mi_mutant == M_DOUBLE_INCREMENT) {
                lin_lock();
                r.epoch = atomic_fetch_add_explicit(&w->epoch, 1, memory_order_acq_rel) + 1;
                lin_step("increment", (int64_t)r.epoch);
                lin_unlock();
            }
            /* ... so its recorded beginning is read after it, never before. */
            at_step("read_clock_again");
            lin_lock();
            int64_t now2 = mi_clock_now();
            lin_step("read_clock_again", now2);
            lin_unlock();
            r.start = mi_mutant == M_START_BEFORE_INCREMENT ? now : now2;   /* broken: early */
            mi_advance_delay(MI_DELAY_BEFORE_STORE);
            at_step("store_start");
            lin_lock();
            atomic_store_explicit(&w->epoch_start, r.start, memory_order_release);
            lin_step("store_start", r.start);
            lin_unlock();
            r.advanced = true;
            return r;
        }
    }
    /* Another sweeper holds MOVING: wait for it, bounded, then carry on either way. */
    int64_t seen = MI_MOVING;
    for (int spins = 0;; spins++) {
        lin_lock();
        if (spins < MI_EPOCH_SPIN_MAX) seen = atomic_load_explicit(&w->epoch_start, memory_order_acquire);
        bool stop = spins >= MI_EPOCH_SPIN_MAX || seen != MI_MOVING;
        if (stop) lin_step_wait(spins, seen);
        lin_unlock();
        if (stop) break;
        cpu_pause();
    }
    return r;
}

/* Fork: in the child, if another thread held MOVING, record a new beginning. */
void mi_page_purge_holes_forked_child(void) {
    if (mi_mutant == M_FORK_CHILD_KEEPS_MOVING) return;   /* broken: the child waits forever */
    int64_t moving = MI_MOVING;
    atomic_compare_exchange_strong(&mi_world->epoch_start, &moving, mi_clock_now());
}

/* The op `epoch_skip COUNT`: COUNT epochs pass untouched; the current one begins now. */
void mi_epoch_skip(int64_t count) {
    uint64_t e = atomic_fetch_add(&mi_world->epoch, (uint64_t)count) + (uint64_t)count;
    atomic_store_explicit(&mi_world->epoch_start, mi_clock_now(), memory_order_release);
    tr_begin("epoch_skip");
    tr_u64("epoch", e);
    tr_end();
}
