/* mpicoll: collective latency over every rank of MPI_COMM_WORLD (rmca-bench runs it at
 * 4 ranks), with per-size adaptive iteration counts and byte-exact validation.
 *
 *   mpirun -np 4 ... mpicoll [--test allreduce,alltoall] [--sizes 8,64k] [--target-ms T]
 *                            [--reps R] [--no-validate]
 *
 * allreduce: MPI_Allreduce of `size` bytes (size / 4 MPI_INTs, MPI_SUM) per rank; ints, and
 *            sums that never overflow: Open MPI 4.1.4's op/avx adds MPI_UNSIGNED_CHAR (and
 *            other small types) with saturation from 16 elements up, so a byte sum that
 *            wraps comes out as 0xff (ompi#8045; this program found it again)
 * alltoall:  MPI_Alltoall of `size` bytes (MPI_BYTE) to every rank (the buffers hold
 *            size x ranks bytes)
 * Method for each (test, size): one validated call (every result byte checked against
 * what the contributions must give), warm-up and calibration (n = 1, 4, 16, ... calls
 * until a batch takes 1/20 of the target; rank 0 decides), then R timed blocks of
 * target / (R * t_call) calls, each block's time the slowest rank's (MPI_MAX), the value
 * the median block in microseconds per call; one more validated call.
 * Output: "RESULT test=<t> size=<bytes> iters=<n> value=<x> unit=us" on rank 0's stdout
 * (the same format as mpibench), a table on stderr. A wrong byte aborts (exit 3).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size_arg.h"

enum test { T_ALLREDUCE, T_ALLTOALL, T_COUNT };
static const char *test_name[T_COUNT] = {"allreduce", "alltoall"};

#define MAX_SIZES 32

static int rank, nranks;
static int tests[T_COUNT] = {1, 1};
static size_t sizes[MAX_SIZES] = {8, 65536};
static int nsizes = 2;
static double target_s = 0.2;
static int reps = 5;
static int validate = 1;
static unsigned char *sbuf, *rbuf;

static void die(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "mpicoll: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* What a rank contributes at index i in a phase (0 first, 1 last validated call): 16
 * bits, so that the sum over ranks never overflows an int. */
static unsigned contribution(int from, int to, size_t i, int phase)
{
    uint64_t x = ((uint64_t)from << 40) ^ ((uint64_t)to << 24) ^ ((uint64_t)phase << 20) ^ i;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    return (unsigned)(x & 0xffff);
}

static void call(int test, size_t size)
{
    if (test == T_ALLREDUCE)
        MPI_Allreduce(sbuf, rbuf, (int)(size / 4), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else
        MPI_Alltoall(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, MPI_COMM_WORLD);
}

static void fail(int test, size_t size, int phase, size_t at, unsigned got, unsigned want)
{
    fprintf(stderr,
            "mpicoll: VALIDATION FAILED: test=%s size=%zu %s call, rank %d, %s %zu: got 0x%x, "
            "expected 0x%x\n",
            test_name[test], size, phase ? "last" : "first", rank,
            test == T_ALLREDUCE ? "int" : "byte", at, got, want);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void validated_call(int test, size_t size, int phase)
{
    size_t span = test == T_ALLTOALL ? size * (size_t)nranks : size;
    memset(rbuf, 0xA5 ^ phase, span);
    if (test == T_ALLREDUCE) {
        int *s = (int *)sbuf, *r = (int *)rbuf;
        for (size_t i = 0; i < size / 4; i++)
            s[i] = (int)contribution(rank, 0, i, phase);
        call(test, size);
        for (size_t i = 0; i < size / 4; i++) {
            unsigned want = 0;
            for (int from = 0; from < nranks; from++)
                want += contribution(from, 0, i, phase);
            if ((unsigned)r[i] != want)
                fail(test, size, phase, i, (unsigned)r[i], want);
        }
        return;
    }
    for (size_t i = 0; i < span; i++)
        sbuf[i] = (unsigned char)contribution(rank, (int)(i / size), i % size, phase);
    call(test, size);
    for (size_t i = 0; i < span; i++) {
        unsigned char want = (unsigned char)contribution((int)(i / size), rank, i % size, phase);
        if (rbuf[i] != want)
            fail(test, size, phase, i, rbuf[i], want);
    }
}

/* Seconds for n calls, the slowest rank's. */
static double timed(int test, size_t size, long n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long k = 0; k < n; k++)
        call(test, size);
    double t = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void measure(int test, size_t size)
{
    if (validate)
        validated_call(test, size, 0);
    long n = 1;
    double t;
    while ((t = timed(test, size, n)) < target_s / 20 && n < 1000000)
        n *= 4;
    double t_call = t / (double)n;
    double again = timed(test, size, n) / (double)n;
    if (again < t_call)
        t_call = again;
    long iters = (long)(target_s / reps / (t_call > 0 ? t_call : 1e-9));
    if (iters < 2)
        iters = 2;
    double v[64];
    for (int k = 0; k < reps; k++)
        v[k] = timed(test, size, iters) * 1e6 / (double)iters;
    qsort(v, (size_t)reps, sizeof v[0], cmp_double);
    double median = reps % 2 ? v[reps / 2] : (v[reps / 2 - 1] + v[reps / 2]) / 2;
    if (validate)
        validated_call(test, size, 1);
    if (rank == 0) {
        printf("RESULT test=%s size=%zu iters=%ld value=%.4f unit=us\n", test_name[test], size,
               iters * reps, median);
        fflush(stdout);
        fprintf(stderr, "  %-10s %10zu %10ld %12.4f %12.4f %12.4f us\n", test_name[test], size,
                iters * reps, median, v[0], v[reps - 1]);
    }
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-validate")) {
            validate = 0;
            continue;
        }
        if (!v)
            die("unknown option or missing value (see the header of tests/bench/mpicoll.c)");
        i++;
        if (!strcmp(a, "--test")) {
            tests[T_ALLREDUCE] = tests[T_ALLTOALL] = 0;
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (int k = 0; k < T_COUNT; k++)
                    if (!strcmp(t, test_name[k]))
                        tests[k] = found = 1;
                if (!found)
                    die("--test: expected allreduce and/or alltoall");
            }
            free(copy);
        } else if (!strcmp(a, "--sizes")) {
            char *copy = strdup(v), *save = NULL;
            nsizes = 0;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (nsizes == MAX_SIZES)
                    die("--sizes: too many sizes");
                sizes[nsizes] = size_arg_or_fail(t, die);
                if (sizes[nsizes] == 0 || sizes[nsizes] % 4 || sizes[nsizes] > (64u << 20))
                    die("--sizes: each size must be a multiple of 4 bytes, at most 64 MiB");
                nsizes++;
            }
            free(copy);
            if (!nsizes)
                die("--sizes: empty list");
        } else if (!strcmp(a, "--target-ms")) {
            target_s = atof(v) / 1e3;
            if (target_s <= 0)
                die("--target-ms must be positive");
        } else if (!strcmp(a, "--reps")) {
            reps = atoi(v);
            if (reps < 1 || reps > 64)
                die("--reps must be 1..64");
        } else {
            die("unknown option (see the header of tests/bench/mpicoll.c)");
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    parse_args(argc, argv);
    size_t largest = 0;
    for (int k = 0; k < nsizes; k++)
        if (sizes[k] > largest)
            largest = sizes[k];
    sbuf = malloc(largest * (size_t)nranks);
    rbuf = malloc(largest * (size_t)nranks);
    if (!sbuf || !rbuf)
        die("out of memory");
    memset(sbuf, 0, largest * (size_t)nranks);
    if (rank == 0) {
        printf("# mpicoll: np=%d target_ms=%.0f reps=%d validate=%d\n", nranks, target_s * 1e3,
               reps, validate);
        fprintf(stderr, "# %-10s %10s %10s %12s %12s %12s\n", "test", "size(B)", "iters",
                "median", "min", "max");
        fflush(stdout);
    }
    for (int t = 0; t < T_COUNT; t++)
        for (int k = 0; k < nsizes && tests[t]; k++)
            measure(t, sizes[k]);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
