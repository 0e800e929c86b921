/* malloc_loop: N pairs of malloc(64)/free, the recorder benchmark's malloc-heavy program
 * (purgecheck/bench/record.py: the recorder's cost per call is the difference of this
 * program's CPU time with and without it, divided by the calls). Usage: malloc_loop N */
#include <stdio.h>
#include <stdlib.h>

static void escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    for (long i = 0; i < n; i++) {
        void *p = malloc(64 + (size_t)(i & 7) * 16);
        escape(p);
        free(p);
    }
    printf("ok %ld\n", n);
    return 0;
}
