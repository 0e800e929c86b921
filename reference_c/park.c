/* park.c: the park handoff and the scavenger (model/park.py).
 *
 * Seed 000, change (2): "a park in which such blocks were left is therefore not marked as
 * done ... it is swept again purge_holes_min_interval after the END of the sweep before
 * (holes_sweep_last is written after the work now) ... until a sweep BEGAN two epochs on from
 * the first sweep of the park ... MI_PARK_SWEEPS_MAX = 6 whatever happens."
 *
 * The park state is an atomic the scavenger claims with a CAS (PARKED -> SWEEPING); the owner
 * leaving the park sets park_reclaim and waits while a sweep has its heap. With the virtual
 * clock the scavenger runs in the op's thread (ops `scavenge`, `scavenger MS`); with the real
 * clock it is a thread of its own that sleeps until the next park is due.
 */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "purge.h"

/* The owner parks: reset the park's progress, RUNNING -> PARKED, wake the scavenger. */
bool mi_on_thread_idle_start(int tid) {
    mi_tld_t *t = mi_thread(tid);
    if (atomic_load(&t->park_state) != PARK_RUNNING) return false;
    atomic_store(&t->park_reclaim, false);
    atomic_store(&t->park_swept, PARK_SWEPT_NONE);
    tr_begin("park");
    tr_int("thread", tid);
    tr_end();
    int running = PARK_RUNNING;
    atomic_compare_exchange_strong_explicit(&t->park_state, &running, PARK_PARKED,
                                            memory_order_acq_rel, memory_order_acquire);
    if (mi_world->opt.clock_real) mi_scavenger_wake();
    return true;
}

/* The owner comes back: PARKED -> RUNNING. While a sweep has the heap, ask it to stop
 * (park_reclaim) and wait for it. */
bool mi_on_thread_idle_end(int tid) {
    mi_tld_t *t = mi_thread(tid);
    for (;;) {
        int state = atomic_load_explicit(&t->park_state, memory_order_acquire);
        if (state == PARK_SWEEPING) {
            atomic_store(&t->park_reclaim, true);
            if (!mi_world->opt.clock_real) return false;   /* cannot happen sequentially */
            sched_yield();
            continue;
        }
        if (state != PARK_PARKED) return false;
        if (atomic_compare_exchange_strong_explicit(&t->park_state, &state, PARK_RUNNING,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            tr_begin("unpark");
            tr_int("thread", tid);
            tr_end();
            return true;
        }
    }
}

/* park_swept after a sweep: DONE unless the sweep left something and the park is still
 * young (the sweep began less than two epochs after the park's first) and under the cap. */
int mi_compute_park_next(mi_tld_t *t, int swept, bool deferred) {
    if (mi_mutant == M_PARK_DONE_FIRST || !deferred) return PARK_SWEPT_DONE;
    int sweeps = swept == PARK_SWEPT_NONE ? 1 : swept - PARK_SWEPT_SMALL + 2;
    uint32_t age = (uint32_t)(t->holes_sweep_epoch - t->holes_park_epoch);
    if (mi_mutant == M_PARK_UNBOUNDED) return PARK_SWEPT_SMALL + sweeps - 1;
    if (mi_mutant == M_PARK_IGNORES_EPOCHS) age = 0;
    if (age < 2 && sweeps < MI_PARK_SWEEPS_MAX) return PARK_SWEPT_SMALL + sweeps - 1;
    return PARK_SWEPT_DONE;
}

/* The scavenger has claimed `t` (SWEEPING): do the idle work, record the end time, store the
 * next park_swept, release (-> PARKED). */
static void sweep_parked_thread(mi_tld_t *t) {
    int swept = atomic_load(&t->park_swept);
    atomic_store(&t->holes_sweep_deferred, false);
    int64_t start = mi_clock_now();
    bool deferred = mi_on_thread_idle(t->id, true);
    if (!mi_world->opt.clock_real) mi_clock_advance(mi_world->opt.sweep_ms);   /* the work's time */
    /* holes_sweep_last is taken AFTER the work, so the next sweep of this park is an
     * interval after the end of this one. */
    atomic_store(&t->holes_sweep_last, mi_mutant == M_SWEEP_LAST_BEFORE_WORK ? start : mi_clock_now());
    if (swept == PARK_SWEPT_NONE) t->holes_park_epoch = t->holes_sweep_epoch;
    int next = mi_compute_park_next(t, swept, deferred);
    atomic_store(&t->park_swept, next);
    tr_begin("park_sweep");
    tr_int("thread", t->id);
    tr_u64("epoch", t->holes_sweep_epoch);
    tr_bool("deferred", deferred);
    tr_bool("done", next == PARK_SWEPT_DONE);
    tr_end();
    atomic_store_explicit(&t->park_state, PARK_PARKED, memory_order_release);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* _mi_theap_sweep_parked: one pass over the parked threads, in thread order. Sets *due to
 * the time until the next thread is due; returns false when nothing is waiting. */
bool mi_theap_sweep_parked(int64_t *due) {
    mi_world_t *w = mi_world;
    int64_t interval = mi_compute_interval(w->opt.interval_ms);
    bool waiting = false;
    pthread_mutex_lock(&w->threads_lock);
    int n = w->nthreads;
    int *ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
    mi_tld_t **tlds = malloc(sizeof(mi_tld_t *) * (size_t)(n ? n : 1));
    if (!ids || !tlds) mi_corrupt("out of memory");
    for (int i = 0; i < n; i++) ids[i] = w->threads[i]->id;
    pthread_mutex_unlock(&w->threads_lock);
    qsort(ids, (size_t)n, sizeof(int), cmp_int);
    for (int i = 0; i < n; i++) tlds[i] = mi_thread(ids[i]);
    *due = 0;
    for (int i = 0; i < n; i++) {
        mi_tld_t *t = tlds[i];
        if (atomic_load_explicit(&t->park_state, memory_order_acquire) != PARK_PARKED
            || atomic_load(&t->park_swept) == PARK_SWEPT_DONE)
            continue;
        int64_t since = mi_clock_now() - atomic_load(&t->holes_sweep_last);
        if (since < interval) {
            int64_t wait = interval - since;
            if (!waiting || wait < *due) *due = wait;
            waiting = true;
            continue;
        }
        int parked = PARK_PARKED;
        if (!atomic_compare_exchange_strong_explicit(&t->park_state, &parked, PARK_SWEEPING,
                                                     memory_order_acq_rel, memory_order_acquire))
            continue;   /* the owner came back first */
        sweep_parked_thread(t);
        if (atomic_load(&t->park_swept) != PARK_SWEPT_DONE) {
            int64_t wait = interval - (mi_clock_now() - atomic_load(&t->holes_sweep_last));
            if (wait < 0) wait = 0;
            if (!waiting || wait < *due) *due = wait;
            waiting = true;
        }
    }
    free(ids);
    free(tlds);
    return waiting;
}

/* The scavenger loop for `duration_ms` of virtual time: sweep, sleep until due. */
int mi_run_scavenger(int64_t duration_ms) {
    int64_t end = mi_clock_now() + duration_ms, due;
    int passes = 0;
    while (mi_clock_now() <= end) {
        bool waiting = mi_theap_sweep_parked(&due);
        passes++;
        if (!waiting || mi_clock_now() + due > end) break;
        mi_clock_advance(due);
    }
    if (mi_clock_now() < end) mi_clock_advance(end - mi_clock_now());
    return passes;
}

/* -- the scavenger thread (real clock) ------------------------------------------------------- */

static pthread_t scav_thread;
static pthread_mutex_t scav_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scav_cond = PTHREAD_COND_INITIALIZER;
static bool scav_running, scav_stop, scav_woken;
static uint64_t scav_started, scav_done, scav_wanted;
static int64_t scav_last_due;
static bool scav_last_waiting;

static void *scavenger_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&scav_lock);
    while (!scav_stop) {
        scav_started++;
        scav_woken = false;
        pthread_mutex_unlock(&scav_lock);
        int64_t due;
        bool waiting = mi_theap_sweep_parked(&due);
        pthread_mutex_lock(&scav_lock);
        scav_done++;
        scav_last_due = due;
        scav_last_waiting = waiting;
        pthread_cond_broadcast(&scav_cond);
        if (scav_stop || scav_woken || scav_wanted > scav_done) continue;
        if (waiting) {   /* sleep until the next park is due (nothing polls) */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += due / 1000;
            ts.tv_nsec += (due % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
            pthread_cond_timedwait(&scav_cond, &scav_lock, &ts);
        } else {
            while (!scav_stop && !scav_woken && scav_wanted <= scav_done)
                pthread_cond_wait(&scav_cond, &scav_lock);
        }
    }
    pthread_mutex_unlock(&scav_lock);
    tr_thread_exit();
    return NULL;
}

void mi_scavenger_start(void) {
    pthread_mutex_lock(&scav_lock);
    scav_stop = scav_woken = false;
    scav_started = scav_done = scav_wanted = 0;
    pthread_mutex_unlock(&scav_lock);
    if (pthread_create(&scav_thread, NULL, scavenger_main, NULL) != 0) mi_corrupt("pthread_create failed");
    scav_running = true;
}

void mi_scavenger_stop(void) {
    if (!scav_running) return;
    pthread_mutex_lock(&scav_lock);
    scav_stop = true;
    pthread_cond_broadcast(&scav_cond);
    pthread_mutex_unlock(&scav_lock);
    pthread_join(scav_thread, NULL);
    scav_running = false;
}

void mi_scavenger_wake(void) {
    pthread_mutex_lock(&scav_lock);
    scav_woken = true;
    pthread_cond_broadcast(&scav_cond);
    pthread_mutex_unlock(&scav_lock);
}

/* The op `scavenge` with the real clock: a pass that starts after this call, waited for. */
bool mi_scavenger_pass(int64_t *due) {
    pthread_mutex_lock(&scav_lock);
    uint64_t want = scav_started + 1;
    if (want > scav_wanted) scav_wanted = want;
    pthread_cond_broadcast(&scav_cond);
    while (scav_done < want) pthread_cond_wait(&scav_cond, &scav_lock);
    *due = scav_last_due;
    bool waiting = scav_last_waiting;
    pthread_mutex_unlock(&scav_lock);
    return waiting;
}
