/* stress_clock_back.c: scenario `clock-back` of stress (stress.c): the clock stepped back
 * before the epoch's start inside an advance, which must then find the epoch due (digest 7;
 * issue 20's rare paths). Check: (i).
 */
#include <string.h>
#include <time.h>

#include "stress.h"

_Atomic int64_t violations_i, clock_backs;

/* Digest 7: "if now >= start && now - start < interval return (a clock that went backwards
 * advances)". The main thread arms a step back; the next sweeper whose advance has loaded the
 * current start S sets the clock back to --back-ms before S, just before its clock reading
 * (mi_advance_hook, before read_clock; under lin_lock with a `clock` event). If the clock,
 * read again after that reading, is still before S, the reading was too: (i) the advance
 * must find the epoch due and go on to its CAS. Broken (clock_back_not_due), it returns. The
 * verdict needs no timing: a sweeper held up until the clock caught up with S gives none, and
 * the step is made again. After each verdict the main thread puts the clock forward again.
 * The hook knows the start the advance loaded: the epoch and start it reads before the load
 * are those it reads before the clock reading, and no advance can have come and gone in
 * between without moving the epoch. */
static _Atomic bool back_armed, back_judged;
static _Thread_local struct { uint64_t epoch; int64_t start; int state; } back_seen;
enum { BACK_NONE, BACK_STEPPED, BACK_MUST_BE_DUE };

void clock_back_hook(const char *pc) {
    mi_world_t *w = mi_world;
    if (back_seen.state == BACK_MUST_BE_DUE && strcmp(pc, "compare")) {
        back_seen.state = BACK_NONE;
        if (strcmp(pc, "cas"))   /* the advance returned after its compare */
            violation(&violations_i, "(i) the clock went back %lld ms before the start of the "
                      "epoch (%lld) and an advance read it there; the advance found the epoch "
                      "not due and returned, without its CAS", (long long)cfg.back_ms,
                      (long long)back_seen.start);
        else
            atomic_fetch_add(&clock_backs, 1);
        atomic_store(&back_judged, true);
    }
    if (!strcmp(pc, "load_start")) {
        back_seen.epoch = atomic_load(&w->epoch);
        back_seen.start = atomic_load(&w->epoch_start);
    } else if (!strcmp(pc, "read_clock") && atomic_load(&back_armed)) {
        lin_lock();
        int64_t start = atomic_load(&w->epoch_start);
        if (start != MI_MOVING && start == back_seen.start && atomic_load(&w->epoch) == back_seen.epoch
            && atomic_exchange(&back_armed, false)) {
            atomic_fetch_sub(&mi_clock_offset_ms, mi_clock_now() - start + cfg.back_ms);
            tr_begin("clock");
            tr_int("now", mi_clock_now());
            tr_end();
            back_seen.state = BACK_STEPPED;
        }
        lin_unlock();
    } else if (!strcmp(pc, "compare") && back_seen.state == BACK_STEPPED) {
        bool before = mi_clock_now() < back_seen.start;   /* so was the reading */
        back_seen.state = before ? BACK_MUST_BE_DUE : BACK_NONE;
        if (!before) atomic_store(&back_armed, true);   /* held up too long: no verdict */
    }
}

void run_clock_backs(void) {
    for (int step = 0; step < cfg.steps && !atomic_load(&stop); step++) {
        sleep_ms(2 * cfg.interval);
        atomic_store(&back_judged, false);
        atomic_store(&back_armed, true);
        struct timespec r0, r;   /* the offset moves the clock: bound the wait by the real one */
        clock_gettime(CLOCK_MONOTONIC, &r0);
        int64_t waited = 0;
        while (!atomic_load(&back_judged) && waited < cfg.max_ms && !atomic_load(&stop)) {
            sleep_ms(1);
            clock_gettime(CLOCK_MONOTONIC, &r);
            waited = (r.tv_sec - r0.tv_sec) * 1000 + (r.tv_nsec - r0.tv_nsec) / 1000000;
        }
        atomic_store(&back_armed, false);
        if (!atomic_load(&back_judged) && !atomic_load(&stop))
            violation(&violations_i, "(i) step %d: no advance read the clock after it went back, "
                      "in %lld ms", step + 1, (long long)cfg.max_ms);
        lin_lock();   /* the clock forward again (a step forward is always allowed) */
        atomic_store(&mi_clock_offset_ms, 0);
        tr_begin("clock");
        tr_int("now", mi_clock_now());
        tr_end();
        lin_unlock();
    }
}

