/* stress_walks.c: scenario `walks` of stress (stress.c): the holes walk on every thread at
 * once (digest 3, the walk; seed 000's scenarios walk-order and purged-straddler), each thread
 * on pages of its own. Checks: (j) the walk's order, (k) its units.
 */
#include <stdlib.h>

#include "stress.h"

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
_Atomic int64_t violations_j, violations_k, walks_checked;

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

void *walker_main(void *arg) {
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
