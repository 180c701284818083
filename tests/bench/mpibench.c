/* mpibench: point-to-point latency, bandwidth, bidirectional bandwidth and message rate
 * between ranks 0 and 1 (other ranks sleep until the end), with per-size adaptive iteration counts and
 * byte-exact validation.
 *
 *   mpicc -O2 -o build/bench/mpibench tests/bench/mpibench.c
 *   mpirun -np 2 --bind-to core ... mpibench [options]
 *
 * Options
 *   --test T          latency | bw | bibw | rate | all, or a comma list (default all)
 *   --min B --max B   size sweep, powers of two from B to B (default 0 .. 16 MiB; 0 = 0 B)
 *   --sizes a,b,c     explicit sizes instead of the sweep (suffixes k, m: 4k = 4096)
 *   --window W        outstanding messages per bw/bibw/rate iteration (default 64)
 *   --window-bytes B  cap W so that W * size <= B (default 64m; at least 1 message)
 *   --rate-size B     message size of the rate test (default 8)
 *   --target-ms T     wall time to spend timing each (test, size) (default 200)
 *   --reps R          the timed part is R blocks; the median block is reported (default 5)
 *   --min-iters N     iterations per block at least (default 2)
 *   --max-iters N     iterations per block at most (default 1000000)
 *   --no-validate     skip the validated first/last iterations
 *   --quick           sizes 0,8,1k,64k,1m, target 20 ms, 3 reps (a demo in seconds)
 *
 * Method for each (test, size):
 *   1. one validated iteration: every byte of every message pattern-filled and checked
 *   2. warm-up + calibration: run n = 1, 4, 16, ... iterations until a batch takes at least
 *      1/20 of the target (those are the warm-up iterations), then two more batches of n;
 *      t_iter = fastest of the last three batches / n
 *   3. R timed blocks of clamp(target / (R * t_iter), min-iters, max-iters) iterations,
 *      a barrier before each; value = median over the blocks
 *   4. one more validated iteration (the last one)
 *   A mismatch aborts the job (MPI_Abort) with a message naming test, size, message, byte.
 * latency: ping-pong, value = half round trip (us)
 * bw:      rank 0 posts W Isend, rank 1 W Irecv, Waitall, then rank 1 sends a 4-byte ack;
 *          value = W * size / time (MB/s, 1 MB = 1e6 B)
 * bibw:    both ranks post W Irecv + W Isend, Waitall; value = 2 * W * size / time (MB/s)
 * rate:    as bw with rate-size messages; value = W / time / 1e6 (Mmsg/s)
 * Output: "RESULT test=<t> size=<bytes> iters=<n> value=<x> unit=<u>" on stdout (rank 0),
 * iters = timed iterations over all blocks; a human-readable table on stderr.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "size_arg.h"

enum test { T_LAT, T_BW, T_BIBW, T_RATE, T_COUNT };
static const char *test_name[T_COUNT] = {"latency", "bw", "bibw", "rate"};
static const char *test_unit[T_COUNT] = {"us", "MB/s", "MB/s", "Mmsg/s"};

#define MAX_SIZES 64
#define TAG_DATA 1
#define TAG_ACK 2
#define TAG_BACK 3

static struct {
    int tests[T_COUNT];
    size_t sizes[MAX_SIZES];
    int nsizes;
    int window;
    size_t window_bytes;
    size_t rate_size;
    double target_s;
    int reps;
    long min_iters, max_iters;
    int validate;
} opt;

static int me;          /* rank in the pair communicator (0 or 1) */
static MPI_Comm pair;   /* ranks 0 and 1 of MPI_COMM_WORLD */
static unsigned char **sbuf, **rbuf; /* nbuf send / receive buffers */
static int nbuf;
static char ack[4];
static int inject_corruption;

static void die(const char *msg)
{
    fprintf(stderr, "mpibench: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* ---------------------------------------------------------------- validation patterns */
static unsigned char pat(int test, size_t size, int sender, int slot, int phase, size_t i)
{
    uint64_t x = ((uint64_t)test << 56) ^ ((uint64_t)size << 16) ^ ((uint64_t)sender << 12) ^
                 ((uint64_t)slot << 4) ^ (uint64_t)phase;
    x = x * 0x9e3779b97f4a7c15ull + i;
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 29;
    return (unsigned char)x;
}

static void fill(unsigned char *b, int test, size_t size, int sender, int slot, int phase)
{
    for (size_t i = 0; i < size; i++)
        b[i] = pat(test, size, sender, slot, phase, i);
}

static void check(const unsigned char *b, int test, size_t size, int sender, int slot, int phase)
{
    for (size_t i = 0; i < size; i++) {
        unsigned char want = pat(test, size, sender, slot, phase, i);
        if (b[i] != want) {
            fprintf(stderr,
                    "mpibench: VALIDATION FAILED: test=%s size=%zu %s iteration, rank %d "
                    "receiving from rank %d, buffer %d, byte %zu: got 0x%02x, expected 0x%02x\n",
                    test_name[test], size, phase ? "last" : "first", me, sender, slot, i, b[i],
                    want);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
}

/* ---------------------------------------------------------------- one iteration each */
static int window_for(int test, size_t size)
{
    if (test == T_LAT)
        return 1;
    size_t w = (size_t)opt.window;
    if (size > 0 && w * size > opt.window_bytes)
        w = opt.window_bytes / size;
    return w < 1 ? 1 : (int)w;
}

static void run_iters(int test, size_t size, long iters)
{
    int w = window_for(test, size);
    int peer = 1 - me;
    MPI_Request rq[2 * 1024];
    for (long it = 0; it < iters; it++) {
        if (test == T_LAT) {
            if (me == 0) {
                MPI_Send(sbuf[0], (int)size, MPI_BYTE, peer, TAG_DATA, pair);
                MPI_Recv(rbuf[0], (int)size, MPI_BYTE, peer, TAG_BACK, pair, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf[0], (int)size, MPI_BYTE, peer, TAG_DATA, pair, MPI_STATUS_IGNORE);
                MPI_Send(sbuf[0], (int)size, MPI_BYTE, peer, TAG_BACK, pair);
            }
        } else if (test == T_BW || test == T_RATE) {
            if (me == 0) {
                for (int j = 0; j < w; j++)
                    MPI_Isend(sbuf[j % nbuf], (int)size, MPI_BYTE, peer, TAG_DATA, pair, &rq[j]);
                MPI_Waitall(w, rq, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, 4, MPI_BYTE, peer, TAG_ACK, pair, MPI_STATUS_IGNORE);
            } else {
                for (int j = 0; j < w; j++)
                    MPI_Irecv(rbuf[j % nbuf], (int)size, MPI_BYTE, peer, TAG_DATA, pair, &rq[j]);
                MPI_Waitall(w, rq, MPI_STATUSES_IGNORE);
                MPI_Send(ack, 4, MPI_BYTE, peer, TAG_ACK, pair);
            }
        } else { /* T_BIBW */
            for (int j = 0; j < w; j++)
                MPI_Irecv(rbuf[j % nbuf], (int)size, MPI_BYTE, peer, TAG_DATA, pair, &rq[j]);
            for (int j = 0; j < w; j++)
                MPI_Isend(sbuf[j % nbuf], (int)size, MPI_BYTE, peer, TAG_DATA, pair, &rq[w + j]);
            MPI_Waitall(2 * w, rq, MPI_STATUSES_IGNORE);
        }
    }
}

/* one iteration with every send buffer pattern-filled and every received byte checked */
static void validated_iter(int test, size_t size, int phase)
{
    int w = window_for(test, size);
    int used = w < nbuf ? w : nbuf;
    for (int j = 0; j < used; j++) {
        fill(sbuf[j], test, size, me, j, phase);
        memset(rbuf[j], 0xA5 ^ phase, size);
    }
    run_iters(test, size, 1);
    /* test hook: prove that a corrupted byte is caught (MPIBENCH_INJECT_CORRUPTION=1) */
    if (inject_corruption && me == 1 && size > 0 && phase == 1)
        rbuf[0][size / 2] ^= 0x40;
    int receives = (test == T_LAT || test == T_BIBW) || me == 1;
    if (receives)
        for (int j = 0; j < used; j++)
            check(rbuf[j], test, size, 1 - me, j, phase);
    MPI_Barrier(pair);
}

/* ---------------------------------------------------------------- measurement */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct result {
    long iters;
    double value, vmin, vmax;
    int window;
};

static double value_of(int test, size_t size, long iters, double t)
{
    double w = window_for(test, size);
    switch (test) {
    case T_LAT: return t * 1e6 / (2.0 * (double)iters);
    case T_BW: return (double)size * w * (double)iters / t / 1e6;
    case T_BIBW: return 2.0 * (double)size * w * (double)iters / t / 1e6;
    default: return w * (double)iters / t / 1e6;
    }
}

static struct result measure(int test, size_t size)
{
    struct result r = {0};
    r.window = window_for(test, size);
    if (opt.validate)
        validated_iter(test, size, 0);

    /* warm-up and calibration; rank 0 decides, rank 1 follows */
    long n = 1;
    double t_iter = 0;
    for (;;) {
        MPI_Barrier(pair);
        double t0 = MPI_Wtime();
        run_iters(test, size, n);
        double t = MPI_Wtime() - t0;
        long next = 0;
        if (me == 0) {
            t_iter = t / (double)n;
            if (t < opt.target_s / 20 && n < opt.max_iters)
                next = n * 4 > opt.max_iters ? opt.max_iters : n * 4;
        }
        MPI_Bcast(&next, 1, MPI_LONG, 0, pair);
        if (!next)
            break;
        n = next;
    }
    /* a stall during the last batch would inflate t_iter and starve the timed blocks:
     * run the final batch size twice more and keep the fastest */
    for (int again = 0; again < 2; again++) {
        MPI_Barrier(pair);
        double t0 = MPI_Wtime();
        run_iters(test, size, n);
        double t = (MPI_Wtime() - t0) / (double)n;
        if (me == 0 && t < t_iter)
            t_iter = t;
    }
    long iters = 0;
    if (me == 0) {
        double want = opt.target_s / opt.reps / (t_iter > 0 ? t_iter : 1e-9);
        iters = want < (double)opt.min_iters ? opt.min_iters
              : want > (double)opt.max_iters ? opt.max_iters
                                              : (long)want;
    }
    MPI_Bcast(&iters, 1, MPI_LONG, 0, pair);

    double *v = malloc(sizeof(double) * (size_t)opt.reps);
    for (int k = 0; k < opt.reps; k++) {
        MPI_Barrier(pair);
        double t0 = MPI_Wtime();
        run_iters(test, size, iters);
        double t = MPI_Wtime() - t0;
        if (test == T_BIBW) { /* both sides time; take the slower */
            double tmax;
            MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, pair);
            t = tmax;
        }
        v[k] = value_of(test, size, iters, t);
    }
    qsort(v, (size_t)opt.reps, sizeof *v, cmp_double);
    r.value = opt.reps % 2 ? v[opt.reps / 2] : (v[opt.reps / 2 - 1] + v[opt.reps / 2]) / 2;
    r.vmin = v[0];
    r.vmax = v[opt.reps - 1];
    r.iters = iters * opt.reps;
    free(v);

    if (opt.validate)
        validated_iter(test, size, 1);
    return r;
}

/* ---------------------------------------------------------------- options */
static void set_tests(const char *s)
{
    memset(opt.tests, 0, sizeof opt.tests);
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        if (!strcmp(t, "all")) {
            for (int k = 0; k < T_COUNT; k++)
                opt.tests[k] = 1;
            found = 1;
        }
        for (int k = 0; k < T_COUNT; k++)
            if (!strcmp(t, test_name[k]))
                opt.tests[k] = found = 1;
        if (!found)
            die("--test: expected latency, bw, bibw, rate or all");
    }
    free(copy);
}

static void set_sizes(const char *s)
{
    char *copy = strdup(s), *save = NULL;
    opt.nsizes = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (opt.nsizes == MAX_SIZES)
            die("--sizes: too many sizes");
        opt.sizes[opt.nsizes++] = size_arg_or_fail(t, die);
    }
    free(copy);
    if (!opt.nsizes)
        die("--sizes: empty list");
}

static void sweep(size_t lo, size_t hi)
{
    opt.nsizes = 0;
    if (lo == 0) {
        opt.sizes[opt.nsizes++] = 0;
        lo = 1;
    }
    for (size_t s = 1; s <= hi && opt.nsizes < MAX_SIZES; s <<= 1)
        if (s >= lo)
            opt.sizes[opt.nsizes++] = s;
}

static void parse_args(int argc, char **argv)
{
    size_t lo = 0, hi = 16u << 20;
    int explicit_sizes = 0, have_range = 0, quick = 0;
    double target_ms = -1;
    int reps = -1;
    set_tests("all");
    opt.window = 64;
    opt.window_bytes = 64u << 20;
    opt.rate_size = 8;
    opt.min_iters = 2;
    opt.max_iters = 1000000;
    opt.validate = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                 \
    do {                                                                                       \
        if (!v)                                                                                \
            die("option needs a value");                                                       \
        i++;                                                                                   \
    } while (0)
        if (!strcmp(a, "--test")) { NEED(); set_tests(v); }
        else if (!strcmp(a, "--min")) { NEED(); lo = size_arg_or_fail(v, die); have_range = 1; }
        else if (!strcmp(a, "--max")) { NEED(); hi = size_arg_or_fail(v, die); have_range = 1; }
        else if (!strcmp(a, "--sizes")) { NEED(); set_sizes(v); explicit_sizes = 1; }
        else if (!strcmp(a, "--window")) { NEED(); opt.window = atoi(v); }
        else if (!strcmp(a, "--window-bytes")) { NEED(); opt.window_bytes = size_arg_or_fail(v, die); }
        else if (!strcmp(a, "--rate-size")) { NEED(); opt.rate_size = size_arg_or_fail(v, die); }
        else if (!strcmp(a, "--target-ms")) { NEED(); target_ms = atof(v); }
        else if (!strcmp(a, "--reps")) { NEED(); reps = atoi(v); }
        else if (!strcmp(a, "--min-iters")) { NEED(); opt.min_iters = atol(v); }
        else if (!strcmp(a, "--max-iters")) { NEED(); opt.max_iters = atol(v); }
        else if (!strcmp(a, "--no-validate")) opt.validate = 0;
        else if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (me == 0)
                fprintf(stderr, "usage: mpibench [--test latency|bw|bibw|rate|all] [--min B] "
                                "[--max B] [--sizes a,b,c] [--window W] [--window-bytes B] "
                                "[--rate-size B] [--target-ms T] [--reps R] [--min-iters N] "
                                "[--max-iters N] [--no-validate] [--quick]\n");
            MPI_Finalize();
            exit(0);
        } else {
            fprintf(stderr, "mpibench: unknown option %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
#undef NEED
    }
    if (quick && !explicit_sizes && !have_range)
        set_sizes("0,8,1k,64k,1m");
    else if (!explicit_sizes)
        sweep(lo, hi);
    opt.target_s = (target_ms >= 0 ? target_ms : quick ? 20 : 200) / 1e3;
    opt.reps = reps > 0 ? reps : quick ? 3 : 5;
    if (opt.window < 1 || opt.window > 1024)
        die("--window must be 1..1024");
    if (opt.min_iters < 1 || opt.max_iters < opt.min_iters)
        die("need 1 <= --min-iters <= --max-iters");
    if (!opt.nsizes)
        die("no sizes selected");
    for (int k = 0; k < opt.nsizes; k++)
        if (opt.sizes[k] > (size_t)1 << 30)
            die("sizes above 1 GiB are not supported");
}

int main(int argc, char **argv)
{
    int wrank, wsize;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    me = wrank;
    inject_corruption = getenv("MPIBENCH_INJECT_CORRUPTION") != NULL;
    if (wsize < 2)
        die("needs at least 2 ranks");
    parse_args(argc, argv);
    MPI_Comm_split(MPI_COMM_WORLD, wrank < 2 ? 0 : MPI_UNDEFINED, wrank, &pair);

    if (wrank < 2) {
        size_t maxsize = opt.rate_size;
        for (int k = 0; k < opt.nsizes; k++)
            if (opt.sizes[k] > maxsize)
                maxsize = opt.sizes[k];
        /* enough distinct buffers for one window, within window-bytes (reuse beyond) */
        nbuf = opt.window;
        if (maxsize > 0 && (size_t)nbuf * maxsize > opt.window_bytes)
            nbuf = (int)(opt.window_bytes / maxsize);
        if (nbuf < 1)
            nbuf = 1;
        sbuf = malloc(sizeof *sbuf * (size_t)opt.window);
        rbuf = malloc(sizeof *rbuf * (size_t)opt.window);
        for (int j = 0; j < nbuf; j++) {
            sbuf[j] = malloc(maxsize ? maxsize : 1);
            rbuf[j] = malloc(maxsize ? maxsize : 1);
            if (!sbuf[j] || !rbuf[j])
                die("out of memory");
            memset(sbuf[j], 0, maxsize ? maxsize : 1);
            memset(rbuf[j], 0, maxsize ? maxsize : 1);
        }
        if (wrank == 0) {
            char name[MPI_MAX_PROCESSOR_NAME];
            int len;
            MPI_Get_processor_name(name, &len);
            printf("# mpibench: np=%d window=%d window_bytes=%zu target_ms=%.0f reps=%d "
                   "validate=%d node0=%s\n",
                   wsize, opt.window, opt.window_bytes, opt.target_s * 1e3, opt.reps,
                   opt.validate, name);
            fflush(stdout);
        }
        for (int t = 0; t < T_COUNT; t++) {
            if (!opt.tests[t])
                continue;
            if (wrank == 0)
                fprintf(stderr, "\n# %-8s %12s %10s %7s %14s %14s %14s\n", test_name[t],
                        "size(B)", "iters", "window", "median", "min", "max");
            int n = t == T_RATE ? 1 : opt.nsizes;
            for (int k = 0; k < n; k++) {
                size_t size = t == T_RATE ? opt.rate_size : opt.sizes[k];
                /* moving zero bytes has no bandwidth: a row of zeros would say nothing */
                if ((t == T_BW || t == T_BIBW) && size == 0)
                    continue;
                struct result r = measure(t, size);
                if (wrank == 0) {
                    printf("RESULT test=%s size=%zu iters=%ld value=%.4f unit=%s\n",
                           test_name[t], size, r.iters, r.value, test_unit[t]);
                    fflush(stdout);
                    fprintf(stderr, "  %-8s %12zu %10ld %7d %14.4f %14.4f %14.4f %s\n", "",
                            size, r.iters, r.window, r.value, r.vmin, r.vmax, test_unit[t]);
                }
            }
        }
        for (int j = 0; j < nbuf; j++) {
            free(sbuf[j]);
            free(rbuf[j]);
        }
        free(sbuf);
        free(rbuf);
        MPI_Comm_free(&pair);
    }
    /* ranks other than 0 and 1 wait here without spinning, so they do not steal a core */
    MPI_Request done;
    MPI_Ibarrier(MPI_COMM_WORLD, &done);
    if (wrank < 2) {
        MPI_Wait(&done, MPI_STATUS_IGNORE);
    } else {
        int flag = 0;
        struct timespec ms = {0, 1000000};
        while (MPI_Test(&done, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag)
            nanosleep(&ms, NULL);
    }
    MPI_Finalize();
    return 0;
}
