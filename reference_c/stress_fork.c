/* stress_fork.c: scenario `fork` of stress (stress.c): forks while a sweeper holds MOVING,
 * checked in the child (seed 000 (2), the forked child; issue 20's rare paths).
 * Checks: (m) the child holds a recorded beginning, (n) the forks were made.
 */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stress.h"

/* Seed 000 (2): "A fork that lands while another thread holds the mark: the child records a
 * new beginning (_mi_page_purge_holes_forked_child)". The sweepers advance with a delay
 * (linearize.c mi_advance_delay) after their CAS won, before the increment, or after the
 * increment, before the store of the new start, so MOVING is held for the delay every other
 * epoch; the main thread forks while a sweeper sleeps there, moving the delay to the other
 * point after each fork, and now and then whatever it finds. The child is a copy of the
 * process at the fork: it reads what it holds, applies the forked-child rule and reports
 * through a pipe. (m) a child of a fork that found MOVING holds a recorded beginning, no
 * longer MOVING; (n) `--steps` forks in each window within --max-ms. What else the child
 * holds (the epoch: the old one before the increment, the new one after it; the start outside
 * a move) validate checks on the trace.
 * In a traced run the fork is made under lin_lock, so its `fork` event sits in the lin order
 * exactly where the copy was taken, and validate replays the model's forked-child rule on the
 * model's state there (purgecheck/validate/advance.py on_fork). */
_Atomic int64_t violations_m, violations_n, forks_moving, forks_quiet;
_Atomic int64_t forks_in[3];   /* forks made while a sweeper slept at MI_DELAY_BEFORE_* */

typedef struct { int64_t found, start, epoch; } fork_report_t;

/* The child: nothing of the trace (its lock and buffer are the parent's), no hooks. */
static _Noreturn void fork_child(int fd) {
    tr_enabled = tr_linearized = false;
    mi_advance_hook = NULL;
    fork_report_t r;
    r.found = atomic_load(&mi_world->epoch_start);
    mi_page_purge_holes_forked_child();
    r.start = atomic_load(&mi_world->epoch_start);
    r.epoch = (int64_t)atomic_load(&mi_world->epoch);
    _exit(write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
}

/* A fork; `window` >= 0: only while a sweeper sleeps at that point of its advance (under
 * lin_lock in a traced run, so that it cannot leave the window before the fork). */
static void fork_and_check(int window) {
    int fds[2];
    lin_lock();   /* the copy and its event are one step of the lin order */
    if (window >= 0 && (atomic_load(&mi_advance_delaying) != window
                        || atomic_load(&mi_world->epoch_start) != MI_MOVING)) {
        lin_unlock();
        return;
    }
    if (pipe(fds) != 0) mi_corrupt("pipe failed");
    pid_t pid = fork();
    if (pid < 0) mi_corrupt("fork failed");
    if (pid == 0) { close(fds[0]); fork_child(fds[1]); }
    close(fds[1]);
    fork_report_t r;
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = read(fds[0], (char *)&r + got, sizeof r - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        mi_corrupt("fork: the child did not report");
    bool moving = r.found == MI_MOVING;
    tr_begin("fork");
    tr_int("thread", 0);
    tr_bool("moving", moving);
    tr_u64("epoch", (uint64_t)r.epoch);
    tr_int("start", r.start);
    tr_end();
    lin_unlock();
    atomic_fetch_add(moving ? &forks_moving : &forks_quiet, 1);
    if (moving && window >= 0) atomic_fetch_add(&forks_in[window], 1);
    if (moving && r.start == MI_MOVING)
        violation(&violations_m, "(m) a fork while another thread held MOVING (epoch %llu): the "
                  "child still holds MOVING, so no sweep of the child moves the epoch again",
                  (unsigned long long)r.epoch);
}

/* The main thread's part: fork while a sweeper sleeps in the window the delay holds open,
 * before its increment and (the delay moved there after each such fork) before its store of
 * the new start, and every tenth look whatever it finds, until --steps forks were made in
 * each window (--max-ms at the most). */
void run_forks(int64_t t0) {
    int window = MI_DELAY_BEFORE_INCREMENT;
    atomic_store(&mi_advance_delay_at, window);
    for (int looks = 0; !atomic_load(&stop); looks++) {
        int64_t before = atomic_load(&forks_in[MI_DELAY_BEFORE_INCREMENT]);
        int64_t after = atomic_load(&forks_in[MI_DELAY_BEFORE_STORE]);
        if (before >= cfg.steps && after >= cfg.steps && atomic_load(&forks_quiet) >= 1) break;
        if (mi_clock_now() - t0 >= cfg.max_ms) {
            violation(&violations_n, "(n) in %lld ms, %lld of %d forks found MOVING held before "
                      "a sweeper's increment and %lld after it", (long long)cfg.max_ms,
                      (long long)before, cfg.steps, (long long)after);
            break;
        }
        if (atomic_load(&mi_advance_delaying) == window) {
            fork_and_check(window);
            if (atomic_load(&forks_in[window]) > (window == MI_DELAY_BEFORE_STORE ? after : before)) {
                window = window == MI_DELAY_BEFORE_STORE ? MI_DELAY_BEFORE_INCREMENT
                                                         : MI_DELAY_BEFORE_STORE;
                atomic_store(&mi_advance_delay_at, window);
            }
        } else if (looks % 10 == 9) {
            fork_and_check(-1);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}
