/* glibc_driver: run a glibc op script (docs/glibc.md) with the system's own malloc.
 *
 * Seed 001 is about which system calls glibc's free() makes (madvise of a thread heap's
 * tail, brk shrinks of the main arena). This driver performs exactly the script's malloc,
 * free and mallopt calls, each in the thread the script names, one op at a time in script
 * order, so that `purgecheck glibc run` can count the calls under `strace -f` and set them
 * beside the model's prediction.
 *
 * The driver itself never allocates with malloc: the script is read with read(2) into a
 * static buffer, ops live in static arrays and output goes through write(2), so the heap
 * state is the script's alone. Around the ops it calls getppid(2) once as a marker, so the
 * trace classifier can drop the start-up and exit noise.
 *
 * Usage: glibc_driver [--addresses] [--op-marks] [--memory] SCRIPT
 * --memory: after the ops, one line `memory MINFLT HWM_KB RSS_KB`: the minor faults of the
 * ops alone (getrusage before and after), the peak resident set (VmHWM) and the resident set
 * when the ops began (the driver's own tables, read beforehand), from /proc/self/status.
 * Exit: 0 ran, 2 bad usage or a bad script (one line naming file:line), 3 malloc failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_SCRIPT (1L << 34) /* bytes: the script is mapped, not copied */
#define MAX_IDS (1 << 24)       /* the pointer table is mapped at this size, pages on use */
#define MAX_THREADS 64
#define MAX_DEPTH 8

enum kind { OP_MALLOC, OP_FREE, OP_MALLOPT, OP_START, OP_JOIN, OP_REPEAT, OP_END, OP_EXIT,
            OP_CALLOC, OP_REALLOC, OP_MEMALIGN, OP_VALLOC, OP_PVALLOC, OP_TRIM };

struct op {
    enum kind kind;
    int thread;
    int line;
    long a; /* id, mallopt param, repeat count, trim pad; for OP_END: index of its REPEAT */
    long b; /* size, mallopt value */
    long c; /* memalign: the alignment */
};

/* The script, the op table and the pointer table are mapped with mmap before the first
 * mark, so that the heap holds the script's blocks only, whatever the script's length. */
static char *script;
static struct op *ops;
static long nops, max_ops;
static void **ptrs;
static const char *path;
static int show_addresses;
static int memory_report; /* --memory: faults and resident set of the ops (usage above) */
static int op_marks; /* --op-marks: a getpid(2) before each op, for locating a divergence */

struct worker {
    pthread_t tid;
    sem_t go, done;
    const struct op *op; /* the op to run, handed over by the main thread */
    int running;
};
static struct worker workers[MAX_THREADS];

static void say(int fd, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1;
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
}

static void bad(int line, const char *what)
{
    say(2, "%s:%d: %s\n", path, line, what);
    exit(2);
}

/* The next blank-separated word of a line (comments already cut off), or NULL. */
static char *word(char **cur)
{
    char *s = *cur;
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    if (*s == '\0')
        return *cur = s, NULL;
    char *start = s;
    while (*s && *s != ' ' && *s != '\t' && *s != '\r')
        s++;
    if (*s)
        *s++ = '\0';
    *cur = s;
    return start;
}

static long number(char *w, int line, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = w ? strtol(w, &end, 0) : 0;
    if (!w || *end || errno || v < lo || v > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "expected %s (%ld..%ld), got %s", what, lo, hi,
                 w ? w : "nothing");
        bad(line, msg);
    }
    return v;
}

static int mallopt_param(const char *w, int line)
{
    if (w && !strcmp(w, "trim_threshold"))
        return M_TRIM_THRESHOLD;
    if (w && !strcmp(w, "top_pad"))
        return M_TOP_PAD;
    if (w && !strcmp(w, "mmap_threshold"))
        return M_MMAP_THRESHOLD;
    if (w && !strcmp(w, "mmap_max"))
        return M_MMAP_MAX;
    bad(line, "mallopt: expected trim_threshold, top_pad, mmap_threshold or mmap_max");
    return 0;
}

static void parse(void)
{
    long depth = 0, open_repeat[MAX_DEPTH];
    int line = 0;
    char *s = script;
    while (*s) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        line++;
        char *cur = s;
        s = nl ? nl + 1 : s + strlen(s);
        char *hash = strchr(cur, '#');
        if (hash)
            *hash = '\0';
        char *w = word(&cur);
        if (!w)
            continue;
        if (nops == max_ops)
            bad(line, "too many ops for the driver's table");
        struct op *op = &ops[nops];
        op->line = line;
        op->thread = -1;
        if (!strcmp(w, "repeat")) {
            if (depth == MAX_DEPTH)
                bad(line, "repeat blocks nested too deep (at most 8)");
            op->kind = OP_REPEAT;
            op->a = number(word(&cur), line, 0, 100000000, "a repeat count");
            open_repeat[depth++] = nops;
        } else if (!strcmp(w, "end")) {
            if (depth == 0)
                bad(line, "end without repeat");
            op->kind = OP_END;
            op->a = open_repeat[--depth];
        } else {
            op->thread = (int)number(w, line, 0, MAX_THREADS - 1,
                                     "a thread number, repeat or end");
            char *name = word(&cur);
            if (!name)
                bad(line, "expected an operation after the thread number");
            if (!strcmp(name, "malloc")) {
                op->kind = OP_MALLOC;
                op->a = number(word(&cur), line, 0, MAX_IDS - 1, "a block id");
                op->b = number(word(&cur), line, 0, 1L << 40, "a size in bytes");
            } else if (!strcmp(name, "free")) {
                op->kind = OP_FREE;
                op->a = number(word(&cur), line, 0, MAX_IDS - 1, "a block id");
            } else if (!strcmp(name, "mallopt")) {
                op->kind = OP_MALLOPT;
                op->a = mallopt_param(word(&cur), line);
                op->b = number(word(&cur), line, 0, 2147483647L, "a mallopt value");
            } else if (!strcmp(name, "calloc") || !strcmp(name, "realloc") ||
                       !strcmp(name, "valloc") || !strcmp(name, "pvalloc")) {
                op->kind = name[0] == 'c' ? OP_CALLOC : name[0] == 'r' ? OP_REALLOC :
                           name[0] == 'v' ? OP_VALLOC : OP_PVALLOC;
                op->a = number(word(&cur), line, 0, MAX_IDS - 1, "a block id");
                op->b = number(word(&cur), line, 0, 1L << 40, "a size in bytes");
            } else if (!strcmp(name, "memalign")) {
                op->kind = OP_MEMALIGN;
                op->a = number(word(&cur), line, 0, MAX_IDS - 1, "a block id");
                op->c = number(word(&cur), line, 0, 1L << 40, "an alignment in bytes");
                op->b = number(word(&cur), line, 0, 1L << 40, "a size in bytes");
            } else if (!strcmp(name, "trim")) {
                op->kind = OP_TRIM;
                op->a = number(word(&cur), line, 0, 1L << 40, "a pad in bytes");
            } else if (!strcmp(name, "start") || !strcmp(name, "join")) {
                op->kind = name[0] == 's' ? OP_START : OP_JOIN;
                if (op->thread == 0)
                    bad(line, "thread 0 is the main thread: it is never started or joined");
            } else {
                bad(line, "unknown operation; expected malloc, free, calloc, realloc, memalign, "
                          "valloc, pvalloc, trim, mallopt, start or join");
            }
        }
        if (word(&cur))
            bad(line, "too many arguments");
        nops++;
    }
    if (depth)
        bad(ops[open_repeat[depth - 1]].line, "repeat without end");
}

/* Keep the pointer observable: gcc -O2 deletes free(malloc(n)) otherwise (digest). */
static void escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

static void run_op(const struct op *op)
{
    switch (op->kind) {
    case OP_MALLOC:
    case OP_CALLOC:
    case OP_REALLOC:
    case OP_MEMALIGN:
    case OP_VALLOC:
    case OP_PVALLOC: {
        size_t n = (size_t)op->b;
        void *p = op->kind == OP_MALLOC ? malloc(n)
                : op->kind == OP_CALLOC ? calloc(1, n)
                : op->kind == OP_REALLOC ? realloc(ptrs[op->a], n)
                : op->kind == OP_MEMALIGN ? memalign((size_t)op->c, n)
                : op->kind == OP_VALLOC ? valloc(n) : pvalloc(n);
        if (!p && (op->b || op->kind != OP_REALLOC)) {
            say(2, "%s:%d: allocation of %ld bytes failed\n", path, op->line, op->b);
            exit(3);
        }
        escape(p);
        ptrs[op->a] = p;
        if (show_addresses)
            say(1, "%d %ld %p\n", op->line, op->a, p);
        break;
    }
    case OP_TRIM:
        malloc_trim((size_t)op->a);
        break;
    case OP_FREE:
        escape(ptrs[op->a]);
        free(ptrs[op->a]);
        ptrs[op->a] = NULL;
        break;
    case OP_MALLOPT:
        if (mallopt((int)op->a, (int)op->b) != 1 && show_addresses)
            say(1, "%d mallopt refused\n", op->line);
        break;
    default:
        break;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        while (sem_wait(&w->go) != 0)
            ;
        const struct op *op = w->op;
        if (op->kind == OP_EXIT) {
            sem_post(&w->done);
            return NULL;
        }
        run_op(op);
        sem_post(&w->done);
    }
}

static void hand_over(struct worker *w, const struct op *op)
{
    w->op = op;
    sem_post(&w->go);
    while (sem_wait(&w->done) != 0)
        ;
}

static void execute(void)
{
    static const struct op exit_op = {.kind = OP_EXIT};
    long remaining[MAX_DEPTH];
    int depth = 0;
    for (long i = 0; i < nops; i++) {
        const struct op *op = &ops[i];
        struct worker *w = op->thread > 0 ? &workers[op->thread] : NULL;
        switch (op->kind) {
        case OP_REPEAT:
            if (op->a == 0) { /* skip the block */
                int nest = 0;
                for (i++; i < nops; i++) {
                    if (ops[i].kind == OP_REPEAT)
                        nest++;
                    else if (ops[i].kind == OP_END && nest-- == 0)
                        break;
                }
                break;
            }
            remaining[depth++] = op->a;
            break;
        case OP_END:
            if (--remaining[depth - 1] > 0)
                i = op->a; /* back to the REPEAT; the loop's i++ enters the body */
            else
                depth--;
            break;
        case OP_START:
            if (op_marks)
                syscall(SYS_getpid);
            if (w->running)
                bad(op->line, "start: the thread is already running");
            sem_init(&w->go, 0, 0);
            sem_init(&w->done, 0, 0);
            if (pthread_create(&w->tid, NULL, worker_main, w) != 0)
                bad(op->line, "pthread_create failed");
            w->running = 1;
            break;
        case OP_JOIN:
            if (op_marks)
                syscall(SYS_getpid);
            if (!w->running)
                bad(op->line, "join: the thread is not running");
            w->op = &exit_op;
            sem_post(&w->go);
            pthread_join(w->tid, NULL);
            w->running = 0;
            break;
        default:
            if (w && !w->running)
                bad(op->line, "the thread is not running: start it first");
            if (op_marks)
                syscall(SYS_getpid);
            if (w)
                hand_over(w, op);
            else
                run_op(op);
        }
    }
    for (int t = 1; t < MAX_THREADS; t++)
        if (workers[t].running)
            bad(0, "a thread is still running at the end: join it");
}

/* A field of /proc/self/status in kB (read with read(2): the driver never mallocs). */
static long status_kb(const char *field)
{
    static char text[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *at = strstr(text, field);
    return at ? strtol(at + strlen(field), NULL, 10) : -1;
}

int main(int argc, char **argv)
{
    int argi = 1;
    for (; argi < argc && argv[argi][0] == '-' && argv[argi][1] == '-'; argi++) {
        if (!strcmp(argv[argi], "--addresses"))
            show_addresses = 1;
        else if (!strcmp(argv[argi], "--op-marks"))
            op_marks = 1;
        else if (!strcmp(argv[argi], "--memory"))
            memory_report = 1;
        else
            break;
    }
    if (argi + 1 != argc) {
        say(2, "usage: glibc_driver [--addresses] [--op-marks] [--memory] SCRIPT\n");
        return 2;
    }
    path = argv[argi];
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        say(2, "%s: cannot open: %s\n", path, strerror(errno));
        return 2;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size >= MAX_SCRIPT) {
        say(2, "%s: cannot read, or longer than %ld bytes\n", path, MAX_SCRIPT);
        return 2;
    }
    size_t len = (size_t)st.st_size;
    /* A private writable mapping one byte longer than the file: parse() cuts words in place
     * and the byte past the end is the terminating NUL. */
    script = mmap(NULL, len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (script == MAP_FAILED) {
        say(2, "%s: cannot map %zu bytes\n", path, len + 1);
        return 2;
    }
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, script + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            say(2, "%s: cannot read: %s\n", path, n < 0 ? strerror(errno) : "short read");
            return 2;
        }
        got += (size_t)n;
    }
    close(fd);
    script[len] = '\0';
    max_ops = 1;
    for (size_t i = 0; i < len; i++)
        max_ops += script[i] == '\n';
    ops = mmap(NULL, (size_t)max_ops * sizeof *ops, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ptrs = mmap(NULL, (size_t)MAX_IDS * sizeof *ptrs, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ops == MAP_FAILED || ptrs == MAP_FAILED) {
        say(2, "%s: cannot map the op tables\n", path);
        return 2;
    }
    parse();
    struct rusage before, after;
    long rss_start = status_kb("VmRSS:");
    getrusage(RUSAGE_SELF, &before);
    syscall(SYS_getppid); /* marker: the ops begin */
    execute();
    syscall(SYS_getppid); /* marker: the ops end */
    getrusage(RUSAGE_SELF, &after);
    if (memory_report)
        say(1, "memory %ld %ld %ld\n", after.ru_minflt - before.ru_minflt,
            status_kb("VmHWM:"), rss_start);
    say(1, "ok %ld lines\n", nops);
    return 0;
}
