"""glibc's heap trimming (seed 001): when free() gives memory back, in every version.

An executable model of ptmalloc's arenas (the main arena on the break, thread arenas on
64 MiB heaps), of the rules that decide a trim in glibc 2.21, the 2015 RFC's madvise
throttle, 2.22 and 2.23+, and of the system calls those rules make, so that its prediction
can be set beside `strace` of the real library. Plain Python, standard library only, no I/O.

Modules: `constants` (sizes), `params` (mp_, mallopt and the environment), `versions` (the
policy table), `trim` (the trim rules, one function each), `heap` (chunks tiling a heap),
`arena` (malloc and free of one arena), `process` (threads, tcache, arenas, the system calls),
`resident` (which pages are resident: the ghost state the cost of a rule is read from).
"""
