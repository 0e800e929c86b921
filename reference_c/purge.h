/* purge.h: hole purging in mimalloc pages with the epoch hold (seed 000), on real memory.
 *
 * The C reference of purgecheck's model (the package model/): the same rules, op for op, on pages
 * that are real mmap'ed regions, blocks that carry their free-list link in their first word,
 * madvise(MADV_DONTNEED) for each run of purge units, mincore for residency, C11 atomics
 * for the epoch, and pthreads for the scavenger and for cross-thread frees. Written from the
 * specification (the seed, the digest and the model); no code of mimalloc is used.
 *
 * Every function here names the model function it implements; the docstring there cites the
 * seed clause. The trace events it emits are those of docs/trace-format.md.
 */
#ifndef PURGE_H
#define PURGE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"   /* its constants: MI_MOVING, the park states, MI_PARK_SWEEPS_MAX */

/* -- constants of the seed and the digest ------------------------------------------------- */
#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MI_PAGE_PURGE_BITS 256                  /* seed 000 (1): page->purged has 256 bits */
#define MI_OLD_PURGE_MAX_BLOCKS 128             /* the mutant purge_max_blocks_cap only */
#define MI_MIN_EXTEND_BLOCKS 4                  /* mi_page_extend_free forms at least 4 */
#define MI_MAX_EXTEND_SIZE_BYTES (4 * KiB)      /* ... or 4 KiB worth of blocks */
#define MI_PAGE_OSPAGE_BLOCK_ALIGN2_BYTES (4 * KiB)
#define MI_PAGE_SWEPT_NONE UINT64_MAX           /* swept_state: nothing known */
#define MI_PAGE_SWEPT_STAMP_TAG (UINT64_C(1) << 62)
#define MI_PAGE_SWEPT_TAG_MASK (UINT64_C(3) << 62)
#define MI_EPOCH_MASK UINT64_C(0xFFFFFFFF)      /* stamps keep 32 bits of the epoch */
#define MI_HOLES_INTERVAL_MAX_MS 3600000
#define MI_REGION_ALIGN (4 * MiB)               /* pages are 4 MiB-aligned regions */

/* -- options (model/world.py Options) ------------------------------------------------------ */
typedef enum { V_EPOCH, V_NO_HOLD, V_CLOCK, V_HANDOFF_ONLY, V_TWO_UNTOUCHED, V_COUNT } mi_variant_t;
extern const char *const mi_variant_names[V_COUNT];

typedef struct mi_options_s {
    bool purge_holes;
    int64_t interval_ms;        /* purge_holes_min_interval; 0 turns the hold off */
    int64_t full_every;         /* purge_holes_full_every */
    int64_t purge_delay;
    int64_t os_page_size;       /* the modelled OS page (a multiple of the real one) */
    int arch_bits;              /* 64, or 32 (emulated: geometry and 4-byte links) */
    int64_t first_block_offset;
    mi_variant_t variant;
    int64_t stale_epochs;       /* how old a relaxed epoch read may be (deterministic mode) */
    int64_t sweep_ms;           /* virtual time one handoff sweep takes */
    bool clock_monotone;
    int64_t clock_start_ms;
    bool clock_real;            /* CLOCK_MONOTONIC in ms instead of the virtual clock */
    bool observe_all;           /* observe residency and page state after every op */
} mi_options_t;

void mi_options_default(mi_options_t *o);

/* -- geometry (model/geometry.py) ---------------------------------------------------------- */
typedef enum { MI_SMALL, MI_MEDIUM, MI_LARGE, MI_HUGE } mi_page_kind_t;
extern const char *const mi_page_kind_names[4];

int64_t mi_arena_slice_size(int arch_bits);
int64_t mi_page_size_of(mi_page_kind_t kind, int arch_bits);
int64_t mi_medium_max_obj_size(int arch_bits);
int64_t mi_compute_block_size(int64_t size, int arch_bits);
mi_page_kind_t mi_compute_page_kind(int64_t block_size, int arch_bits);

/* A page's block area and its purge unit; offsets are relative to the region start (the
 * model's slice_start), which is 4 MiB-aligned like the model's arena addresses. */
typedef struct mi_geom_s {
    mi_page_kind_t kind;
    int64_t block_size;
    int64_t os_page_size;
    int arch_bits;
    int64_t offset;             /* first_block_offset: page_start - slice_start */
    int64_t area_size;
    int64_t reserved;
} mi_geom_t;

int64_t mi_geom_area_end(const mi_geom_t *g);
int64_t mi_compute_purge_unit(const mi_geom_t *g);
int64_t mi_compute_unit_base(const mi_geom_t *g, int64_t unit);
int64_t mi_compute_purge_bits(const mi_geom_t *g, int64_t unit);
bool mi_page_can_purge_holes(const mi_geom_t *g);
int64_t mi_floordiv(int64_t a, int64_t b);

/* -- the page (model/page.py) -------------------------------------------------------------- */
typedef struct mi_block_s mi_block_t;   /* a free block: its first word is the link */

typedef struct mi_page_s {
    int id;
    mi_geom_t geom;
    uint8_t *slice;             /* the mmap'ed region */
    size_t map_size;
    int64_t unit, base, bits;   /* the purge unit, the unit base (relative), units spanned */
    int64_t capacity, used;
    mi_block_t *free, *local_free;
    _Atomic(mi_block_t *) xthread_free;
    uint64_t *purged;           /* bit k: unit k is discarded */
    int64_t purged_words;
    int64_t unformed_purged_lo, unformed_purged_hi;   /* relative byte range of the tail */
    uint64_t swept_state;
    _Atomic bool free_is_zero;  /* atomic: a cross-thread free clears it (as the model does) */
    int64_t discarded_bytes, discarded_blocks;
    bool sweeping;
    bool stamp_gated;           /* block_size > MI_MEDIUM_MAX_OBJ_SIZE && reserved > 1 */
    _Atomic int owner;
    int heap;
    _Atomic bool abandoned;
    bool retired;
    _Atomic int64_t double_frees;
    _Atomic uint64_t *live;     /* debug shadow of the blocks handed out: finds double frees */
    atomic_flag claim;          /* a sweeper or a reclaim has this abandoned page */
    int64_t untouched;          /* two-untouched variant: sweeps in a row that found it so */
} mi_page_t;

uint8_t *mi_block_addr(const mi_page_t *p, int64_t i);
int64_t mi_block_index(const mi_page_t *p, const mi_block_t *b);
mi_block_t *mi_block_next(const mi_page_t *p, const mi_block_t *b);
void mi_block_set_next(const mi_page_t *p, mi_block_t *b, const mi_block_t *next);
bool mi_page_is_unit_purged(const mi_page_t *p, int64_t k);
bool mi_page_is_block_purged(const mi_page_t *p, int64_t i);
void mi_units_of_block(const mi_page_t *p, int64_t i, int64_t *k0, int64_t *k1);
void mi_blocks_of_unit(const mi_page_t *p, int64_t k, int64_t capacity, int64_t *i0, int64_t *i1);
bool mi_is_unit_inside_blocks(const mi_page_t *p, int64_t k, int64_t capacity);
int64_t mi_list_length(const mi_page_t *p, const mi_block_t *b);
int64_t mi_xthread_count(mi_page_t *p);
bool mi_page_is_all_free(mi_page_t *p);
bool mi_page_has_unformed_tail(const mi_page_t *p);
bool mi_page_has_any_free(mi_page_t *p);
void mi_page_emit_state(mi_page_t *p);
void mi_page_emit_list(const char *key, const mi_page_t *p, const mi_block_t *b);  /* head first */
void mi_page_emit_resident(mi_page_t *p);
void mi_emit_holes_stats(void);   /* the process-wide counters, after an observation */

/* -- the OS side (model/memory.py) ---------------------------------------------------------- */
bool mi_os_discard(mi_page_t *p, int64_t rel, int64_t size);
void mi_os_touch(mi_page_t *p, int64_t rel, int64_t size, int byte);

/* -- holes (model/holes.py) ---------------------------------------------------------------- */
typedef struct { bool complete; int64_t dropped; } mi_walk_result_t;
mi_walk_result_t mi_page_purge_holes_walk(mi_page_t *p);
int64_t mi_page_unpurge_range(mi_page_t *p, int64_t k0, int64_t k1, bool reuse);
int64_t mi_page_unpurge_run(mi_page_t *p);
void mi_page_unpurge_all(mi_page_t *p);
bool mi_page_purge_unformed_tail(mi_page_t *p);
void mi_page_reuse_unformed_tail(mi_page_t *p);

/* -- alloc (model/alloc.py) ---------------------------------------------------------------- */
int64_t mi_page_extend_free(mi_page_t *p);
void mi_page_free_collect(mi_page_t *p);
int64_t mi_page_malloc(mi_page_t *p, bool zero);     /* block index, or -1: full */
bool mi_free_local(mi_page_t *p, int64_t i);         /* false: a double free (reported) */
bool mi_free_xthread(mi_page_t *p, int64_t i);
bool mi_check_live(mi_page_t *p, int64_t i);          /* false: not live (a double free, reported) */
void mi_write_block(mi_page_t *p, int64_t i);

/* -- threads and heaps (model/thread.py, model/heap.py) ------------------------------------- */

typedef struct mi_queue_s { int64_t block_size; int *ids; int n, cap; } mi_queue_t;

typedef struct mi_tld_s {
    int id;                      /* the script's thread number; heap id == thread id */
    mi_queue_t *queues;          /* the heap's pages by size class, in insertion order */
    int nq, capq;
    pthread_mutex_t heap_lock;   /* the queue structure (a sweeper may retire a page) */
    _Atomic bool holes_sweep_deferred;
    uint64_t holes_sweep_seq;
    bool holes_sweep_full;
    uint64_t holes_sweep_epoch;
    _Atomic int64_t holes_sweep_last;   /* read by the scavenger before it claims */
    uint64_t holes_park_epoch;
    _Atomic int park_state;
    _Atomic int park_swept;
    _Atomic bool park_reclaim;
    uint64_t epoch_seen;
} mi_tld_t;

typedef struct mi_ptr_s { int page; int64_t block; } mi_ptr_t;

/* -- the world (model/world.py) ------------------------------------------------------------- */
#define MI_MAX_PAGES 65536
#define MI_MAX_THREADS 1024

/* The process-wide hole-purging counters (model/stats.py, mi_purge_holes_stats_get). */
typedef struct mi_holes_stats_s {
    _Atomic int64_t reuse_calls, purged_bytes, purged_bytes_total, purged_blocks,
        blocks_visited, pages_skipped, ineligible_pages, unformed_bytes,
        full_sweeps;                   /* sweeps that walked every page (mi_holes_sweep_begin) */
} mi_holes_stats_t;

typedef struct mi_world_s {
    mi_options_t opt;
    mi_page_t *pages[MI_MAX_PAGES];   /* by id; ids count up from 1 */
    _Atomic int npages;
    pthread_mutex_t pages_lock;
    mi_tld_t *threads[MI_MAX_THREADS];
    int nthreads;
    pthread_mutex_t threads_lock;
    int *abandoned;                    /* the abandoned map, in the order pages went there */
    int nab, capab;
    pthread_mutex_t abandoned_lock;
    _Atomic int64_t epoch_start;       /* mi_holes_epoch: the time the epoch began */
    _Atomic uint64_t epoch;
    _Atomic int64_t vclock;            /* the virtual clock, ms */
    _Atomic int64_t fail_next_discards;
    _Atomic int64_t discard_calls;
    mi_holes_stats_t holes;            /* the process-wide counters (model/stats.py) */
    int64_t real_page_size;
} mi_world_t;

extern mi_world_t *mi_world;

mi_world_t *mi_world_new(const mi_options_t *opt);
void mi_world_free(mi_world_t *w);
mi_tld_t *mi_thread(int tid);
mi_page_t *mi_page_of(int id);
mi_page_t *mi_world_new_page(mi_tld_t *heap, int64_t block_size);

mi_ptr_t mi_heap_malloc(mi_tld_t *heap, int64_t size, bool zero, bool write);
bool mi_free(mi_ptr_t ptr, int thread);                 /* false: a double free */
bool mi_realloc(mi_tld_t *heap, mi_ptr_t ptr, int64_t size, mi_ptr_t *out);
void mi_page_retire(mi_page_t *p);
void mi_heap_destroy(mi_tld_t *heap);
void mi_heap_delete(mi_tld_t *heap, mi_tld_t *into);
void mi_heap_abandon(mi_tld_t *heap);
void mi_page_reclaim(mi_page_t *p, mi_tld_t *heap);
int mi_heap_page_ids(mi_tld_t *heap, int **out);        /* a snapshot, queue order */
bool mi_abandoned_remove(int id);

/* -- the allocation stamp (model/stamp.py, model/world.py after_malloc) --------------------- */
extern bool mi_stamp_slow_path;   /* stale-read emulation, the clock design, or its mutant */
void mi_stamp_configure(const mi_options_t *o);
void mi_stamp_slow(mi_tld_t *t, mi_page_t *p);
void mi_stamp_store(mi_page_t *p, uint64_t stamp, uint64_t value);
extern bool tr_linearized;
/* mi_malloc_generic_fallback after a block was taken: behind the gate, computed once per page
 * as the real one compiles to a few instructions, a relaxed load of the epoch and a store only
 * when the page does not carry that stamp already. Inline, so this is all the allocating side
 * pays (docs/conformance.md measures it). */
static inline void mi_after_malloc(mi_tld_t *t, mi_page_t *p) {
#ifdef MI_NO_STAMP
    (void)t; (void)p;
#else
    if (!p->stamp_gated) return;
    if (__builtin_expect(mi_stamp_slow_path | tr_linearized, 0)) {
        mi_stamp_slow(t, p);
        return;
    }
    uint64_t epoch = mi_atomic_load(&mi_world->epoch, MI_ORDER_STAMP_LOAD);   /* atomics.h */
    uint64_t stamp = MI_PAGE_SWEPT_STAMP_TAG | (epoch & MI_EPOCH_MASK);
    if (__builtin_expect(p->swept_state != stamp, 0)) mi_stamp_store(p, stamp, epoch);
#endif
}

/* -- clock and epoch (model/clock.py, model/epoch.py) --------------------------------------- */
int64_t mi_clock_now(void);
extern _Atomic int64_t mi_clock_offset_ms;              /* test hook: see mi_clock_now */
bool mi_clock_advance(int64_t ms);                      /* false: a monotone clock went back */
int64_t mi_compute_interval(int64_t min_interval);
uint32_t mi_compute_epoch_age(uint64_t current, uint64_t stamp);
bool mi_is_epoch_young(uint64_t current, uint64_t stamp);
bool mi_is_epoch_due(int64_t start, int64_t now, int64_t interval);
mi_advance_t mi_holes_epoch_advance(int64_t interval);
void mi_page_purge_holes_forked_child(void);
void mi_epoch_skip(int64_t count);

/* -- stamp, variants, the sweep and its drivers (model/stamp.py, variants.py, sweep.py,
 *    drivers.py) ----------------------------------------------------------------------------- */
typedef struct { int64_t now; uint64_t epoch; int64_t interval; bool in_handoff; bool full; } mi_sweep_ctx_t;
mi_sweep_ctx_t mi_holes_sweep_begin(mi_tld_t *t);
const char *mi_page_purge_holes(mi_page_t *p, mi_tld_t *t, const mi_sweep_ctx_t *ctx);
bool mi_on_thread_idle(int tid, bool in_handoff);       /* returns deferred */
bool mi_on_thread_idle_pending(int tid);

/* -- the park handoff (model/park.py) ------------------------------------------------------- */
bool mi_on_thread_idle_start(int tid);
bool mi_on_thread_idle_end(int tid);
int mi_compute_park_next(mi_tld_t *t, int swept, bool deferred);
bool mi_theap_sweep_parked(int64_t *due);                /* false: nothing is waiting */
int mi_run_scavenger(int64_t duration_ms);
/* Real-clock mode: a scavenger thread that sleeps until the next park is due. */
void mi_scavenger_start(void);
void mi_scavenger_stop(void);
void mi_scavenger_wake(void);
bool mi_scavenger_pass(int64_t *due);                    /* one pass on that thread, waited for */

/* -- mutants (purgecheck/mutants.py, hold_mutants.py: their c_switch names) ---------------- */
typedef enum {
    M_NONE,
    M_PURGED_LEFT_ON_LIST, M_FREE_IS_ZERO_KEPT, M_UNIT_NEXT_TO_LIVE, M_UNIT_OUTSIDE_AREA,
    M_UNPURGE_ALL_SKIPPED, M_UNIT_OS_PAGE, M_UNIT_BASE_UNALIGNED, M_DOUBLE_FREE_ABSORBED,
    M_HUGE_PURGES, M_ACCOUNTING_SKIPPED,
    M_AGE_LT_1, M_AGE_NO_MODULO, M_STAMP_NEVER_WRITTEN, M_WALK_KEEPS_STAMP,
    M_PARK_DONE_FIRST, M_PARK_UNBOUNDED, M_PARK_IGNORES_EPOCHS, M_SWEEP_LAST_BEFORE_WORK,
    M_EPOCH_NOT_RATE_LIMITED, M_DOUBLE_INCREMENT, M_NO_HOLD_INLINE,
    M_NO_CAS_EXCLUSION, M_START_BEFORE_INCREMENT,   /* the advance's broken variants (linearize.c) */
    M_EPOCH_PLAIN_READ,   /* a data race only the TSan build sees (purgecheck/sanitizer_mutants.py) */
    M_FULL_SWEEP_NEVER, M_OPTION_OFF_IGNORED, M_COLLECT_UNPURGES, M_TAIL_FROM_LAST_BLOCK,
    M_UNPURGE_WITHOUT_REUSE,   /* the real tests' mutants (catalogue/realtests.py) */
    M_REBUILD_KEEPS_ORDER,   /* issue 20: the walk's rebuild keeps the free list's order */
    M_FORK_CHILD_KEEPS_MOVING, M_CLOCK_BACK_NOT_DUE,   /* issue 20: the rare paths of the advance */
    M_PURGED_STRADDLER_LIVE, M_AGE_SIGNED32,   /* issue 20: found only by long fuzzing before */
    M_UNIT_LAST_BLOCK_SHORT,   /* issue 21: the blocks over a unit miss the last one (arith.c) */
    M_PURGE_MAX_BLOCKS_CAP,    /* issue 21: the per-block bitmap's cap of d445051 */
    M_ALIGNED_AT_BLOCK_START,  /* issue 21: malloc_aligned hands out the block, not the address */
    M_SIZE_CLASS_WORD_LESS,    /* issue 21: size classes above 8 words are a word short */
    M_FULL_SWEEPS_UNCOUNTED,   /* issue 28: a full sweep is not counted in full_sweeps */
    M_ABANDON_OUTSIDE_LIN_STEP,   /* the abandoned map's entry and its event in two lin steps */
    M_COUNT
} mi_mutant_t;
extern mi_mutant_t mi_mutant;
extern const char *const mi_mutant_names[M_COUNT];
int mi_mutant_by_name(const char *name);                /* -1: unknown */

/* -- the real tests' unit arithmetic grids (arith.c; purgecheck/arith.py) ------------------- */
int mi_arith_grid(const char *grid);                    /* `driver --arith large|small` */

/* -- trace output (docs/trace-format.md) ---------------------------------------------------- */
extern bool tr_enabled;
void tr_begin(const char *ev);
void tr_int(const char *key, int64_t v);
void tr_u64(const char *key, uint64_t v);
void tr_bool(const char *key, bool v);
void tr_str(const char *key, const char *s);
void tr_null(const char *key);
void tr_key(const char *key);             /* then tr_raw pieces: a value written by hand */
void tr_raw(const char *s);
void tr_rawf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tr_end(void);
void tr_flush(void);
void tr_thread_exit(void);
void tr_header(const char *json);
extern _Atomic int64_t tr_events;

/* -- linearized traces of the concurrent mode (linearize.c, docs/validation.md) ------------- */
/* With tr_linearized, every event carries "lin" (one process-wide counter) and "tid" (the OS
 * thread's label); each access to the epoch's shared state is made under lin_lock together
 * with the event that reports it, so the order of lin is an order in which the accesses
 * really happened. Both calls are no-ops when the trace is not linearized. */
extern bool tr_linearized;
extern _Thread_local int tr_tid;          /* the script thread an OS thread runs; -1: scavenger */
extern _Atomic int64_t tr_lin;
void lin_lock(void);
void lin_unlock(void);
void lin_step(const char *pc, int64_t value);          /* an advance_step event */
void lin_step_bool(const char *pc, bool value);
void lin_step_wait(int spins, int64_t value);
enum { MI_DELAY_BEFORE_CAS, MI_DELAY_BEFORE_INCREMENT, MI_DELAY_BEFORE_STORE };
extern _Atomic int64_t mi_advance_delay_us;           /* test hook: see mi_advance_delay */
extern _Atomic int mi_advance_delay_at;
void mi_advance_delay(int at);
extern _Atomic int mi_advance_delaying;              /* the point a sweeper sleeps at, or -1 */
/* Test hook: called before each step of the advance with the model's program counter; the
 * driver runs the interleavings a script armed there (fork_at, clock_at). */
extern void (*mi_advance_hook)(const char *pc);
extern _Atomic int64_t mi_park_work_delay_us;         /* test hook: see mi_park_work_delay */
void mi_park_work_delay(void);
extern _Atomic int64_t mi_abandon_delay_us;           /* test hook: see mi_abandon_delay */
void mi_abandon_delay(void);

/* A broken internal state (a corrupted list under a mutant): report and stop the script. */
_Noreturn void mi_corrupt(const char *what);

/* -- the atomic protocol, shared with the Relacy build (protocol.h) ------------------------- */
void mi_trace_thread_event(const char *ev, int tid);        /* park.c: "park", "unpark" */
void mi_trace_park_sweep(mi_tld_t *t, bool deferred, int next);
bool mi_park_idle_work(mi_tld_t *t);                         /* park.c: the sweep's work */
#define MI_PROTO_TLD mi_tld_t
#define MI_MUTANT(name) (mi_mutant == M_##name)
#define MI_AT_STEP(pc) do { if (mi_advance_hook) mi_advance_hook(pc); } while (0)
#define MI_LIN_LOCK() lin_lock()
#define MI_LIN_UNLOCK() lin_unlock()
#define MI_LIN_STEP(pc, v) lin_step((pc), (v))
#define MI_LIN_STEP_BOOL(pc, b) lin_step_bool((pc), (b))
#define MI_LIN_STEP_WAIT(spins, v) lin_step_wait((spins), (v))
#define MI_ADVANCE_DELAY(at) mi_advance_delay(at)
#define MI_ON_PARK(t) mi_trace_thread_event("park", (t)->id)
#define MI_ON_UNPARK(t) mi_trace_thread_event("unpark", (t)->id)
#define MI_ON_PARK_SWEEP(t, deferred, next) mi_trace_park_sweep((t), (deferred), (next))
#define MI_PARK_IDLE_WORK(t) mi_park_idle_work(t)
#define MI_PARK_CAN_WAIT (mi_world->opt.clock_real)
#define MI_PARK_YIELD() sched_yield()
#include "protocol.h"

#endif
