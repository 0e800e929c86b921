/* stress.c: the seed's concurrent tests on real threads and the real clock, with a trace that
 * `purgecheck validate` replays on the model (docs/validation.md).
 *
 * Scenario `sweepers` (seed 000, tests: "sweepers at the same time: four threads that
 * allocate from a large page of their own and sweep without a pause, next to the thread under
 * test, which does the same and checks (a) from readings of the clock that lie around its
 * readings of the epoch that no epoch is shorter than the interval, to the millisecond, and
 * (b) that a page it allocated from before a sweep keeps its blocks in that sweep"), and a
 * watcher thread that only reads the clock and the epoch and checks (a) as well.
 *
 * Scenario `real`: the fork's own test of sweepers at the same time (test-purge-holes-large.c,
 * "sweepers-at-the-same-time"), in its shape: interval 50 ms unless --interval says otherwise;
 * the thread under test keeps 12 blocks of the middle large class (320 KiB) with the odd ones
 * freed; four sweepers each keep a page of the first large class (96 KiB) with two standing
 * holes (blocks 1 and 3 of 4 freed) and then allocate, free and sweep without a pause. The
 * thread under test runs for 12 intervals and until it has seen the epoch move 4 times
 * (10 s at the most, --max-ms): each round it allocates from one of its pages with holes
 * (until a block comes out of them) and frees what it took, then sweeps, and checks
 * (e) the busy page's purged count did not change in that sweep when the round took less than
 * the interval less 2 ms; (f) from the clock reading before a read of an epoch, to the one
 * after a read of an epoch 2..7 later, the epochs in between lasted the interval less 1 ms at
 * least on average; (g) the epoch moved 4 times; (h) the 6 live blocks keep every byte.
 *
 * Scenario `park`: the park handoff with the real scavenger thread. Several threads allocate
 * from large pages, free most of it, park, and wait (bounded) until the scavenger has marked
 * their park done; (c) it does, and (d) then the blocks they freed are no longer resident,
 * while one more thread sweeps inline beside them. With --park-work-us each park sweep's work
 * lasts that long (linearize.c mi_park_work_delay), as the virtual clock's sweep_ms.
 *
 * Scenarios `fork`, `clock-back` and `walks` (issue 20's rare paths, and the walk on every
 * thread at once): forks while a sweeper holds MOVING, checked in the child (m, n); the
 * clock stepped back before the epoch's start inside an advance, which must then be due (i);
 * the walk's order and units around each walk (j, k). See each scenario's section below.
 *
 * Every check is a lower bound on time, or an upper bound against a clock reading taken
 * before the event in question, so it holds on a machine of any load; the one liveness
 * check (the epoch moves, the park gets done) waits for it, 10 s at the most.
 *
 * Exit: 0 every check held, 1 a check failed (one line each on stderr), 2 bad usage,
 * 3 broken state.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "purge.h"

#ifndef BUILD_NAME
#define BUILD_NAME "release"
#endif
#define BLOCK (256 * KiB)         /* a large-page block (seed: 96..512 KiB) */
#define LIVENESS_EPOCHS 3         /* the epoch must move this often in a run */

static const char *USAGE =
    "usage: stress [OPTIONS]\n"
    "The seed's concurrent tests on real threads and CLOCK_MONOTONIC; writes a linearized\n"
    "trace for `purgecheck validate` with --trace.\n\n"
    "  --scenario NAME        sweepers: four sweepers beside the thread under test (default)\n"
    "                         park: the park handoff with the scavenger thread\n"
    "                         real: the fork's own sweepers test in its shape (interval 50)\n"
    "                         fork: forks while a sweeper holds MOVING (a delay after its\n"
    "                           CAS, half the interval unless --delay-us says otherwise)\n"
    "                         clock-back: the clock stepped back inside an advance\n"
    "                         walks: every thread walking pages of its own (the walk's\n"
    "                           order and units)\n"
    "  --steps N              fork: forks that find MOVING held; clock-back: steps back\n"
    "                         (default 3)\n"
    "  --back-ms MS           clock-back: the clock goes back to MS before the epoch's start\n"
    "                         (default 100)\n"
    "  --interval MS          purge_holes_min_interval (default 10)\n"
    "  --ms MS                how long to run at least (default 300)\n"
    "  --max-ms MS            the bound of the liveness waits (default 10000)\n"
    "  --sweepers N           sweeping threads beside the thread under test (default 4)\n"
    "  --parked N             park scenario: parking threads (default 3)\n"
    "  --cycles N             park scenario: parks per thread (default 2)\n"
    "  --mutant NAME          a run-time switch of reference_c/mutants.c\n"
    "  --delay-us US          a sweeper leaving an even epoch sleeps this long in the advance\n"
    "  --delay-at cas|increment|store  ... before its CAS (default), its increment or its\n"
    "                         store of the new start: hits the advance's races every time\n"
    "                         (reference_c/linearize.c)\n"
    "  --park-work-us US      park scenario: each sweep of a parked heap sleeps this long at\n"
    "                         the end of its work and reports a clock reading (the trace's\n"
    "                         bound for the end): sweep_last_before_work then sweeps a park\n"
    "                         early by a time validate sees (reference_c/linearize.c)\n"
    "  --until-violation      stop at the first failed check\n"
    "  --trace FILE           write the linearized trace there\n"
    "  --summary FILE         write the figures and verdicts as JSON there\n\n"
    "examples:\n"
    "  stress --trace run.jsonl && purgecheck validate run.jsonl\n"
    "  stress --mutant no_cas_exclusion --delay-us 2000 --until-violation   # exits 1\n"
    "  stress --scenario fork --mutant fork_child_keeps_moving   # exits 1: (m)\n"
    "  stress --scenario clock-back --mutant clock_back_not_due  # exits 1: (i)\n"
    "  stress --scenario walks --mutant rebuild_keeps_order      # exits 1: (j)\n"
    "  stress --scenario park --parked 1 --cycles 3 --interval 10 --park-work-us 10000 \\\n"
    "         --mutant sweep_last_before_work --trace run.jsonl\n"
    "  purgecheck validate run.jsonl   # rejected: \"its last park sweep ended at ...\"\n";

static struct {
    const char *scenario;
    int64_t interval, ms, max_ms, delay_us, park_work_us;
    int sweepers, parked, cycles, mutant, delay_at;
    bool until_violation;
    const char *trace, *summary;
    int steps;                /* fork, clock-back: the forks at MOVING, the steps back */
    int64_t back_ms;          /* clock-back: how far before the epoch's start */
} cfg = {"sweepers", 10, 300, 10000, 0, 0, 4, 3, 2, 0, MI_DELAY_BEFORE_CAS, false, NULL, NULL, 3, 100};

static const char *const DELAY_AT_NAMES[] = {"cas", "increment", "store"};   /* MI_DELAY_BEFORE_* */

static _Atomic bool stop;
static _Atomic int64_t violations_a, violations_b, violations_c, violations_d;
static _Atomic int64_t violations_e, violations_f, violations_g, violations_h;
static struct { int64_t epochs, rounds, checked, shortest, ran_ms; } real_figures = {0, 0, 0, -1, 0};
static _Atomic int64_t observations, checked_b, sweeps, parks;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

_Noreturn void mi_corrupt(const char *what) {
    fprintf(stderr, "stress: broken state: %s\n", what);
    fflush(stdout);
    _exit(3);
}

static void violation(_Atomic int64_t *counter, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(_Atomic int64_t *counter, const char *fmt, ...) {
    if (atomic_fetch_add(counter, 1) < 5) {   /* the first few of each kind are enough */
        pthread_mutex_lock(&report_lock);
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "stress: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        pthread_mutex_unlock(&report_lock);
    }
    if (cfg.until_violation) atomic_store(&stop, true);
}

static uint64_t epoch_now(void) { return atomic_load_explicit(&mi_world->epoch, memory_order_acquire); }

/* Is any OS page of the block resident (mincore)? */
static bool block_resident(mi_ptr_t b) {
    mi_page_t *p = mi_page_of(b.page);
    uint8_t *a = mi_block_addr(p, b.block);
    int64_t real = mi_world->real_page_size;
    /* mincore takes a page-aligned start: from the OS page the block begins in (a block of
     * a broken size class, as under size_class_word_less, does not begin on one) */
    int64_t lead = (int64_t)((uintptr_t)a % (uintptr_t)real);
    size_t n = (size_t)((lead + p->geom.block_size + real - 1) / real);
    unsigned char vec[BLOCK / 4096 + 2];
    if (n > sizeof vec || mincore(a - lead, (size_t)(lead + p->geom.block_size), vec) != 0)
        mi_corrupt("mincore failed");
    for (size_t i = 0; i < n; i++)
        if (vec[i] & 1) return true;
    return false;
}

/* -- scenario sweepers ------------------------------------------------------------------------ */

/* A sweeper: a large page of its own (one block stays live), then allocate, free and sweep
 * without a pause. */
static void *sweeper_main(void *arg) {
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
static void *under_test_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_heap_malloc(t, BLOCK, false, true);
    seen_t last = {epoch_now(), mi_clock_now(), 0, false};
    while (!atomic_load(&stop)) {
        observe(&last);
        int64_t c0 = mi_clock_now();
        mi_ptr_t b = mi_heap_malloc(t, BLOCK, false, true);
        mi_free(b, tid);
        observe(&last);
        mi_on_thread_idle(tid, false);
        int64_t c1 = mi_clock_now();
        atomic_fetch_add(&sweeps, 1);
        if (c1 - c0 < cfg.interval) {
            atomic_fetch_add(&checked_b, 1);
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
static void *watcher_main(void *arg) {
    (void)arg;
    seen_t last = {epoch_now(), mi_clock_now(), 0, false};
    while (!atomic_load(&stop)) observe(&last);
    return NULL;
}

/* -- scenario park ------------------------------------------------------------------------------ */

/* A parking thread: per cycle, allocate a few blocks of a large page and free all but the
 * first, park, wait for the scavenger to finish the park (c), check the freed blocks went (d),
 * come back. */
static void *parker_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_heap_malloc(t, BLOCK, false, true);   /* the page stays in use */
    for (int cycle = 0; cycle < cfg.cycles && !atomic_load(&stop); cycle++) {
        mi_ptr_t b[3];
        for (int i = 0; i < 3; i++) b[i] = mi_heap_malloc(t, BLOCK, false, true);
        for (int i = 0; i < 3; i++) mi_free(b[i], tid);
        int64_t parked_at = mi_clock_now();
        mi_on_thread_idle_start(tid);
        atomic_fetch_add(&parks, 1);
        while (atomic_load(&t->park_swept) != PARK_SWEPT_DONE
               && mi_clock_now() - parked_at < cfg.max_ms && !atomic_load(&stop)) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        bool done = atomic_load(&t->park_swept) == PARK_SWEPT_DONE;
        if (!done && !atomic_load(&stop))
            violation(&violations_c, "(c) thread %d: its park was not done %lld ms after it "
                      "parked", tid, (long long)cfg.max_ms);
        mi_on_thread_idle_end(tid);
        for (int i = 0; done && i < 3; i++)
            if (block_resident(b[i]))
                violation(&violations_d, "(d) thread %d: block %lld of page %d is still resident "
                          "after its park was done", tid, (long long)b[i].block, b[i].page);
    }
    tr_thread_exit();
    return NULL;
}

/* -- scenario real: the fork's sweepers test in its shape -------------------------------------- */

#define REAL_INTERVAL_MS 50
#define REAL_BLOCKS 12            /* the thread under test's blocks; the odd ones are freed */
#define REAL_INTERVALS 12         /* it runs this many intervals at least */
#define REAL_EPOCH_MOVES 4        /* and until it has seen the epoch move this often */

static int64_t real_size(int which) {   /* the first (96 KiB) and the middle (320 KiB) class */
    return which == 0 ? mi_medium_max_obj_size(64) + 1024
                      : mi_page_size_of(MI_LARGE, 64) / 8 / 2 + 1024;
}

static uint8_t pattern(int64_t id, int64_t off) { return (uint8_t)(id * 131 ^ off * 7 ^ off >> 8); }

/* A sweeper of the real test: a page of its own with two standing holes, then allocate, write
 * a byte, free and sweep without a pause. */
static void *real_sweeper_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_ptr_t own[4];
    for (int i = 0; i < 4; i++) own[i] = mi_heap_malloc(t, real_size(0), false, true);
    mi_free(own[1], tid);
    mi_free(own[3], tid);
    while (!atomic_load(&stop)) {
        mi_ptr_t b = mi_heap_malloc(t, real_size(0), false, true);
        mi_free(b, tid);
        mi_on_thread_idle(tid, false);
        atomic_fetch_add(&sweeps, 1);
    }
    tr_thread_exit();
    return NULL;
}

static int64_t purged_in(const mi_ptr_t *freed, int n, int page) {
    int64_t count = 0;
    for (int i = 0; i < n; i++)
        if (freed[i].page == page && mi_page_is_block_purged(mi_page_of(page), freed[i].block)) count++;
    return count;
}

/* Take blocks until one comes out of `freed`, then give them all back: that block's page was
 * allocated from now. Its page, or -1. */
static int touch_one_page(mi_tld_t *t, int tid, const mi_ptr_t *freed, int n) {
    mi_ptr_t extra[64];
    int nextra = 0, hit = -1;
    while (hit < 0 && nextra < 64) {
        mi_ptr_t p = mi_heap_malloc(t, real_size(1), false, true);
        extra[nextra++] = p;
        for (int i = 0; i < n; i++)
            if (freed[i].page == p.page && freed[i].block == p.block) hit = p.page;
    }
    for (int i = 0; i < nextra; i++) mi_free(extra[i], tid);
    return hit;
}

static void *real_under_test_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_ptr_t live[REAL_BLOCKS], freed[REAL_BLOCKS];
    int nlive = 0, nfreed = 0;
    for (int i = 0; i < REAL_BLOCKS; i++) {
        mi_ptr_t b = mi_heap_malloc(t, real_size(1), false, true);
        mi_page_t *p = mi_page_of(b.page);
        uint8_t *a = mi_block_addr(p, b.block);
        for (int64_t o = 0; o < p->geom.block_size; o++) a[o] = pattern(i, o);
        if (i % 2) freed[nfreed++] = b;
        else live[nlive++] = b;
    }
    for (int i = 0; i < nfreed; i++) mi_free(freed[i], tid);
    int64_t seen_at[8] = {0};
    uint64_t seen_epoch[8] = {0};
    uint64_t last = epoch_now();
    int64_t t_start = mi_clock_now(), shortest = -1;
    while (!atomic_load(&stop)) {
        int64_t t0 = mi_clock_now();
        if (t0 - t_start >= REAL_INTERVALS * cfg.interval
            && (real_figures.epochs >= REAL_EPOCH_MOVES || t0 - t_start >= cfg.max_ms)) break;
        int busy = touch_one_page(t, tid, freed, nfreed);
        int64_t nb0 = busy >= 0 ? purged_in(freed, nfreed, busy) : 0;
        mi_on_thread_idle(tid, false);
        int64_t nb1 = busy >= 0 ? purged_in(freed, nfreed, busy) : 0;
        uint64_t e = epoch_now();
        int64_t t1 = mi_clock_now();
        atomic_fetch_add(&sweeps, 1);
        real_figures.rounds++;
        if (busy >= 0 && t1 - t0 < cfg.interval - 2) {
            real_figures.checked++;
            if (nb1 != nb0)
                violation(&violations_e, "(e) page %d, allocated from after clock %lld, lost %lld "
                          "blocks in the sweep that ended at %lld, less than the interval of %lld "
                          "ms less 2 later", busy, (long long)t0, (long long)(nb1 - nb0),
                          (long long)t1, (long long)cfg.interval);
        }
        if (e != last) {   /* epochs 2..7 back, seen at a time T: the ones in between lay after T */
            real_figures.epochs++;
            for (uint64_t back = 2; back <= 7 && e >= back; back++) {
                uint64_t old = e - back;
                if (seen_epoch[old % 8] != old || !seen_at[old % 8]) continue;
                int64_t len = (t1 - seen_at[old % 8]) / (int64_t)(back - 1);
                if (shortest < 0 || len < shortest) shortest = len;
                if (len < cfg.interval - 1)
                    violation(&violations_f, "(f) the %llu epochs after epoch %llu lasted %lld ms "
                              "on average, less than the interval of %lld ms less 1",
                              (unsigned long long)(back - 1), (unsigned long long)old,
                              (long long)len, (long long)cfg.interval);
                break;
            }
            last = e;
        }
        seen_at[e % 8] = t0;   /* e was read after t0 */
        seen_epoch[e % 8] = e;
    }
    real_figures.ran_ms = mi_clock_now() - t_start;
    real_figures.shortest = shortest;
    if (real_figures.epochs < REAL_EPOCH_MOVES)
        violation(&violations_g, "(g) the epoch moved %lld times in %lld ms of sweeping (expected "
                  "%d)", (long long)real_figures.epochs, (long long)real_figures.ran_ms,
                  REAL_EPOCH_MOVES);
    for (int i = 0; i < nlive; i++) {
        mi_page_t *p = mi_page_of(live[i].page);
        uint8_t *a = mi_block_addr(p, live[i].block);
        for (int64_t o = 0; o < p->geom.block_size; o++)
            if (a[o] != pattern(2 * i, o)) {
                violation(&violations_h, "(h) live block %d (page %d, block %lld) differs at "
                          "byte %lld", 2 * i, live[i].page, (long long)live[i].block, (long long)o);
                break;
            }
    }
    atomic_store(&stop, true);   /* the thread under test decides how long the run is */
    tr_thread_exit();
    return NULL;
}

/* -- scenario walks: the holes walk on every thread at once -------------------------------------- */

/* Digest 3: the walk takes every unit wholly inside the formed blocks whose blocks are all free
 * (free-listed, or purged through a unit discarded before: step 2), drops the blocks over
 * those units, and pushes each kept block on a new head, so the kept ones come back in reverse
 * (step 3). Each thread builds the shapes of the scenarios walk-order (1000-byte blocks, free
 * ones beside live ones) and purged-straddler (3000-byte blocks straddling 4 KiB units, one
 * purged before its neighbour is freed) on pages of its own, walks them as the op `walk` does
 * (an `op` event, then each page of its heap collected and walked), allocates again and
 * sweeps, round after round. Around each walk it checks, from the lists and bits it sees
 * before and after: (j) the free list after the walk is the kept blocks in the reverse order;
 * (k) every unit that lay wholly in free or purged blocks is purged. */
static _Atomic int64_t violations_j, violations_k, walks_checked;

static void check_walk(mi_page_t *p, int tid) {
    int64_t cap = p->capacity, nb = 0;
    int64_t *before = calloc((size_t)cap + 1, sizeof *before);
    uint8_t *was_free = calloc((size_t)cap + 1, 1), *was_purged = calloc((size_t)cap + 1, 1);
    if (!before || !was_free || !was_purged) mi_corrupt("out of memory");
    for (mi_block_t *b = p->free; b && nb < cap; b = mi_block_next(p, b)) {
        before[nb] = mi_block_index(p, b);
        was_free[before[nb++]] = 1;
    }
    for (int64_t i = 0; i < cap; i++) was_purged[i] = mi_page_is_block_purged(p, i);
    int64_t units_before = 0, units_after = 0;
    for (int64_t k = 0; k < p->bits; k++) units_before += mi_page_is_unit_purged(p, k);
    mi_walk_result_t r = mi_page_purge_holes_walk(p);
    for (int64_t k = 0; k < p->bits; k++) units_after += mi_page_is_unit_purged(p, k);
    atomic_fetch_add(&walks_checked, 1);
    /* (j): a walk that took units rebuilt the list: the kept ones, last first; one that took
     * none left it as it was */
    bool rebuilt = units_after > units_before;
    int64_t at = rebuilt ? nb - 1 : 0, step = rebuilt ? -1 : 1;
    for (mi_block_t *b = p->free; b; b = mi_block_next(p, b)) {
        while (at >= 0 && at < nb && mi_page_is_block_purged(p, before[at])) at += step;
        int64_t i = mi_block_index(p, b);
        if (at < 0 || at >= nb || before[at] != i) {
            violation(&violations_j, "(j) thread %d, page %d: after a walk that %s block %lld is "
                      "on the free list where the kept blocks %s have %lld", tid, p->id,
                      rebuilt ? "discarded units" : "discarded nothing", (long long)i,
                      rebuilt ? "reversed" : "in their order",
                      at < 0 || at >= nb ? -1LL : (long long)before[at]);
            break;
        }
        at += step;
    }
    for (int64_t k = 0; r.complete && k < p->bits; k++) {   /* (k) */
        if (!mi_is_unit_inside_blocks(p, k, cap) || mi_page_is_unit_purged(p, k)) continue;
        int64_t i0, i1;
        mi_blocks_of_unit(p, k, cap, &i0, &i1);
        bool all_free = true;
        for (int64_t i = i0; i < i1 && all_free; i++) all_free = was_free[i] || was_purged[i];
        if (all_free)
            violation(&violations_k, "(k) thread %d, page %d: unit %lld lay wholly in free or "
                      "purged blocks (%lld..%lld) and the walk left it", tid, p->id, (long long)k,
                      (long long)i0, (long long)i1 - 1);
    }
    free(before);
    free(was_free);
    free(was_purged);
}

/* The op `walk` of a thread: its event, then each page of its heap collected and walked. */
static void walk_op(mi_tld_t *t, int tid, int line) {
    tr_begin("op");
    tr_int("line", line);
    tr_int("thread", tid);
    tr_str("op", "walk");
    tr_key("args");
    tr_raw("[]");
    tr_end();
    int *ids;
    int n = mi_heap_page_ids(t, &ids);
    for (int i = 0; i < n; i++) {
        mi_page_t *p = mi_page_of(ids[i]);
        mi_page_free_collect(p);
        if (mi_page_can_purge_holes(&p->geom)) check_walk(p, tid);
    }
    free(ids);
}

#define ORDER_BLOCKS 24
#define STRADDLERS 6

static void *walker_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    for (int round = 0; !atomic_load(&stop); round++) {
        mi_ptr_t w[ORDER_BLOCKS], s[STRADDLERS];
        bool live_w[ORDER_BLOCKS], live_s[STRADDLERS];
        for (int i = 0; i < ORDER_BLOCKS; i++) { w[i] = mi_heap_malloc(t, 1000, false, true); live_w[i] = true; }
        for (int i = 0; i < STRADDLERS; i++) { s[i] = mi_heap_malloc(t, 3000, false, true); live_s[i] = true; }
        /* walk-order: kept blocks share units with live ones, units 2 and 3 lie in free ones */
        for (int i = 0; i < ORDER_BLOCKS; i++)
            if (i == 1 || i == 2 || i == 5 || (i >= 8 && i <= 16)) { mi_free(w[i], tid); live_w[i] = false; }
        for (int i = 1; i <= 3; i++) { mi_free(s[i], tid); live_s[i] = false; }
        walk_op(t, tid, 3 * round);
        mi_free(s[0], tid);   /* unit 0 now lies in s0 (free) and s1 (purged) */
        live_s[0] = false;
        walk_op(t, tid, 3 * round + 1);
        mi_ptr_t x[2];   /* the next mallocs take the kept blocks in the walk's order */
        for (int i = 0; i < 2; i++) x[i] = mi_heap_malloc(t, 1000, false, true);
        for (int i = 0; i < 2; i++) mi_free(x[i], tid);
        for (int i = 0; i < ORDER_BLOCKS; i++) if (live_w[i]) mi_free(w[i], tid);
        for (int i = 0; i < STRADDLERS; i++) if (live_s[i]) mi_free(s[i], tid);
        walk_op(t, tid, 3 * round + 2);
        mi_on_thread_idle(tid, false);
        atomic_fetch_add(&sweeps, 1);
    }
    tr_thread_exit();
    return NULL;
}

/* -- the run ------------------------------------------------------------------------------------ */

static void write_header(const mi_options_t *o, int nthreads) {
    char threads[512] = "";
    for (int i = 1; i <= nthreads; i++)
        snprintf(threads + strlen(threads), sizeof threads - strlen(threads), "%s%d", i > 1 ? "," : "", i);
    char mutant[64] = "null";
    if (cfg.mutant) snprintf(mutant, sizeof mutant, "\"%s\"", mi_mutant_names[cfg.mutant]);
    char json[2048];
    snprintf(json, sizeof json,
             "{\"format\":\"purgecheck-trace\",\"version\":1,\"config\":{"
             "\"page_kinds\":{\"small\":%lld,\"medium\":%lld,\"large\":%lld},"
             "\"os_page_size\":%lld,\"arch\":%d,\"first_block_offset\":0,\"interval_ms\":%lld,"
             "\"purge_holes\":true,\"full_every\":%lld,\"purge_delay\":%lld,\"variant\":\"epoch\","
             "\"stale_epochs\":0,\"sweep_ms\":0,\"clock\":\"real\",\"clock_monotone\":%s,"
             "\"clock_start_ms\":0,\"observe\":\"sweeps\"},"
             "\"producer\":{\"name\":\"stress\",\"build\":\"%s\",\"scenario\":\"%s\",\"mutant\":%s,"
             "\"linearized\":true,\"threads\":[%s],\"delay_us\":%lld,\"delay_at\":\"%s\","
             "\"park_work_us\":%lld,\"steps\":%d,\"back_ms\":%lld}}",
             (long long)mi_page_size_of(MI_SMALL, 64), (long long)mi_page_size_of(MI_MEDIUM, 64),
             (long long)mi_page_size_of(MI_LARGE, 64), (long long)o->os_page_size, o->arch_bits,
             (long long)o->interval_ms, (long long)o->full_every, (long long)o->purge_delay,
             o->clock_monotone ? "true" : "false", BUILD_NAME, cfg.scenario, mutant, threads, (long long)cfg.delay_us,
             DELAY_AT_NAMES[cfg.delay_at], (long long)cfg.park_work_us,
             cfg.steps, (long long)cfg.back_ms);
    tr_header(json);
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* -- scenario fork: a fork while another thread holds MOVING ----------------------------------- */

/* Seed 000 (2): "A fork that lands while another thread holds the mark: the child records a
 * new beginning (_mi_page_purge_holes_forked_child)". The sweepers advance with a delay
 * (linearize.c mi_advance_delay) after their CAS won, before the increment, or after the
 * increment, before the store of the new start, so MOVING is held for the delay every other
 * epoch; the main thread forks while a sweeper sleeps there, moving the delay to the other
 * point after each fork, and now and then whatever it finds. The child is a copy of the
 * process at the fork: it reads what it holds, applies the forked-child rule and reports
 * through a pipe. (m) a child of a fork that found MOVING holds a recorded beginning, no
 * longer MOVING; (n) `--steps` forks in each window within --max-ms. What else the child
 * holds (the epoch: the old one before the increment, the new one after it; the start outside
 * a move) validate checks on the trace.
 * In a traced run the fork is made under lin_lock, so its `fork` event sits in the lin order
 * exactly where the copy was taken, and validate replays the model's forked-child rule on the
 * model's state there (purgecheck/validate/advance.py on_fork). */
static _Atomic int64_t violations_m, violations_n, violations_i, forks_moving, forks_quiet, clock_backs;
static _Atomic int64_t forks_in[3];   /* forks made while a sweeper slept at MI_DELAY_BEFORE_* */

typedef struct { int64_t found, start, epoch; } fork_report_t;

/* The child: nothing of the trace (its lock and buffer are the parent's), no hooks. */
static _Noreturn void fork_child(int fd) {
    tr_enabled = tr_linearized = false;
    mi_advance_hook = NULL;
    fork_report_t r;
    r.found = atomic_load(&mi_world->epoch_start);
    mi_page_purge_holes_forked_child();
    r.start = atomic_load(&mi_world->epoch_start);
    r.epoch = (int64_t)atomic_load(&mi_world->epoch);
    _exit(write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
}

/* A fork; `window` >= 0: only while a sweeper sleeps at that point of its advance (under
 * lin_lock in a traced run, so that it cannot leave the window before the fork). */
static void fork_and_check(int window) {
    int fds[2];
    lin_lock();   /* the copy and its event are one step of the lin order */
    if (window >= 0 && (atomic_load(&mi_advance_delaying) != window
                        || atomic_load(&mi_world->epoch_start) != MI_MOVING)) {
        lin_unlock();
        return;
    }
    if (pipe(fds) != 0) mi_corrupt("pipe failed");
    pid_t pid = fork();
    if (pid < 0) mi_corrupt("fork failed");
    if (pid == 0) { close(fds[0]); fork_child(fds[1]); }
    close(fds[1]);
    fork_report_t r;
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = read(fds[0], (char *)&r + got, sizeof r - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        mi_corrupt("fork: the child did not report");
    bool moving = r.found == MI_MOVING;
    tr_begin("fork");
    tr_int("thread", 0);
    tr_bool("moving", moving);
    tr_u64("epoch", (uint64_t)r.epoch);
    tr_int("start", r.start);
    tr_end();
    lin_unlock();
    atomic_fetch_add(moving ? &forks_moving : &forks_quiet, 1);
    if (moving && window >= 0) atomic_fetch_add(&forks_in[window], 1);
    if (moving && r.start == MI_MOVING)
        violation(&violations_m, "(m) a fork while another thread held MOVING (epoch %llu): the "
                  "child still holds MOVING, so no sweep of the child moves the epoch again",
                  (unsigned long long)r.epoch);
}

/* The main thread's part: fork while a sweeper sleeps in the window the delay holds open,
 * before its increment and (the delay moved there after each such fork) before its store of
 * the new start, and every tenth look whatever it finds, until --steps forks were made in
 * each window (--max-ms at the most). */
static void run_forks(int64_t t0) {
    int window = MI_DELAY_BEFORE_INCREMENT;
    atomic_store(&mi_advance_delay_at, window);
    for (int looks = 0; !atomic_load(&stop); looks++) {
        int64_t before = atomic_load(&forks_in[MI_DELAY_BEFORE_INCREMENT]);
        int64_t after = atomic_load(&forks_in[MI_DELAY_BEFORE_STORE]);
        if (before >= cfg.steps && after >= cfg.steps && atomic_load(&forks_quiet) >= 1) break;
        if (mi_clock_now() - t0 >= cfg.max_ms) {
            violation(&violations_n, "(n) in %lld ms, %lld of %d forks found MOVING held before "
                      "a sweeper's increment and %lld after it", (long long)cfg.max_ms,
                      (long long)before, cfg.steps, (long long)after);
            break;
        }
        if (atomic_load(&mi_advance_delaying) == window) {
            fork_and_check(window);
            if (atomic_load(&forks_in[window]) > (window == MI_DELAY_BEFORE_STORE ? after : before)) {
                window = window == MI_DELAY_BEFORE_STORE ? MI_DELAY_BEFORE_INCREMENT
                                                         : MI_DELAY_BEFORE_STORE;
                atomic_store(&mi_advance_delay_at, window);
            }
        } else if (looks % 10 == 9) {
            fork_and_check(-1);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* -- scenario clock-back: the clock steps back during an advance -------------------------------- */

/* Digest 7: "if now >= start && now - start < interval return (a clock that went backwards
 * advances)". The main thread arms a step back; the next sweeper whose advance has loaded the
 * current start S sets the clock back to --back-ms before S, just before its clock reading
 * (mi_advance_hook, before read_clock; under lin_lock with a `clock` event). If the clock,
 * read again after that reading, is still before S, the reading was too: (i) the advance
 * must find the epoch due and go on to its CAS. Broken (clock_back_not_due), it returns. The
 * verdict needs no timing: a sweeper held up until the clock caught up with S gives none, and
 * the step is made again. After each verdict the main thread puts the clock forward again.
 * The hook knows the start the advance loaded: the epoch and start it reads before the load
 * are those it reads before the clock reading, and no advance can have come and gone in
 * between without moving the epoch. */
static _Atomic bool back_armed, back_judged;
static _Thread_local struct { uint64_t epoch; int64_t start; int state; } back_seen;
enum { BACK_NONE, BACK_STEPPED, BACK_MUST_BE_DUE };

static void clock_back_hook(const char *pc) {
    mi_world_t *w = mi_world;
    if (back_seen.state == BACK_MUST_BE_DUE && strcmp(pc, "compare")) {
        back_seen.state = BACK_NONE;
        if (strcmp(pc, "cas"))   /* the advance returned after its compare */
            violation(&violations_i, "(i) the clock went back %lld ms before the start of the "
                      "epoch (%lld) and an advance read it there; the advance found the epoch "
                      "not due and returned, without its CAS", (long long)cfg.back_ms,
                      (long long)back_seen.start);
        else
            atomic_fetch_add(&clock_backs, 1);
        atomic_store(&back_judged, true);
    }
    if (!strcmp(pc, "load_start")) {
        back_seen.epoch = atomic_load(&w->epoch);
        back_seen.start = atomic_load(&w->epoch_start);
    } else if (!strcmp(pc, "read_clock") && atomic_load(&back_armed)) {
        lin_lock();
        int64_t start = atomic_load(&w->epoch_start);
        if (start != MI_MOVING && start == back_seen.start && atomic_load(&w->epoch) == back_seen.epoch
            && atomic_exchange(&back_armed, false)) {
            atomic_fetch_sub(&mi_clock_offset_ms, mi_clock_now() - start + cfg.back_ms);
            tr_begin("clock");
            tr_int("now", mi_clock_now());
            tr_end();
            back_seen.state = BACK_STEPPED;
        }
        lin_unlock();
    } else if (!strcmp(pc, "compare") && back_seen.state == BACK_STEPPED) {
        bool before = mi_clock_now() < back_seen.start;   /* so was the reading */
        back_seen.state = before ? BACK_MUST_BE_DUE : BACK_NONE;
        if (!before) atomic_store(&back_armed, true);   /* held up too long: no verdict */
    }
}

static void run_clock_backs(void) {
    for (int step = 0; step < cfg.steps && !atomic_load(&stop); step++) {
        sleep_ms(2 * cfg.interval);
        atomic_store(&back_judged, false);
        atomic_store(&back_armed, true);
        struct timespec r0, r;   /* the offset moves the clock: bound the wait by the real one */
        clock_gettime(CLOCK_MONOTONIC, &r0);
        int64_t waited = 0;
        while (!atomic_load(&back_judged) && waited < cfg.max_ms && !atomic_load(&stop)) {
            sleep_ms(1);
            clock_gettime(CLOCK_MONOTONIC, &r);
            waited = (r.tv_sec - r0.tv_sec) * 1000 + (r.tv_nsec - r0.tv_nsec) / 1000000;
        }
        atomic_store(&back_armed, false);
        if (!atomic_load(&back_judged) && !atomic_load(&stop))
            violation(&violations_i, "(i) step %d: no advance read the clock after it went back, "
                      "in %lld ms", step + 1, (long long)cfg.max_ms);
        lin_lock();   /* the clock forward again (a step forward is always allowed) */
        atomic_store(&mi_clock_offset_ms, 0);
        tr_begin("clock");
        tr_int("now", mi_clock_now());
        tr_end();
        lin_unlock();
    }
}


static int64_t parse_int(const char *flag, const char *v) {
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || *end || n < 0) {
        fprintf(stderr, "stress: %s: expected a non-negative integer, got '%s'\n%s", flag, v, USAGE);
        exit(2);
    }
    return n;
}

static void parse_args(int argc, char **argv) {
    bool interval_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool valued = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); exit(0); }
        else if (!strcmp(a, "--until-violation")) { cfg.until_violation = true; valued = false; }
        else if (!v) { fprintf(stderr, "stress: unknown option or missing value: %s\n%s", a, USAGE); exit(2); }
        else if (!strcmp(a, "--scenario")) {
            if (strcmp(v, "sweepers") && strcmp(v, "park") && strcmp(v, "real") && strcmp(v, "fork")
                && strcmp(v, "clock-back") && strcmp(v, "walks")) {
                fprintf(stderr, "stress: --scenario: expected sweepers, park, real, fork, "
                        "clock-back or walks, got '%s'\n", v);
                exit(2);
            }
            cfg.scenario = v;
        } else if (!strcmp(a, "--interval")) { cfg.interval = parse_int(a, v); interval_given = true; }
        else if (!strcmp(a, "--ms")) cfg.ms = parse_int(a, v);
        else if (!strcmp(a, "--max-ms")) cfg.max_ms = parse_int(a, v);
        else if (!strcmp(a, "--delay-us")) cfg.delay_us = parse_int(a, v);
        else if (!strcmp(a, "--park-work-us")) cfg.park_work_us = parse_int(a, v);
        else if (!strcmp(a, "--delay-at")) {
            cfg.delay_at = -1;
            for (int d = 0; d < 3; d++)
                if (!strcmp(v, DELAY_AT_NAMES[d])) cfg.delay_at = d;
            if (cfg.delay_at < 0) {
                fprintf(stderr, "stress: --delay-at: expected cas, increment or store, got '%s'\n", v);
                exit(2);
            }
        }
        else if (!strcmp(a, "--sweepers")) cfg.sweepers = (int)parse_int(a, v);
        else if (!strcmp(a, "--parked")) cfg.parked = (int)parse_int(a, v);
        else if (!strcmp(a, "--cycles")) cfg.cycles = (int)parse_int(a, v);
        else if (!strcmp(a, "--steps")) cfg.steps = (int)parse_int(a, v);
        else if (!strcmp(a, "--back-ms")) cfg.back_ms = parse_int(a, v);
        else if (!strcmp(a, "--trace")) cfg.trace = v;
        else if (!strcmp(a, "--summary")) cfg.summary = v;
        else if (!strcmp(a, "--mutant")) {
            cfg.mutant = mi_mutant_by_name(v);
            if (cfg.mutant < 0) {
                fprintf(stderr, "stress: unknown mutant '%s'; expected one of", v);
                for (int m = 1; m < M_COUNT; m++) fprintf(stderr, " %s", mi_mutant_names[m]);
                fprintf(stderr, "\n");
                exit(2);
            }
        } else { fprintf(stderr, "stress: unknown option %s\n%s", a, USAGE); exit(2); }
        i += valued;
    }
    if (!strcmp(cfg.scenario, "real") && !interval_given) cfg.interval = REAL_INTERVAL_MS;
    if (cfg.interval <= 0 || cfg.sweepers + cfg.parked + 1 >= 64) {
        fprintf(stderr, "stress: expected --interval > 0 and fewer than 63 threads\n");
        exit(2);
    }
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    mi_options_t o;
    memset(&o, 0, sizeof o);
    o.purge_holes = true;
    o.interval_ms = cfg.interval;
    o.full_every = 64;
    o.purge_delay = 100;
    o.os_page_size = 4 * KiB;
    o.arch_bits = 64;
    o.variant = V_EPOCH;
    bool forks = !strcmp(cfg.scenario, "fork"), backs = !strcmp(cfg.scenario, "clock-back");
    bool walks = !strcmp(cfg.scenario, "walks");
    o.clock_monotone = !backs;   /* a trace whose clock goes back says so */
    o.clock_real = true;
    if (forks && !cfg.delay_us) {   /* MOVING held for half the interval, every other epoch */
        cfg.delay_us = cfg.interval * 500;
        cfg.delay_at = MI_DELAY_BEFORE_INCREMENT;
    }
    static char outbuf[1 << 20];
    if (cfg.trace) {
        if (!freopen(cfg.trace, "w", stdout)) {
            fprintf(stderr, "stress: cannot write %s: %s\n", cfg.trace, strerror(errno));
            return 2;
        }
        setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    }
    tr_enabled = tr_linearized = cfg.trace != NULL;
    mi_mutant = (mi_mutant_t)cfg.mutant;
    atomic_store(&mi_advance_delay_us, cfg.delay_us);
    atomic_store(&mi_advance_delay_at, cfg.delay_at);
    atomic_store(&mi_park_work_delay_us, cfg.park_work_us);
    mi_world = mi_world_new(&o);
    bool park = !strcmp(cfg.scenario, "park"), real = !strcmp(cfg.scenario, "real");
    int nthreads = park ? cfg.parked + 1 : forks || backs || walks ? cfg.sweepers : cfg.sweepers + 1;
    if (cfg.trace) write_header(&o, nthreads);
    tr_tid = 0;
    if (backs) mi_advance_hook = clock_back_hook;
    if (park) mi_scavenger_start();
    pthread_t th[64], watcher;
    int64_t t0 = mi_clock_now();
    uint64_t e0 = epoch_now();
    for (int i = 0; i < nthreads; i++) {
        void *(*fn)(void *) = park ? (i < cfg.parked ? parker_main : sweeper_main)
                              : real ? (i < cfg.sweepers ? real_sweeper_main : real_under_test_main)
                              : forks || backs ? sweeper_main : walks ? walker_main
                                     : (i < cfg.sweepers ? sweeper_main : under_test_main);
        if (pthread_create(&th[i], NULL, fn, (void *)(intptr_t)(i + 1)) != 0) mi_corrupt("pthread_create failed");
    }
    bool watched = !park && !real && !forks && !backs && !walks;   /* a clock that goes back breaks (a) */
    if (watched && pthread_create(&watcher, NULL, watcher_main, NULL) != 0) mi_corrupt("pthread_create failed");
    if (forks) run_forks(t0);
    if (backs) run_clock_backs();
    /* Run for --ms, and on until the epoch has moved (liveness), --max-ms at the most. */
    bool moved = false;
    while (!atomic_load(&stop)) {
        int64_t ran = mi_clock_now() - t0;
        moved = epoch_now() >= e0 + LIVENESS_EPOCHS;
        /* --until-violation runs until a check fails, --max-ms at the most */
        if (real) { sleep_ms(1); continue; }   /* its thread under test ends the run (by --max-ms) */
        if ((ran >= cfg.ms && moved && !cfg.until_violation) || ran >= cfg.max_ms) break;
        sleep_ms(1);
    }
    if (park) {   /* the parkers end by themselves (or at --max-ms) */
        for (int i = 0; i < cfg.parked; i++) pthread_join(th[i], NULL);
        atomic_store(&stop, true);
        pthread_join(th[cfg.parked], NULL);
        mi_scavenger_stop();
    } else {
        atomic_store(&stop, true);
        for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
        if (watched) pthread_join(watcher, NULL);
    }
    int64_t ran = mi_clock_now() - t0;
    uint64_t epochs = epoch_now() - e0;
    bool live = moved || epochs >= LIVENESS_EPOCHS || cfg.until_violation;
    if (!live)
        fprintf(stderr, "stress: liveness: the epoch moved %llu times in %lld ms (expected %d)\n",
                (unsigned long long)epochs, (long long)ran, LIVENESS_EPOCHS);
    if (cfg.trace) {
        tr_begin("end");
        tr_int("events", atomic_load(&tr_events));
        tr_end();
        tr_flush();
    }
    int64_t failed = atomic_load(&violations_a) + atomic_load(&violations_b)
                     + atomic_load(&violations_c) + atomic_load(&violations_d) + !live
                     + atomic_load(&violations_e) + atomic_load(&violations_f)
                     + atomic_load(&violations_g) + atomic_load(&violations_h)
                     + atomic_load(&violations_m) + atomic_load(&violations_n)
                     + atomic_load(&violations_i) + atomic_load(&violations_j)
                     + atomic_load(&violations_k);
    fprintf(stderr, "stress %s (%s%s%s): %llu epochs in %lld ms, interval %lld ms, %lld sweeps, "
            "(a) %lld epoch readings, (b) %lld sweeps checked, %lld parks: %s\n",
            cfg.scenario, BUILD_NAME, cfg.mutant ? ", mutant " : "",
            cfg.mutant ? mi_mutant_names[cfg.mutant] : "", (unsigned long long)epochs,
            (long long)ran, (long long)cfg.interval, (long long)atomic_load(&sweeps),
            (long long)atomic_load(&observations), (long long)atomic_load(&checked_b),
            (long long)atomic_load(&parks), failed ? "FAILED" : "every check held");
    if (cfg.summary) {
        FILE *f = fopen(cfg.summary, "w");
        if (!f) { fprintf(stderr, "stress: cannot write %s\n", cfg.summary); return 2; }
        fprintf(f, "{\"scenario\":\"%s\",\"build\":\"%s\",\"mutant\":\"%s\",\"ms\":%lld,"
                "\"interval_ms\":%lld,\"epochs\":%llu,\"sweeps\":%lld,\"observations\":%lld,"
                "\"checked_b\":%lld,\"parks\":%lld,\"violations\":{\"a\":%lld,\"b\":%lld,\"c\":%lld,"
                "\"d\":%lld,\"liveness\":%d,\"e\":%lld,\"f\":%lld,\"g\":%lld,\"h\":%lld,"
                "\"i\":%lld,\"m\":%lld,\"n\":%lld,\"j\":%lld,\"k\":%lld},"
                "\"real\":{\"ran_ms\":%lld,\"epoch_moves\":%lld,\"rounds\":%lld,\"checked\":%lld,"
                "\"shortest_ms\":%lld},\"trace_events\":%lld,\"forks_moving\":%lld,"
                "\"forks_quiet\":%lld,\"forks_before_increment\":%lld,\"forks_after_increment\":%lld,"
                "\"clock_backs\":%lld,\"walks\":%lld}\n",
                cfg.scenario, BUILD_NAME, mi_mutant_names[cfg.mutant], (long long)ran,
                (long long)cfg.interval, (unsigned long long)epochs, (long long)atomic_load(&sweeps),
                (long long)atomic_load(&observations), (long long)atomic_load(&checked_b),
                (long long)atomic_load(&parks), (long long)atomic_load(&violations_a),
                (long long)atomic_load(&violations_b), (long long)atomic_load(&violations_c),
                (long long)atomic_load(&violations_d), !live, (long long)atomic_load(&violations_e),
                (long long)atomic_load(&violations_f), (long long)atomic_load(&violations_g),
                (long long)atomic_load(&violations_h), (long long)atomic_load(&violations_i),
                (long long)atomic_load(&violations_m), (long long)atomic_load(&violations_n),
                (long long)atomic_load(&violations_j), (long long)atomic_load(&violations_k),
                (long long)real_figures.ran_ms,
                (long long)real_figures.epochs, (long long)real_figures.rounds,
                (long long)real_figures.checked, (long long)real_figures.shortest,
                (long long)atomic_load(&tr_events), (long long)atomic_load(&forks_moving),
                (long long)atomic_load(&forks_quiet),
                (long long)atomic_load(&forks_in[MI_DELAY_BEFORE_INCREMENT]),
                (long long)atomic_load(&forks_in[MI_DELAY_BEFORE_STORE]), (long long)atomic_load(&clock_backs),
                (long long)atomic_load(&walks_checked));
        fclose(f);
    }
    mi_world_free(mi_world);
    return failed ? 1 : 0;
}
