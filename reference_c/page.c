/* page.c: blocks, their links, the unit arithmetic and the observations of one page
 * (model/page.py, model/geometry.py UnitMap, model/memory.py).
 *
 * A free block carries its free-list link in its first word, as in mimalloc: a pointer on
 * 64-bit; on the emulated 32-bit target a 32-bit word (the block's offset in the region,
 * plus one; zero ends the list), since a block may be only 4 bytes there. Reading a link is
 * the only read the reference makes of block memory: a read of an untouched page would map
 * the zero page, which mincore counts as resident, and the model's residency would lie.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "purge.h"

uint8_t *mi_block_addr(const mi_page_t *p, int64_t i) {
    return p->slice + p->geom.offset + i * p->geom.block_size;
}

int64_t mi_block_index(const mi_page_t *p, const mi_block_t *b) {
    return ((const uint8_t *)b - p->slice - p->geom.offset) / p->geom.block_size;
}

/* The link of a free block. A link that does not point at a block of this page means the
 * lists are broken (a mutant's absorbed double free lets the program write over a listed
 * block): report it instead of following it, as a checking build of an allocator does. */
mi_block_t *mi_block_next(const mi_page_t *p, const mi_block_t *b) {
    mi_block_t *next;
    if (p->geom.arch_bits == 64) {
        memcpy(&next, b, sizeof next);
    } else {
        uint32_t v;
        memcpy(&v, b, sizeof v);
        next = v ? (mi_block_t *)(p->slice + v - 1) : NULL;
    }
    if (next != NULL) {
        uintptr_t start = (uintptr_t)(p->slice + p->geom.offset), at = (uintptr_t)next;
        if (at < start || (at - start) % (uintptr_t)p->geom.block_size != 0
            || (int64_t)((at - start) / (uintptr_t)p->geom.block_size) >= p->geom.reserved)
            mi_corrupt("a free-list link points outside the page's blocks");
    }
    return next;
}

void mi_block_set_next(const mi_page_t *p, mi_block_t *b, const mi_block_t *next) {
    if (p->geom.arch_bits == 64) {
        memcpy(b, &next, sizeof next);
        return;
    }
    uint32_t v = next ? (uint32_t)((const uint8_t *)next - p->slice + 1) : 0;
    memcpy(b, &v, sizeof v);
}

/* -- unit arithmetic (model UnitMap) --------------------------------------------------------- */

bool mi_page_is_unit_purged(const mi_page_t *p, int64_t k) {
    if (k < 0 || k >= p->purged_words * 64) return false;
    return (p->purged[k / 64] >> (k % 64)) & 1;
}

void mi_units_of_block(const mi_page_t *p, int64_t i, int64_t *k0, int64_t *k1) {
    int64_t lo = p->geom.offset + i * p->geom.block_size, hi = lo + p->geom.block_size;
    *k0 = mi_floordiv(lo - p->base, p->unit);
    *k1 = mi_floordiv(hi - 1 - p->base, p->unit) + 1;
}

/* Seed 000: "a block is purged exactly when it overlaps a discarded unit". */
bool mi_page_is_block_purged(const mi_page_t *p, int64_t i) {
    int64_t k0, k1;
    mi_units_of_block(p, i, &k0, &k1);
    for (int64_t k = k0; k < k1; k++)
        if (mi_page_is_unit_purged(p, k)) return true;
    return false;
}

/* The formed blocks (index < capacity) that overlap unit k: [*i0, *i1). */
void mi_blocks_of_unit(const mi_page_t *p, int64_t k, int64_t capacity, int64_t *i0, int64_t *i1) {
    int64_t lo = p->base + k * p->unit, hi = lo + p->unit, start = p->geom.offset;
    int64_t first = mi_floordiv(lo - start, p->geom.block_size);
    int64_t last = mi_floordiv(hi - 1 - start, p->geom.block_size);
    if (first < 0) first = 0;
    if (last > capacity - 1) last = capacity - 1;
    if (mi_mutant == M_UNIT_LAST_BLOCK_SHORT && last > first) last--;   /* one block short */
    *i0 = first;
    *i1 = (hi <= start || last < first) ? first : last + 1;
}

bool mi_is_unit_inside_blocks(const mi_page_t *p, int64_t k, int64_t capacity) {
    int64_t lo = p->base + k * p->unit, hi = lo + p->unit;
    return lo >= p->geom.offset && hi <= p->geom.offset + capacity * p->geom.block_size;
}

/* -- lists ------------------------------------------------------------------------------------ */

/* Length of a list; a list longer than the page's blocks is a cycle (a mutant broke it). */
int64_t mi_list_length(const mi_page_t *p, const mi_block_t *b) {
    int64_t n = 0;
    for (; b != NULL; b = mi_block_next(p, b))
        if (++n > p->geom.reserved) mi_corrupt("a free list is longer than the page");
    return n;
}

int64_t mi_xthread_count(mi_page_t *p) {
    return mi_list_length(p, atomic_load_explicit(&p->xthread_free, memory_order_acquire));
}

bool mi_page_is_all_free(mi_page_t *p) { return p->used - mi_xthread_count(p) == 0; }

bool mi_page_has_unformed_tail(const mi_page_t *p) { return p->capacity < p->geom.reserved; }

static bool any_purged(const mi_page_t *p) {
    for (int64_t w = 0; w < p->purged_words; w++)
        if (p->purged[w]) return true;
    return false;
}

/* model heap_page_for: can this page hand out a block without a new page? */
bool mi_page_has_any_free(mi_page_t *p) {
    return p->free || p->local_free || atomic_load_explicit(&p->xthread_free, memory_order_acquire)
           || any_purged(p) || mi_page_has_unformed_tail(p);
}

/* -- the OS side (model/memory.py) ----------------------------------------------------------- */

/* _mi_os_discard: madvise(MADV_DONTNEED); a failure may be injected (op fail_discard). */
bool mi_os_discard(mi_page_t *p, int64_t rel, int64_t size) {
    atomic_fetch_add(&mi_world->discard_calls, 1);
    int64_t n = atomic_load(&mi_world->fail_next_discards);
    while (n > 0)
        if (atomic_compare_exchange_weak(&mi_world->fail_next_discards, &n, n - 1)) return false;
    return madvise(p->slice + rel, (size_t)size, MADV_DONTNEED) == 0;
}

/* A write of `size` bytes at `rel`: every OS page it touches becomes resident. */
void mi_os_touch(mi_page_t *p, int64_t rel, int64_t size, int byte) {
    memset(p->slice + rel, byte, (size_t)size);
}

/* -- observations (trace events `page_state` and `resident`) --------------------------------- */

void mi_page_emit_list(const char *key, const mi_page_t *p, const mi_block_t *b) {
    tr_key(key);
    tr_raw("[");
    int64_t n = 0;
    for (; b != NULL; b = mi_block_next(p, b)) {
        if (++n > p->geom.reserved) mi_corrupt("a free list is longer than the page");
        tr_rawf(n > 1 ? ",%lld" : "%lld", (long long)mi_block_index(p, b));
    }
    tr_raw("]");
}

/* model Page.snapshot(), field for field. */
void mi_page_emit_state(mi_page_t *p) {
    tr_begin("page_state");
    tr_int("page", p->id);
    tr_int("capacity", p->capacity);
    tr_int("reserved", p->geom.reserved);
    tr_int("used", p->used);
    mi_page_emit_list("free", p, p->free);
    mi_page_emit_list("local_free", p, p->local_free);
    mi_page_emit_list("xthread_free", p, atomic_load(&p->xthread_free));
    tr_key("purged_units");
    tr_raw("[");
    bool first = true;
    for (int64_t k = 0; k < p->bits; k++)
        if (mi_page_is_unit_purged(p, k)) {
            tr_rawf(first ? "%lld" : ",%lld", (long long)k);
            first = false;
        }
    tr_raw("]");
    tr_int("unit", p->unit);
    tr_u64("swept_state", p->swept_state);
    tr_bool("free_is_zero", atomic_load_explicit(&p->free_is_zero, memory_order_relaxed));
    tr_int("discarded_bytes", p->discarded_bytes);
    tr_int("discarded_blocks", p->discarded_blocks);
    tr_end();
}

/* Residency as mincore reports it, in runs of OS pages (of the modelled size) counted from
 * the region start: a modelled OS page is resident when any real page in it is. */
void mi_page_emit_resident(mi_page_t *p) {
    int64_t os = p->geom.os_page_size, real = mi_world->real_page_size;
    int64_t npages = (p->geom.area_size + os - 1) / os;
    int64_t nreal = npages * os / real;
    unsigned char *vec = malloc((size_t)nreal);
    if (!vec || mincore(p->slice, (size_t)(nreal * real), vec) != 0) {
        free(vec);
        mi_corrupt("mincore failed");
    }
    tr_begin("resident");
    tr_int("page", p->id);
    tr_key("runs");
    tr_raw("[");
    int64_t per = os / real, run_start = -1;
    bool first = true;
    for (int64_t j = 0; j <= npages; j++) {
        bool res = false;
        for (int64_t r = 0; j < npages && r < per && !res; r++) res = vec[j * per + r] & 1;
        if (res && run_start < 0) run_start = j;
        if (!res && run_start >= 0) {
            tr_rawf(first ? "[%lld,%lld]" : ",[%lld,%lld]", (long long)run_start, (long long)j);
            first = false;
            run_start = -1;
        }
    }
    tr_raw("]");
    tr_end();
    free(vec);
}

/* The process-wide counters (trace event `holes_stats`, model/stats.py), after the pages of
 * every observation. */
void mi_emit_holes_stats(void) {
    mi_holes_stats_t *h = &mi_world->holes;
    tr_begin("holes_stats");
    tr_int("discard_calls", atomic_load(&mi_world->discard_calls));
    tr_int("reuse_calls", atomic_load(&h->reuse_calls));
    tr_int("purged_bytes", atomic_load(&h->purged_bytes));
    tr_int("purged_bytes_total", atomic_load(&h->purged_bytes_total));
    tr_int("purged_blocks", atomic_load(&h->purged_blocks));
    tr_int("blocks_visited", atomic_load(&h->blocks_visited));
    tr_int("pages_skipped", atomic_load(&h->pages_skipped));
    tr_int("ineligible_pages", atomic_load(&h->ineligible_pages));
    tr_int("unformed_bytes", atomic_load(&h->unformed_bytes));
    tr_int("full_sweeps", atomic_load(&h->full_sweeps));
    tr_end();
}
