/* stress_park.c: scenario `park` of stress (stress.c): the park handoff with the real
 * scavenger thread (seed 000, the park handoff; docs/validation.md).
 *
 * Several threads allocate from large pages, free most of it, park, and wait (bounded) until
 * the scavenger has marked their park done; (c) it does, and (d) then the blocks they freed
 * are no longer resident, while one more thread sweeps inline beside them (sweeper_main of
 * stress_sweepers.c). With --park-work-us each park sweep's work lasts that long
 * (linearize.c mi_park_work_delay), as the virtual clock's sweep_ms. Checks: (c), (d).
 */
#include <time.h>

#include "stress.h"

_Atomic int64_t violations_c, violations_d, parks;

/* A parking thread: per cycle, allocate a few blocks of a large page and free all but the
 * first, park, wait for the scavenger to finish the park (c), check the freed blocks went (d),
 * come back. */
void *parker_main(void *arg) {
    int tid = (int)(intptr_t)arg;
    tr_tid = tid;
    mi_tld_t *t = mi_thread(tid);
    mi_heap_malloc(t, BLOCK, false, true);   /* the page stays in use */
    for (int cycle = 0; cycle < cfg.cycles && !atomic_load(&stop); cycle++) {
        mi_ptr_t b[3];
        for (int i = 0; i < 3; i++) b[i] = mi_heap_malloc(t, BLOCK, false, true);
        for (int i = 0; i < 3; i++) mi_free(b[i], tid);
        int64_t parked_at = mi_clock_now();
        mi_on_thread_idle_start(tid);
        atomic_fetch_add(&parks, 1);
        while (atomic_load(&t->park_swept) != PARK_SWEPT_DONE
               && mi_clock_now() - parked_at < cfg.max_ms && !atomic_load(&stop)) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        bool done = atomic_load(&t->park_swept) == PARK_SWEPT_DONE;
        if (!done && !atomic_load(&stop))
            violation(&violations_c, "(c) thread %d: its park was not done %lld ms after it "
                      "parked", tid, (long long)cfg.max_ms);
        mi_on_thread_idle_end(tid);
        for (int i = 0; done && i < 3; i++)
            if (block_resident(b[i]))
                violation(&violations_d, "(d) thread %d: block %lld of page %d is still resident "
                          "after its park was done", tid, (long long)b[i].block, b[i].page);
    }
    tr_thread_exit();
    return NULL;
}
