/* trace.c: trace events as JSON Lines on stdout (docs/trace-format.md).
 *
 * Each thread builds its event in a buffer of its own; the finished line is written under one
 * lock, so the events of concurrent threads never interleave within a line and the order of
 * the lines is the order in which events were completed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "purge.h"

bool tr_enabled = true;
static _Thread_local char *buf;
static _Thread_local size_t len, cap;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int64_t tr_events;   /* events written since the last header */

static void reserve(size_t more) {
    if (len + more + 1 <= cap) return;
    while (len + more + 1 > cap) cap = cap ? 2 * cap : 4096;
    buf = realloc(buf, cap);
    if (!buf) abort();
}

void tr_raw(const char *s) {
    if (!tr_enabled) return;
    size_t n = strlen(s);
    reserve(n);
    memcpy(buf + len, s, n);
    len += n;
}

void tr_rawf(const char *fmt, ...) {
    if (!tr_enabled) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    reserve((size_t)n);
    va_start(ap, fmt);
    vsnprintf(buf + len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    len += (size_t)n;
}

static void raw_string(const char *s) {
    tr_raw("\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') tr_rawf("\\%c", c);
        else if (c < 0x20) tr_rawf("\\u%04x", c);
        else { reserve(1); buf[len++] = (char)c; }
    }
    tr_raw("\"");
}

void tr_begin(const char *ev) {
    if (!tr_enabled) return;
    len = 0;
    tr_raw("{\"ev\":");
    raw_string(ev);
}

void tr_key(const char *key) {
    if (!tr_enabled) return;
    tr_raw(",");
    raw_string(key);
    tr_raw(":");
}

void tr_int(const char *key, int64_t v) { tr_key(key); tr_rawf("%lld", (long long)v); }
void tr_u64(const char *key, uint64_t v) { tr_key(key); tr_rawf("%llu", (unsigned long long)v); }
void tr_bool(const char *key, bool v) { tr_key(key); tr_raw(v ? "true" : "false"); }
void tr_null(const char *key) { tr_key(key); tr_raw("null"); }

void tr_str(const char *key, const char *s) {
    tr_key(key);
    if (tr_enabled) raw_string(s);
}

/* Write a finished line (an event, or the header when it does not start with {"ev"). */
static void write_line(void) {
    pthread_mutex_lock(&out_lock);
    fwrite(buf, 1, len, stdout);
    pthread_mutex_unlock(&out_lock);
}

void tr_end(void) {
    if (!tr_enabled) return;
    if (tr_linearized)   /* linearize.c: the lin number is taken here, inside the caller's lin_lock */
        tr_rawf(",\"lin\":%lld,\"tid\":%d", (long long)atomic_fetch_add(&tr_lin, 1), tr_tid);
    tr_raw("}\n");
    atomic_fetch_add(&tr_events, 1);
    write_line();
}

/* A thread that wrote events ends: its buffer goes with it. */
void tr_thread_exit(void) {
    free(buf);
    buf = NULL;
    len = cap = 0;
}

void tr_flush(void) {
    pthread_mutex_lock(&out_lock);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
}

/* The header line: `fmt` is the whole JSON object without the newline. */
void tr_header(const char *json) {
    len = 0;
    bool was = tr_enabled;
    tr_enabled = true;
    tr_raw(json);
    tr_raw("\n");
    tr_enabled = was;
    write_line();
    atomic_store(&tr_events, 0);
}
