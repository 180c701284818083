/*
 * check.h -- shared pattern / verify / report code for the MPI conformance
 * programs in tests/programs/.  Header-only (static inline), no other files.
 *
 * Pattern
 * -------
 * Every message payload is a deterministic byte stream that depends on
 * (sender rank, receiver rank, tag, message index, byte offset):
 *
 *   seed       = ck_seed(src, dst, tag, idx)          (chained mix32 of each)
 *   word(w)    = mix32(seed ^ (w * 0x9e3779b9) ^ hi32(w) * 0x85ebca6b)
 *   byte(off)  = (word(off / 4) >> (8 * (off % 4))) & 0xff
 *
 * mix32 is the (bijective) "lowbias32" integer finaliser, so within one
 * message the 32-bit words are all distinct (for messages < 16 GiB) and two
 * different messages almost never share a word: a misrouted (wrong src/dst),
 * reordered (wrong tag/idx), shifted, truncated or corrupted payload shows up
 * as a mismatch at a precise offset.  Receive buffers carry a guard region
 * of CK_GUARD bytes of CK_GUARD_BYTE after the payload that must stay
 * untouched (detects overruns and wrong counts).
 *
 * Reporting
 * ---------
 * Every check increments a pass or a fail counter (atomically, so threads may
 * check concurrently).  A failure prints one line to stdout:
 *   FAIL <prog> rank R: <what> [src S dst D tag T idx I]: first bad offset O of N: expected 0xEE got 0xGG (B bad bytes)
 * ck_finish() sums the counters over MPI_COMM_WORLD, rank 0 prints exactly
 *   "<passed> passed, <failed> failed"
 * as the last line, MPI_Finalize()s, and returns the process exit status
 * (0 only if no rank failed anything).
 *
 * Command-line flags understood by every program (ck_init):
 *   --quick              fewer iterations / smaller maxima (ck.quick = 1)
 *   --inject-corruption  programs that support it flip one received byte
 *                        before verifying, to prove failures are reported
 *   --verbose            progress lines (ck_progress) to locate a hang
 */
#ifndef CK_CHECK_H
#define CK_CHECK_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK_GUARD 64
#define CK_GUARD_BYTE 0xA5
#define CK_MSG_LEN 512

struct ck_state {
    const char *prog;
    int rank, size;
    int quick;
    int inject;   /* --inject-corruption given */
    int injected; /* corruption already done on this rank */
    int quiet;    /* 1: failures are recorded in last_msg but not printed */
    int verbose;  /* --verbose: ck_progress prints */
    long passed, failed;
    char last_msg[CK_MSG_LEN];
};

static struct ck_state ck __attribute__((unused)) = {"?", -1, 0, 0, 0, 0, 0, 0, 0, 0, {0}};

/* ------------------------------------------------------------------ */
/* pattern                                                              */
/* ------------------------------------------------------------------ */

static inline uint32_t ck_mix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    return h;
}

static inline uint32_t ck_seed(int src, int dst, int tag, long idx)
{
    uint64_t i = (uint64_t)idx;
    uint32_t h = ck_mix32(0x243f6a88U ^ (uint32_t)src);
    h = ck_mix32(h ^ ((uint32_t)dst * 0x85ebca6bU));
    h = ck_mix32(h ^ ((uint32_t)tag * 0xc2b2ae35U));
    h = ck_mix32(h ^ ((uint32_t)i * 0x27d4eb2fU) ^ (uint32_t)(i >> 32));
    return h;
}

static inline uint32_t ck_word(uint32_t seed, uint64_t w)
{
    return ck_mix32(seed ^ ((uint32_t)w * 0x9e3779b9U) ^ ((uint32_t)(w >> 32) * 0x85ebca6bU));
}

/* expected byte at byte offset off of the stream identified by seed */
static inline unsigned char ck_byte(uint32_t seed, uint64_t off)
{
    return (unsigned char)(ck_word(seed, off >> 2) >> (8 * (off & 3)));
}

/* fill n bytes of buf with stream bytes [start, start + n) of seed */
static inline void ck_fill_seed_at(void *buf, size_t n, uint32_t seed, uint64_t start)
{
    unsigned char *p = (unsigned char *)buf;
    size_t i = 0;
    while (i < n && ((start + i) & 3) != 0) {
        p[i] = ck_byte(seed, start + i);
        i++;
    }
    for (; i + 4 <= n; i += 4) {
        uint32_t w = ck_word(seed, (start + i) >> 2);
        p[i] = (unsigned char)w;
        p[i + 1] = (unsigned char)(w >> 8);
        p[i + 2] = (unsigned char)(w >> 16);
        p[i + 3] = (unsigned char)(w >> 24);
    }
    for (; i < n; i++)
        p[i] = ck_byte(seed, start + i);
}

static inline void ck_fill_seed(void *buf, size_t n, uint32_t seed)
{
    ck_fill_seed_at(buf, n, seed, 0);
}

/* fill buf with the payload that src sends to dst as message (tag, idx) */
static inline void ck_fill(void *buf, size_t n, int src, int dst, int tag, long idx)
{
    ck_fill_seed(buf, n, ck_seed(src, dst, tag, idx));
}

/* Compare n bytes of buf with stream bytes [start, start+n) of seed.
 * Returns the number of bad bytes; *first gets the offset (relative to buf)
 * of the first bad byte and *exp / *got its expected and actual value. */
static inline size_t ck_scan_seed_at(const void *buf, size_t n, uint32_t seed, uint64_t start,
                                     size_t *first, unsigned *exp, unsigned *got)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t bad = 0, i = 0;
    while (i < n) {
        /* fast path on whole aligned words */
        if (((start + i) & 3) == 0 && i + 4 <= n) {
            uint32_t w = ck_word(seed, (start + i) >> 2);
            if (p[i] == (unsigned char)w && p[i + 1] == (unsigned char)(w >> 8) &&
                p[i + 2] == (unsigned char)(w >> 16) && p[i + 3] == (unsigned char)(w >> 24)) {
                i += 4;
                continue;
            }
        }
        unsigned char e = ck_byte(seed, start + i);
        if (p[i] != e) {
            if (bad == 0) {
                *first = i;
                *exp = e;
                *got = p[i];
            }
            bad++;
        }
        i++;
    }
    return bad;
}

static inline size_t ck_scan(const void *buf, size_t n, uint32_t seed, size_t *first,
                             unsigned *exp, unsigned *got)
{
    return ck_scan_seed_at(buf, n, seed, 0, first, exp, got);
}

/* Compare n bytes of got with the expected image; same outputs as ck_scan. */
static inline size_t ck_scan_image(const void *gotbuf, const void *expbuf, size_t n,
                                   size_t *first, unsigned *exp, unsigned *got)
{
    const unsigned char *g = (const unsigned char *)gotbuf, *e = (const unsigned char *)expbuf;
    size_t bad = 0;
    if (memcmp(g, e, n) == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (g[i] != e[i]) {
            if (bad == 0) {
                *first = i;
                *exp = e[i];
                *got = g[i];
            }
            bad++;
        }
    }
    return bad;
}

/* ------------------------------------------------------------------ */
/* reporting                                                            */
/* ------------------------------------------------------------------ */

static inline void ck_pass(void)
{
    __atomic_fetch_add(&ck.passed, 1, __ATOMIC_RELAXED);
}

static inline void ck_record_failure(const char *msg)
{
    __atomic_fetch_add(&ck.failed, 1, __ATOMIC_RELAXED);
    if (ck.quiet) {
        snprintf(ck.last_msg, sizeof ck.last_msg, "%s", msg);
    } else {
        printf("FAIL %s rank %d: %s\n", ck.prog, ck.rank, msg);
        fflush(stdout);
    }
}

/* generic condition check; fmt describes the failure */
static inline int ck_check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int ck_check(int cond, const char *fmt, ...)
{
    if (cond) {
        ck_pass();
        return 1;
    }
    char msg[CK_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ck_record_failure(msg);
    return 0;
}

/* informational line from rank 0 (or any rank if all_ranks) */
static inline void ck_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void ck_note(const char *fmt, ...)
{
    va_list ap;
    printf("%s: ", ck.prog);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* progress line (any rank), only with --verbose */
static inline void ck_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void ck_progress(const char *fmt, ...)
{
    if (!ck.verbose)
        return;
    va_list ap;
    printf("%s rank %d: ", ck.prog, ck.rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* a part that cannot run in this configuration (e.g. needs >= 2 ranks) */
static inline void ck_skip(const char *what)
{
    if (ck.rank == 0)
        ck_note("SKIP %s (needs >= 2 ranks, running with %d)", what, ck.size);
}

static inline void ck_fail_bytes(const char *what, int src, int dst, int tag, long idx,
                                 size_t first, size_t n, unsigned exp, unsigned got, size_t bad,
                                 const char *region)
{
    char msg[CK_MSG_LEN];
    snprintf(msg, sizeof msg,
             "%s [src %d dst %d tag %d idx %ld]: %sfirst bad offset %zu of %zu: "
             "expected 0x%02x got 0x%02x (%zu bad bytes)",
             what, src, dst, tag, idx, region, first, n, exp, got, bad);
    ck_record_failure(msg);
}

/* Verify that buf[0..n) is the payload src -> dst (tag, idx) and that the
 * CK_GUARD bytes after it still hold CK_GUARD_BYTE (pass guard = 0 to skip
 * the guard check when the buffer has none).  One check. */
static inline int ck_verify_g(const char *what, const void *buf, size_t n, int src, int dst,
                              int tag, long idx, int guard)
{
    size_t first = 0;
    unsigned exp = 0, got = 0;
    size_t bad = ck_scan(buf, n, ck_seed(src, dst, tag, idx), &first, &exp, &got);
    if (bad) {
        ck_fail_bytes(what, src, dst, tag, idx, first, n, exp, got, bad, "");
        return 0;
    }
    if (guard) {
        const unsigned char *g = (const unsigned char *)buf + n;
        for (size_t i = 0; i < CK_GUARD; i++) {
            if (g[i] != CK_GUARD_BYTE) {
                size_t nb = 0;
                for (size_t j = i; j < CK_GUARD; j++)
                    nb += g[j] != CK_GUARD_BYTE;
                ck_fail_bytes(what, src, dst, tag, idx, n + i, n, CK_GUARD_BYTE, g[i], nb,
                              "overrun past payload into guard: ");
                return 0;
            }
        }
    }
    ck_pass();
    return 1;
}

static inline int ck_verify(const char *what, const void *buf, size_t n, int src, int dst, int tag,
                            long idx)
{
    return ck_verify_g(what, buf, n, src, dst, tag, idx, 1);
}

/* Verify a whole buffer against an expected image (used for non-contiguous
 * receives, where gap bytes must be untouched).  One check. */
static inline int ck_verify_image(const char *what, const void *gotbuf, const void *expbuf, size_t n,
                                  int src, int dst, int tag, long idx)
{
    size_t first = 0;
    unsigned exp = 0, got = 0;
    size_t bad = ck_scan_image(gotbuf, expbuf, n, &first, &exp, &got);
    if (bad) {
        ck_fail_bytes(what, src, dst, tag, idx, first, n, exp, got, bad, "buffer image: ");
        return 0;
    }
    ck_pass();
    return 1;
}

/* Check an MPI_Status after a receive: source, tag and byte count.  One check. */
static inline int ck_status(const char *what, const MPI_Status *st, int src, int tag, size_t n)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    return ck_check(st->MPI_SOURCE == src && st->MPI_TAG == tag && count >= 0 && (size_t)count == n,
                    "%s: status mismatch: source %d (expected %d) tag %d (expected %d) "
                    "count %d (expected %zu)",
                    what, st->MPI_SOURCE, src, st->MPI_TAG, tag, count, n);
}

/* ------------------------------------------------------------------ */
/* buffers and corruption injection                                     */
/* ------------------------------------------------------------------ */

/* allocate n payload bytes + guard, all set to CK_GUARD_BYTE */
static inline unsigned char *ck_alloc(size_t n)
{
    unsigned char *p = (unsigned char *)malloc(n + CK_GUARD);
    if (!p) {
        fprintf(stderr, "%s rank %d: out of memory allocating %zu bytes\n", ck.prog, ck.rank,
                n + CK_GUARD);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, CK_GUARD_BYTE, n + CK_GUARD);
    return p;
}

/* reset a receive buffer of n payload bytes (plus its guard) before reuse */
static inline void ck_clear(void *buf, size_t n)
{
    memset(buf, CK_GUARD_BYTE, n + CK_GUARD);
}

/* With --inject-corruption: flip one byte (in the middle) of the first
 * non-empty received message on this rank, so the verify that follows fails. */
static inline void ck_maybe_inject(void *buf, size_t n)
{
    if (ck.inject && !ck.injected && n > 0) {
        ((unsigned char *)buf)[n / 2] ^= 0x5a;
        ck.injected = 1;
        printf("%s rank %d: --inject-corruption: flipped byte at offset %zu of a %zu-byte "
               "received message\n",
               ck.prog, ck.rank, n / 2, n);
        fflush(stdout);
    }
}

/* ------------------------------------------------------------------ */
/* init / finish                                                        */
/* ------------------------------------------------------------------ */

/* Initialise MPI (with the given thread level) and parse the common flags.
 * Returns the provided thread level. */
static inline int ck_init(int *argc, char ***argv, const char *prog, int required)
{
    int provided = MPI_THREAD_SINGLE;
    ck.prog = prog;
    for (int i = 1; i < *argc; i++) {
        if (strcmp((*argv)[i], "--quick") == 0)
            ck.quick = 1;
        else if (strcmp((*argv)[i], "--inject-corruption") == 0)
            ck.inject = 1;
        else if (strcmp((*argv)[i], "--verbose") == 0)
            ck.verbose = 1;
    }
    if (required == MPI_THREAD_SINGLE)
        MPI_Init(argc, argv);
    else
        MPI_Init_thread(argc, argv, required, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &ck.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ck.size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    return provided;
}

/* Sum the counters over all ranks, print the summary on rank 0, finalize.
 * Returns the exit status for main(). */
static inline int ck_finish(void)
{
    long local[2] = {__atomic_load_n(&ck.passed, __ATOMIC_RELAXED),
                     __atomic_load_n(&ck.failed, __ATOMIC_RELAXED)};
    long total[2] = {0, 0};
    fflush(stdout);
    MPI_Allreduce(local, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (ck.rank == 0) {
        printf("%ld passed, %ld failed\n", total[0], total[1]);
        fflush(stdout);
    }
    MPI_Finalize();
    return total[1] != 0 ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* small helpers                                                        */
/* ------------------------------------------------------------------ */

static inline int ck_right(void) { return (ck.rank + 1) % ck.size; }
static inline int ck_left(void) { return (ck.rank + ck.size - 1) % ck.size; }

#endif /* CK_CHECK_H */
