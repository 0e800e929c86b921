/* stress.h: what the parts of stress share: the options, the run's stop flag, the checks'
 * counters, the helpers, and each scenario's threads (stress.c is the run; one file per
 * scenario: stress_sweepers.c, stress_park.c, stress_real.c, stress_fork.c,
 * stress_clock_back.c, stress_walks.c). Each check's letter is the one in that file's comment
 * and in the --summary JSON's "violations" (docs/validation.md).
 */
#ifndef STRESS_H
#define STRESS_H

#include "purge.h"

#define BLOCK (256 * KiB)         /* a large-page block (seed: 96..512 KiB) */
#define REAL_INTERVAL_MS 50       /* scenario real's interval unless --interval says otherwise */

/* The options (stress.c parse_args; --help says what each means). */
typedef struct {
    const char *scenario;
    int64_t interval, ms, max_ms, delay_us, park_work_us;
    int64_t min_crossings;    /* sweepers: run on until this many checked sweeps crossed an epoch */
    int sweepers, parked, cycles, mutant, delay_at;
    bool until_violation;
    const char *trace, *summary;
    int steps;                /* fork, clock-back: the forks at MOVING, the steps back */
    int64_t back_ms;          /* clock-back: how far before the epoch's start */
} stress_cfg_t;
extern stress_cfg_t cfg;

extern _Atomic bool stop;       /* every thread ends its loop when this is set */
extern _Atomic int64_t sweeps;  /* the sweeps of every thread, for the verdict line */

/* A failed check: count it, report the first few of its kind on stderr (stress.c). */
void violation(_Atomic int64_t *counter, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool block_resident(mi_ptr_t b);
void sleep_ms(int64_t ms);

static inline uint64_t epoch_now(void) {
    return atomic_load_explicit(&mi_world->epoch, memory_order_acquire);
}

/* stress_sweepers.c: (a), (b) */
extern _Atomic int64_t violations_a, violations_b, observations, checked_b, crossed_b;
void *sweeper_main(void *arg);
void *under_test_main(void *arg);
void *watcher_main(void *arg);

/* stress_park.c: (c), (d) */
extern _Atomic int64_t violations_c, violations_d, parks;
void *parker_main(void *arg);

/* stress_real.c: (e), (f), (g), (h) and its figures */
typedef struct { int64_t epochs, rounds, checked, shortest, ran_ms; } real_figures_t;
extern _Atomic int64_t violations_e, violations_f, violations_g, violations_h;
extern real_figures_t real_figures;
void *real_sweeper_main(void *arg);
void *real_under_test_main(void *arg);

/* stress_fork.c: (m), (n) */
extern _Atomic int64_t violations_m, violations_n, forks_moving, forks_quiet;
extern _Atomic int64_t forks_in[3];   /* forks made while a sweeper slept at MI_DELAY_BEFORE_* */
void run_forks(int64_t t0);

/* stress_clock_back.c: (i) */
extern _Atomic int64_t violations_i, clock_backs;
void clock_back_hook(const char *pc);
void run_clock_backs(void);

/* stress_walks.c: (j), (k) */
extern _Atomic int64_t violations_j, violations_k, walks_checked;
void *walker_main(void *arg);

#endif
