/* holes.c: the holes walk, unpurge and the unformed tail of one page (model/holes.py).
 *
 * Seed 000, change (1): "a unit is discarded only when it lies wholly inside the block area
 * and every block that overlaps it is free (mi_page_purge_holes_walk), a block is purged
 * exactly when it overlaps a discarded unit, a purged block is off every free list until
 * _mi_page_unpurge_run brings its run back". One madvise per maximal run of units.
 */
#include <stdlib.h>

#include "purge.h"

static void *xcalloc(int64_t n) {
    void *p = calloc((size_t)(n > 0 ? n : 1), 1);
    if (!p) mi_corrupt("out of memory");
    return p;
}

static void set_unit(mi_page_t *p, int64_t k, bool on) {
    uint64_t bit = UINT64_C(1) << (k % 64);
    if (on) p->purged[k / 64] |= bit;
    else p->purged[k / 64] &= ~bit;
}

/* Digest 3, step 2: bit clear, wholly inside the formed blocks, every overlapping block free
 * (free-listed, or purged through a discarded neighbour unit). */
static bool is_unit_todo(const mi_page_t *p, int64_t k, const uint8_t *free_set) {
    if (mi_page_is_unit_purged(p, k)) return false;
    if (mi_mutant != M_UNIT_OUTSIDE_AREA && !mi_is_unit_inside_blocks(p, k, p->capacity))
        return false;
    int64_t i0, i1, lo = p->base + k * p->unit, hi = lo + p->unit;
    mi_blocks_of_unit(p, k, p->capacity, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        if (mi_mutant == M_UNIT_NEXT_TO_LIVE) {   /* only blocks wholly inside the unit */
            int64_t b0 = p->geom.offset + i * p->geom.block_size;
            if (b0 < lo || b0 + p->geom.block_size > hi) continue;
        }
        if (mi_mutant == M_PURGED_STRADDLER_LIVE && !free_set[i]) {   /* broken: a purged */
            int64_t b0 = p->geom.offset + i * p->geom.block_size;  /* straddler is live */
            if (b0 < lo || b0 + p->geom.block_size > hi) return false;
        }
        if (!free_set[i] && !mi_page_is_block_purged(p, i)) return false;
    }
    return true;
}

static bool overlaps_todo(const mi_page_t *p, int64_t i, const uint8_t *todo) {
    int64_t k0, k1;
    mi_units_of_block(p, i, &k0, &k1);
    for (int64_t k = k0; k < k1; k++)
        if (k >= 0 && k < p->bits && todo[k]) return true;
    return false;
}

/* Step 3: drop the blocks that overlap a todo unit; pushing each kept block on a new head
 * reverses their order. Clears free_is_zero. Returns the number dropped. */
static int64_t rebuild_free_list(mi_page_t *p, const uint8_t *todo) {
    bool zero = atomic_load_explicit(&p->free_is_zero, memory_order_relaxed);
    int64_t dropped = 0, n = 0;
    mi_block_t *kept = NULL, *b = p->free;
    mi_block_t *last = NULL;   /* the mutant rebuild_keeps_order appends after it instead */
    while (b != NULL) {
        if (++n > p->geom.reserved) mi_corrupt("a free list is longer than the page");
        mi_block_t *next = mi_block_next(p, b);
        if (overlaps_todo(p, mi_block_index(p, b), todo)) {
            dropped++;
        } else if (mi_mutant == M_REBUILD_KEEPS_ORDER) {
            mi_block_set_next(p, b, NULL);
            if (last != NULL) mi_block_set_next(p, last, b); else kept = b;
            last = b;
        } else if (mi_mutant != M_PURGED_LEFT_ON_LIST) {
            mi_block_set_next(p, b, kept);
            kept = b;
        }
        b = next;
    }
    if (mi_mutant != M_PURGED_LEFT_ON_LIST) p->free = kept;
    atomic_store_explicit(&p->free_is_zero, mi_mutant == M_FREE_IS_ZERO_KEPT && zero,
                          memory_order_relaxed);
    return dropped;
}

/* The discard accounting: bytes (units * unit) and blocks off, up or down. */
static void count_discarded(mi_page_t *p, int64_t units, int64_t blocks) {
    if (mi_mutant == M_ACCOUNTING_SKIPPED) return;
    p->discarded_bytes += units * p->unit;
    p->discarded_blocks += blocks;
    mi_holes_stats_t *h = &mi_world->holes;
    atomic_fetch_add(&h->purged_bytes, units * p->unit);
    atomic_fetch_add(&h->purged_blocks, blocks);
    if (units > 0) atomic_fetch_add(&h->purged_bytes_total, units * p->unit);
}

/* Digest 3, step 5: a complete walk sets swept_state = (capacity, used). */
static void mark_walked(mi_page_t *p) {
    if (mi_mutant == M_WALK_KEEPS_STAMP) return;
    p->swept_state = ((uint64_t)p->capacity << 32) | (uint64_t)p->used;
}

/* Maximal runs [k0, k1) of set entries of `flags` (or of purged bits when flags is NULL). */
static int64_t compute_runs(const mi_page_t *p, const uint8_t *flags, int64_t (*runs)[2]) {
    int64_t n = 0;
    for (int64_t k = 0; k < p->bits; k++) {
        bool on = flags ? flags[k] : mi_page_is_unit_purged(p, k);
        if (!on) continue;
        if (n && runs[n - 1][1] == k) runs[n - 1][1] = k + 1;
        else { runs[n][0] = k; runs[n][1] = k + 1; n++; }
    }
    return n;
}

static void emit_runs(int64_t (*runs)[2], int64_t n) {
    tr_key("runs");
    tr_raw("[");
    for (int64_t r = 0; r < n; r++)
        tr_rawf(r ? ",[%lld,%lld]" : "[%lld,%lld]", (long long)runs[r][0], (long long)runs[r][1]);
    tr_raw("]");
}

/* mi_page_purge_holes_walk (digest 3): the caller has collected the page. */
mi_walk_result_t mi_page_purge_holes_walk(mi_page_t *p) {
    uint8_t *free_set = xcalloc(p->capacity), *todo = xcalloc(p->bits);
    int64_t n = 0, ntodo = 0;
    for (mi_block_t *b = p->free; b != NULL; b = mi_block_next(p, b)) {
        if (++n > p->geom.reserved) mi_corrupt("a free list is longer than the page");
        free_set[mi_block_index(p, b)] = 1;
    }
    atomic_fetch_add(&mi_world->holes.blocks_visited, n);
    for (int64_t k = 0; k < p->bits; k++)
        if (is_unit_todo(p, k, free_set)) { todo[k] = 1; ntodo++; }
    int64_t (*runs)[2] = xcalloc(p->bits * (int64_t)sizeof *runs);
    int64_t nruns = compute_runs(p, todo, runs);
    mi_walk_result_t res = {true, 0};
    if (ntodo) {
        int64_t dropped = rebuild_free_list(p, todo);
        for (int64_t k = 0; k < p->bits; k++)
            if (todo[k]) set_unit(p, k, true);
        count_discarded(p, ntodo, dropped);
        res.dropped = dropped;
        for (int64_t r = 0; r < nruns; r++) {
            int64_t lo = p->base + runs[r][0] * p->unit, hi = p->base + runs[r][1] * p->unit;
            bool ok = mi_os_discard(p, lo, hi - lo);
            tr_begin("discard");
            tr_int("page", p->id);
            tr_int("k0", runs[r][0]);
            tr_int("k1", runs[r][1]);
            tr_int("addr", lo);
            tr_int("size", hi - lo);
            tr_bool("ok", ok);
            tr_end();
            if (!ok) {   /* digest 3, step 4: the failed run is un-purged, without reuse */
                res.complete = false;
                res.dropped -= mi_page_unpurge_range(p, runs[r][0], runs[r][1], false);
            }
        }
    }
    if (res.complete) mark_walked(p);
    tr_begin("walk");
    tr_int("page", p->id);
    tr_bool("complete", res.complete);
    emit_runs(runs, nruns);
    tr_int("dropped", res.dropped);
    mi_page_emit_list("free", p, p->free);   /* the order the walk leaves: what malloc takes next */
    tr_end();
    free(runs);
    free(todo);
    free(free_set);
    return res;
}

/* mi_page_unpurge_range: clear the bits of units k0..k1-1, set swept_state NONE, push back in
 * descending index order each block of the range that no longer overlaps a discarded unit,
 * writing its link (one OS page touched per block); clear free_is_zero. */
int64_t mi_page_unpurge_range(mi_page_t *p, int64_t k0, int64_t k1, bool reuse) {
    int64_t cleared = 0;
    uint8_t *before = xcalloc(p->capacity);
    for (int64_t k = k0; k < k1; k++) {
        if (!mi_page_is_unit_purged(p, k)) continue;
        cleared++;
        int64_t i0, i1;
        mi_blocks_of_unit(p, k, p->capacity, &i0, &i1);
        for (int64_t i = i0; i < i1; i++) before[i] = 1;
    }
    if (!cleared) {
        free(before);
        return 0;
    }
    for (int64_t k = k0; k < k1; k++)
        if (k < p->purged_words * 64) set_unit(p, k, false);
    p->swept_state = MI_PAGE_SWEPT_NONE;
    int64_t back = 0;
    for (int64_t i = p->capacity - 1; i >= 0; i--) {
        if (!before[i] || mi_page_is_block_purged(p, i)) continue;
        mi_block_t *b = (mi_block_t *)mi_block_addr(p, i);
        mi_block_set_next(p, b, p->free);
        p->free = b;
        back++;
    }
    free(before);
    count_discarded(p, -cleared, -back);
    if (reuse) atomic_fetch_add(&mi_world->holes.reuse_calls, 1);
    else   /* a failed discard undone: those bytes were never given back */
        atomic_fetch_sub(&mi_world->holes.purged_bytes_total, cleared * p->unit);
    atomic_store_explicit(&p->free_is_zero, false, memory_order_relaxed);
    tr_begin("unpurge");
    tr_int("page", p->id);
    tr_int("k0", k0);
    tr_int("k1", k1);
    tr_bool("reuse", reuse);
    tr_int("blocks", back);
    tr_end();
    return back;
}

/* _mi_page_unpurge_run: the lowest maximal run of set bits (digest 4). */
int64_t mi_page_unpurge_run(mi_page_t *p) {
    int64_t (*runs)[2] = xcalloc(p->bits * (int64_t)sizeof *runs);
    int64_t n = compute_runs(p, NULL, runs), back = 0;
    if (n) back = mi_page_unpurge_range(p, runs[0][0], runs[0][1],
                                        mi_mutant != M_UNPURGE_WITHOUT_REUSE);
    free(runs);
    return back;
}

/* _mi_page_unpurge_all: the page goes back to the arena; reset the bitmap and the
 * accounting, rebuild nothing (digest 4). */
void mi_page_unpurge_all(mi_page_t *p) {
    if (mi_mutant == M_UNPURGE_ALL_SKIPPED) return;
    int64_t (*runs)[2] = xcalloc(p->bits * (int64_t)sizeof *runs);
    int64_t n = compute_runs(p, NULL, runs);
    mi_holes_stats_t *h = &mi_world->holes;
    int64_t tail = p->unformed_purged_hi - p->unformed_purged_lo;
    atomic_fetch_sub(&h->purged_bytes, p->discarded_bytes);
    atomic_fetch_sub(&h->purged_blocks, p->discarded_blocks);
    atomic_fetch_sub(&h->unformed_bytes, tail > 0 ? tail : 0);
    atomic_fetch_add(&h->reuse_calls, n + (tail > 0));
    for (int64_t w = 0; w < p->purged_words; w++) p->purged[w] = 0;
    p->discarded_bytes = p->discarded_blocks = 0;
    p->unformed_purged_lo = p->unformed_purged_hi = 0;
    p->swept_state = MI_PAGE_SWEPT_NONE;
    atomic_store_explicit(&p->free_is_zero, false, memory_order_relaxed);
    tr_begin("unpurge_all");
    tr_int("page", p->id);
    emit_runs(runs, n);
    tr_end();
    free(runs);
}

/* The OS-page-aligned byte range wholly inside the unformed tail [capacity, reserved). */
static void compute_unformed_tail(const mi_page_t *p, int64_t *lo, int64_t *hi) {
    int64_t os = p->geom.os_page_size;
    int64_t cap = p->capacity - (mi_mutant == M_TAIL_FROM_LAST_BLOCK && p->capacity > 0);
    int64_t a = p->geom.offset + cap * p->geom.block_size, b = mi_geom_area_end(&p->geom);
    int64_t first = (a + os - 1) / os, last = b / os;
    if (last <= first) { *lo = *hi = 0; return; }
    *lo = first * os;
    *hi = last * os;
}

/* mi_page_purge_unformed_tail: its own OS-page-granular discard (digest 3). */
bool mi_page_purge_unformed_tail(mi_page_t *p) {
    int64_t lo, hi;
    compute_unformed_tail(p, &lo, &hi);
    if (hi <= lo || (p->unformed_purged_lo == lo && p->unformed_purged_hi == hi)) return false;
    bool ok = mi_os_discard(p, lo, hi - lo);
    tr_begin("discard_tail");
    tr_int("page", p->id);
    tr_int("addr", lo);
    tr_int("size", hi - lo);
    tr_bool("ok", ok);
    tr_end();
    if (ok) {
        int64_t old = p->unformed_purged_hi - p->unformed_purged_lo;
        atomic_fetch_add(&mi_world->holes.unformed_bytes, (hi - lo) - (old > 0 ? old : 0));
        p->unformed_purged_lo = lo;
        p->unformed_purged_hi = hi;
    }
    return ok;
}

/* Bring the tail back before mi_page_extend_free writes into it (nothing to do on Linux:
 * discarded anonymous memory faults back in as zeros). */
void mi_page_reuse_unformed_tail(mi_page_t *p) {
    if (p->unformed_purged_hi > p->unformed_purged_lo) {
        atomic_fetch_add(&mi_world->holes.reuse_calls, 1);
        atomic_fetch_sub(&mi_world->holes.unformed_bytes,
                         p->unformed_purged_hi - p->unformed_purged_lo);
        tr_begin("reuse_tail");
        tr_int("page", p->id);
        tr_int("addr", p->unformed_purged_lo);
        tr_int("size", p->unformed_purged_hi - p->unformed_purged_lo);
        tr_end();
    }
    p->unformed_purged_lo = p->unformed_purged_hi = 0;
}
