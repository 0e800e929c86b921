/* alloc.c: taking and giving back blocks of one page (model/alloc.py).
 *
 * Seed 000, change (1): "Nothing in mi_malloc or mi_free" changes; these are the paths the
 * purge rules live beside. A purged block comes back only through _mi_page_unpurge_run,
 * called when the free list is empty (digest 4). A free from another thread is an atomic
 * push on xthread_free and nothing else ("A free from another thread only pushes on
 * xthread_free").
 */
#include "purge.h"

/* How many blocks mi_page_extend_free forms at once: 4 KiB worth, at least 4. */
static int64_t compute_extend_count(const mi_page_t *p) {
    int64_t bs = p->geom.block_size;
    int64_t max_extend = bs >= (int64_t)MI_MAX_EXTEND_SIZE_BYTES ? MI_MIN_EXTEND_BLOCKS
                         : (int64_t)MI_MAX_EXTEND_SIZE_BYTES / bs;
    if (max_extend < MI_MIN_EXTEND_BLOCKS) max_extend = MI_MIN_EXTEND_BLOCKS;
    int64_t room = p->geom.reserved - p->capacity;
    return room < max_extend ? room : max_extend;
}

/* Append list `more` at the end of `*head` (the model's list.extend). */
static void list_append(mi_page_t *p, mi_block_t **head, mi_block_t *more) {
    if (more == NULL) return;
    if (*head == NULL) { *head = more; return; }
    mi_block_t *b = *head;
    int64_t n = 0;
    for (mi_block_t *next; (next = mi_block_next(p, b)) != NULL; b = next)
        if (++n > p->geom.reserved) mi_corrupt("a free list is longer than the page");
    mi_block_set_next(p, b, more);
}

/* Form blocks from the unformed tail, in ascending order at the end of `free`, each with
 * its link written. */
int64_t mi_page_extend_free(mi_page_t *p) {
    int64_t n = compute_extend_count(p);
    if (n <= 0) return 0;
    mi_page_reuse_unformed_tail(p);
    int64_t first = p->capacity;
    for (int64_t i = first; i < first + n; i++)
        mi_block_set_next(p, (mi_block_t *)mi_block_addr(p, i),
                          i + 1 < first + n ? (mi_block_t *)mi_block_addr(p, i + 1) : NULL);
    list_append(p, &p->free, (mi_block_t *)mi_block_addr(p, first));
    p->capacity += n;
    tr_begin("extend");
    tr_int("page", p->id);
    tr_int("first", first);
    tr_int("count", n);
    tr_end();
    return n;
}

/* _mi_page_free_collect without unpurge: xthread_free (taken atomically) in front of
 * local_free, appended to `free`; frees from other threads leave `used` only now. */
void mi_page_free_collect(mi_page_t *p) {
    lin_lock();   /* linearized trace: ordered with the pushes and their events */
    mi_block_t *xt = atomic_exchange_explicit(&p->xthread_free, NULL, memory_order_acq_rel);
    lin_unlock();
    int64_t nx = mi_list_length(p, xt);
    p->used -= nx;
    list_append(p, &xt, p->local_free);
    p->local_free = NULL;
    list_append(p, &p->free, xt);
    if (mi_mutant == M_COLLECT_UNPURGES && p->free == NULL && !p->sweeping)
        mi_page_unpurge_run(p);   /* broken: the idle path's collect takes a hole back */
}

/* Take a block: from `free`; when empty, collect; when still empty and units are purged
 * (and no sweep has the page), unpurge the lowest run; else extend. -1: the page is full. */
int64_t mi_page_malloc(mi_page_t *p, bool zero) {
    const char *src = "free";
    if (p->free == NULL) {
        mi_page_free_collect(p);
        src = "collect";
    }
    if (p->free == NULL && !p->sweeping) {
        bool purged = false;
        for (int64_t w = 0; w < p->purged_words && !purged; w++) purged = p->purged[w] != 0;
        if (purged) {
            mi_page_unpurge_run(p);
            src = "unpurge";
        }
    }
    if (p->free == NULL && mi_page_has_unformed_tail(p)) {
        mi_page_extend_free(p);
        src = "extend";
    }
    if (p->free == NULL) return -1;
    mi_block_t *b = p->free;
    p->free = mi_block_next(p, b);
    int64_t i = mi_block_index(p, b);
    p->used++;
    atomic_fetch_or_explicit(&p->live[i / 64], UINT64_C(1) << (i % 64), memory_order_relaxed);
    if (zero) {
        /* mi_zalloc: known-zero free blocks need only their link word cleared; any other
         * block is zeroed in full, so it never shows stale bytes. */
        bool known_zero = atomic_load_explicit(&p->free_is_zero, memory_order_relaxed);
        int64_t n = known_zero ? (p->geom.block_size < 8 ? p->geom.block_size : 8) : p->geom.block_size;
        mi_os_touch(p, (uint8_t *)b - p->slice, n, 0);
    }
    tr_begin("malloc");
    tr_int("page", p->id);
    tr_int("block", i);
    tr_bool("zero", zero);
    tr_str("src", src);
    tr_end();
    return i;
}

/* A free of a block that is not live is a double (or invalid) free: reported, never
 * absorbed. The live bits are the debug shadow of the blocks handed out; clearing one is
 * atomic, so two threads freeing one block find out which of them was second. */
static void report_double_free(mi_page_t *p, int64_t i) {
    atomic_fetch_add(&p->double_frees, 1);
    tr_begin("double_free");
    tr_int("page", p->id);
    tr_int("block", i);
    tr_end();
}

static bool check_free(mi_page_t *p, int64_t i) {
    bool live = false;
    /* Bounded by `reserved`, which never changes, not `capacity`, which the owner writes
     * while another thread frees: a block at or past capacity has no live bit anyway. */
    if (i >= 0 && i < p->geom.reserved) {
        uint64_t bit = UINT64_C(1) << (i % 64);
        live = atomic_fetch_and_explicit(&p->live[i / 64], ~bit, memory_order_relaxed) & bit;
    }
    if (live || mi_mutant == M_DOUBLE_FREE_ABSORBED) return true;
    report_double_free(p, i);
    return false;
}

/* realloc's check, before it does anything (docs/op-script.md, "Stale names"): the block
 * must be live, as for a free, but its live bit stays set (the block is still handed out
 * when it is resized in place). A block that is not live is reported as a double free. */
bool mi_check_live(mi_page_t *p, int64_t i) {
    if (i >= 0 && i < p->geom.reserved
        && (atomic_load_explicit(&p->live[i / 64], memory_order_relaxed) & (UINT64_C(1) << (i % 64))))
        return true;
    if (mi_mutant == M_DOUBLE_FREE_ABSORBED) return true;
    report_double_free(p, i);
    return false;
}

static void emit_free(const mi_page_t *p, int64_t i, const char *who) {
    tr_begin("free");
    tr_int("page", p->id);
    tr_int("block", i);
    tr_str("thread", who);
    tr_end();
}

/* mi_free by the owner: push on local_free, writing the link. */
bool mi_free_local(mi_page_t *p, int64_t i) {
    if (!check_free(p, i)) return false;
    mi_block_t *b = (mi_block_t *)mi_block_addr(p, i);
    mi_block_set_next(p, b, p->local_free);
    p->local_free = b;
    p->used--;
    atomic_store_explicit(&p->free_is_zero, false, memory_order_relaxed);
    emit_free(p, i, "owner");
    return true;
}

/* mi_free from another thread: only an atomic push on xthread_free. */
bool mi_free_xthread(mi_page_t *p, int64_t i) {
    if (!check_free(p, i)) return false;
    mi_block_t *b = (mi_block_t *)mi_block_addr(p, i);
    lin_lock();   /* linearized trace: the push and its event are one step */
    mi_block_t *head = atomic_load_explicit(&p->xthread_free, memory_order_relaxed);
    do {
        mi_block_set_next(p, b, head);
    } while (!atomic_compare_exchange_weak_explicit(&p->xthread_free, &head, b,
                                                    memory_order_release, memory_order_relaxed));
    atomic_store_explicit(&p->free_is_zero, false, memory_order_relaxed);
    emit_free(p, i, "other");
    lin_unlock();
    return true;
}

/* The program writes the whole block, as the seed's workloads do before freeing. */
void mi_write_block(mi_page_t *p, int64_t i) {
    mi_os_touch(p, mi_block_addr(p, i) - p->slice, p->geom.block_size, 0x5a);
}
