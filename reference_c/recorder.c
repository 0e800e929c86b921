/* recorder: an LD_PRELOAD library that records every allocation call of a process
 * (docs/record.md), for `purgecheck record`.
 *
 * Written here from the documented interfaces: dlsym(3) with RTLD_NEXT finds the C
 * library's malloc family behind this library; pthread_atfork(3) resets the child;
 * clock_gettime(2) with CLOCK_MONOTONIC stamps each call.
 *
 * The recorder never allocates with malloc, and no record waits in memory of its own: the
 * trace file is mapped (mmap(2), MAP_SHARED) and each thread stores its records straight into
 * a window of that mapping, so a record is in the page cache the moment it is stored and a
 * SIGKILL loses none (the kernel writes the pages back whatever becomes of the process).
 * Windows are handed out under a lock at a cursor (the unused rest of a thread's last window
 * goes back when the thread ends, if no window was handed out after it); the file is
 * extended ahead of the cursor (zeros written) and cut back to it when the image ends (exit,
 * _exit, exec).
 * A record's first word is stored last, with release order, and is never zero (its kind is
 * at least 1): a slot whose first word is zero was never written (the rest of a window, the
 * room extended ahead, a record in flight at a kill), and the reader skips it. A global
 * sequence number orders the calls of all threads; the reader sorts by it and cuts the
 * trace at the first number missing (after a kill: a call whose record was in flight).
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
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
#define RECORD_BYTES 32
#define WINDOW_RECORDS 64             /* a thread's window of the file: 2 KiB */
#define SEGMENT_BYTES (4L << 20)      /* the file is mapped 4 MiB at a time */
#define EXTEND_BYTES (64L << 10)      /* and extended 64 KiB at a time */

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef int (*mallopt_fn)(int, int);
typedef int (*trim_fn)(size_t);
typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
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

/* The mapped file (module comment). Offsets are the file's; [cursor, seg_end) is mapped at
 * seg_base + (offset - seg_off), and the file is allocated up to file_end (at most seg_end:
 * a window is handed out only where the file already reaches). All of it under file_lock;
 * a thread's own window needs no lock. */
static atomic_flag file_lock;
static char *seg_base;
static off_t seg_off, seg_end, file_end, cursor;
static off_t image_start; /* the offset of this image's START record */
static dev_t trace_dev;   /* the file fd was opened on */
static ino_t trace_ino;
static __thread uint64_t *win_next, *win_end; /* this thread's window: the next free slot */
static __thread off_t win_end_off;            /* the window's end as a file offset */
static __thread int my_thread = -1;
static __thread int in_create;
static __thread int unbuffered; /* after the thread's exit record or the process's END:
                                 * windows of one record, so nothing is left unused */
static __thread int forking;    /* inside fork(): see emit */

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

static pid_t image_pid; /* the process whose image is recorded (not a vfork child) */

static void lock_file(void)
{
    while (atomic_flag_test_and_set_explicit(&file_lock, memory_order_acquire))
        sched_yield(); /* the holder may be in a system call (extending, mapping) */
}

static void unlock_file(void)
{
    atomic_flag_clear_explicit(&file_lock, memory_order_release);
}

static void stop_recording(const char *what) /* with file_lock held */
{
    if (active)
        say("purgecheck-record: %s: %s; recording stops here\n", what, strerror(errno));
    active = 0;
}

/* The window [lo, hi) of the file as this thread's (with file_lock held). */
static void set_window(off_t lo, off_t hi)
{
    win_next = (uint64_t *)(seg_base + (lo - seg_off));
    win_end = (uint64_t *)(seg_base + (hi - seg_off));
    win_end_off = hi;
}

/* Whether fd still names the trace: a program that closes every descriptor (a daemon) may
 * have another file of its own there, which must be neither extended nor cut. */
static int fd_is_trace(void)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino;
}

/* The file made to reach at least `hi` (with file_lock held), EXTEND_BYTES at a time, by
 * writing zeros: the pages are then in the page cache and reserved on the disk, so a full
 * disk fails here rather than as a SIGBUS at a store, and the stores fault far less (on
 * ext4, 2 M records: 1,100 faults and 0.04 s of system time, where pages allocated by
 * posix_fallocate took 14,800 faults, each page read in, and 0.19 s). */
static int extend_file(off_t hi)
{
    static const char zeros[EXTEND_BYTES];
    if (!fd_is_trace()) {
        errno = EBADF;
        stop_recording("the trace's descriptor was closed");
        return 0;
    }
    off_t to = (hi + EXTEND_BYTES - 1) / EXTEND_BYTES * EXTEND_BYTES;
    if (to > seg_end)
        to = seg_end;
    while (file_end < to) {
        ssize_t w = pwrite(fd, zeros, (size_t)(to - file_end), file_end);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            stop_recording("cannot extend the trace");
            return 0;
        }
        file_end += w;
    }
    return 1;
}

/* A new window of up to `records` slots for this thread, at the cursor (with file_lock
 * held): the file is mapped and extended there first. 0 if the file cannot grow. */
static int take_window(int records)
{
    if (cursor == seg_end) { /* the mapping is used up: map the next 4 MiB */
        off_t at = cursor & ~(off_t)(getpagesize() - 1);
        void *m = mmap(NULL, SEGMENT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, at);
        if (m == MAP_FAILED) {
            stop_recording("cannot map the trace");
            return 0;
        }
        /* The last segment's pages leave this process's resident set (its RSS would grow
         * with the trace otherwise): on a shared file mapping MADV_DONTNEED drops the page
         * table entries only, the records stay in the page cache, and a thread whose window
         * is still there faults its page back in. */
        if (seg_base)
            madvise(seg_base, SEGMENT_BYTES, MADV_DONTNEED);
        seg_base = m;
        seg_off = at;
        seg_end = at + SEGMENT_BYTES;
    }
    off_t hi = cursor + (off_t)records * RECORD_BYTES;
    if (hi > seg_end)
        hi = seg_end;
    if (hi > file_end && !extend_file(hi))
        return 0;
    set_window(cursor, hi);
    cursor = hi;
    return 1;
}

/* The slots of this thread's window not used yet go back when no window was handed out
 * after it (with file_lock held); the thread has no window afterwards. */
static void give_back_window(void)
{
    if (win_next && win_end_off == cursor)
        cursor -= (off_t)((char *)win_end - (char *)win_next);
    win_next = win_end = NULL;
}

/* The image ends here (exit, _exit, exec, a refusal): the file is cut back to the cursor,
 * past the last window handed out. Every window stays below the cut, so a thread still
 * running keeps storing into its own; one that needs a new window extends the file again. */
static void trim_file(void)
{
    lock_file();
    give_back_window();
#ifndef RECORDER_MUTANT_NO_TRIM /* the broken variant: the room extended ahead stays */
    if (file_end > cursor && fd_is_trace() && ftruncate(fd, cursor) == 0)
        file_end = cursor;
#endif
    unlock_file();
}

/* A slot of this thread's window for its next record (a new window when this one is used
 * up); NULL when the file cannot grow. The slot is the thread's before it is written: a
 * signal handler's record gets the next one. */
static uint64_t *window_slot(void)
{
    if (win_next == win_end) {
        lock_file();
        int ok = active && take_window(unbuffered ? 1 : WINDOW_RECORDS);
        unlock_file();
        if (!ok)
            return NULL;
    }
    uint64_t *slot = win_next;
    win_next += 4;
    return slot;
}

/* A record into its slot: words 1..3, then word 0 with release order, so a slot whose word 0
 * is set holds the whole record (module comment). */
static void store(uint64_t *slot, uint64_t w0, uint64_t w1, uint64_t a, uint64_t r)
{
    slot[1] = w1;
    slot[2] = a;
    slot[3] = r;
    __atomic_store_n(&slot[0], w0, __ATOMIC_RELEASE);
}

#ifdef RECORDER_MUTANT_OWN_BUFFER_ONLY
/* The broken variant the tests run (the recorder before issue 29): records wait in a buffer
 * of their thread and reach the file when it is full, when the thread ends, and at exit for
 * the exiting thread only; no _exit wrapper. An exit with threads running, an _exit and a
 * SIGKILL lose what waits. */
#define STAGED_RECORDS 256
static __thread uint64_t staged[STAGED_RECORDS * 4];
static __thread int n_staged;

static void unstage(void)
{
    for (int i = 0; i < n_staged; i++) {
        uint64_t *w = &staged[i * 4], *slot = window_slot();
        if (slot)
            store(slot, w[0], w[1], w[2], w[3]);
    }
    n_staged = 0;
}

static uint64_t *record_slot(void) { return &staged[n_staged++ * 4]; }

static void stored(void)
{
    if (n_staged == STAGED_RECORDS || unbuffered)
        unstage();
}
#else
static void unstage(void) {}
static uint64_t *record_slot(void) { return window_slot(); }
static void stored(void) {}
#endif

static int thread_number(void);

/* The check byte (byte 15, the top of w1): 0xA5 xor the record's other 31 bytes, which is the
 * xor of the bytes of the xor of its words (w1's byte 15 still zero). */
static uint64_t check_byte(uint64_t w0, uint64_t w1, uint64_t a, uint64_t r)
{
    uint64_t x = w0 ^ w1 ^ a ^ r;
    x ^= x >> 32;
    x ^= x >> 16;
    x ^= x >> 8;
    return (0xA5 ^ x) & 0xFF;
}

static void emit(int kind, unsigned flags, uint64_t a, uint64_t r)
{
    /* Inside fork() in the child, before child_after_fork has given it a file of its own
     * (another library's fork handler that allocates): the window is still the parent's,
     * so the record is dropped, as the child's image starts afterwards. */
    if (forking && getpid() != image_pid)
        return;
    int saved = errno;
    /* Everything but the call number first: between taking the number and storing the
     * record (a call in flight, which a kill there leaves missing and the reader cuts at)
     * there are a few instructions only. */
    uint64_t w0 = ((uint64_t)(thread_number() & 0xFFFF) << 40) | ((uint64_t)kind << 56);
    uint64_t w1 = ((now_ns() - t0) & 0xFFFFFFFFFFFFULL) | ((uint64_t)(flags & 0xFF) << 48);
    uint64_t *slot = record_slot();
    w0 |= atomic_fetch_add(&seq, 1) & 0xFFFFFFFFFFULL; /* taken even without a slot: the
                                                         * loss is a gap the reader sees */
    if (slot) {
        store(slot, w0, w1 | check_byte(w0, w1, a, r) << 56, a, r);
        stored();
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
    fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        say("purgecheck-record: cannot open %s: %s\n", name, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
        return;
    }
    /* An exec'ed image continues the file after the last one (which cut it back to its
     * records); nothing of it is mapped yet (seg_end = cursor; a fork child's seg_base was
     * its parent's file). */
    trace_dev = st.st_dev;
    trace_ino = st.st_ino;
    cursor = file_end = seg_end = (st.st_size + RECORD_BYTES - 1) / RECORD_BYTES * RECORD_BYTES;
    seg_base = NULL;
#ifndef RECORDER_MUTANT_CHILD_KEEPS_WINDOW /* the broken variant: a fork child stores into
                                            * its parent's window, in the parent's file */
    win_next = win_end = NULL;
#endif
}

/* This library's own malloc (inside the library, `malloc` names the first definition the
 * dynamic linker finds, which may be the program's). */
void *recorder_malloc(size_t n) __attribute__((alias("malloc"), visibility("hidden"), copy(malloc)));

static __thread int probe_hits;

static void start_image(void)
{
    image_pid = getpid();
    t0 = now_ns();
    atomic_store(&seq, 0);
    my_thread = 0;
    unbuffered = 0;
    image_start = cursor;
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
        /* The image is written again as its START record alone, marked (only this thread
         * runs in the constructor: nothing else is in the file after image_start). */
        unstage();
        lock_file();
        give_back_window();
        cursor = image_start;
        unlock_file();
        atomic_store(&seq, 0);
        emit(K_START, refused, (uint64_t)getpid(), MAGIC);
        unstage();
        trim_file();
        say("purgecheck-record: %s replaces malloc (%s): its allocations cannot be recorded "
            "faithfully; refusing\n", program_invocation_short_name,
            refused == F_REFUSED_DEFINED ? "the program defines malloc" :
                                           "the next malloc is not the C library's");
        active = 0;
        close(fd);
        fd = -1;
        return;
    }
    unstage(); /* the broken variant too writes its START record at once */
}

static void child_after_fork(void)
{
    /* Only the forking thread runs in the child, with the parent's mapping (shared: never
     * written here again) and perhaps its lock held by a thread that is not here: the child
     * starts a file of its own (open_trace forgets this thread's window). */
    atomic_flag_clear(&file_lock);
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
    if (!active || getpid() != image_pid) /* a vfork child's _exit: not this image's end */
        return;
    unstage();
    unbuffered = 1;
    emit(K_END, 0, 0, 0);
    trim_file(); /* the threads still running keep storing into their windows */
}

/* _exit and _Exit end the process without destructors: the END record is made and the file
 * cut back here first. (exit() calls the C library's own _exit after the destructor.) */
typedef void (*exit_fn)(int);

__attribute__((noreturn)) static void exit_now(const char *name, int status)
{
#ifndef RECORDER_MUTANT_OWN_BUFFER_ONLY
    if (getpid() == image_pid) {
        recorder_fini();
        active = 0;
    }
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
    /* The old pointer is recorded before the call, so it is numbered before another thread
     * can see the old block freed; the reader joins it to the thread's next record. */
    emit(K_REALLOC_OLD, flags, (uint64_t)old, 0);
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
        unstage();
        lock_file();
        give_back_window();
        unlock_file();
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
    in_create++;
    int rc = next_create(t, attr, thread_start, s);
    in_create--;
    if (rc)
        atomic_store(&s->used, 0);
    return rc;
}

pid_t fork(void)
{
    resolve();
    forking = 1;
    pid_t pid = next_fork();
    forking = 0;
    if (pid > 0)
        REC(emit(K_FORK, 0, (uint64_t)pid, 0));
    return pid;
}

static void before_exec(void)
{
    /* A vfork child (posix_spawn, pex) shares this thread's window and counter until its
     * exec: its records are this image's, but its exec is not. */
    if (active && getpid() == image_pid) {
        emit(K_EXEC, 0, 0, 0);
        unstage();
        trim_file(); /* the next image starts where this one's records end */
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

#ifndef RECORDER_MUTANT_NO_EXECL /* the broken variant: the execl family unseen (as before) */
/* The execl family builds its argv inside the C library and calls execve there, where the
 * recorder cannot see it: here the argv is built on the stack (the recorder must not
 * allocate) and the call goes through execve / execvpe above. The arguments end with a null
 * pointer (arg itself, for an empty argv); execle's environment follows it. */
static size_t args_until_null(const char *arg, va_list ap)
{
    size_t n = 0;
    for (const char *a = arg; a; a = va_arg(ap, const char *))
        n++;
    return n;
}

/* argv[0..n] from arg and the n - 1 arguments after it, the terminating null consumed */
static void take_args(char **argv, size_t n, const char *arg, va_list *ap)
{
    argv[0] = (char *)arg;
    for (size_t i = 1; i <= n; i++)
        argv[i] = va_arg(*ap, char *);
}

#define EXEC_LIST(arg, argv, ap)                          \
    va_list ap, counting;                                 \
    va_start(ap, arg);                                    \
    va_copy(counting, ap);                                \
    size_t n_##argv = args_until_null(arg, counting);     \
    va_end(counting);                                     \
    char *argv[n_##argv + 1];                             \
    take_args(argv, n_##argv, arg, &ap)

int execl(const char *path, const char *arg, ...)
{
    EXEC_LIST(arg, argv, ap);
    va_end(ap);
    return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...)
{
    EXEC_LIST(arg, argv, ap);
    va_end(ap);
    return execvpe(file, argv, environ);
}

int execle(const char *path, const char *arg, ...)
{
    EXEC_LIST(arg, argv, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
#endif
