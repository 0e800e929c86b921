/* driver.c: run op scripts (docs/op-script.md) on the C reference and write their traces
 * (docs/trace-format.md) on stdout.
 *
 * Input is a stream of scripts separated by lines `---`; each script may start with lines
 * `%options KEY=VALUE ...` (not counted as script lines). The driver answers each script with
 * one whole trace (a header, the events, an `end` event) and flushes, so one process serves
 * any number of scripts (the persistent mode of differential fuzzing).
 *
 * Modes (--clock):
 *   virtual  (default) every op runs on the calling thread, in script order, on the virtual
 *            clock the script's `clock MS` ops move; the trace is deterministic and is the one
 *            conformance compares with the model's;
 *   real     CLOCK_MONOTONIC in ms; each script thread is an OS thread and a scavenger thread
 *            sweeps the parked ones. Ops run in lockstep (one at a time, on their own thread),
 *            or with --concurrent each thread runs its own ops as fast as it can (a free waits
 *            only for the allocation it names): the stress mode the sanitizers run.
 *
 * Exit: 0 every script ran; 2 bad usage, a bad script or a script error; 3 broken state.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "purge.h"

#ifndef BUILD_NAME
#define BUILD_NAME "release"
#endif
#define TRACE_FORMAT "purgecheck-trace"
#define TRACE_VERSION 1
#define MAX_ARGS 3

static const char *USAGE =
    "usage: driver [OPTIONS] [SCRIPT]\n"
    "Run op scripts (scripts separated by '---' lines; stdin when SCRIPT is absent) on the C\n"
    "reference of seed 000 and write their traces (JSON Lines) on stdout.\n\n"
    "  --clock virtual|real   the virtual clock of the script (default) or CLOCK_MONOTONIC\n"
    "  --concurrent           real clock: threads run their ops at the same time\n"
    "  --linearize            with --concurrent: a trace `purgecheck validate` replays\n"
    "  --variant V            epoch (default), no-hold, clock, handoff-only, two-untouched\n"
    "  --mutant NAME          a mutant's run-time switch (--list-mutants)\n"
    "  --interval MS  --os-page BYTES  --arch 32|64  --offset BYTES  --full-every N\n"
    "  --purge-delay N  --no-purge-holes  --stale-epochs N  --sweep-ms MS  --non-monotone\n"
    "  --clock-start MS  --observe sweeps|all  --quiet (no trace)\n"
    "  --list-mutants  --list-ops  --bench-stamp N (N malloc+free pairs of 128 KiB, no trace)\n"
    "  --arith large|small    the unit arithmetic of the real tests' grid, a line per unit\n\n"
    "examples:\n"
    "  purgecheck scenario park-handoff --script | reference_c/build/driver\n"
    "  printf '1 malloc a 262144\\n1 free a\\n---\\n%%options variant=no-hold\\n1 idle\\n' | driver\n";

/* -- the op grammar (purgecheck/ops.py SPECS) ------------------------------------------------- */
typedef enum { A_INT, A_STR, A_COUNT, A_STEP } argtype_t;   /* A_COUNT: an integer >= 0;
                                                              A_STEP: a step of the advance */
typedef struct {
    const char *name;
    bool threaded;
    int nargs;
    argtype_t types[MAX_ARGS];
    const char *argnames[MAX_ARGS];
} opspec_t;

enum {
    OP_MALLOC, OP_ZALLOC, OP_FREE, OP_REALLOC, OP_COLLECT, OP_WALK, OP_HEAP_DESTROY,
    OP_HEAP_DELETE, OP_FAIL_DISCARD, OP_CLOCK, OP_IDLE, OP_PENDING, OP_PARK, OP_UNPARK,
    OP_SCAVENGE, OP_SCAVENGER, OP_ABANDON, OP_RECLAIM, OP_FORK, OP_EPOCH_SKIP,
    OP_FORK_AT, OP_CLOCK_AT, OP_COLLECT_FORCE, OP_MALLOC_ALIGNED, OP_COUNT
};

static const opspec_t SPECS[OP_COUNT] = {
    [OP_MALLOC] = {"malloc", true, 2, {A_STR, A_COUNT}, {"name", "size"}},
    [OP_ZALLOC] = {"zalloc", true, 2, {A_STR, A_COUNT}, {"name", "size"}},
    [OP_FREE] = {"free", true, 1, {A_STR}, {"name"}},
    [OP_REALLOC] = {"realloc", true, 3, {A_STR, A_STR, A_COUNT}, {"name", "new", "size"}},
    [OP_COLLECT] = {"collect", true, 0, {0}, {0}},
    [OP_WALK] = {"walk", true, 0, {0}, {0}},
    [OP_COLLECT_FORCE] = {"collect_force", true, 0, {0}, {0}},
    [OP_MALLOC_ALIGNED] = {"malloc_aligned", true, 3, {A_STR, A_COUNT, A_COUNT}, {"name", "size", "align"}},
    [OP_HEAP_DESTROY] = {"heap_destroy", true, 0, {0}, {0}},
    [OP_HEAP_DELETE] = {"heap_delete", true, 0, {0}, {0}},
    [OP_FAIL_DISCARD] = {"fail_discard", false, 1, {A_COUNT}, {"count"}},
    [OP_CLOCK] = {"clock", false, 1, {A_INT}, {"ms"}},
    [OP_IDLE] = {"idle", true, 0, {0}, {0}},
    [OP_PENDING] = {"pending", true, 0, {0}, {0}},
    [OP_PARK] = {"park", true, 0, {0}, {0}},
    [OP_UNPARK] = {"unpark", true, 0, {0}, {0}},
    [OP_SCAVENGE] = {"scavenge", false, 0, {0}, {0}},
    [OP_SCAVENGER] = {"scavenger", false, 1, {A_COUNT}, {"ms"}},
    [OP_ABANDON] = {"abandon", true, 0, {0}, {0}},
    [OP_RECLAIM] = {"reclaim", true, 1, {A_STR}, {"name"}},
    [OP_FORK] = {"fork", true, 0, {0}, {0}},
    [OP_EPOCH_SKIP] = {"epoch_skip", false, 1, {A_COUNT}, {"count"}},
    [OP_FORK_AT] = {"fork_at", true, 1, {A_STEP}, {"step"}},
    [OP_CLOCK_AT] = {"clock_at", false, 2, {A_STEP, A_INT}, {"step", "ms"}},
};

/* The steps of the epoch advance an interleaved op is placed before (purgecheck/formats/ops.py
 * ADVANCE_STEPS, model/epoch.py's program counters in order). */
static const char *const ADVANCE_STEPS[] = {"load_start", "read_clock", "compare", "cas",
                                            "increment", "read_clock_again", "store_start"};
#define N_ADVANCE_STEPS ((int)(sizeof ADVANCE_STEPS / sizeof *ADVANCE_STEPS))

/* Ops after which the pages are observed (residency and state): those that sweep, walk or
 * move pages. With `observe=all`, after every op. */
#define MI_ALIGN_MAX (4 * (int64_t)MiB)   /* the regions' alignment (runner.py MI_ALIGN_MAX) */

static bool is_observed(int spec) {
    switch (spec) {
    case OP_COLLECT: case OP_WALK: case OP_HEAP_DESTROY: case OP_HEAP_DELETE: case OP_IDLE:
    case OP_SCAVENGE: case OP_SCAVENGER: case OP_ABANDON: case OP_RECLAIM: case OP_COLLECT_FORCE:
        return true;
    default:
        return false;
    }
}

typedef struct {
    int line, spec, thread;
    bool has_thread;
    int64_t ival[MAX_ARGS];
    char *sval[MAX_ARGS];
    int producer;   /* concurrent mode: the op that bound the name this op reads (-1: none) */
} op_t;

/* -- a script and its options ----------------------------------------------------------------- */
typedef struct {
    mi_options_t opt;
    int mutant;
    bool concurrent;
    bool linearize;   /* concurrent mode: a linearized trace (linearize.c, docs/validation.md) */
    bool quiet;
    int64_t abandon_delay_us;   /* test hook: linearize.c mi_abandon_delay (0: off) */
} config_t;

static config_t base_config;
static int exit_status;

/* Python's int(word, 0): sign, 0x/0o/0b prefixes, single underscores between digits, no
 * leading zero in a decimal other than zero itself. */
static bool parse_pyint(const char *s, int64_t *out) {
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    int base = 10;
    bool prefixed = false;
    if (s[0] == '0' && s[1] && strchr("xXoObB", s[1])) {
        base = strchr("xX", s[1]) ? 16 : strchr("oO", s[1]) ? 8 : 2;
        s += 2;
        prefixed = true;
        if (*s == '_') s++;
    }
    if (!*s) return false;
    unsigned long long v = 0;
    bool nonzero_lead = false, digits = false;
    char prev = 0;
    for (const char *c = s; *c; prev = *c++) {
        if (*c == '_') {
            if (prev == '_' || !c[1] || c == s) return false;
            continue;
        }
        int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10 : 99;
        if (d >= base) return false;
        if (!digits && d == 0 && !prefixed && c[1] && c[1] != '_') nonzero_lead = true;
        if (nonzero_lead && d != 0) return false;   /* "010" is not a Python literal */
        digits = true;
        if (v > (ULLONG_MAX - (unsigned)d) / (unsigned)base) return false;
        v = v * (unsigned)base + (unsigned)d;
    }
    if (v > (unsigned long long)INT64_MAX) return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

static int set_option(config_t *c, const char *key, const char *val, char *err, size_t errlen) {
    int64_t n = 0;
    bool isint = parse_pyint(val, &n);
#define NEED_INT() do { if (!isint) { snprintf(err, errlen, "%s: expected an integer, got '%s'", key, val); return -1; } } while (0)
    if (!strcmp(key, "clock")) {
        if (strcmp(val, "virtual") && strcmp(val, "real")) {
            snprintf(err, errlen, "clock: expected virtual or real, got '%s'", val);
            return -1;
        }
        c->opt.clock_real = !strcmp(val, "real");
    } else if (!strcmp(key, "variant")) {
        int v = -1;
        for (int i = 0; i < V_COUNT; i++)
            if (!strcmp(mi_variant_names[i], val)) v = i;
        if (v < 0) {
            snprintf(err, errlen, "unknown variant '%s'; expected one of epoch, no-hold, clock, "
                     "handoff-only, two-untouched", val);
            return -1;
        }
        c->opt.variant = (mi_variant_t)v;
    } else if (!strcmp(key, "mutant")) {
        int m = mi_mutant_by_name(val);
        if (m < 0) {
            snprintf(err, errlen, "unknown mutant '%s' (driver --list-mutants lists them)", val);
            return -1;
        }
        c->mutant = m;
    } else if (!strcmp(key, "observe")) {
        if (strcmp(val, "sweeps") && strcmp(val, "all")) {
            snprintf(err, errlen, "observe: expected sweeps or all, got '%s'", val);
            return -1;
        }
        c->opt.observe_all = !strcmp(val, "all");
    } else if (!strcmp(key, "interval")) { NEED_INT(); c->opt.interval_ms = n; }
    else if (!strcmp(key, "os_page")) {
        NEED_INT();
        if (n <= 0 || (n & (n - 1)) || n % sysconf(_SC_PAGESIZE)) {
            snprintf(err, errlen, "os_page: expected a power of two and a multiple of this "
                     "machine's page (%ld), got %lld", sysconf(_SC_PAGESIZE), (long long)n);
            return -1;
        }
        c->opt.os_page_size = n;
    } else if (!strcmp(key, "arch")) {
        NEED_INT();
        if (n != 32 && n != 64) { snprintf(err, errlen, "arch: expected 32 or 64"); return -1; }
        c->opt.arch_bits = (int)n;
    } else if (!strcmp(key, "offset")) {
        NEED_INT();
        if (n < 0 || n % 8 || n >= (int64_t)(64 * KiB)) {
            snprintf(err, errlen, "offset: expected a multiple of 8 below 65536");
            return -1;
        }
        c->opt.first_block_offset = n;
    } else if (!strcmp(key, "full_every")) {
        NEED_INT();
        if (n <= 0) { snprintf(err, errlen, "full_every: expected a positive integer"); return -1; }
        c->opt.full_every = n;
    } else if (!strcmp(key, "purge_delay")) { NEED_INT(); c->opt.purge_delay = n; }
    else if (!strcmp(key, "purge_holes")) { NEED_INT(); c->opt.purge_holes = n != 0; }
    else if (!strcmp(key, "stale_epochs")) { NEED_INT(); c->opt.stale_epochs = n; }
    else if (!strcmp(key, "sweep_ms")) { NEED_INT(); c->opt.sweep_ms = n; }
    else if (!strcmp(key, "monotone")) { NEED_INT(); c->opt.clock_monotone = n != 0; }
    else if (!strcmp(key, "clock_start")) { NEED_INT(); c->opt.clock_start_ms = n; }
    else if (!strcmp(key, "concurrent")) { NEED_INT(); c->concurrent = n != 0; }
    else if (!strcmp(key, "linearize")) { NEED_INT(); c->linearize = n != 0; }
    else if (!strcmp(key, "abandon_delay_us")) {   /* test hook: linearize.c mi_abandon_delay */
        NEED_INT();
        if (n < 0) { snprintf(err, errlen, "abandon_delay_us: expected 0 or more"); return -1; }
        c->abandon_delay_us = n;
    } else {
        snprintf(err, errlen, "unknown option '%s'; expected one of clock, variant, mutant, "
                 "observe, interval, os_page, arch, offset, full_every, purge_delay, "
                 "purge_holes, stale_epochs, sweep_ms, monotone, clock_start, concurrent, linearize, "
                 "abandon_delay_us", key);
        return -1;
    }
#undef NEED_INT
    return 0;
}

void mi_options_default(mi_options_t *o) {
    memset(o, 0, sizeof *o);
    o->purge_holes = true;
    o->interval_ms = 100;
    o->full_every = 64;
    o->purge_delay = 100;
    o->os_page_size = 4 * KiB;
    o->arch_bits = 64;
    o->variant = V_EPOCH;
    o->clock_monotone = true;
    o->clock_start_ms = 1000;
}

/* -- errors inside a script ------------------------------------------------------------------ */
static _Thread_local jmp_buf *abort_jmp;   /* virtual mode: where a broken script unwinds */
static _Thread_local int cur_line;
static _Atomic bool script_failed;

static void emit_error(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit_error(int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tr_begin("error");
    tr_int("line", line);
    tr_str("msg", msg);
    tr_end();
    atomic_store(&script_failed, true);
    if (exit_status < 2) exit_status = 2;
}

_Noreturn void mi_corrupt(const char *what) {
    emit_error(cur_line, "broken state: %s", what);
    exit_status = 3;
    if (abort_jmp) longjmp(*abort_jmp, 1);
    tr_begin("end");
    tr_int("events", atomic_load(&tr_events));
    tr_end();
    tr_flush();
    _exit(3);
}

/* -- parsing ---------------------------------------------------------------------------------- */

/* One line of the script into `op`: 1 an op, 0 nothing (blank or comment), -1 an error
 * (written to err, as purgecheck/ops.py words it). */
static int parse_line(char *text, int line, op_t *op, char *err, size_t errlen) {
    char *hash = strchr(text, '#');
    if (hash) *hash = 0;
    char *words[16];
    int n = 0;
    for (char *tok = strtok(text, " \t\r\v\f"); tok; tok = strtok(NULL, " \t\r\v\f")) {
        if (n == 16) { snprintf(err, errlen, "too many words on a line"); return -1; }
        words[n++] = tok;
    }
    if (n == 0) return 0;
    memset(op, 0, sizeof *op);
    op->line = line;
    op->producer = -1;
    int w = 0;
    const char *d = words[0];
    if (d[0] == '-' && d[1] && strspn(d + 1, "0123456789") == strlen(d + 1)) {
        snprintf(err, errlen, "thread %s: thread numbers are 0 or more", d);
        return -1;
    }
    if (*d && strspn(d, "0123456789") == strlen(d)) {
        char *end;
        errno = 0;
        long t = strtol(words[0], &end, 10);
        if (*end || errno || t < INT_MIN || t > INT_MAX) {
            snprintf(err, errlen, "expected a thread number, got '%s'", words[0]);
            return -1;
        }
        op->has_thread = true;
        op->thread = (int)t;
        if (++w == n) { snprintf(err, errlen, "expected an operation after the thread number"); return -1; }
    }
    int spec = -1;
    for (int s = 0; s < OP_COUNT; s++)
        if (!strcmp(SPECS[s].name, words[w])) spec = s;
    if (spec < 0) {
        snprintf(err, errlen, "unknown operation '%s'; expected one of abandon, clock, clock_at, collect, "
                 "collect_force, epoch_skip, fail_discard, fork, fork_at, free, heap_delete, heap_destroy, "
                 "idle, malloc, malloc_aligned, park, pending, realloc, reclaim, scavenge, scavenger, "
                 "unpark, walk, zalloc", words[w]);
        return -1;
    }
    const opspec_t *sp = &SPECS[spec];
    op->spec = spec;
    if (sp->threaded && !op->has_thread) {
        char form[128] = "";
        for (int a = 0; a < sp->nargs; a++) {
            strcat(form, a ? " " : "");
            strcat(form, sp->argnames[a]);
        }
        snprintf(err, errlen, "%s needs a thread number first: '1 %s %s'", sp->name, sp->name, form);
        return -1;
    }
    if (!sp->threaded && op->has_thread) {
        snprintf(err, errlen, "%s is global: write it without a thread", sp->name);
        return -1;
    }
    if (n - w - 1 != sp->nargs) {
        char want[128] = "";
        for (int a = 0; a < sp->nargs; a++) {
            strcat(want, a ? " " : "");
            strcat(want, sp->argnames[a]);
        }
        snprintf(err, errlen, "%s takes %s, got %d argument(s)", sp->name,
                 sp->nargs ? want : "no arguments", n - w - 1);
        return -1;
    }
    for (int a = 0; a < sp->nargs; a++) {
        const char *v = words[w + 1 + a];
        if (sp->types[a] == A_STEP) {
            int k = 0;
            while (k < N_ADVANCE_STEPS && strcmp(ADVANCE_STEPS[k], v)) k++;
            if (k == N_ADVANCE_STEPS) {
                snprintf(err, errlen, "%s: %s '%.24s' is not a step of the advance; expected one "
                         "of load_start, read_clock, compare, cas, increment, read_clock_again, "
                         "store_start", sp->name, sp->argnames[a], v);
                return -1;
            }
            op->sval[a] = strdup(v);
            op->ival[a] = k;
        } else if (sp->types[a] == A_STR) {
            op->sval[a] = strdup(v);
        } else if (!parse_pyint(v, &op->ival[a])) {
            char ints[128] = "[";
            bool first = true;
            for (int b = 0; b < sp->nargs; b++)
                if (sp->types[b] != A_STR && sp->types[b] != A_STEP) {
                    strcat(ints, first ? "'" : ", '");
                    strcat(ints, sp->argnames[b]);
                    strcat(ints, "'");
                    first = false;
                }
            strcat(ints, "]");
            snprintf(err, errlen, "%s: expected integers for %s", sp->name, ints);
            return -1;
        }
    }
    for (int a = 0; a < sp->nargs; a++)
        if (sp->types[a] == A_COUNT && op->ival[a] < 0) {
            snprintf(err, errlen, "%s: %s must be 0 or more, got %lld", sp->name, sp->argnames[a],
                     (long long)op->ival[a]);
            return -1;
        }
    return 1;
}

/* -- names: what the script calls its allocations (purgecheck/runner.py Run) ------------------ */
typedef struct {
    char *name;
    bool has_live, has_freed;
    mi_ptr_t live, freed;
} binding_t;

static binding_t *names;
static size_t names_cap;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static binding_t *binding(const char *name, bool create) {
    if (names_cap == 0) {
        names_cap = 1024;
        names = calloc(names_cap, sizeof *names);
    }
    size_t mask = names_cap - 1;
    for (size_t i = hash_str(name) & mask;; i = (i + 1) & mask) {
        if (names[i].name == NULL) {
            if (!create) return NULL;
            names[i].name = strdup(name);
            size_t used = 0;
            for (size_t j = 0; j < names_cap; j++) used += names[j].name != NULL;
            if (2 * used > names_cap) {   /* grow: rehash into twice the table */
                binding_t *old = names;
                size_t oldcap = names_cap;
                names_cap *= 2;
                names = calloc(names_cap, sizeof *names);
                for (size_t j = 0; j < oldcap; j++)
                    if (old[j].name) {
                        size_t k = hash_str(old[j].name) & (names_cap - 1);
                        while (names[k].name) k = (k + 1) & (names_cap - 1);
                        names[k] = old[j];
                    }
                free(old);
                return binding(name, false);
            }
            return &names[i];
        }
        if (!strcmp(names[i].name, name)) return &names[i];
    }
}

static void names_reset(void) {
    for (size_t i = 0; i < names_cap; i++) free(names[i].name);
    free(names);
    names = NULL;
    names_cap = 0;
}

static void bind_live(const char *name, mi_ptr_t p) {
    pthread_mutex_lock(&names_lock);
    binding_t *b = binding(name, true);
    b->has_live = true;
    b->live = p;
    b->has_freed = false;
    pthread_mutex_unlock(&names_lock);
}

/* Run.ptr: the live binding, else the freed one (a double free), else an error. */
static bool lookup(const op_t *op, const char *name, mi_ptr_t *out) {
    pthread_mutex_lock(&names_lock);
    binding_t *b = binding(name, false);
    bool ok = b && (b->has_live || b->has_freed);
    if (ok) *out = b->has_live ? b->live : b->freed;
    pthread_mutex_unlock(&names_lock);
    if (!ok) emit_error(op->line, "%s: no allocation named '%s'", SPECS[op->spec].name, name);
    return ok;
}

/* -- executing one op (purgecheck/runner.py HANDLERS) ------------------------------------------- */

static void observe_pages(void) {
    int n = atomic_load(&mi_world->npages);
    for (int id = 1; id <= n; id++) {
        mi_page_t *p = mi_world->pages[id];
        if (p->retired) continue;
        mi_page_emit_state(p);
        mi_page_emit_resident(p);
    }
    mi_emit_holes_stats();
}

static void emit_op(const op_t *op) {
    const opspec_t *sp = &SPECS[op->spec];
    tr_begin("op");
    tr_int("line", op->line);
    if (op->has_thread) tr_int("thread", op->thread);
    else tr_null("thread");
    tr_str("op", sp->name);
    tr_key("args");
    tr_raw("[");
    for (int a = 0; a < sp->nargs; a++) {
        if (a) tr_raw(",");
        if (sp->types[a] != A_STR && sp->types[a] != A_STEP) tr_rawf("%lld", (long long)op->ival[a]);
        else {
            tr_raw("\"");
            for (const char *c = op->sval[a]; *c; c++) {   /* names are words: escape quotes only */
                if (*c == '"' || *c == '\\') tr_rawf("\\%c", *c);
                else if ((unsigned char)*c < 0x20) tr_rawf("\\u%04x", *c);
                else tr_rawf("%c", *c);
            }
            tr_raw("\"");
        }
    }
    tr_raw("]");
    tr_end();
}

static const int64_t MAX_SIZE = (int64_t)1 << 30;

static void emit_clock(void) {
    lin_lock();   /* a linearized trace: the reading and its event are one step */
    tr_begin("clock");
    tr_int("now", mi_clock_now());
    tr_end();
    lin_unlock();
}

/* -- forks and interleavings (the ops fork, fork_at, clock_at: docs/op-script.md) ------------ */

/* A real fork by `thread`: the child applies _mi_page_purge_holes_forked_child to its copy of
 * the process and reports the epoch and its start through a pipe; the parent waits for it and
 * writes the `fork` event (purgecheck/runner.py fork_now). The child writes no trace and
 * leaves with _exit, so nothing buffered in the parent's stdout is written twice. */
static bool fork_now(int thread) {
    int fds[2];
    if (pipe(fds) != 0) mi_corrupt("pipe failed");
    lin_lock();   /* a linearized trace: the copy and its event are one step (validate) */
    bool moving = atomic_load(&mi_world->epoch_start) == MI_MOVING;
    pid_t pid = fork();
    if (pid < 0) mi_corrupt("fork failed");
    if (pid == 0) {
        close(fds[0]);
        mi_page_purge_holes_forked_child();
        int64_t report[2] = {atomic_load(&mi_world->epoch_start), (int64_t)atomic_load(&mi_world->epoch)};
        _exit(write(fds[1], report, sizeof report) == (ssize_t)sizeof report ? 0 : 3);
    }
    close(fds[1]);
    int64_t report[2];
    size_t got = 0;
    while (got < sizeof report) {
        ssize_t k = read(fds[0], (char *)report + got, sizeof report - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof report || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        lin_unlock();
        emit_error(cur_line, "fork: the child did not report its epoch (wait status %d)", status);
        return false;
    }
    tr_begin("fork");
    tr_int("thread", thread);
    tr_bool("moving", moving);
    tr_u64("epoch", (uint64_t)report[1]);
    tr_int("start", report[0]);
    tr_end();
    lin_unlock();
    return true;
}

/* Armed interleavings: each runs once, before its step of the next advance that reaches it,
 * in the order armed (model/drivers.py run_interleavings). */
static const op_t **armed;
static int narmed, armed_cap;

static void arm(const op_t *op) {
    if (narmed == armed_cap) {
        armed_cap = armed_cap ? 2 * armed_cap : 16;
        armed = realloc(armed, (size_t)armed_cap * sizeof *armed);
        if (!armed) abort();
    }
    armed[narmed++] = op;
}

static void run_interleavings(const char *pc) {
    int line = cur_line;
    for (int i = 0; i < narmed;) {
        const op_t *a = armed[i];
        if (strcmp(ADVANCE_STEPS[a->ival[0]], pc)) { i++; continue; }
        memmove(&armed[i], &armed[i + 1], (size_t)(narmed - i - 1) * sizeof *armed);
        narmed--;
        if (a->spec == OP_FORK_AT) {
            fork_now(a->thread);
        } else {
            mi_clock_advance(a->ival[1]);   /* a step back was refused when it was armed */
            emit_clock();
        }
    }
    cur_line = line;
}

static bool exec_op(const op_t *op) {
    mi_options_t *o = &mi_world->opt;
    mi_tld_t *t = op->has_thread ? mi_thread(op->thread) : NULL;
    mi_ptr_t p, moved;
    cur_line = op->line;
    if (o->clock_real && t && op->spec != OP_PARK && op->spec != OP_UNPARK
        && op->spec != OP_PENDING && atomic_load(&t->park_state) != PARK_RUNNING) {
        emit_error(op->line, "thread %d is parked: unpark it before its next op (real clock)", t->id);
        return false;
    }
    switch (op->spec) {
    case OP_MALLOC:
    case OP_ZALLOC:
        if (op->ival[1] > MAX_SIZE) {
            emit_error(op->line, "%s: size %lld is above the driver's limit of 1 GiB",
                       SPECS[op->spec].name, (long long)op->ival[1]);
            return false;
        }
        p = mi_heap_malloc(t, op->ival[1], op->spec == OP_ZALLOC, op->spec == OP_MALLOC);
        bind_live(op->sval[0], p);
        return true;
    case OP_MALLOC_ALIGNED: {   /* purgecheck/runner.py _malloc_aligned */
        int64_t a = 1, align = op->ival[2], size = op->ival[1];
        while (a < align && a < MI_ALIGN_MAX) a *= 2;
        bool whole = mi_compute_block_size(size, mi_world->opt.arch_bits) % a == 0
                     && mi_world->opt.first_block_offset % a == 0;
        if (size + a - 1 > MAX_SIZE) {
            emit_error(op->line, "%s: size %lld is above the driver's limit of 1 GiB",
                       SPECS[op->spec].name, (long long)(size + a - 1));
            return false;
        }
        p = mi_heap_malloc(t, whole ? size : size + a - 1, false, true);
        mi_page_t *pg = mi_page_of(p.page);
        int64_t addr = pg->geom.offset + p.block * pg->geom.block_size;   /* in a 4 MiB region */
        tr_begin("aligned");
        tr_int("page", p.page);
        tr_int("block", p.block);
        /* the mutant aligned_at_block_start hands out the block itself */
        tr_int("offset", mi_mutant == M_ALIGNED_AT_BLOCK_START ? 0 : ((-addr) % a + a) % a);
        tr_end();
        bind_live(op->sval[0], p);
        return true;
    }
    case OP_FREE:
        if (!lookup(op, op->sval[0], &p)) return false;
        if (mi_free(p, op->thread)) {
            pthread_mutex_lock(&names_lock);
            binding_t *b = binding(op->sval[0], false);
            if (b->has_live) {
                b->freed = b->live;
                b->has_freed = true;
                b->has_live = false;
            }
            pthread_mutex_unlock(&names_lock);
        }
        return true;
    case OP_REALLOC:
        if (op->ival[2] > MAX_SIZE) {
            emit_error(op->line, "realloc: size %lld is above the driver's limit of 1 GiB",
                       (long long)op->ival[2]);
            return false;
        }
        if (!lookup(op, op->sval[0], &p)) return false;
        if (mi_realloc(t, p, op->ival[2], &moved)) {
            pthread_mutex_lock(&names_lock);
            binding(op->sval[0], true)->has_live = false;
            binding_t *b = binding(op->sval[1], true);
            b->has_live = true;
            b->live = moved;
            pthread_mutex_unlock(&names_lock);
        }
        return true;
    case OP_COLLECT:
    case OP_WALK: {
        int *ids;
        int n = mi_heap_page_ids(t, &ids);
        for (int i = 0; i < n; i++) {
            mi_page_t *pg = mi_page_of(ids[i]);
            mi_page_free_collect(pg);
            if (op->spec == OP_WALK && mi_page_can_purge_holes(&pg->geom)) mi_page_purge_holes_walk(pg);
        }
        free(ids);
        return true;
    }
    case OP_COLLECT_FORCE: {   /* mi_collect(true): a page with no live block goes back */
        int *ids;
        int n = mi_heap_page_ids(t, &ids);
        for (int i = 0; i < n; i++) {
            mi_page_t *pg = mi_page_of(ids[i]);
            mi_page_free_collect(pg);
            if (mi_page_is_all_free(pg)) mi_page_retire(pg);
        }
        free(ids);
        return true;
    }
    case OP_HEAP_DESTROY:
        mi_heap_destroy(t);
        pthread_mutex_lock(&names_lock);   /* the names of its blocks are dropped */
        for (size_t i = 0; i < names_cap; i++)
            if (names[i].name && names[i].has_live && mi_page_of(names[i].live.page)->retired)
                names[i].has_live = false;
        pthread_mutex_unlock(&names_lock);
        return true;
    case OP_HEAP_DELETE:
        mi_heap_delete(t, mi_thread(0));
        return true;
    case OP_FAIL_DISCARD:
        atomic_fetch_add(&mi_world->fail_next_discards, op->ival[0]);
        return true;
    case OP_CLOCK:
        if (o->clock_real) {
            if (op->ival[0] > 0) {
                struct timespec ts = {op->ival[0] / 1000, (op->ival[0] % 1000) * 1000000};
                nanosleep(&ts, NULL);
            }
        } else if (!mi_clock_advance(op->ival[0])) {
            emit_error(op->line, "clock: a monotone clock cannot go back %lld ms", (long long)-op->ival[0]);
            return false;
        }
        emit_clock();
        return true;
    case OP_IDLE:
        mi_on_thread_idle(op->thread, false);
        return true;
    case OP_PENDING:
        tr_begin("pending");
        tr_int("thread", op->thread);
        tr_bool("value", mi_on_thread_idle_pending(op->thread));
        tr_end();
        return true;
    case OP_PARK:
        mi_on_thread_idle_start(op->thread);
        return true;
    case OP_UNPARK:
        mi_on_thread_idle_end(op->thread);
        return true;
    case OP_SCAVENGE: {
        int64_t due;
        bool waiting = o->clock_real ? mi_scavenger_pass(&due) : mi_theap_sweep_parked(&due);
        tr_begin("scavenge");
        if (waiting) tr_int("due", due);
        else tr_null("due");
        tr_end();
        return true;
    }
    case OP_SCAVENGER:
        if (o->clock_real) {   /* the scavenger thread works meanwhile */
            struct timespec ts = {op->ival[0] / 1000, (op->ival[0] % 1000) * 1000000};
            if (op->ival[0] > 0) nanosleep(&ts, NULL);
        } else {
            mi_run_scavenger(op->ival[0]);
        }
        return true;
    case OP_ABANDON:
        mi_heap_abandon(t);
        return true;
    case OP_RECLAIM: {
        if (!lookup(op, op->sval[0], &p)) return false;
        mi_page_t *pg = mi_page_of(p.page);
        if (!atomic_load(&pg->abandoned) || pg->retired) {
            emit_error(op->line, "reclaim: the page of '%s' is not abandoned", op->sval[0]);
            return false;
        }
        mi_page_reclaim(pg, t);
        return true;
    }
    case OP_FORK:
        return fork_now(op->thread);
    case OP_FORK_AT:
    case OP_CLOCK_AT:
        if (o->clock_real) {
            emit_error(op->line, "%s: only on the virtual clock", SPECS[op->spec].name);
            return false;
        }
        if (op->spec == OP_CLOCK_AT && op->ival[1] < 0 && o->clock_monotone) {
            emit_error(op->line, "clock_at: a monotone clock cannot go back %lld ms",
                       (long long)-op->ival[1]);
            return false;
        }
        arm(op);
        return true;
    case OP_EPOCH_SKIP:
        mi_epoch_skip(op->ival[0]);
        return true;
    }
    return false;
}

/* -- real-clock execution: one OS thread per script thread --------------------------------- */
typedef struct worker_s {
    int tid;
    pthread_t th;
    pthread_mutex_t m;
    pthread_cond_t cv;
    const op_t *op;          /* lockstep: the op to run now */
    bool quit;
    const op_t **queue;      /* concurrent: this thread's ops in script order */
    int nq, capq;
} worker_t;

static worker_t *workers[MI_MAX_THREADS];
static int nworkers;
static _Atomic bool *op_done;
static const op_t *script_ops;

static void *worker_lockstep(void *arg) {
    worker_t *w = arg;
    pthread_mutex_lock(&w->m);
    for (;;) {
        while (!w->op && !w->quit) pthread_cond_wait(&w->cv, &w->m);
        if (w->quit) break;
        pthread_mutex_unlock(&w->m);
        exec_op(w->op);
        pthread_mutex_lock(&w->m);
        w->op = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->m);
    tr_thread_exit();
    return NULL;
}

/* Concurrent mode: run this thread's ops; an op that names an allocation waits until the op
 * that made it has run. */
static void *worker_concurrent(void *arg) {
    worker_t *w = arg;
    tr_tid = w->tid;   /* a linearized trace names the thread of each event */
    for (int i = 0; i < w->nq && !atomic_load(&script_failed); i++) {
        const op_t *op = w->queue[i];
        while (op->producer >= 0 && !atomic_load(&op_done[op->producer]) && !atomic_load(&script_failed))
            sched_yield();
        if (atomic_load(&script_failed)) break;
        emit_op(op);
        exec_op(op);
        atomic_store(&op_done[op - script_ops], true);
    }
    tr_thread_exit();
    return NULL;
}

static worker_t *worker_for(int tid, bool concurrent) {
    for (int i = 0; i < nworkers; i++)
        if (workers[i]->tid == tid) return workers[i];
    worker_t *w = calloc(1, sizeof *w);
    w->tid = tid;
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->cv, NULL);
    workers[nworkers++] = w;
    if (!concurrent && pthread_create(&w->th, NULL, worker_lockstep, w) != 0) mi_corrupt("pthread_create failed");
    return w;
}

static void workers_stop(bool concurrent) {
    for (int i = 0; i < nworkers; i++) {
        worker_t *w = workers[i];
        if (!concurrent) {
            pthread_mutex_lock(&w->m);
            w->quit = true;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->m);
        }
        pthread_join(w->th, NULL);
        pthread_mutex_destroy(&w->m);
        pthread_cond_destroy(&w->cv);
        free(w->queue);
        free(w);
    }
    nworkers = 0;
}

static void run_real(op_t *ops, int nops, bool concurrent) {
    mi_scavenger_start();
    if (concurrent) {
        op_done = calloc((size_t)nops + 1, sizeof *op_done);
        script_ops = ops;
        for (int i = 0; i < nops; i++) {   /* the op that last bound each name it reads */
            const char *need = ops[i].spec == OP_FREE || ops[i].spec == OP_REALLOC
                               || ops[i].spec == OP_RECLAIM ? ops[i].sval[0] : NULL;
            for (int j = i - 1; need && j >= 0 && ops[i].producer < 0; j--) {
                const char *made = ops[j].spec == OP_MALLOC || ops[j].spec == OP_ZALLOC ? ops[j].sval[0]
                                   : ops[j].spec == OP_REALLOC ? ops[j].sval[1] : NULL;
                if (made && !strcmp(made, need)) ops[i].producer = j;
            }
            if (ops[i].has_thread) {
                worker_t *w = worker_for(ops[i].thread, true);
                if (w->nq == w->capq) {
                    w->capq = w->capq ? 2 * w->capq : 64;
                    w->queue = realloc(w->queue, (size_t)w->capq * sizeof *w->queue);
                }
                w->queue[w->nq++] = &ops[i];
            }
        }
        for (int i = 0; i < nworkers; i++)
            if (pthread_create(&workers[i]->th, NULL, worker_concurrent, workers[i]) != 0)
                mi_corrupt("pthread_create failed");
        for (int i = 0; i < nops && !atomic_load(&script_failed); i++)
            if (!ops[i].has_thread) {
                emit_op(&ops[i]);
                exec_op(&ops[i]);
                atomic_store(&op_done[i], true);
            }
        workers_stop(true);
        free(op_done);
        op_done = NULL;
    } else {
        for (int i = 0; i < nops && !atomic_load(&script_failed); i++) {
            emit_op(&ops[i]);
            if (!ops[i].has_thread) {
                exec_op(&ops[i]);
            } else {
                worker_t *w = worker_for(ops[i].thread, false);
                pthread_mutex_lock(&w->m);
                w->op = &ops[i];
                pthread_cond_broadcast(&w->cv);
                while (w->op) pthread_cond_wait(&w->cv, &w->m);
                pthread_mutex_unlock(&w->m);
            }
            /* No observation here: the scavenger thread may be sweeping these very pages.
             * With real threads the pages are observed once, at the end, after every
             * thread has been joined. */
        }
        workers_stop(false);
    }
    mi_scavenger_stop();
}

/* -- one script ----------------------------------------------------------------------------------- */

static void emit_header(const config_t *c) {
    const mi_options_t *o = &c->opt;
    char json[2048];
    char mutant[64] = "null";
    if (c->mutant) snprintf(mutant, sizeof mutant, "\"%s\"", mi_mutant_names[c->mutant]);
    snprintf(json, sizeof json,
             "{\"format\":\"%s\",\"version\":%d,\"config\":{"
             "\"page_kinds\":{\"small\":%lld,\"medium\":%lld,\"large\":%lld},"
             "\"os_page_size\":%lld,\"arch\":%d,\"first_block_offset\":%lld,"
             "\"interval_ms\":%lld,\"purge_holes\":%s,\"full_every\":%lld,\"purge_delay\":%lld,"
             "\"variant\":\"%s\",\"stale_epochs\":%lld,\"sweep_ms\":%lld,\"clock\":\"%s\","
             "\"clock_monotone\":%s,\"clock_start_ms\":%lld,\"observe\":\"%s\"},"
             "\"producer\":{\"name\":\"reference_c\",\"build\":\"%s\",\"mutant\":%s,"
             "\"concurrent\":%s%s}}",
             TRACE_FORMAT, TRACE_VERSION,
             (long long)mi_page_size_of(MI_SMALL, o->arch_bits),
             (long long)mi_page_size_of(MI_MEDIUM, o->arch_bits),
             (long long)mi_page_size_of(MI_LARGE, o->arch_bits),
             (long long)o->os_page_size, o->arch_bits, (long long)o->first_block_offset,
             (long long)o->interval_ms, o->purge_holes ? "true" : "false", (long long)o->full_every,
             (long long)o->purge_delay, mi_variant_names[o->variant], (long long)o->stale_epochs,
             (long long)o->sweep_ms, o->clock_real ? "real" : "virtual",
             o->clock_monotone ? "true" : "false", (long long)o->clock_start_ms,
             o->observe_all ? "all" : "sweeps", BUILD_NAME, mutant,
             c->concurrent ? "true" : "false", tr_linearized ? ",\"linearized\":true" : "");
    tr_header(json);
}

/* Run one script (its lines, without the %options lines) under config `c`. */
static void run_script(char *text, const config_t *c, const char *option_error) {
    tr_enabled = !c->quiet;
    mi_mutant = (mi_mutant_t)c->mutant;
    mi_world = mi_world_new(&c->opt);
    atomic_store(&script_failed, false);
    atomic_store(&mi_abandon_delay_us, c->abandon_delay_us);
    tr_linearized = c->linearize && c->concurrent && c->opt.clock_real && !c->quiet;
    atomic_store(&tr_lin, 0);
    tr_tid = 0;
    mi_advance_hook = c->opt.clock_real ? NULL : run_interleavings;
    emit_header(c);
    int cap = 64, nops = 0;
    op_t *ops = calloc((size_t)cap, sizeof *ops);
    bool parsed = option_error == NULL;
    if (option_error) emit_error(0, "%s", option_error);
    int line = 0;
    for (char *s = text; parsed && s && *s;) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = 0;
        char err[768];
        if (nops == cap) ops = realloc(ops, (size_t)(cap *= 2) * sizeof *ops);
        int r = parse_line(s, ++line, &ops[nops], err, sizeof err);
        if (r < 0) {
            emit_error(line, "%s", err);
            parsed = false;
        }
        nops += r > 0;
        s = nl ? nl + 1 : NULL;
    }
    if (parsed) {
        jmp_buf jb;
        if (setjmp(jb) == 0) {
            abort_jmp = c->opt.clock_real ? NULL : &jb;   /* threads cannot unwind: exit */
            if (c->opt.clock_real) {
                run_real(ops, nops, c->concurrent);
            } else {
                for (int i = 0; i < nops && !atomic_load(&script_failed); i++) {
                    emit_op(&ops[i]);
                    if (exec_op(&ops[i]) && (c->opt.observe_all || is_observed(ops[i].spec)))
                        observe_pages();
                }
            }
            if (!atomic_load(&script_failed)) observe_pages();   /* the final observation */
        }
        abort_jmp = NULL;
    }
    tr_begin("end");
    tr_int("events", atomic_load(&tr_events));
    tr_end();
    tr_flush();
    tr_linearized = false;
    for (int i = 0; i < nops; i++)
        for (int a = 0; a < MAX_ARGS; a++) free(ops[i].sval[a]);
    free(ops);
    narmed = 0;   /* what no advance reached is dropped with the script */
    names_reset();
    mi_world_free(mi_world);
    mi_world = NULL;
    mi_mutant = M_NONE;
}

/* -- the allocation stamp's cost (see docs/conformance.md) ---------------------------------- */
static int bench_stamp(long pairs) {
    mi_options_t o;
    mi_options_default(&o);
    tr_enabled = false;
    mi_world = mi_world_new(&o);
    mi_tld_t *t = mi_thread(1);
    mi_heap_malloc(t, 128 * KiB, false, false);   /* a pinned block keeps the page in use */
    for (long i = 0; i < pairs; i++) {
        mi_ptr_t p = mi_heap_malloc(t, 128 * KiB, false, false);
        mi_free(p, 1);
    }
    printf("%ld malloc+free pairs of 128 KiB (%s build)\n", pairs, BUILD_NAME);
    mi_world_free(mi_world);
    return 0;
}

/* -- main ----------------------------------------------------------------------------------------- */

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "driver: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", USAGE);
    return 2;
}

int main(int argc, char **argv) {
    config_t c;
    memset(&c, 0, sizeof c);
    mi_options_default(&c.opt);
    const char *path = NULL, *arith = NULL;
    static const struct { const char *flag, *key; } VALUED[] = {
        {"--clock", "clock"}, {"--variant", "variant"}, {"--mutant", "mutant"},
        {"--interval", "interval"}, {"--os-page", "os_page"}, {"--arch", "arch"},
        {"--offset", "offset"}, {"--full-every", "full_every"}, {"--purge-delay", "purge_delay"},
        {"--stale-epochs", "stale_epochs"}, {"--sweep-ms", "sweep_ms"},
        {"--clock-start", "clock_start"}, {"--observe", "observe"},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool done = false;
        for (size_t v = 0; v < sizeof VALUED / sizeof *VALUED && !done; v++) {
            if (strcmp(a, VALUED[v].flag)) continue;
            if (i + 1 == argc) return usage_error("%s needs a value", a);
            char err[512];
            if (set_option(&c, VALUED[v].key, argv[++i], err, sizeof err) < 0)
                return usage_error("%s", err);
            done = true;
        }
        if (done) continue;
        if (!strcmp(a, "--concurrent")) c.concurrent = true;
        else if (!strcmp(a, "--linearize")) c.linearize = true;
        else if (!strcmp(a, "--no-purge-holes")) c.opt.purge_holes = false;
        else if (!strcmp(a, "--non-monotone")) c.opt.clock_monotone = false;
        else if (!strcmp(a, "--quiet")) c.quiet = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return 0; }
        else if (!strcmp(a, "--list-mutants")) {
            for (int m = 1; m < M_COUNT; m++) puts(mi_mutant_names[m]);
            return 0;
        } else if (!strcmp(a, "--list-ops")) {
            for (int s = 0; s < OP_COUNT; s++) {
                printf("%s %s", SPECS[s].name, SPECS[s].threaded ? "threaded" : "global");
                for (int k = 0; k < SPECS[s].nargs; k++)
                    printf(" %s:%s", SPECS[s].argnames[k], SPECS[s].types[k] == A_STR || SPECS[s].types[k] == A_STEP ? "str"
                                                           : SPECS[s].types[k] == A_COUNT ? "count" : "int");
                printf("\n");
            }
            return 0;
        } else if (!strcmp(a, "--bench-stamp")) {
            if (i + 1 == argc) return usage_error("%s needs a count", a);
            return bench_stamp(atol(argv[++i]));
        } else if (!strcmp(a, "--arith")) {
            if (i + 1 == argc) return usage_error("%s needs a grid: large or small", a);
            arith = argv[++i];
        } else if (a[0] == '-' && a[1]) return usage_error("unknown option %s", a);
        else if (path) return usage_error("one SCRIPT at most (got a second: %s)", a);
        else path = a;
    }
    if (arith) {   /* the grid on the C reference's arithmetic, under --mutant if given */
        mi_mutant = (mi_mutant_t)c.mutant;
        return mi_arith_grid(arith);
    }
    base_config = c;
    FILE *in = stdin;
    if (path && strcmp(path, "-") && !(in = fopen(path, "r"))) {
        fprintf(stderr, "driver: cannot read %s: %s\n", path, strerror(errno));
        return 2;
    }
    static char outbuf[1 << 20];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    char *line = NULL, *text = NULL;
    size_t linecap = 0, tlen = 0, tcap = 0;
    ssize_t n;
    int lines = 0;
    config_t sc = base_config;
    char opt_err[512] = "";
    bool have_opt_err = false;
    for (;;) {
        n = getline(&line, &linecap, in);
        bool sep = n > 0 && (!strcmp(line, "---\n") || !strcmp(line, "---\r\n") || !strcmp(line, "---"));
        if (n < 0 || sep) {
            if (sep || lines > 0) {
                if (!text) text = calloc(1, 1);
                run_script(text, &sc, have_opt_err ? opt_err : NULL);
            }
            if (n < 0) break;
            tlen = 0;
            if (text) text[0] = 0;
            lines = 0;
            sc = base_config;
            have_opt_err = false;
            continue;
        }
        if (!strncmp(line, "%options", 8) && lines == 0) {   /* before the script's first line */
            for (char *kv = strtok(line + 8, " \t\r\n"); kv && !have_opt_err; kv = strtok(NULL, " \t\r\n")) {
                char *eq = strchr(kv, '=');
                if (!eq) {
                    snprintf(opt_err, sizeof opt_err, "%%options: expected KEY=VALUE, got '%s'", kv);
                    have_opt_err = true;
                    break;
                }
                *eq = 0;
                have_opt_err = set_option(&sc, kv, eq + 1, opt_err, sizeof opt_err) < 0;
            }
            continue;
        }
        lines++;
        if (tlen + (size_t)n + 1 > tcap) {
            tcap = (tlen + (size_t)n + 1) * 2;
            text = realloc(text, tcap);
        }
        memcpy(text + tlen, line, (size_t)n);
        tlen += (size_t)n;
        text[tlen] = 0;
    }
    free(line);
    free(text);
    if (in != stdin) fclose(in);
    return exit_status;
}
