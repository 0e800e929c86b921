/* stress_real.c: scenario `real` of stress (stress.c): the fork's own test of sweepers at
 * the same time (test-purge-holes-large.c, "sweepers-at-the-same-time"), in its shape.
 *
 * Interval 50 ms unless --interval says otherwise; the thread under test keeps 12 blocks of
 * the middle large class (320 KiB) with the odd ones freed; four sweepers each keep a page of
 * the first large class (96 KiB) with two standing holes (blocks 1 and 3 of 4 freed) and then
 * allocate, free and sweep without a pause. The thread under test runs for 12 intervals and
 * until it has seen the epoch move 4 times (10 s at the most, --max-ms): each round it
 * allocates from one of its pages with holes (until a block comes out of them) and frees what
 * it took, then sweeps, and checks (e) the busy page's purged count did not change in that
 * sweep when the round took less than the interval less 2 ms; (f) from the clock reading
 * before a read of an epoch, to the one after a read of an epoch 2..7 later, the epochs in
 * between lasted the interval less 1 ms at least on average; (g) the epoch moved 4 times;
 * (h) the 6 live blocks keep every byte. Checks: (e), (f), (g), (h).
 */
#include "stress.h"

_Atomic int64_t violations_e, violations_f, violations_g, violations_h;
real_figures_t real_figures = {0, 0, 0, -1, 0};

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
void *real_sweeper_main(void *arg) {
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

void *real_under_test_main(void *arg) {
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
