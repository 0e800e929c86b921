/* stress_sweepers.c: scenario `sweepers` of stress (stress.c), and the plain sweeper thread
 * the scenarios park, fork and clock-back run beside their own threads.
 *
 * Seed 000, tests: "sweepers at the same time: four threads that allocate from a large page
 * of their own and sweep without a pause, next to the thread under test, which does the same
 * and checks (a) from readings of the clock that lie around its readings of the epoch that no
 * epoch is shorter than the interval, to the millisecond, and (b) that a page it allocated
 * from before a sweep keeps its blocks in that sweep"; a watcher thread only reads the clock
 * and the epoch and checks (a) as well. Checks: (a), (b).
 */
#include <string.h>
#include <time.h>

#include "stress.h"

_Atomic int64_t violations_a, violations_b, observations, checked_b, crossed_b;

/* A sweeper: a large page of its own (one block stays live), then allocate, free and sweep
 * without a pause. */
void *sweeper_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_heap_malloc(t, BLOCK, false, true);
    bool beside_parks = !strcmp(cfg.scenario, "park");   /* there it sweeps now and then */
    while (!atomic_load(&stop)) {
        mi_ptr_t b = mi_heap_malloc(t, BLOCK, false, true);
        mi_free(b, tid);
        mi_on_thread_idle(tid, false);
        atomic_fetch_add(&sweeps, 1);
        if (beside_parks) {
            struct timespec ts = {0, (long)(cfg.interval * 1000000 / 4)};
            nanosleep(&ts, NULL);
        }
    }
    tr_thread_exit();
    return NULL;
}

/* (a) An epoch begins after its increment and a read of the epoch that still returned an
 * older one comes before that increment; it ends before a read that returns a newer one. So
 * the epochs from `epoch` to E-1 lie between the clock reading taken before the last read
 * that returned an epoch older than `epoch` and the reading taken after the first read that
 * returned E; each lasts the interval at least, to the millisecond, because its recorded
 * beginning is read after its increment and the next one waits for that plus the interval.
 * The same for the epochs skipped between two reads. */
typedef struct {
    uint64_t epoch;       /* the newest epoch read */
    int64_t before;       /* the reading before the latest read that returned it */
    int64_t older;        /* the reading before the latest read of an older epoch */
    bool has_older;
} seen_t;

static void short_epochs(const char *what, uint64_t from, uint64_t to, int64_t c1, int64_t c2,
                         uint64_t read_then, uint64_t read_now) {
    int64_t count = (int64_t)(to - from);
    if (count > 0 && c2 - c1 < count * cfg.interval)
        violation(&violations_a, "(a) epochs %llu..%llu (%s) lasted %lld ms together at most "
                  "(clock %lld before a read of epoch %llu, %lld after a read of epoch %llu): "
                  "less than %lld x the interval of %lld ms",
                  (unsigned long long)from, (unsigned long long)to - 1, what,
                  (long long)(c2 - c1), (long long)c1, (unsigned long long)read_then,
                  (long long)c2, (unsigned long long)read_now, (long long)count,
                  (long long)cfg.interval);
}

static void observe(seen_t *last) {
    int64_t c1 = mi_clock_now();
    uint64_t e = epoch_now();
    int64_t c2 = mi_clock_now();
    atomic_fetch_add(&observations, 1);
    if (e > last->epoch) {
        if (last->has_older)
            short_epochs("the last one seen and the ones after it", last->epoch, e, last->older, c2,
                         last->epoch - 1, e);
        short_epochs("never seen", last->epoch + 1, e, last->before, c2, last->epoch, e);
        last->older = last->before;
        last->has_older = true;
        last->epoch = e;
    }
    if (e == last->epoch) last->before = c1;
}

/* The thread under test sweeps like the others and checks (a) and (b). (b): a page stamped
 * at a clock reading c0 can be two epochs old only when a whole epoch lies after c0, so a
 * sweep that ends less than an interval after c0 must leave the freed block where it is. */
void *under_test_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_heap_malloc(t, BLOCK, false, true);
    seen_t last = {epoch_now(), mi_clock_now(), 0, false};
    while (!atomic_load(&stop)) {
        observe(&last);
        int64_t c0 = mi_clock_now();
        uint64_t e0 = epoch_now();
        mi_ptr_t b = mi_heap_malloc(t, BLOCK, false, true);
        mi_free(b, tid);
        observe(&last);
        mi_on_thread_idle(tid, false);
        int64_t c1 = mi_clock_now();
        atomic_fetch_add(&sweeps, 1);
        if (c1 - c0 < cfg.interval) {
            atomic_fetch_add(&checked_b, 1);
            /* the chances (b) has to see a page aged by the epoch's move before it is two
             * epochs old: what --min-crossings counts, so a run's power does not hang on load */
            if (epoch_now() > e0) atomic_fetch_add(&crossed_b, 1);
            if (!block_resident(b))
                violation(&violations_b, "(b) page %d: the block freed after an allocation at "
                          "clock %lld was discarded by the sweep that ended at %lld, less than "
                          "the interval of %lld ms later (epoch now %llu)", b.page, (long long)c0,
                          (long long)c1, (long long)cfg.interval, (unsigned long long)epoch_now());
        }
        observe(&last);
    }
    tr_thread_exit();
    return NULL;
}

/* A watcher beside the thread under test: it only reads the clock and the epoch and checks
 * (a) as the thread under test does. It never sweeps, so it is never held up in an advance
 * (the injected delays hold up the sweepers, the thread under test included), and its
 * readings around the beginning of a delayed epoch keep coming. */
void *watcher_main(void *arg) {
    (void)arg;
    seen_t last = {epoch_now(), mi_clock_now(), 0, false};
    while (!atomic_load(&stop)) observe(&last);
    return NULL;
}
