// check.cpp: the C reference's own epoch advance, stamp and park handoff (reference_c/protocol.h)
// run under Relacy, which explores weak executions of C++11 atomics (relaxed, acquire/release,
// seq_cst) and reports data races on plain variables (rl::var). The same scenarios as the weak
// explorer (proofs/weak/configs.py):
//   advance-2, advance-3  two or three sweepers, each: the advance, then the sweep's epoch read
//                         (weak-adv-2, weak-adv-3);
//   park                  the owner (malloc, free, park, unpark, malloc, free, park) and the
//                         scavenger, which claims, advances, sweeps the page and releases
//                         (weak-park-2; built with -DMI_HANDOFF_ACQ_REL, weak-park-2-acqrel);
//   fork                  two sweepers of the parent and the child of a fork (weak-fork-2, as
//                         far as Relacy can say it: see fork_test).
// Judged, as there: EP-NO-SHORT-EPOCH, EP-MOVING-EXCL, EP-RECORDED-NOT-BEFORE-REAL and
// EP-SEES-STARTED on the advance (through protocol.h's step hooks, the points where the
// linearized trace reports each step); on the park, PK-HANDOFF-FRESH as Relacy's data-race
// check on the page's plain fields (swept_state and block 1 are rl::var), HD-INTERVAL at a
// purge, PK-MAX-SWEEPS and PK-DONE-TWO-EPOCHS at each sweep's end.
// The clock is virtual: a plain counter (physical time, outside Relacy's memory) that each
// reading may move on by 0 to 2 ms (rl::rand), up to CLOCK_BOUND_MS.
//
// Usage: relacy_check SCENARIO [ITERATIONS [MUTANT]] [--weaken ACCESS]    exit 0: every
// iteration held; 1: a failure (Relacy prints the execution history). MUTANT: one of
// protocol.h's run-time switches (the C reference's --mutant names, e.g.
// fork_child_keeps_moving). ACCESS: an access of atomics.h with an unsafe weakening (e.g.
// unpark_cas), run at its weaker ordering MI_WEAKER_<ACCESS>, as a build with
// -DMI_WEAKEN_<ACCESS> would run it: one build judges every weakening (a Relacy build takes a
// minute of g++). Build: reference_c/Makefile (relacy targets).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

// The run-time mutant (argv[3]): MI_MUTANT(NAME) is on when its name, lowercased, is it.
static const char *relacy_mutant = "";
#define MI_MUTANT(name) (!strcasecmp(#name, relacy_mutant))
// The run-time weakening (--weaken ACCESS): atomics.h's MI_WEAKENABLE accesses read it.
// WEAKENABLE: the accesses atomics.h gives a MI_WEAKER_<ACCESS> (tests/test_weak_engines.py
// checks the two lists are one), so that a misspelt ACCESS is refused, not run unweakened.
static const char *relacy_weakened = "";
#define MI_WEAKENED(access) (!strcasecmp(#access, relacy_weakened))
static const char *const WEAKENABLE[] = {"load_start", "fetch_add", "store_start", "spin_load",
                                         "park_cas", "unpark_cas", "claim_cas", "release_state"};

#define MI_EPOCH_SPIN_MAX 1   // the spin's bound, as the weak explorer's spin_max
#include "../protocol.h"   // its constants; its functions once the hooks below are defined

static const int64_t INTERVAL_MS = 2;
static const int64_t CLOCK_BOUND_MS = 6;
static const int MAX_THREADS = 3;
enum { LIVE, FREE, PURGED };               // block 1 of the owner's page
static const int64_t SWEPT_NONE = -1, WALKED = -2;   // swept_state; else a stamp (the epoch)

struct tld {
    rl::atomic<int> park_state, park_swept;
    rl::atomic<bool> park_reclaim, holes_sweep_deferred;
    rl::atomic<int64_t> holes_sweep_last;
    uint64_t holes_sweep_epoch, holes_park_epoch;
};

// What one iteration's hooks and checks read: physical time and the ghost records. Plain
// variables, outside Relacy's memory, reset by `before` (so each iteration is deterministic).
struct ghost {
    int64_t now;                      // the virtual clock
    int64_t begins[16];               // the physical time each epoch began (its increment)
    int64_t started_start[16];        // the start recorded for each epoch (store_start;
                                      // MI_MOVING until then)
    int epochs;                       // increments so far
    int holders;                      // threads between a won CAS and their store
    int64_t seen[MAX_THREADS];        // the start each thread's advance last read
    bool holding[MAX_THREADS];        // this thread is between its won CAS and its store
    int64_t t_alloc;                  // the owner's last allocation (the stamp's load)
    int park_sweeps;                  // sweeps of the current park
    uint64_t park_first_epoch;
};
static ghost g;

// A check of property `id` (its registry name): Relacy's report of a failed RL_ASSERT quotes
// the expression, so the name stands in it.
#define CHECK(id, cond) RL_ASSERT((cond) || !id)

int64_t mi_clock_now(void) {
    int64_t step = rl::rand(3);
    if (g.now + step > CLOCK_BOUND_MS) step = CLOCK_BOUND_MS - g.now;
    g.now += step;
    return g.now;
}

// The hooks of protocol.h: the advance's step reports feed the ghost and its checks.
static void on_step(const char *pc, int64_t v) {
    unsigned me = rl::thread_index();
    if (!strcmp(pc, "load_start")) g.seen[me] = v;
    if (!strcmp(pc, "increment")) {
        CHECK("EP-NO-SHORT-EPOCH", v == g.epochs + 1);   // the increment read the latest
        CHECK("EP-NO-SHORT-EPOCH", g.now - g.begins[g.epochs] >= INTERVAL_MS);
        g.epochs++;
        g.begins[g.epochs] = g.now;
        g.started_start[g.epochs] = MI_MOVING;   // not recorded yet
    }
    if (!strcmp(pc, "store_start")) {
        CHECK("EP-RECORDED-NOT-BEFORE-REAL", v >= g.begins[g.epochs]);
        g.started_start[g.epochs] = v;
        g.seen[me] = v;
        g.holders--;
        g.holding[me] = false;
    }
}
static void on_cas(bool won) {
    if (won) CHECK("EP-MOVING-EXCL", ++g.holders == 1);
    if (won) g.holding[rl::thread_index()] = true;
}
static void at_step(void);
#define MI_LIN_STEP(pc, v) on_step((pc), (v))
#define MI_LIN_STEP_BOOL(pc, b) on_cas(b)
#define MI_LIN_STEP_WAIT(spins, v) (g.seen[rl::thread_index()] = (v))
#define MI_AT_STEP(pc) at_step()
#define MI_LIN_LOCK() ((void)0)
#define MI_LIN_UNLOCK() ((void)0)
#define MI_ADVANCE_DELAY(at) ((void)0)
#define MI_SPIN_PAUSE() rl::yield(1, $)
#define MI_PARK_CAN_WAIT true
#define MI_PARK_YIELD() rl::yield(1, $)
#define MI_PARK_IDLE_WORK(t) sweep_page(t)
#define MI_ON_PARK(t) (g.park_sweeps = 0)   // before the CAS that parks: a new park
#define MI_ON_UNPARK(t) ((void)0)
#define MI_ON_PARK_SWEEP(t, deferred, next) on_park_sweep((t), (next))
#define MI_PROTO_TLD tld
static bool sweep_page(tld *t);

static void on_park_sweep(tld *t, int next);
#include "../protocol.h"

static void on_park_sweep(tld *t, int next) {
    if (++g.park_sweeps == 1) g.park_first_epoch = t->holes_sweep_epoch;
    CHECK("PK-MAX-SWEEPS", g.park_sweeps <= MI_PARK_SWEEPS_MAX);
    if (t->holes_sweep_epoch - g.park_first_epoch >= 2)
        CHECK("PK-DONE-TWO-EPOCHS", next == PARK_SWEPT_DONE);
}

// EP-SEES-STARTED: an advance that returned having read a recorded start (its own store, a
// start found not due, or the spin seeing the mark go) is followed by a sweep that reads the
// epoch that began there, or a later one. A spin that gave up on MOVING promises nothing.
static void sweep_read_epoch(mi_atomic(uint64_t) *epoch, uint64_t *out) {
    int64_t s = g.seen[rl::thread_index()];
    uint64_t e = mi_proto_sweep_epoch(epoch);
    if (s != MI_MOVING) {
        int want = -1;
        for (int k = 0; k <= g.epochs; k++)
            if ((k == 0 && s == 0) || (k > 0 && g.started_start[k] == s)) want = k;
        if (want >= 0) CHECK("EP-SEES-STARTED", e >= (uint64_t)want);
    }
    *out = e;
}

struct world {
    rl::atomic<int64_t> epoch_start;
    rl::atomic<uint64_t> epoch;
    tld owner;
    rl::var<int> block;            // block 1 of the owner's page (a plain field in C)
    rl::var<int64_t> swept_state;  // the page's swept_state (a plain field in C)
    rl::atomic<int> parents_gone;  // fork: the parent's sweepers that have stopped
};
static world *w;

static void world_init(world *x) {
    w = x;
    memset(&g, 0, sizeof g);
    x->epoch_start.store(0, rl::mo_relaxed, $);
    x->epoch.store(0, rl::mo_relaxed, $);
    x->owner.park_state.store(PARK_RUNNING, rl::mo_relaxed, $);
    x->owner.park_swept.store(PARK_SWEPT_NONE, rl::mo_relaxed, $);
    x->owner.park_reclaim.store(false, rl::mo_relaxed, $);
    x->owner.holes_sweep_deferred.store(false, rl::mo_relaxed, $);
    x->owner.holes_sweep_last.store(0, rl::mo_relaxed, $);
    x->owner.holes_sweep_epoch = x->owner.holes_park_epoch = 0;
    x->parents_gone.store(0, rl::mo_relaxed, $);
    x->block($) = FREE;
    x->swept_state($) = SWEPT_NONE;
    g.t_alloc = -1;
}

// -- the advance: sweepers ------------------------------------------------------------------
// Each: the advance, then the sweep's epoch read, twice.
static void sweeper_rounds(world *x) {
    for (int round = 0; round < 2; round++) {
        mi_proto_epoch_advance(&x->epoch_start, &x->epoch, INTERVAL_MS);
        uint64_t e;
        sweep_read_epoch(&x->epoch, &e);
    }
}

template<int N>
struct advance_test : rl::test_suite<advance_test<N>, N> {
    world x;
    void before() { world_init(&x); }
    void thread(unsigned) { sweeper_rounds(&x); }
};

// -- the park: the owner and the scavenger --------------------------------------------------

// The sweep of the claimed thread's one page (digest 6.2): the advance first, the epoch read
// (holes_sweep_epoch), then the hold: stamped less than two epochs ago keeps the page, else a
// walk purges a free block 1.
static bool sweep_page(tld *t) {
    mi_proto_epoch_advance(&w->epoch_start, &w->epoch, INTERVAL_MS);
    sweep_read_epoch(&w->epoch, &t->holes_sweep_epoch);
    int64_t e = (int64_t)t->holes_sweep_epoch;
    int64_t state = w->swept_state($);
    int block = w->block($);
    if (state >= 0 && e - state < 2) return block == FREE;   // held: deferred if it has free blocks
    if (block == FREE) {
        CHECK("HD-INTERVAL", g.now - g.t_alloc >= INTERVAL_MS);
        w->block($) = PURGED;
    }
    w->swept_state($) = WALKED;
    return false;
}

static void owner_malloc(void) {
    if (w->block($) == PURGED) w->swept_state($) = SWEPT_NONE;   // _mi_page_unpurge_run
    w->block($) = LIVE;
    int64_t e = (int64_t)mi_proto_stamp_epoch(&w->epoch);
    g.t_alloc = g.now;
    if (w->swept_state($) != e) w->swept_state($) = e;
}

struct park_test : rl::test_suite<park_test, 2> {
    world x;
    void before() { world_init(&x); }
    void thread(unsigned index) {
        tld *t = &x.owner;
        if (index == 0) {   // the owner
            for (int round = 0; round < 2; round++) {
                owner_malloc();
                x.block($) = FREE;
                mi_proto_park_enter(t);
                if (round == 0) mi_proto_park_leave(t);
            }
            return;
        }
        for (int pass = 0; pass < 6; pass++) {   // the scavenger
            int64_t wait;
            if (mi_proto_park_claim(t, INTERVAL_MS, &wait) != MI_CLAIM_WON) {
                rl::yield(1, $);
                continue;
            }
            mi_proto_park_sweep(t);
        }
    }
};

// -- the fork: the parent's sweepers and the child ------------------------------------------
// Relacy has no fork and one memory for all threads: it cannot copy it. The child is the third
// thread, which waits until the parent's two sweepers have stopped for good: each stops before
// a step of its advance that rl::rand picked (or after its last), unwinding out of it (a thread
// of the parent is not in the child; one that held MOVING leaves it held), and says so with a
// release that the child acquires. So every write of the parent is in the child's memory (the
// weak explorer's weak-fork-2-latest; a copy without some of them, its happens-before-closed
// prefix, cannot be said here, and without the acquire the child would read writes of the
// parent after the fork that it had not seen before it). Then the child runs the C reference's
// forked-child rule (protocol.h), checks that it does not hold MOVING (EP-MOVING-HELD), and
// sweeps twice as the parent's sweepers did, judged as they are.
struct parent_gone {};
static const int FORK_STEPS = 16;   // a sweeper's steps in two rounds are fewer
static int stop_at[MAX_THREADS], steps[MAX_THREADS];
static bool fork_scenario;

static void at_step(void) {
    unsigned me = rl::thread_index();
    if (fork_scenario && me < 2 && steps[me]++ == stop_at[me]) throw parent_gone();
}

struct fork_test : rl::test_suite<fork_test, 3> {
    world x;
    void before() {
        world_init(&x);
        fork_scenario = true;
        for (int t = 0; t < MAX_THREADS; t++) steps[t] = 0;
    }
    void thread(unsigned index) {
        if (index < 2) {   // a sweeper of the parent
            stop_at[index] = (int)rl::rand(FORK_STEPS);
            try {
                sweeper_rounds(&x);
            } catch (parent_gone &) {
                if (g.holding[index]) g.holders--;   // its claim stays in memory, not in a thread
            }
            x.parents_gone.fetch_add(1, rl::mo_acq_rel, $);
            return;
        }
        while (x.parents_gone.load(rl::mo_acquire, $) < 2) rl::yield(1, $);   // the fork lands
        int64_t now = mi_clock_now();
        if (mi_proto_forked_child(&x.epoch_start, now)) {
            CHECK("EP-RECORDED-NOT-BEFORE-REAL", now >= g.begins[g.epochs]);
            g.started_start[g.epochs] = now;
        }
        CHECK("EP-MOVING-HELD", x.epoch_start.load(rl::mo_relaxed, $) != MI_MOVING);
        sweeper_rounds(&x);
    }
};

template<typename T>
static bool run(unsigned iterations) {
    rl::test_params p;
    p.search_type = rl::sched_random;
    p.iteration_count = iterations;
    p.execution_depth_limit = 5000;
    return rl::simulate<T>(p);
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[argc - 2], "--weaken")) {
        relacy_weakened = argv[argc - 1];
        argc -= 2;
        bool known = false;
        for (const char *access : WEAKENABLE) known |= !strcasecmp(access, relacy_weakened);
        if (!known) {
            fprintf(stderr, "%s: --weaken %s: no such access (one of atomics.h's "
                    "MI_WEAKER_<ACCESS>, lowercased)\n", argv[0], relacy_weakened);
            return 2;
        }
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s advance-2|advance-3|park|fork [ITERATIONS [MUTANT]] "
                "[--weaken ACCESS]\n", argv[0]);
        return 2;
    }
    unsigned iterations = argc > 2 ? (unsigned)atoi(argv[2]) : 20000;
    if (argc > 3) relacy_mutant = argv[3];
    bool ok;
    if (!strcmp(argv[1], "advance-2")) ok = run<advance_test<2> >(iterations);
    else if (!strcmp(argv[1], "advance-3")) ok = run<advance_test<3> >(iterations);
    else if (!strcmp(argv[1], "park")) ok = run<park_test>(iterations);
    else if (!strcmp(argv[1], "fork")) ok = run<fork_test>(iterations);
    else {
        fprintf(stderr, "%s: unknown scenario %s (advance-2, advance-3, park, fork)\n", argv[0],
                argv[1]);
        return 2;
    }
    return ok ? 0 : 1;
}
