/* recorded_exits: the ways a program ends that `purgecheck record` must survive
 * (docs/record.md, "No call lost"). Each mode makes COUNT mallocs of MARK bytes, fewer than
 * a recorder buffer holds, so they are all still buffered when the program ends:
 *
 *   recorded_exits running COUNT   a second thread makes them, then blocks for good; main
 *                                  returns while it still runs (exit with a thread running)
 *   recorded_exits _exit COUNT     main makes them, then calls _exit (no destructors)
 *   recorded_exits plain COUNT     main makes them and returns
 *   recorded_exits killed COUNT    main and three threads make them each; when all have,
 *                                  main sends the process SIGKILL (no call in flight)
 *   recorded_exits many THREADS    THREADS threads (more than the recorder once had
 *                                  buffers for), MANY_BATCH at a time, make 3 each
 *
 * The test counts the records of MARK bytes in the trace: COUNT, whatever the mode (of each
 * thread, in killed; 3 a thread in many).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARK 777

#define THREADS_KILLED 3
#define MANY_BATCH 64

static int count = 100;
static atomic_int done;
static char *volatile kept[256]; /* the blocks escape: the compiler keeps every call */

static void make(void)
{
    for (int i = 0; i < count; i++) {
        char *p = malloc(MARK);
        p[0] = (char)i;
        kept[i % 256] = p;
        if (i % 2)
            free(kept[i % 256]); /* half kept, half freed */
    }
}

static void *worker(void *arg)
{
    (void)arg;
    make();
    atomic_fetch_add(&done, 1); /* then waits for the exit or the kill */
    for (;;)
        pause();
    return NULL;
}

static void *three(void *arg) /* many */
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        char *volatile p = malloc(MARK);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    if (argc > 2)
        count = atoi(argv[2]);
    if (strcmp(mode, "running") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
        while (!atomic_load(&done))
            usleep(1000);
        return 0;
    }
    if (strcmp(mode, "killed") == 0) {
        pthread_t t;
        for (int i = 0; i < THREADS_KILLED; i++)
            pthread_create(&t, NULL, worker, NULL);
        make();
        while (atomic_load(&done) < THREADS_KILLED)
            usleep(1000);
        kill(getpid(), SIGKILL);
    }
    if (strcmp(mode, "many") == 0) {
        pthread_t t[MANY_BATCH];
        for (int made = 0; made < count; made += MANY_BATCH) {
            int n = count - made < MANY_BATCH ? count - made : MANY_BATCH;
            for (int i = 0; i < n; i++)
                pthread_create(&t[i], NULL, three, NULL);
            for (int i = 0; i < n; i++)
                pthread_join(t[i], NULL);
        }
        return 0;
    }
    make();
    if (strcmp(mode, "_exit") == 0)
        _exit(0);
    return 0;
}
