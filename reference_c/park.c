/* park.c: the park handoff and the scavenger (model/park.py).
 *
 * Seed 000, change (2): "a park in which such blocks were left is therefore not marked as
 * done ... it is swept again purge_holes_min_interval after the END of the sweep before
 * (holes_sweep_last is written after the work now) ... until a sweep BEGAN two epochs on from
 * the first sweep of the park ... MI_PARK_SWEEPS_MAX = 6 whatever happens."
 *
 * The park state is an atomic the scavenger claims with a CAS (PARKED -> SWEEPING); the owner
 * leaving the park sets park_reclaim and waits while a sweep has its heap. The handoff's
 * atomic accesses are protocol.h's, shared with the Relacy build (reference_c/relacy/). With the virtual
 * clock the scavenger runs in the op's thread (ops `scavenge`, `scavenger MS`); with the real
 * clock it is a thread of its own that sleeps until the next park is due.
 */
#include <stdlib.h>
#include <time.h>

#include "purge.h"

/* The owner parks: reset the park's progress, RUNNING -> PARKED (protocol.h), wake the
 * scavenger. */
bool mi_on_thread_idle_start(int tid) {
    if (!mi_proto_park_enter(mi_thread(tid))) return false;
    if (mi_world->opt.clock_real) mi_scavenger_wake();
    return true;
}

/* The owner comes back: PARKED -> RUNNING. While a sweep has the heap, ask it to stop
 * (park_reclaim) and wait for it (protocol.h). */
bool mi_on_thread_idle_end(int tid) {
    return mi_proto_park_leave(mi_thread(tid));
}

void mi_trace_thread_event(const char *ev, int tid) {
    tr_begin(ev);
    tr_int("thread", tid);
    tr_end();
}

/* park_swept after a sweep (protocol.h). */
int mi_compute_park_next(mi_tld_t *t, int swept, bool deferred) {
    return mi_proto_park_next(t, swept, deferred);
}

/* The work of a claimed sweep: the idle work of the thread's heaps, and its virtual time. */
bool mi_park_idle_work(mi_tld_t *t) {
    bool deferred = mi_on_thread_idle(t->id, true);
    if (!mi_world->opt.clock_real) mi_clock_advance(mi_world->opt.sweep_ms);   /* the work's time */
    return deferred;
}

void mi_trace_park_sweep(mi_tld_t *t, bool deferred, int next) {
    tr_begin("park_sweep");
    tr_int("thread", t->id);
    tr_u64("epoch", t->holes_sweep_epoch);
    tr_bool("deferred", deferred);
    tr_bool("done", next == PARK_SWEPT_DONE);
    tr_end();
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
        int64_t wait;
        int claim = mi_proto_park_claim(t, interval, &wait);
        if (claim == MI_CLAIM_NOT_DUE) {
            if (!waiting || wait < *due) *due = wait;
            waiting = true;
        }
        if (claim != MI_CLAIM_WON) continue;   /* skipped, not due, or the owner came back first */
        if (mi_proto_park_sweep(t) != PARK_SWEPT_DONE) {
            wait = interval - (mi_clock_now() - atomic_load(&t->holes_sweep_last));
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
