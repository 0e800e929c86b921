/* own_malloc: a program that defines malloc itself (it forwards to glibc's __libc_malloc).
 * `purgecheck record` must refuse it: the recorder would never see its calls. */
#include <stdio.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);

void *malloc(size_t n)
{
    return __libc_malloc(n);
}

int main(void)
{
    void *volatile p = malloc(100);
    printf("%p\n", p);
    return 0;
}
