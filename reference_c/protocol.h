/* protocol.h: the atomic protocol of seed 000 in the C reference, written once for two builds:
 * the epoch advance (digest 7) and the forked-child rule, the stamp's and the sweep's reads of
 * the epoch (digests 5 and 6.2), and the park handoff between an owner and the scavenger
 * (digest 8).
 *
 * The normal build includes it at the end of purge.h (epoch.c, sweep.c and park.c call it);
 * the Relacy build (reference_c/relacy/check.cpp) includes it with its own thread record and
 * clock, so that Relacy checks this very text. Every atomic access goes through atomics.h,
 * with its ordering named there. What is not atomic protocol (traces, the linearized steps,
 * the script's hooks, the mutants' run-time switches, the idle work) is reached through the
 * hooks below, which the includer defines (each is nothing by default):
 *   MI_PROTO_TLD                the thread record type (fields park_state, park_swept,
 *                               park_reclaim, holes_sweep_last, holes_sweep_deferred: atomics;
 *                               holes_sweep_epoch, holes_park_epoch: plain)
 *   MI_MUTANT(NAME)             the run-time switch M_NAME is on (0: never)
 *   MI_AT_STEP(pc), MI_LIN_LOCK(), MI_LIN_UNLOCK(), MI_LIN_STEP(pc, v),
 *   MI_LIN_STEP_BOOL(pc, b), MI_LIN_STEP_WAIT(spins, v), MI_ADVANCE_DELAY(at)
 *                               around each step of the advance (linearize.c, the script's
 *                               fork_at / clock_at, the stress delays)
 *   MI_SPIN_PAUSE()             between two loads of the MOVING spin (a cpu pause)
 *   MI_ON_PARK(t), MI_ON_UNPARK(t), MI_ON_PARK_SWEEP(t, deferred, next)   trace events
 *   MI_PARK_IDLE_WORK(t)        the scavenger's sweep of a claimed thread; returns deferred
 *   MI_PARK_CAN_WAIT            the owner may wait for a sweep in progress (real threads)
 *   MI_PARK_YIELD()             what it does while it waits
 * and `int64_t mi_clock_now(void)`.
 */
#ifndef MI_PROTOCOL_H
#define MI_PROTOCOL_H

#include <stdbool.h>
#include <stdint.h>

#include "atomics.h"

#define MI_MOVING INT64_MIN                     /* the mark of an epoch advance in progress */
#ifndef MI_EPOCH_SPIN_MAX
#define MI_EPOCH_SPIN_MAX 1000
#endif
#define MI_PARK_SWEEPS_MAX 6
enum { PARK_RUNNING, PARK_PARKED, PARK_SWEEPING };
enum { PARK_SWEPT_NONE = 0, PARK_SWEPT_DONE = 1, PARK_SWEPT_SMALL = 2 };
typedef struct { bool advanced; uint64_t epoch; int64_t start; } mi_advance_t;
#endif

/* The functions, once the includer has defined its thread record type and hooks (purge.h
 * includes this file at its top for the constants and again at its end for these). */
#if defined(MI_PROTO_TLD) && !defined(MI_PROTOCOL_FUNCTIONS)
#define MI_PROTOCOL_FUNCTIONS

#ifndef MI_MUTANT
#define MI_MUTANT(name) 0
#endif
#ifndef MI_AT_STEP
#define MI_AT_STEP(pc) ((void)0)
#define MI_LIN_LOCK() ((void)0)
#define MI_LIN_UNLOCK() ((void)0)
#define MI_LIN_STEP(pc, v) ((void)0)
#define MI_LIN_STEP_BOOL(pc, b) ((void)0)
#define MI_LIN_STEP_WAIT(spins, v) ((void)0)
#define MI_ADVANCE_DELAY(at) ((void)0)
#endif
#ifndef MI_SPIN_PAUSE
#define MI_SPIN_PAUSE() mi_proto_cpu_pause()
#endif
#ifndef MI_ON_PARK
#define MI_ON_PARK(t) ((void)0)
#define MI_ON_UNPARK(t) ((void)0)
#define MI_ON_PARK_SWEEP(t, deferred, next) ((void)0)
#endif

int64_t mi_clock_now(void);

/* The epoch has lasted the interval, or the clock went backwards. */
static inline bool mi_proto_is_epoch_due(int64_t start, int64_t now, int64_t interval) {
    if (MI_MUTANT(EPOCH_NOT_RATE_LIMITED)) return true;
    if (MI_MUTANT(CLOCK_BACK_NOT_DUE)) return now - start >= interval;   /* broken: back is not due */
    return !(now >= start && now - start < interval);
}

static inline void mi_proto_cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* _mi_page_purge_holes_epoch_advance (digest 7) on the epoch's two atomics. One call moves
 * the epoch by at most one. Each atomic access (and each clock read) is one step of
 * model/epoch.py; in a linearized trace it is made under lin_lock with the advance_step event
 * that reports it. */
static inline mi_advance_t mi_proto_epoch_advance(mi_atomic(int64_t) *epoch_start,
                                                  mi_atomic(uint64_t) *epoch, int64_t interval) {
    mi_advance_t r = {false, 0, 0};
    if (interval <= 0) return r;
    MI_AT_STEP("load_start");
    MI_LIN_LOCK();
    int64_t start = mi_atomic_load(epoch_start, MI_ORDER_LOAD_START);
    MI_LIN_STEP("load_start", start);
    MI_LIN_UNLOCK();
    if (start != MI_MOVING) {
        MI_AT_STEP("read_clock");
        MI_LIN_LOCK();
        int64_t now = mi_clock_now();
        MI_LIN_STEP("read_clock", now);
        MI_LIN_UNLOCK();
        MI_AT_STEP("compare");
        if (!mi_proto_is_epoch_due(start, now, interval)) return r;
        MI_ADVANCE_DELAY(MI_DELAY_BEFORE_CAS);
        MI_AT_STEP("cas");
        MI_LIN_LOCK();
        bool won;
        if (MI_MUTANT(NO_CAS_EXCLUSION)) {   /* broken: a plain store claims it */
            mi_atomic_store(epoch_start, MI_MOVING, MI_RELEASE);
            won = true;
        } else {
            won = mi_atomic_cas(epoch_start, &start, MI_MOVING, MI_ORDER_CAS, MI_ORDER_CAS_FAIL);
        }
        MI_LIN_STEP_BOOL("cas", won);
        MI_LIN_UNLOCK();
        if (won) {
            MI_ADVANCE_DELAY(MI_DELAY_BEFORE_INCREMENT);
            MI_AT_STEP("increment");
            /* The epoch begins for everybody else at the increment ... */
            MI_LIN_LOCK();
            r.epoch = mi_atomic_fetch_add(epoch, 1, MI_ORDER_FETCH_ADD) + 1;
            MI_LIN_STEP("increment", (int64_t)r.epoch);
            MI_LIN_UNLOCK();
            if (MI_MUTANT(DOUBLE_INCREMENT)) {
                MI_LIN_LOCK();
                r.epoch = mi_atomic_fetch_add(epoch, 1, MI_ORDER_FETCH_ADD) + 1;
                MI_LIN_STEP("increment", (int64_t)r.epoch);
                MI_LIN_UNLOCK();
            }
            /* ... so its recorded beginning is read after it, never before. */
            MI_AT_STEP("read_clock_again");
            MI_LIN_LOCK();
            int64_t now2 = mi_clock_now();
            MI_LIN_STEP("read_clock_again", now2);
            MI_LIN_UNLOCK();
            r.start = MI_MUTANT(START_BEFORE_INCREMENT) ? now : now2;   /* broken: early */
            MI_ADVANCE_DELAY(MI_DELAY_BEFORE_STORE);
            MI_AT_STEP("store_start");
            MI_LIN_LOCK();
            mi_atomic_store(epoch_start, r.start, MI_ORDER_STORE_START);
            MI_LIN_STEP("store_start", r.start);
            MI_LIN_UNLOCK();
            r.advanced = true;
            return r;
        }
    }
    /* Another sweeper holds MOVING: wait for it, bounded, then carry on either way. */
    int64_t seen = MI_MOVING;
    for (int spins = 0;; spins++) {
        MI_LIN_LOCK();
        if (spins < MI_EPOCH_SPIN_MAX) seen = mi_atomic_load(epoch_start, MI_ORDER_SPIN_LOAD);
        bool stop = spins >= MI_EPOCH_SPIN_MAX || seen != MI_MOVING;
        if (stop) MI_LIN_STEP_WAIT(spins, seen);
        MI_LIN_UNLOCK();
        if (stop) break;
        MI_SPIN_PAUSE();
    }
    return r;
}

/* Fork: in the child, if another thread held MOVING, record a new beginning (seed 000: "A fork
 * that lands while another thread holds the mark: the child records a new beginning"). One
 * CAS MOVING -> now; the real code loads start relaxed and stores now with release, which in a
 * child of one thread comes to the same (docs/proofs.md, "A fork under C11"). True when it
 * recorded one. */
static inline bool mi_proto_forked_child(mi_atomic(int64_t) *epoch_start, int64_t now) {
    if (MI_MUTANT(FORK_CHILD_KEEPS_MOVING)) return false;   /* broken: the child waits forever */
    int64_t moving = MI_MOVING;
    return mi_atomic_cas(epoch_start, &moving, now, MI_ORDER_FORK_CAS, MI_ORDER_FORK_CAS_FAIL);
}

/* The allocating side's read of the epoch for the stamp (digest 5): relaxed. */
static inline uint64_t mi_proto_stamp_epoch(mi_atomic(uint64_t) *epoch) {
    return mi_atomic_load(epoch, MI_ORDER_STAMP_LOAD);
}

/* The sweep's read of the epoch (digest 6.2, holes_sweep_epoch): acquire. */
static inline uint64_t mi_proto_sweep_epoch(mi_atomic(uint64_t) *epoch) {
    return mi_atomic_load(epoch, MI_ORDER_SWEEP_EPOCH);
}

/* -- the park handoff (model/park.py) ------------------------------------------------------ */

/* mi_on_thread_idle_start: reset the park's progress, RUNNING -> PARKED. */
static inline bool mi_proto_park_enter(MI_PROTO_TLD *t) {
    if (mi_atomic_load(&t->park_state, MI_ORDER_PARK_LOAD_STATE) != PARK_RUNNING) return false;
    mi_atomic_store(&t->park_reclaim, false, MI_ORDER_PARK_STORE_RECLAIM);
    mi_atomic_store(&t->park_swept, (int)PARK_SWEPT_NONE, MI_ORDER_PARK_STORE_SWEPT);
    MI_ON_PARK(t);
    int running = PARK_RUNNING;
    mi_atomic_cas(&t->park_state, &running, (int)PARK_PARKED, MI_ORDER_PARK_CAS,
                  MI_ORDER_PARK_CAS_FAIL);
    return true;
}

/* mi_on_thread_idle_end: PARKED -> RUNNING. While a sweep has the heap, ask it to stop
 * (park_reclaim) and wait for it, where waiting is possible (MI_PARK_CAN_WAIT). */
static inline bool mi_proto_park_leave(MI_PROTO_TLD *t) {
    for (;;) {
        int state = mi_atomic_load(&t->park_state, MI_ORDER_UNPARK_LOAD_STATE);
        if (state == PARK_SWEEPING) {
            mi_atomic_store(&t->park_reclaim, true, MI_ORDER_UNPARK_STORE_RECLAIM);
            if (!(MI_PARK_CAN_WAIT)) return false;   /* cannot happen sequentially */
            MI_PARK_YIELD();
            continue;
        }
        if (state != PARK_PARKED) return false;
        if (mi_atomic_cas(&t->park_state, &state, (int)PARK_RUNNING, MI_ORDER_UNPARK_CAS,
                          MI_ORDER_UNPARK_CAS_FAIL)) {
            MI_ON_UNPARK(t);
            return true;
        }
    }
}

/* park_swept after a sweep: DONE unless the sweep left something and the park is still
 * young (the sweep began less than two epochs after the park's first) and under the cap. */
static inline int mi_proto_park_next(MI_PROTO_TLD *t, int swept, bool deferred) {
    if (MI_MUTANT(PARK_DONE_FIRST) || !deferred) return PARK_SWEPT_DONE;
    int sweeps = swept == PARK_SWEPT_NONE ? 1 : swept - PARK_SWEPT_SMALL + 2;
    uint32_t age = (uint32_t)(t->holes_sweep_epoch - t->holes_park_epoch);
    if (MI_MUTANT(PARK_UNBOUNDED)) return PARK_SWEPT_SMALL + sweeps - 1;
    if (MI_MUTANT(PARK_IGNORES_EPOCHS)) age = 0;
    if (age < 2 && sweeps < MI_PARK_SWEEPS_MAX) return PARK_SWEPT_SMALL + sweeps - 1;
    return PARK_SWEPT_DONE;
}

enum { MI_CLAIM_SKIP, MI_CLAIM_NOT_DUE, MI_CLAIM_LOST, MI_CLAIM_WON };

/* _mi_theap_sweep_parked's look at one thread: skip it (not parked, or its park is done), not
 * due yet (*wait: the ms until it is), lost to the owner coming back, or claimed
 * (PARKED -> SWEEPING). */
static inline int mi_proto_park_claim(MI_PROTO_TLD *t, int64_t interval, int64_t *wait) {
    if (mi_atomic_load(&t->park_state, MI_ORDER_SCAV_LOAD_STATE) != PARK_PARKED
        || mi_atomic_load(&t->park_swept, MI_ORDER_SCAV_LOAD_SWEPT) == PARK_SWEPT_DONE)
        return MI_CLAIM_SKIP;
    int64_t since = mi_clock_now() - mi_atomic_load(&t->holes_sweep_last, MI_ORDER_SCAV_LOAD_LAST);
    if (since < interval) {
        *wait = interval - since;
        return MI_CLAIM_NOT_DUE;
    }
    int parked = PARK_PARKED;
    if (!mi_atomic_cas(&t->park_state, &parked, (int)PARK_SWEEPING, MI_ORDER_CLAIM_CAS,
                       MI_ORDER_CLAIM_CAS_FAIL))
        return MI_CLAIM_LOST;   /* the owner came back first */
    return MI_CLAIM_WON;
}

/* The scavenger has claimed `t` (SWEEPING): do the idle work, record the end time, store the
 * next park_swept, release (-> PARKED). Returns park_swept as it leaves it. */
static inline int mi_proto_park_sweep(MI_PROTO_TLD *t) {
    int swept = mi_atomic_load(&t->park_swept, MI_ORDER_CLAIM_LOAD_SWEPT);
    mi_atomic_store(&t->holes_sweep_deferred, false, MI_ORDER_STORE_DEFERRED);
    int64_t start = mi_clock_now();
    bool deferred = MI_PARK_IDLE_WORK(t);
    /* holes_sweep_last is taken AFTER the work, so the next sweep of this park is an
     * interval after the end of this one. */
    mi_atomic_store(&t->holes_sweep_last,
                    MI_MUTANT(SWEEP_LAST_BEFORE_WORK) ? start : mi_clock_now(), MI_ORDER_STORE_LAST);
    if (swept == PARK_SWEPT_NONE) t->holes_park_epoch = t->holes_sweep_epoch;
    int next = mi_proto_park_next(t, swept, deferred);
    mi_atomic_store(&t->park_swept, next, MI_ORDER_STORE_SWEPT);
    MI_ON_PARK_SWEEP(t, deferred, next);
    mi_atomic_store(&t->park_state, (int)PARK_PARKED, MI_ORDER_RELEASE_STATE);
    return next;
}

#endif /* MI_PROTO_TLD */
