/* What every reference client does with the bytes it reads, and nothing more: count event ends
 * ("\n\n") and, at the start of each content event, read the scripted server's send stamp to
 * take the lag. Shared by curl_floor.c and raw_floor.c so that the two rows differ only in how
 * the bytes arrive. Written for fastsse's read-cost benchmark. */
#ifndef READ_COST_EVENTS_H
#define READ_COST_EVENTS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const char STAMP_KEY[] = "\"fastsse_sent_ns\":";
#define STAMP_WINDOW 64 /* the stamp is the first key of the JSON object: look this far only */

typedef struct {
    long events;    /* event ends seen ("\n\n") */
    int last_nl;    /* the previous read ended with '\n' */
    int at_start;   /* the next byte starts an event */
    int done;       /* the transfer ended */
    int failed;
} stream_t;

typedef struct {
    long chunks;       /* content chunks per stream: events 1..chunks of each stream carry content */
    int64_t *lags;     /* ns, one per content event whose start arrived with its stamp */
    long nlags, cap;
    long events;
} totals_t;

/* FASTSSE_BENCH_CPU=N pins the process to core N before anything is timed (the benchmark runs
 * the server on one core and the client on another). */
static void pin_from_env(void) {
    const char *cpu = getenv("FASTSSE_BENCH_CPU");
    if (!cpu || !*cpu) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(cpu), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sched_setaffinity");
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

/* The stamp of the event starting at p (at most n bytes of it in this read), or -1. The stamp is
 * taken only when the event's start arrived in one read, which with one event per HTTP chunk is
 * every event. */
static int64_t read_stamp(const char *p, size_t n) {
    const char *key = memmem(p, n < STAMP_WINDOW ? n : STAMP_WINDOW, STAMP_KEY, sizeof STAMP_KEY - 1);
    if (!key) return -1;
    const char *d = key + sizeof STAMP_KEY - 1, *end = p + n;
    int64_t v = 0;
    if (d >= end || *d < '0' || *d > '9') return -1;
    while (d < end && *d >= '0' && *d <= '9') v = v * 10 + (*d++ - '0');
    return d < end ? v : -1;
}

static void add_lag(totals_t *t, int64_t lag) {
    if (t->nlags < t->cap) t->lags[t->nlags++] = lag;
}

/* One read of stream s: count its event ends, stamp its content events. An event start that
 * arrives with fewer than MIN_START bytes (the raw client's chunk trailer "\r\n" at the end of a
 * read) is looked at again at the start of the next read. */
#define MIN_START 24
static void on_bytes(totals_t *t, stream_t *s, const char *p, size_t n) {
    const char *end = p + n, *q = p, *last_end = NULL;
    int64_t now = 0;
    if (n == 0) return;
    if (s->last_nl && *p == '\n') { /* "\n" | "\n" across two reads */
        s->events++;
        s->at_start = 1;
        q = last_end = p + 1;
    }
    for (;;) {
        if (s->at_start && end - q >= MIN_START) {
            s->at_start = 0;
            if (s->events >= 1 && s->events <= t->chunks) {
                int64_t sent = read_stamp(q, (size_t)(end - q));
                if (sent > 0) {
                    if (!now) now = now_ns();
                    add_lag(t, now - sent);
                }
            }
        }
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        if (!nl || nl + 1 >= end) break;
        if (nl[1] == '\n') {
            s->events++;
            s->at_start = 1;
            q = last_end = nl + 2;
        } else {
            q = nl + 1;
        }
    }
    s->last_nl = end[-1] == '\n' && last_end != end;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(totals_t *t, double q) {
    if (!t->nlags) return -1.0;
    long i = (long)(q * t->nlags);
    if (i >= t->nlags) i = t->nlags - 1;
    return t->lags[i] / 1e6;
}

/* The one line the benchmark reads: {"events": ..., ...}. Lags are sorted after the clock stops. */
static void report(totals_t *t, long events, long failed, double cpu, double wall, const char *lib) {
    qsort(t->lags, (size_t)t->nlags, sizeof *t->lags, cmp_i64);
    printf("{\"events\": %ld, \"failed\": %ld, \"cpu_s\": %.6f, \"wall_s\": %.6f, \"lag_samples\": %ld, "
           "\"lag_p50_ms\": %.4f, \"lag_p99_ms\": %.4f, \"library\": \"%s\"}\n",
           events, failed, cpu, wall, t->nlags, pct_ms(t, 0.5), pct_ms(t, 0.99), lib);
}

static int64_t *alloc_lags(long streams, long chunks, long *cap) {
    *cap = streams * chunks;
    int64_t *lags = malloc(sizeof(int64_t) * (size_t)(*cap ? *cap : 1));
    if (!lags) {
        perror("malloc");
        exit(2);
    }
    return lags;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        perror(path);
        exit(2);
    }
    buf[size] = 0;
    fclose(f);
    *len = (size_t)size;
    return buf;
}

#endif
