/* stress.c: the seed's concurrent tests on real threads and the real clock, with a trace that
 * `purgecheck validate` replays on the model (docs/validation.md). This file is the shared
 * part: the options, the trace header, the checks' reports, the helpers the scenarios share,
 * and the run (which threads each scenario starts, the liveness wait, the verdict and the
 * --summary JSON). Each scenario is a file of its own, which says what it runs and checks:
 *
 *   sweepers     stress_sweepers.c     (a), (b)   seed 000's sweepers at the same time
 *   park         stress_park.c         (c), (d)   the park handoff with the scavenger thread
 *   real         stress_real.c         (e)..(h)   the fork's own sweepers test, in its shape
 *   fork         stress_fork.c         (m), (n)   forks while a sweeper holds MOVING
 *   clock-back   stress_clock_back.c   (i)        the clock stepped back inside an advance
 *   walks        stress_walks.c        (j), (k)   the walk on every thread at once
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
#include <time.h>
#include <unistd.h>

#include "stress.h"

#ifndef BUILD_NAME
#define BUILD_NAME "release"
#endif
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
    "  --min-crossings N      sweepers: run on (--max-ms at the most) until N sweeps checked by\n"
    "                         (b) saw the epoch move during them: a bound in chances to see a\n"
    "                         young page discarded, not in time (default 0)\n"
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

stress_cfg_t cfg = {"sweepers", 10, 300, 10000, 0, 0, 0, 4, 3, 2, 0, MI_DELAY_BEFORE_CAS, false, NULL, NULL, 3, 100};

static const char *const DELAY_AT_NAMES[] = {"cas", "increment", "store"};   /* MI_DELAY_BEFORE_* */

_Atomic bool stop;
_Atomic int64_t sweeps;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

_Noreturn void mi_corrupt(const char *what) {
    fprintf(stderr, "stress: broken state: %s\n", what);
    fflush(stdout);
    _exit(3);
}

void violation(_Atomic int64_t *counter, const char *fmt, ...) {
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

/* Is any OS page of the block resident (mincore)? */
bool block_resident(mi_ptr_t b) {
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

void sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
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
        else if (!strcmp(a, "--min-crossings")) cfg.min_crossings = parse_int(a, v);
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
        bool crossed = atomic_load(&crossed_b) >= cfg.min_crossings;
        if ((ran >= cfg.ms && moved && crossed && !cfg.until_violation) || ran >= cfg.max_ms) break;
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
                "\"checked_b\":%lld,\"crossed_b\":%lld,\"parks\":%lld,\"violations\":{\"a\":%lld,\"b\":%lld,\"c\":%lld,"
                "\"d\":%lld,\"liveness\":%d,\"e\":%lld,\"f\":%lld,\"g\":%lld,\"h\":%lld,"
                "\"i\":%lld,\"m\":%lld,\"n\":%lld,\"j\":%lld,\"k\":%lld},"
                "\"real\":{\"ran_ms\":%lld,\"epoch_moves\":%lld,\"rounds\":%lld,\"checked\":%lld,"
                "\"shortest_ms\":%lld},\"trace_events\":%lld,\"forks_moving\":%lld,"
                "\"forks_quiet\":%lld,\"forks_before_increment\":%lld,\"forks_after_increment\":%lld,"
                "\"clock_backs\":%lld,\"walks\":%lld}\n",
                cfg.scenario, BUILD_NAME, mi_mutant_names[cfg.mutant], (long long)ran,
                (long long)cfg.interval, (unsigned long long)epochs, (long long)atomic_load(&sweeps),
                (long long)atomic_load(&observations), (long long)atomic_load(&checked_b),
                (long long)atomic_load(&crossed_b),
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
