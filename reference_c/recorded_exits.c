/* recorded_exits: the ways a program ends that `purgecheck record` must survive
 * (docs/record.md, "No call lost"). Each mode makes COUNT mallocs of MARK bytes, fewer than
 * a recorder buffer holds, so they are all still buffered when the program ends:
 *
 *   recorded_exits running COUNT   a second thread makes them, then blocks for good; main
 *                                  returns while it still runs (exit with a thread running)
 *   recorded_exits _exit COUNT     main makes them, then calls _exit (no destructors)
 *   recorded_exits plain COUNT     main makes them and returns
 *
 * The test counts the records of MARK bytes in the trace: COUNT, whatever the mode.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARK 777

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
    atomic_store(&done, 1);
    for (;;)
        pause();
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
    make();
    if (strcmp(mode, "_exit") == 0)
        _exit(0);
    return 0;
}
