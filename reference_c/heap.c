/* heap.c: the world, its pages and heaps; heap-level malloc, free, realloc, retire, destroy,
 * delete, abandon and reclaim (model/world.py, model/heap.py).
 *
 * A page is a region from mmap, aligned to 4 MiB like the model's arena addresses, with
 * transparent huge pages off (MADV_NOHUGEPAGE) so that mincore reports what the model
 * predicts. Seed 000: "mi_heap_destroy, mi_heap_delete and a page that becomes free all go
 * through _mi_page_unpurge_all". Page ids count up from 1 and are never reused in a script;
 * a retired page keeps its region until the world ends, as in the model.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "purge.h"

mi_world_t *mi_world;

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) mi_corrupt("out of memory");
    return p;
}

/* Room for one more element in a growing array of `*cap` elements of `size` bytes. */
static void *grow(void *arr, int n, int *cap, size_t size) {
    if (n < *cap) return arr;
    *cap = *cap ? 2 * *cap : 8;
    arr = realloc(arr, (size_t)*cap * size);
    if (!arr) mi_corrupt("out of memory");
    return arr;
}

mi_world_t *mi_world_new(const mi_options_t *opt) {
    mi_world_t *w = xcalloc(1, sizeof *w);
    w->opt = *opt;
    pthread_mutex_init(&w->pages_lock, NULL);
    pthread_mutex_init(&w->threads_lock, NULL);
    pthread_mutex_init(&w->abandoned_lock, NULL);
    atomic_init(&w->vclock, opt->clock_start_ms);
    w->real_page_size = sysconf(_SC_PAGESIZE);
    mi_stamp_configure(opt);
    return w;
}

void mi_world_free(mi_world_t *w) {
    for (int id = 1; id <= atomic_load(&w->npages); id++) {
        mi_page_t *p = w->pages[id];
        munmap(p->slice, p->map_size);
        free(p->purged);
        free((void *)p->live);
        free(p);
    }
    for (int t = 0; t < w->nthreads; t++) {
        mi_tld_t *tld = w->threads[t];
        for (int q = 0; q < tld->nq; q++) free(tld->queues[q].ids);
        free(tld->queues);
        pthread_mutex_destroy(&tld->heap_lock);
        free(tld);
    }
    free(w->abandoned);
    pthread_mutex_destroy(&w->pages_lock);
    pthread_mutex_destroy(&w->threads_lock);
    pthread_mutex_destroy(&w->abandoned_lock);
    free(w);
}

/* The state of thread `tid` and its default heap (created on first use; heap id == tid). */
mi_tld_t *mi_thread(int tid) {
    mi_world_t *w = mi_world;
    pthread_mutex_lock(&w->threads_lock);
    mi_tld_t *t = NULL;
    for (int i = 0; i < w->nthreads && !t; i++)
        if (w->threads[i]->id == tid) t = w->threads[i];
    if (!t) {
        if (w->nthreads == MI_MAX_THREADS) {
            pthread_mutex_unlock(&w->threads_lock);
            mi_corrupt("too many threads in one script");
        }
        t = xcalloc(1, sizeof *t);
        t->id = tid;
        pthread_mutex_init(&t->heap_lock, NULL);
        atomic_init(&t->park_state, PARK_RUNNING);
        w->threads[w->nthreads++] = t;
    }
    pthread_mutex_unlock(&w->threads_lock);
    return t;
}

mi_page_t *mi_page_of(int id) {
    return id >= 1 && id <= atomic_load(&mi_world->npages) ? mi_world->pages[id] : NULL;
}

/* -- heap queues: block size -> page ids, keys in insertion order ------------------------ */

static mi_queue_t *queue_of(mi_tld_t *h, int64_t bs, bool create) {
    for (int q = 0; q < h->nq; q++)
        if (h->queues[q].block_size == bs) return &h->queues[q];
    if (!create) return NULL;
    h->queues = grow(h->queues, h->nq, &h->capq, sizeof *h->queues);
    mi_queue_t *q = &h->queues[h->nq++];
    memset(q, 0, sizeof *q);
    q->block_size = bs;
    return q;
}

static void queue_append(mi_tld_t *h, int64_t bs, int id) {
    pthread_mutex_lock(&h->heap_lock);
    mi_queue_t *q = queue_of(h, bs, true);
    q->ids = grow(q->ids, q->n, &q->cap, sizeof *q->ids);
    q->ids[q->n++] = id;
    pthread_mutex_unlock(&h->heap_lock);
}

static void queue_remove(mi_tld_t *h, int id) {
    pthread_mutex_lock(&h->heap_lock);
    for (int qi = 0; qi < h->nq; qi++) {
        mi_queue_t *q = &h->queues[qi];
        for (int i = 0; i < q->n; i++)
            if (q->ids[i] == id) {
                memmove(&q->ids[i], &q->ids[i + 1], (size_t)(q->n - i - 1) * sizeof *q->ids);
                q->n--;
                break;
            }
    }
    pthread_mutex_unlock(&h->heap_lock);
}

static void queues_clear(mi_tld_t *h) {
    pthread_mutex_lock(&h->heap_lock);
    for (int q = 0; q < h->nq; q++) free(h->queues[q].ids);
    h->nq = 0;
    pthread_mutex_unlock(&h->heap_lock);
}

/* Every page of the heap, in queue order (a snapshot: a sweep may retire pages). */
int mi_heap_page_ids(mi_tld_t *h, int **out) {
    pthread_mutex_lock(&h->heap_lock);
    int n = 0;
    for (int q = 0; q < h->nq; q++) n += h->queues[q].n;
    int *ids = xcalloc((size_t)n, sizeof *ids), k = 0;
    for (int q = 0; q < h->nq; q++)
        for (int i = 0; i < h->queues[q].n; i++) ids[k++] = h->queues[q].ids[i];
    pthread_mutex_unlock(&h->heap_lock);
    *out = ids;
    return n;
}

/* -- the abandoned map ---------------------------------------------------------------------- */

static void abandoned_append(int id) {
    mi_world_t *w = mi_world;
    pthread_mutex_lock(&w->abandoned_lock);
    w->abandoned = grow(w->abandoned, w->nab, &w->capab, sizeof *w->abandoned);
    w->abandoned[w->nab++] = id;
    pthread_mutex_unlock(&w->abandoned_lock);
}

bool mi_abandoned_remove(int id) {
    mi_world_t *w = mi_world;
    bool found = false;
    pthread_mutex_lock(&w->abandoned_lock);
    for (int i = 0; i < w->nab && !found; i++)
        if (w->abandoned[i] == id) {
            memmove(&w->abandoned[i], &w->abandoned[i + 1], (size_t)(w->nab - i - 1) * sizeof(int));
            w->nab--;
            found = true;
        }
    pthread_mutex_unlock(&w->abandoned_lock);
    return found;
}

/* -- pages ------------------------------------------------------------------------------------ */

/* An anonymous region of `size` bytes aligned to 4 MiB, huge pages off. */
static uint8_t *map_region(size_t size) {
    size_t over = size + MI_REGION_ALIGN;
    uint8_t *raw = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)raw + MI_REGION_ALIGN - 1) & ~(uintptr_t)(MI_REGION_ALIGN - 1);
    uint8_t *p = (uint8_t *)a;
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + over - (p + size));
    if (tail) munmap(p + size, tail);
    madvise(p, size, MADV_NOHUGEPAGE);
    return p;
}

/* world.new_page: a page of the size class for `heap`, at the end of its queue. */
mi_page_t *mi_world_new_page(mi_tld_t *heap, int64_t block_size) {
    mi_world_t *w = mi_world;
    const mi_options_t *o = &w->opt;
    mi_page_t *p = xcalloc(1, sizeof *p);
    mi_geom_t *g = &p->geom;
    g->kind = mi_compute_page_kind(block_size, o->arch_bits);
    g->block_size = block_size;
    g->os_page_size = o->os_page_size;
    g->arch_bits = o->arch_bits;
    g->offset = o->first_block_offset;
    g->area_size = g->kind == MI_HUGE ? g->offset + block_size : mi_page_size_of(g->kind, o->arch_bits);
    g->reserved = (g->area_size - g->offset) / block_size;
    int64_t os_pages = (g->area_size + g->os_page_size - 1) / g->os_page_size;
    p->map_size = (size_t)(os_pages * g->os_page_size);
    p->slice = map_region(p->map_size);
    if (!p->slice) mi_corrupt("mmap failed");
    p->unit = mi_compute_purge_unit(g);
    p->base = mi_compute_unit_base(g, p->unit);
    p->bits = mi_compute_purge_bits(g, p->unit);
    p->purged_words = p->bits / 64 + 1 > 4 ? p->bits / 64 + 1 : 4;
    p->purged = xcalloc((size_t)p->purged_words, sizeof(uint64_t));
    p->live = xcalloc((size_t)(g->reserved / 64 + 1), sizeof(uint64_t));
    p->swept_state = MI_PAGE_SWEPT_NONE;
    p->stamp_gated = block_size > mi_medium_max_obj_size(o->arch_bits) && g->reserved > 1;
    atomic_init(&p->free_is_zero, true);   /* fresh memory from the OS is zero */
    atomic_init(&p->owner, heap->id);
    p->heap = heap->id;
    atomic_flag_clear(&p->claim);
    pthread_mutex_lock(&w->pages_lock);
    int id = atomic_load(&w->npages) + 1;
    if (id >= MI_MAX_PAGES) {
        pthread_mutex_unlock(&w->pages_lock);
        mi_corrupt("too many pages in one script");
    }
    p->id = id;
    w->pages[id] = p;
    atomic_store(&w->npages, id);
    pthread_mutex_unlock(&w->pages_lock);
    queue_append(heap, block_size, id);
    tr_begin("page_new");
    tr_int("page", id);
    tr_str("page_kind", mi_page_kind_names[g->kind]);
    tr_int("block_size", block_size);
    tr_int("reserved", g->reserved);
    tr_int("unit", p->unit);
    tr_end();
    return p;
}

/* The first page of the size class that can hand out a block without a new page. */
static mi_page_t *heap_page_for(mi_tld_t *heap, int64_t bs) {
    mi_page_t *found = NULL;
    pthread_mutex_lock(&heap->heap_lock);
    mi_queue_t *q = queue_of(heap, bs, false);
    for (int i = 0; q && i < q->n && !found; i++) {
        mi_page_t *p = mi_page_of(q->ids[i]);
        if (mi_page_has_any_free(p)) found = p;
    }
    pthread_mutex_unlock(&heap->heap_lock);
    return found;
}

mi_ptr_t mi_heap_malloc(mi_tld_t *heap, int64_t size, bool zero, bool write) {
    int64_t bs = mi_compute_block_size(size, mi_world->opt.arch_bits);
    mi_page_t *p = heap_page_for(heap, bs);
    if (p == NULL) p = mi_world_new_page(heap, bs);
    int64_t i = mi_page_malloc(p, zero);
    if (i < 0) mi_corrupt("a page with room gave no block");
    mi_after_malloc(heap, p);
    if (write) mi_write_block(p, i);
    return (mi_ptr_t){p->id, i};
}

/* Free from `thread`: the owner pushes on local_free (and a page with no live block left
 * goes back to the arena); any other thread pushes on xthread_free. */
bool mi_free(mi_ptr_t ptr, int thread) {
    mi_page_t *p = mi_page_of(ptr.page);
    if (thread == atomic_load_explicit(&p->owner, memory_order_relaxed)
        && !atomic_load_explicit(&p->abandoned, memory_order_relaxed)) {
        if (!mi_free_local(p, ptr.block)) return false;
        if (p->used == 0 && atomic_load(&p->xthread_free) == NULL) mi_page_retire(p);
        return true;
    }
    return mi_free_xthread(p, ptr.block);
}

/* Shrink in place while the new size is at least half of the block, else move. The driver
 * writes every block it allocates in full, so a move need not copy (and a copy would read
 * memory the model does not read). */
bool mi_realloc(mi_tld_t *heap, mi_ptr_t ptr, int64_t size, mi_ptr_t *out) {
    mi_page_t *p = mi_page_of(ptr.page);
    int64_t bs = p->geom.block_size;
    if (!mi_check_live(p, ptr.block)) return false;   /* a stale name: nothing is allocated */
    if (size <= bs && size >= bs / 2) {
        tr_begin("realloc");
        tr_int("page", p->id);
        tr_int("block", ptr.block);
        tr_bool("inplace", true);
        tr_end();
        *out = ptr;
        return true;
    }
    mi_ptr_t moved = mi_heap_malloc(heap, size, false, true);
    tr_begin("realloc");
    tr_int("page", p->id);
    tr_int("block", ptr.block);
    tr_bool("inplace", false);
    tr_int("to_page", moved.page);
    tr_int("to_block", moved.block);
    tr_end();
    *out = moved;
    return mi_free(ptr, heap->id);
}

/* A page with no live block goes back to the arena: unpurge all, drop its lists. */
void mi_page_retire(mi_page_t *p) {
    mi_page_unpurge_all(p);
    p->free = p->local_free = NULL;
    atomic_store(&p->xthread_free, NULL);
    for (int64_t w = 0; w <= p->geom.reserved / 64; w++) atomic_store(&p->live[w], 0);
    p->capacity = p->used = 0;
    p->retired = true;
    tr_begin("retire");
    tr_int("page", p->id);
    tr_end();
    queue_remove(mi_thread(p->heap), p->id);
    mi_abandoned_remove(p->id);
}

/* mi_heap_destroy: every page goes back, live blocks included. */
void mi_heap_destroy(mi_tld_t *heap) {
    int *ids;
    int n = mi_heap_page_ids(heap, &ids);
    for (int i = 0; i < n; i++) mi_page_retire(mi_page_of(ids[i]));
    free(ids);
    queues_clear(heap);
}

/* mi_heap_delete: pages without live blocks go back to the arena; pages with live blocks
 * move to the backing heap `into`, their purge state intact. */
void mi_heap_delete(mi_tld_t *heap, mi_tld_t *into) {
    int *ids;
    int n = mi_heap_page_ids(heap, &ids);
    for (int i = 0; i < n; i++) {
        mi_page_t *p = mi_page_of(ids[i]);
        if (mi_page_is_all_free(p)) {
            mi_page_retire(p);
            continue;
        }
        queue_remove(heap, p->id);
        p->heap = into->id;
        atomic_store(&p->owner, into->id);
        queue_append(into, p->geom.block_size, p->id);
    }
    free(ids);
    queues_clear(heap);
}

/* The thread exits: its pages go to the abandoned map; frees into them from then on are
 * cross-thread frees. */
void mi_heap_abandon(mi_tld_t *heap) {
    int *ids;
    int n = mi_heap_page_ids(heap, &ids);
    for (int i = 0; i < n; i++) {
        mi_page_t *p = mi_page_of(ids[i]);
        /* One lin step: a sweeper's snapshot of the map (taken under lin_lock) cannot see the
         * page before its event, or a traced sweep of it would precede the abandon (the
         * mutant publishes the page first, the event in a step of its own). */
        bool split = mi_mutant == M_ABANDON_OUTSIDE_LIN_STEP;
        if (!split) lin_lock();
        atomic_store(&p->abandoned, true);
        atomic_store(&p->owner, -1);
        abandoned_append(p->id);
        mi_abandon_delay();   /* test hook (linearize.c): off unless set */
        if (split) lin_lock();
        tr_begin("abandon");
        tr_int("page", p->id);
        tr_end();
        lin_unlock();
    }
    free(ids);
    queues_clear(heap);
}

/* A thread takes an abandoned page into its heap and becomes its owner. The claim keeps a
 * sweeper of another thread off the page meanwhile. */
void mi_page_reclaim(mi_page_t *p, mi_tld_t *heap) {
    while (atomic_flag_test_and_set_explicit(&p->claim, memory_order_acquire)) sched_yield();
    mi_abandoned_remove(p->id);
    atomic_store(&p->abandoned, false);
    atomic_store(&p->owner, heap->id);
    p->heap = heap->id;
    queue_append(heap, p->geom.block_size, p->id);
    tr_begin("reclaim");
    tr_int("page", p->id);
    tr_int("thread", heap->id);
    tr_end();
    atomic_flag_clear_explicit(&p->claim, memory_order_release);
}
