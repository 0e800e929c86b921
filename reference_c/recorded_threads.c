/* recorded_threads: a small threaded program for `purgecheck record` (docs/record.md).
 *
 * Four workers allocate blocks of mixed sizes (small, a few KiB, a few hundred KiB), hand
 * half of them to the next worker through a mutex-protected mailbox (so blocks are freed by
 * another thread than the one that made them), grow some with realloc, and free the rest.
 * Deterministic sizes (a fixed linear congruential sequence per worker); the interleaving is
 * the scheduler's, which is what the recorder must capture.
 *
 * Usage: recorded_threads [ROUNDS]   (default 200)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 4
#define MAILBOX 64

struct mailbox {
    pthread_mutex_t lock;
    void *slots[MAILBOX];
    int n;
};
static struct mailbox boxes[WORKERS];
static int rounds = 200;

static size_t next_size(uint32_t *state)
{
    *state = *state * 1103515245u + 12345u;
    uint32_t r = (*state >> 8) & 0xFFFF;
    if (r % 16 == 0)
        return 64 * 1024 + r * 4; /* a large block: 64 KiB .. 320 KiB */
    if (r % 4 == 0)
        return 1024 + r % 8192;
    return 16 + r % 512;
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint32_t state = 7u + (uint32_t)me;
    void *keep[8] = {0};
    for (int i = 0; i < rounds; i++) {
        void *p = malloc(next_size(&state));
        memset(p, me, 16);
        struct mailbox *to = &boxes[(me + 1) % WORKERS];
        pthread_mutex_lock(&to->lock);
        if (to->n < MAILBOX && i % 2 == 0) {
            to->slots[to->n++] = p;
            p = NULL;
        }
        pthread_mutex_unlock(&to->lock);
        if (p) {
            int k = i % 8;
            if (keep[k] && i % 3 == 0)
                keep[k] = realloc(keep[k], next_size(&state) * 2);
            free(keep[k]);
            keep[k] = p;
        }
        struct mailbox *mine = &boxes[me];
        pthread_mutex_lock(&mine->lock);
        while (mine->n)
            free(mine->slots[--mine->n]); /* made by the previous worker */
        pthread_mutex_unlock(&mine->lock);
    }
    for (int k = 0; k < 8; k++)
        free(keep[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atoi(argv[1]);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_mutex_init(&boxes[i].lock, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < WORKERS; i++)
        while (boxes[i].n)
            free(boxes[i].slots[--boxes[i].n]);
    void *volatile c = calloc(100, 1000); /* volatile: gcc drops calloc+free otherwise */
    void *volatile a = aligned_alloc(4096, 10000);
    free(c);
    free(a);
    printf("ok %d rounds\n", rounds);
    return 0;
}
