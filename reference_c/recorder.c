/* recorder: an LD_PRELOAD library that records every allocation call of a process
 * (docs/record.md), for `purgecheck record`.
 *
 * Written here from the documented interfaces: dlsym(3) with RTLD_NEXT finds the C
 * library's malloc family behind this library; pthread_atfork(3) resets the child;
 * clock_gettime(2) with CLOCK_MONOTONIC stamps each call.
 *
 * The recorder never allocates with malloc: records go to a per-thread static buffer and
 * reach the file with write(2) in whole 32-byte records. A write's offset and length are
 * multiples of 32, so a page boundary of the file is a record boundary: a program killed
 * during a write (the kernel stops between pages) leaves whole records only. A global
 * sequence number orders the calls of all threads; the reader sorts by it and cuts the
 * trace at the first number missing (the buffers of a killed program's other threads).
 *
 * Record (4 little-endian 64-bit words):
 *   w0 = seq (bits 0..39) | thread (40..55) | kind (56..63)
 *   w1 = ns since the image started (0..47) | flags (48..55) | check (56..63)
 *   w2 = a (the first argument: size, pointer, parameter)
 *   w3 = r (the result: the pointer returned, or a second argument)
 * check = 0xA5 xor every other byte of the record.
 *
 * Files: PURGECHECK_RECORD names the trace; the process whose pid is PURGECHECK_RECORD_PID
 * writes it, every other process (a fork, a spawned program) writes NAME.PID. An exec keeps
 * the file: the new image appends its own START record and numbers from 0 again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum kind {
    K_START = 1,      /* a = pid, r = magic; flags: REFUSED reason */
    K_MALLOC = 2,     /* a = size, r = ptr */
    K_FREE = 3,       /* a = ptr */
    K_CALLOC = 4,     /* a = n * size (UINT64_MAX on overflow), r = ptr */
    K_REALLOC_OLD = 5,/* a = old ptr; the next record of the thread is its K_REALLOC */
    K_REALLOC = 6,    /* a = size, r = new ptr */
    K_MEMALIGN = 7,   /* a = size, r = ptr; flags = log2(alignment asked) | NOT_POW2 */
    K_POSIX_MEMALIGN = 8,
    K_ALIGNED_ALLOC = 9,
    K_VALLOC = 10,    /* a = size, r = ptr */
    K_PVALLOC = 11,
    K_MALLOPT = 12,   /* a = param (as int64), r = value; flags = mallopt's return */
    K_MALLOC_TRIM = 13, /* a = pad, flags = return */
    K_THREAD_NEW = 14,  /* by the creating thread: a = the new thread's number */
    K_THREAD_EXIT = 15, /* by the thread, when its start routine ended */
    K_FORK = 16,      /* a = child pid (its trace is NAME.PID) */
    K_EXEC = 17,      /* the image is about to exec: what follows is a new image's START */
    K_END = 18,       /* the process exits (the library's destructor) */
};
#define F_IN_CREATE 0x80 /* made by pthread_create itself (the new thread's dtv) */
#define F_NOT_POW2 0x40  /* the alignment asked was not a power of two */
#define F_REFUSED_DEFINED 1  /* START: the program defines malloc itself */
#define F_REFUSED_NEXT 2     /* START: the next malloc is not the C library's */
#define MAGIC 0x3130434552435050ULL /* "PPCREC01" */
#define BUF_RECORDS 256 /* 8 KiB a thread */

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef int (*mallopt_fn)(int, int);
typedef int (*trim_fn)(size_t);
typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*join_fn)(pthread_t, void **);
typedef pid_t (*fork_fn)(void);
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);

static malloc_fn next_malloc;
static free_fn next_free;
static calloc_fn next_calloc;
static realloc_fn next_realloc;
static memalign_fn next_memalign, next_aligned_alloc;
static posix_memalign_fn next_posix_memalign;
static malloc_fn next_valloc, next_pvalloc;
static mallopt_fn next_mallopt;
static trim_fn next_trim;
static create_fn next_create;
static join_fn next_join;
static fork_fn next_fork;
static execve_fn next_execve;
static execvpe_fn next_execvpe;

static int fd = -1;
static int active; /* recording (set once the symbols are found and not refused) */
static int resolving;
static atomic_ullong seq;
static atomic_uint next_thread = 1;
static uint64_t t0;

/* The bootstrap: dlsym may allocate (dlerror's buffer) before malloc is known. Those
 * requests are served from this static arena and never freed to the C library. */
static char boot[64 * 1024] __attribute__((aligned(64)));
static size_t boot_used;

/* Each thread's records wait in a buffer of its own, taken from a static pool on the
 * thread's first record and given back when it ends. The pool, unlike thread-local storage,
 * outlives the thread and is reachable from any thread: at the process's exit (the
 * destructor, or _exit / _Exit) and at an exec, every buffer still holding records is
 * written, so the calls of threads that are still running are not lost (docs/record.md).
 * A buffer's lock is held only while its thread appends a record or while someone writes
 * the buffer out, so each buffer reaches the file whole and in order. */
#define POOL 1024
struct tbuf {
    atomic_flag lock;
    atomic_int used;
    int n;
    uint64_t rec[BUF_RECORDS * 4];
};
static struct tbuf pool[POOL];
static __thread struct tbuf *buf_of; /* this thread's buffer; NULL: none (yet) */
static int write_through; /* after the exit's flush of every buffer: records go at once */
static __thread int my_thread = -1;
static __thread int in_create;
static __thread int unbuffered; /* after the thread's exit record or the process's END */

static int in_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n)
{
    size_t at = (boot_used + 15) & ~(size_t)15;
    if (at + n > sizeof boot)
        return NULL;
    boot_used = at + n;
    return boot + at;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void write_all(const void *p, size_t n)
{
    const char *c = p;
    while (n && fd >= 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void lock_buf(struct tbuf *b)
{
    while (atomic_flag_test_and_set_explicit(&b->lock, memory_order_acquire))
        ;
}

static void unlock_buf(struct tbuf *b)
{
    atomic_flag_clear_explicit(&b->lock, memory_order_release);
}

static void write_buf(struct tbuf *b) /* with b's lock held */
{
    if (b->n) {
        write_all(b->rec, (size_t)b->n * 32);
        b->n = 0;
    }
}

/* This thread's buffer: a free one of the pool, taken on first use. NULL when the pool is
 * exhausted: the thread's records are then written one by one. */
static struct tbuf *my_buf(void)
{
    if (!buf_of) {
        for (int i = 0; i < POOL && !buf_of; i++) {
            int expected = 0;
            if (atomic_compare_exchange_strong(&pool[i].used, &expected, 1))
                buf_of = &pool[i];
        }
    }
    return buf_of;
}

static void flush(void)
{
    struct tbuf *b = buf_of;
    if (b) {
        lock_buf(b);
        write_buf(b);
        unlock_buf(b);
    }
}

/* Every buffer of the pool written out: at exit, _exit and exec, while other threads may
 * still be running (each buffer under its lock). RECORDER_MUTANT_OWN_BUFFER_ONLY builds the
 * broken variant the tests run: only the calling thread's buffer is written. */
static void flush_all(void)
{
#ifdef RECORDER_MUTANT_OWN_BUFFER_ONLY
    flush();
#else
    for (int i = 0; i < POOL; i++) {
        if (!atomic_load(&pool[i].used))
            continue;
        lock_buf(&pool[i]);
        write_buf(&pool[i]);
        unlock_buf(&pool[i]);
    }
#endif
}

/* The thread ends: its buffer, written, goes back to the pool. */
static void release_buf(void)
{
    struct tbuf *b = buf_of;
    if (b) {
        flush();
        buf_of = NULL;
        atomic_store(&b->used, 0);
    }
}

static int thread_number(void);

/* The check byte (byte 15, the top of w[1]): 0xA5 xor the record's other 31 bytes. */
static void seal(uint64_t *w)
{
    w[1] &= 0x00FFFFFFFFFFFFFFULL;
    unsigned char check = 0xA5;
    const unsigned char *b = (const unsigned char *)w;
    for (int i = 0; i < 32; i++)
        if (i != 15)
            check ^= b[i];
    w[1] |= (uint64_t)check << 56;
}

static void emit(int kind, unsigned flags, uint64_t a, uint64_t r)
{
    int saved = errno;
    uint64_t s = atomic_fetch_add(&seq, 1);
    uint64_t w[4];
    w[0] = (s & 0xFFFFFFFFFFULL) | ((uint64_t)(thread_number() & 0xFFFF) << 40) |
           ((uint64_t)kind << 56);
    w[1] = ((now_ns() - t0) & 0xFFFFFFFFFFFFULL) | ((uint64_t)(flags & 0xFF) << 48);
    w[2] = a;
    w[3] = r;
    seal(w);
    /* a thread past its exit record writes at once, without taking a buffer again */
    struct tbuf *b = unbuffered && !buf_of ? NULL : my_buf();
    if (!b) {
        write_all(w, sizeof w);
    } else {
        lock_buf(b);
        memcpy(&b->rec[b->n * 4], w, sizeof w);
        if (++b->n == BUF_RECORDS || unbuffered || write_through)
            write_buf(b);
        unlock_buf(b);
    }
    errno = saved;
}

static int thread_number(void)
{
    if (my_thread < 0) /* a thread not made by pthread_create (clone): numbered when seen */
        my_thread = (int)atomic_fetch_add(&next_thread, 1);
    return my_thread;
}

static void *must(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        static const char msg[] = "purgecheck-record: a symbol of the C library is missing\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    return f;
}

static void say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ssize_t w = write(2, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
    (void)w;
}

static void open_trace(int append_image)
{
    const char *path = getenv("PURGECHECK_RECORD");
    const char *root = getenv("PURGECHECK_RECORD_PID");
    if (!path)
        return;
    char name[4096];
    pid_t pid = getpid();
    if (root && atol(root) == (long)pid)
        snprintf(name, sizeof name, "%s", path);
    else
        snprintf(name, sizeof name, "%s.%ld", path, (long)pid);
    (void)append_image;
    fd = open(name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        say("purgecheck-record: cannot open %s: %s\n", name, strerror(errno));
}

/* This library's own malloc (inside the library, `malloc` names the first definition the
 * dynamic linker finds, which may be the program's). */
void *recorder_malloc(size_t n) __attribute__((alias("malloc"), visibility("hidden"), copy(malloc)));

static __thread int probe_hits;

/* Patch the flags of a record still in this thread's buffer (the START record, once the
 * probe below has decided), keeping its check byte right. */
static void set_flags(int index, unsigned flags)
{
    uint64_t *w = &my_buf()->rec[index * 4];
    w[1] = (w[1] & 0x0000FFFFFFFFFFFFULL) | ((uint64_t)(flags & 0xFF) << 48);
    seal(w);
}

static pid_t image_pid;

static void start_image(void)
{
    image_pid = getpid();
    t0 = now_ns();
    atomic_store(&seq, 0);
    my_thread = 0;
    if (my_buf())
        buf_of->n = 0;
    unbuffered = 0;
    write_through = 0;
    active = 1;
    emit(K_START, 0, (uint64_t)getpid(), MAGIC);
    unsigned refused = 0;
    Dl_info info;
    void *first = dlsym(RTLD_DEFAULT, "malloc");
    if (!dladdr((void *)next_malloc, &info) || !info.dli_fname ||
        !strstr(info.dli_fname, "libc.so")) {
        refused = F_REFUSED_NEXT; /* another malloc library comes between us and libc */
    } else if (first != (void *)recorder_malloc) {
        /* The first definition is not ours: either the program defines malloc (its calls
         * would never reach us), or a non-PIE program's canonical PLT entry, which jumps to
         * us. One call through it tells; it is recorded like any other. */
        probe_hits = 0;
        void *p = ((malloc_fn)first)(1);
        if (probe_hits == 0) {
            refused = F_REFUSED_DEFINED;
            ((free_fn)dlsym(RTLD_DEFAULT, "free"))(p);
        } else {
            free(p);
        }
    }
    if (refused) {
        buf_of->n = 1; /* the START record alone, marked */
        set_flags(0, refused);
        flush();
        say("purgecheck-record: %s replaces malloc (%s): its allocations cannot be recorded "
            "faithfully; refusing\n", program_invocation_short_name,
            refused == F_REFUSED_DEFINED ? "the program defines malloc" :
                                           "the next malloc is not the C library's");
        active = 0;
        close(fd);
        fd = -1;
        return;
    }
    flush();
}

static void child_after_fork(void)
{
    /* Only the forking thread runs in the child: the other buffers are the parent's
     * threads', written by the parent, and go back to the pool here. */
    for (int i = 0; i < POOL; i++) {
        if (&pool[i] != buf_of) {
            atomic_flag_clear(&pool[i].lock);
            pool[i].n = 0;
            atomic_store(&pool[i].used, 0);
        }
    }
    if (fd >= 0)
        close(fd);
    fd = -1;
    active = 0;
    atomic_store(&next_thread, 1);
    open_trace(0);
    if (fd >= 0)
        start_image();
}

static void resolve(void)
{
    if (next_malloc || resolving)
        return;
    resolving = 1;
    next_malloc = (malloc_fn)must("malloc");
    next_free = (free_fn)must("free");
    next_calloc = (calloc_fn)must("calloc");
    next_realloc = (realloc_fn)must("realloc");
    next_memalign = (memalign_fn)must("memalign");
    next_aligned_alloc = (memalign_fn)must("aligned_alloc");
    next_posix_memalign = (posix_memalign_fn)must("posix_memalign");
    next_valloc = (malloc_fn)must("valloc");
    next_pvalloc = (malloc_fn)must("pvalloc");
    next_mallopt = (mallopt_fn)must("mallopt");
    next_trim = (trim_fn)must("malloc_trim");
    next_create = (create_fn)must("pthread_create");
    next_join = (join_fn)must("pthread_join");
    next_fork = (fork_fn)must("fork");
    next_execve = (execve_fn)must("execve");
    next_execvpe = (execvpe_fn)must("execvpe");
    resolving = 0;
}

__attribute__((constructor(101))) static void recorder_init(void)
{
    resolve();
    open_trace(1);
    if (fd < 0)
        return;
    pthread_atfork(NULL, NULL, child_after_fork);
    start_image();
}

__attribute__((destructor(101))) static void recorder_fini(void)
{
    if (!active)
        return;
    flush_all(); /* the threads still running: what they recorded so far */
    write_through = 1;
    unbuffered = 1;
    emit(K_END, 0, 0, 0);
}

/* _exit and _Exit end the process without destructors: the buffers are written and the END
 * record made here first. (exit() calls the C library's own _exit after the destructor.) */
typedef void (*exit_fn)(int);

__attribute__((noreturn)) static void exit_now(const char *name, int status)
{
#ifndef RECORDER_MUTANT_OWN_BUFFER_ONLY
    recorder_fini();
    active = 0;
#endif
    ((exit_fn)dlsym(RTLD_NEXT, name))(status);
    for (;;) /* not reached: _exit does not return */
        ;
}

void _exit(int status)
{
    exit_now("_exit", status);
}

void _Exit(int status)
{
    exit_now("_Exit", status);
}

#define REC(stmt) do { if (active) { stmt; } } while (0)

void *malloc(size_t n)
{
    if (!next_malloc) {
        if (resolving)
            return boot_alloc(n);
        resolve();
    }
    void *p = next_malloc(n);
    probe_hits++;
    REC(emit(K_MALLOC, in_create ? F_IN_CREATE : 0, n, (uint64_t)p));
    return p;
}

void free(void *p)
{
    if (!p || in_boot(p))
        return;
    if (!next_free)
        resolve();
    REC(emit(K_FREE, in_create ? F_IN_CREATE : 0, (uint64_t)p, 0));
    next_free(p);
}

void *calloc(size_t n, size_t size)
{
    if (!next_calloc) {
        if (resolving) {
            void *p = boot_alloc(n * size);
            if (p)
                memset(p, 0, n * size);
            return p;
        }
        resolve();
    }
    void *p = next_calloc(n, size);
    size_t total;
    uint64_t bytes = __builtin_mul_overflow(n, size, &total) ? UINT64_MAX : total;
    REC(emit(K_CALLOC, in_create ? F_IN_CREATE : 0, bytes, (uint64_t)p));
    return p;
}

static void *realloc_recorded(void *old, size_t n)
{
    if (in_boot(old)) { /* a bootstrap block moves to the C library: a plain malloc */
        void *p = malloc(n);
        if (p)
            memcpy(p, old, n < sizeof boot ? n : sizeof boot);
        return p;
    }
    if (!next_realloc)
        resolve();
    if (!active)
        return next_realloc(old, n);
    unsigned flags = in_create ? F_IN_CREATE : 0;
    /* The old pointer and the call are one event: both records are made before another
     * thread can see the old block freed, and they stay next to each other in this thread's
     * buffer (the reader joins them). */
    int saved = unbuffered;
    unbuffered = 0;
    if (buf_of && buf_of->n >= BUF_RECORDS - 1)
        flush();
    emit(K_REALLOC_OLD, flags, (uint64_t)old, 0);
    unbuffered = saved;
    void *p = next_realloc(old, n);
    emit(K_REALLOC, flags, n, (uint64_t)p);
    return p;
}

void *realloc(void *old, size_t n) { return realloc_recorded(old, n); }

void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_recorded(old, total);
}

static unsigned align_flags(size_t alignment)
{
    unsigned lg = 0;
    while (lg < 63 && ((size_t)1 << lg) < alignment)
        lg++;
    return lg | ((alignment & (alignment - 1)) ? F_NOT_POW2 : 0);
}

void *memalign(size_t alignment, size_t n)
{
    resolve();
    void *p = next_memalign(alignment, n);
    REC(emit(K_MEMALIGN, align_flags(alignment) | (in_create ? F_IN_CREATE : 0), n, (uint64_t)p));
    return p;
}

void *aligned_alloc(size_t alignment, size_t n)
{
    resolve();
    void *p = next_aligned_alloc(alignment, n);
    REC(emit(K_ALIGNED_ALLOC, align_flags(alignment), n, (uint64_t)p));
    return p;
}

int posix_memalign(void **out, size_t alignment, size_t n)
{
    resolve();
    int rc = next_posix_memalign(out, alignment, n);
    REC(emit(K_POSIX_MEMALIGN, align_flags(alignment), n, rc ? 0 : (uint64_t)*out));
    return rc;
}

void *valloc(size_t n)
{
    resolve();
    void *p = next_valloc(n);
    REC(emit(K_VALLOC, 0, n, (uint64_t)p));
    return p;
}

void *pvalloc(size_t n)
{
    resolve();
    void *p = next_pvalloc(n);
    REC(emit(K_PVALLOC, 0, n, (uint64_t)p));
    return p;
}

int mallopt(int param, int value)
{
    resolve();
    int rc = next_mallopt(param, value);
    REC(emit(K_MALLOPT, (unsigned)rc & 0xFF, (uint64_t)(int64_t)param, (uint64_t)(int64_t)value));
    return rc;
}

int malloc_trim(size_t pad)
{
    resolve();
    int rc = next_trim(pad);
    REC(emit(K_MALLOC_TRIM, (unsigned)rc & 0xFF, pad, 0));
    return rc;
}

/* Threads: numbered in creation order by the creating thread, which records the number
 * before the thread runs; the start routine is wrapped so that its end is recorded. The
 * hand-over slots are static: the recorder must not allocate. */
#define SLOTS 4096
struct slot {
    atomic_int used;
    void *(*fn)(void *);
    void *arg;
    int number;
};
static struct slot slots[SLOTS];

static void thread_ended(void *unused)
{
    (void)unused;
    if (active) {
        emit(K_THREAD_EXIT, 0, 0, 0);
        release_buf();
        unbuffered = 1; /* what the thread frees after this (TSD destructors) goes at once */
    }
}

static void *thread_start(void *arg)
{
    struct slot *s = arg;
    void *(*fn)(void *) = s->fn;
    void *fn_arg = s->arg;
    my_thread = s->number;
    atomic_store(&s->used, 0);
    void *ret;
    pthread_cleanup_push(thread_ended, NULL);
    ret = fn(fn_arg);
    pthread_cleanup_pop(1);
    return ret;
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    resolve();
    if (!active)
        return next_create(t, attr, fn, arg);
    struct slot *s = NULL;
    for (int i = 0; i < SLOTS && !s; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&slots[i].used, &expected, 1))
            s = &slots[i];
    }
    if (!s) {
        say("purgecheck-record: more than %d threads starting at once\n", SLOTS);
        abort();
    }
    s->fn = fn;
    s->arg = arg;
    s->number = (int)atomic_fetch_add(&next_thread, 1);
    emit(K_THREAD_NEW, 0, (uint64_t)s->number, 0);
    flush(); /* a thread that creates others often waits next: its records must not hold
              * back the cut of a killed program's trace (docs/record.md) */
    in_create++;
    int rc = next_create(t, attr, thread_start, s);
    in_create--;
    if (rc)
        atomic_store(&s->used, 0);
    return rc;
}

/* Waiting for a thread: what this thread did so far reaches the file first, for the same
 * reason as in pthread_create. */
int pthread_join(pthread_t t, void **ret)
{
    resolve();
    flush();
    return next_join(t, ret);
}

pid_t fork(void)
{
    resolve();
    flush(); /* the parent's records so far are on disk before the child can exist */
    pid_t pid = next_fork();
    if (pid > 0)
        REC(emit(K_FORK, 0, (uint64_t)pid, 0));
    return pid;
}

static void before_exec(void)
{
    /* A vfork child (posix_spawn, pex) shares this thread's buffer and counter until its
     * exec: the records so far are written, but its exec is not this image's. */
    if (active && getpid() == image_pid) {
        emit(K_EXEC, 0, 0, 0);
        flush_all(); /* an exec ends every other thread: their records first */
    }
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    resolve();
    before_exec();
    return next_execve(path, argv, envp);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
    resolve();
    before_exec();
    return next_execvpe(file, argv, envp);
}

int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}
