/* sweep.c: the allocation stamp, the designs of the seed, the sweep of one page and the
 * inline idle driver (model/stamp.py, variants.py, sweep.py, drivers.py).
 *
 * Seed 000, change (2): "The sweep owns the time instead. It counts epochs". The allocating
 * side makes a relaxed load of the epoch and a store into swept_state when the value differs;
 * nothing else (no clock, no call). The sweep keeps a large page stamped in the current or
 * the previous epoch, and tells the thread so (`holes_sweep_deferred`, `_pending`).
 */
#include <stdlib.h>

#include "purge.h"

const char *const mi_variant_names[V_COUNT] = {"epoch", "no-hold", "clock", "handoff-only",
                                               "two-untouched"};

static inline bool is_stamp(uint64_t state) {
    return (state & MI_PAGE_SWEPT_TAG_MASK) == MI_PAGE_SWEPT_STAMP_TAG;
}

bool mi_stamp_slow_path;

void mi_stamp_configure(const mi_options_t *o) {
    mi_stamp_slow_path = o->stale_epochs > 0 || o->variant == V_CLOCK
                         || mi_mutant == M_STAMP_NEVER_WRITTEN || mi_mutant == M_EPOCH_PLAIN_READ;
}

/* Mutant epoch_plain_read: the allocating side reads the epoch with a plain load while the
 * sweepers move it with an atomic read-modify-write. That is a data race (C11 5.1.2.4:
 * undefined behaviour) although on x86-64 the load returns the same value, so no trace tells
 * it from the relaxed load; the TSan build reports it (CF-SANITIZERS-CLEAN). */
static uint64_t mi_epoch_plain_read(void) {
    return *(const uint64_t *)(const void *)&mi_world->epoch;
}

/* Write the stamp (it differs from what the page carries): once per epoch for a busy page. */
void mi_stamp_store(mi_page_t *p, uint64_t stamp, uint64_t value) {
    p->swept_state = stamp;
    tr_begin("stamp");
    tr_int("page", p->id);
    tr_u64("epoch", value);
    tr_end();
}

/* The stamp's slow path: an emulated stale epoch read (`stale_epochs`: a relaxed load may
 * return an epoch that old, never older than one this thread has seen), the clock design
 * (a clock reading instead of the epoch), or the mutant that never writes it. */
void mi_stamp_slow(mi_tld_t *t, mi_page_t *p) {
    const mi_options_t *o = &mi_world->opt;
    lin_lock();   /* linearized trace: the epoch read and its stamp event are one step */
    uint64_t epoch = mi_mutant == M_EPOCH_PLAIN_READ ? mi_epoch_plain_read()
                     : mi_proto_stamp_epoch(&mi_world->epoch);
    if (o->stale_epochs > 0) {
        int64_t seen = (int64_t)t->epoch_seen, oldest = (int64_t)epoch - o->stale_epochs;
        epoch = (uint64_t)(seen > oldest ? seen : oldest);
        t->epoch_seen = epoch;
    }
    uint64_t value = o->variant == V_CLOCK ? (uint64_t)mi_clock_now() : epoch;
    uint64_t stamp = MI_PAGE_SWEPT_STAMP_TAG | (value & MI_EPOCH_MASK);
    if (mi_mutant != M_STAMP_NEVER_WRITTEN && p->swept_state != stamp) mi_stamp_store(p, stamp, value);
    lin_unlock();
}

/* -- the designs (model/variants.py) --------------------------------------------------------- */

static bool is_held_by_epoch(const mi_page_t *p, const mi_sweep_ctx_t *ctx) {
    return ctx->interval > 0 && is_stamp(p->swept_state)
           && mi_is_epoch_young(ctx->epoch, p->swept_state & MI_EPOCH_MASK);
}

/* The first version: kept while the stamp (a clock reading) is less than the interval ago. */
static bool is_held_by_clock(const mi_page_t *p, const mi_sweep_ctx_t *ctx) {
    if (ctx->interval <= 0 || !is_stamp(p->swept_state)) return false;
    return (uint32_t)((uint64_t)ctx->now - (p->swept_state & MI_EPOCH_MASK)) < (uint64_t)ctx->interval;
}

/* Kept until the second sweep in a row that finds it untouched; the sweep consumes the
 * allocation's stamp. */
static bool is_held_two_untouched(mi_page_t *p, const mi_sweep_ctx_t *ctx) {
    if (ctx->interval <= 0) return false;
    if (is_stamp(p->swept_state)) {
        p->swept_state = MI_PAGE_SWEPT_NONE;
        p->untouched = 0;
        return true;
    }
    return ++p->untouched < 2;
}

static bool is_page_held(mi_page_t *p, const mi_sweep_ctx_t *ctx) {
    if (mi_mutant == M_NO_HOLD_INLINE) return ctx->in_handoff && is_held_by_epoch(p, ctx);
    switch (mi_world->opt.variant) {
    case V_EPOCH: return is_held_by_epoch(p, ctx);
    case V_NO_HOLD: return false;
    case V_CLOCK: return is_held_by_clock(p, ctx);
    case V_HANDOFF_ONLY: return ctx->in_handoff && is_held_by_epoch(p, ctx);
    case V_TWO_UNTOUCHED: return is_held_two_untouched(p, ctx);
    default: return false;
    }
}

/* -- the sweep of one page (model/sweep.py) ---------------------------------------------------- */

static bool has_pending_tail(const mi_page_t *p) {
    return mi_page_has_unformed_tail(p) && p->unformed_purged_hi <= p->unformed_purged_lo;
}

static const char *sweep_done(mi_page_t *p, const char *outcome) {
    tr_begin("sweep_page");
    tr_int("page", p->id);
    tr_str("outcome", outcome);
    tr_end();
    return outcome;
}

/* _mi_page_purge_holes in the real order (digest 6); the page is already collected. */
const char *mi_page_purge_holes(mi_page_t *p, mi_tld_t *t, const mi_sweep_ctx_t *ctx) {
    const mi_options_t *o = &mi_world->opt;
    if ((!o->purge_holes && mi_mutant != M_OPTION_OFF_IGNORED) || o->purge_delay < 0)
        return sweep_done(p, "off");
    if (mi_page_is_all_free(p)) return sweep_done(p, "all-free");
    if (is_page_held(p, ctx)) {
        if (p->free || p->local_free || atomic_load(&p->xthread_free) || has_pending_tail(p))
            atomic_store(&t->holes_sweep_deferred, true);
        return sweep_done(p, "held");
    }
    mi_page_purge_unformed_tail(p);
    if (!mi_page_can_purge_holes(&p->geom)) {
        atomic_fetch_add(&mi_world->holes.ineligible_pages, 1);
        return sweep_done(p, "ineligible");
    }
    if (!ctx->full && p->swept_state == (((uint64_t)p->capacity << 32) | (uint64_t)p->used)) {
        atomic_fetch_add(&mi_world->holes.pages_skipped, 1);
        return sweep_done(p, "unchanged");
    }
    p->sweeping = true;
    mi_walk_result_t r = mi_page_purge_holes_walk(p);
    p->sweeping = false;
    return sweep_done(p, r.complete ? "walked" : "incomplete");
}

/* -- the inline driver (model/drivers.py) ----------------------------------------------------- */

/* _mi_page_purge_holes_sweep_begin: advance the epoch FIRST, count the sweep (a full one
 * every purge_holes_full_every), note the epoch the sweep runs in. */
mi_sweep_ctx_t mi_holes_sweep_begin(mi_tld_t *t) {
    const mi_options_t *o = &mi_world->opt;
    int64_t interval = mi_compute_interval(o->interval_ms);
    if (o->purge_holes) {
        mi_advance_t a = mi_holes_epoch_advance(interval);
        if (a.advanced) {
            tr_begin("epoch_advance");
            tr_int("thread", t->id);
            tr_u64("epoch", a.epoch);
            tr_int("start", a.start);
            tr_end();
        }
    }
    t->holes_sweep_seq++;
    t->holes_sweep_full = (int64_t)(t->holes_sweep_seq % (uint64_t)o->full_every) == 0
                          && mi_mutant != M_FULL_SWEEP_NEVER;
    if (t->holes_sweep_full && mi_mutant != M_FULL_SWEEPS_UNCOUNTED)
        atomic_fetch_add(&mi_world->holes.full_sweeps, 1);   /* model: count_full_sweep */
    lin_lock();   /* linearized trace: the epoch read, the clock read and the event are one step */
    t->holes_sweep_epoch = mi_proto_sweep_epoch(&mi_world->epoch);
    if (t->holes_sweep_epoch > t->epoch_seen) t->epoch_seen = t->holes_sweep_epoch;
    int64_t now = mi_clock_now();
    tr_begin("sweep_begin");
    tr_int("thread", t->id);
    tr_u64("seq", t->holes_sweep_seq);
    tr_bool("full", t->holes_sweep_full);
    tr_u64("epoch", t->holes_sweep_epoch);
    if (tr_linearized) tr_int("now", now);
    tr_end();
    lin_unlock();
    return (mi_sweep_ctx_t){now, t->holes_sweep_epoch, interval, false, t->holes_sweep_full};
}

/* Collect (never unpurge) and sweep each page; a page left with no live block goes back to
 * the arena. `abandoned`: the ids are a snapshot of the abandoned map, so each page is
 * claimed first (another thread may be sweeping or reclaiming it) and swept only if it is
 * still abandoned under the claim: a page reclaimed since the snapshot belongs to its new
 * owner's heap, which a sweep of this thread must not touch (found by a traced run,
 * tests/data/regressions/concurrent-tsan-3-foreign-sweep.jsonl.gz). */
static void sweep_pages(mi_tld_t *t, const int *ids, int n, const mi_sweep_ctx_t *ctx,
                        bool abandoned) {
    for (int i = 0; i < n; i++) {
        if (ctx->in_handoff && atomic_load(&t->park_reclaim)) return;   /* the owner is back */
        mi_page_t *p = mi_page_of(ids[i]);
        if (abandoned) {
            if (atomic_flag_test_and_set_explicit(&p->claim, memory_order_acquire)) continue;
            if (!atomic_load(&p->abandoned)) {
                atomic_flag_clear_explicit(&p->claim, memory_order_release);
                continue;
            }
        }
        if (!p->retired) {
            mi_page_free_collect(p);
            if (mi_page_is_all_free(p) && p->capacity) mi_page_retire(p);
            else mi_page_purge_holes(p, t, ctx);
        }
        if (abandoned) atomic_flag_clear_explicit(&p->claim, memory_order_release);
    }
}

/* mi_on_thread_idle: clear deferred; advance the epoch first; sweep every page of the
 * thread's heap, then the abandoned pages. Returns whether something was held back. */
bool mi_on_thread_idle(int tid, bool in_handoff) {
    mi_tld_t *t = mi_thread(tid);
    atomic_store(&t->holes_sweep_deferred, false);
    mi_sweep_ctx_t ctx = mi_holes_sweep_begin(t);
    ctx.in_handoff = in_handoff;
    int *ids;
    int n = mi_heap_page_ids(t, &ids);
    sweep_pages(t, ids, n, &ctx, false);
    free(ids);
    /* The snapshot under lin_lock: a page is in the map only after its `abandon` event
     * (mi_heap_abandon publishes both in one lin step), so this sweep's events of the page
     * come after it in the lin order. */
    lin_lock();
    pthread_mutex_lock(&mi_world->abandoned_lock);
    n = mi_world->nab;
    ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!ids) mi_corrupt("out of memory");
    for (int i = 0; i < n; i++) ids[i] = mi_world->abandoned[i];
    pthread_mutex_unlock(&mi_world->abandoned_lock);
    lin_unlock();
    sweep_pages(t, ids, n, &ctx, true);
    free(ids);
    if (in_handoff) mi_park_work_delay();   /* test hook (linearize.c): off unless set */
    bool deferred = atomic_load(&t->holes_sweep_deferred);
    tr_begin("idle");
    tr_int("thread", tid);
    tr_u64("epoch", ctx.epoch);
    tr_bool("handoff", in_handoff);
    tr_bool("deferred", deferred);
    tr_bool("full", ctx.full);
    tr_end();
    return deferred;
}

/* mi_on_thread_idle_pending: the last sweep of this thread's heaps held blocks back. */
bool mi_on_thread_idle_pending(int tid) { return atomic_load(&mi_thread(tid)->holes_sweep_deferred); }
