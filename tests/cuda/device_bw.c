/*
 * device_bw.c -- bandwidth on CUDA device memory: the GPU's own copy against MPI.
 *
 * Built like device_buffers.c (CUDA driver API only: cuda.h, -lcuda, and check.h
 * for the payload pattern), so the same binary runs on a real driver and on the
 * test stand-in (tools/cuda-standin).
 *
 * Parts:
 *   dtod  on every rank in turn (the others wait, so ranks sharing a GPU do not
 *         share its bandwidth): cuMemcpyDtoD between two device buffers, ITERS
 *         copies then cuCtxSynchronize, timed with MPI_Wtime; the median of REPS
 *         repetitions after one untimed warm-up
 *   mpi   ranks 0 and 1, device buffers on both sides, as OSU's osu_bw does it: a
 *         window of W MPI_Isend of S bytes from rank 0 (MPI_Irecv on rank 1, all
 *         into the same buffers), MPI_Waitall, then a 1-byte ack from rank 1;
 *         ITERS windows per repetition, median of REPS after one warm-up
 *   lat   ranks 0 and 1: ping-pong on device buffers, half the round trip, for each
 *         size of --lat-sizes (default 8 bytes), as osu_latency D D does it
 *
 * Every figure is reported only after its bytes were checked: the source buffers
 * hold check.h's pattern, the destination is cleared (cuMemsetD8) before the last
 * repetition and copied back to host after it; a wrong byte (or an overrun into
 * the guard after the payload) prints FAIL and the figure is replaced by the word
 * "unverified". The exit status is non-zero then.
 *
 * Output (rank 0; MB/s = 10^6 bytes per second, as OSU's):
 *   device_bw info ranks <n> window <W> reps <R> quick <0|1>
 *   device_bw rank <r> device <d> of <count> name <name...>
 *   device_bw dtod <size> <MB/s>                  (rank 0's GPU)
 *   device_bw dtod_rank<r> <size> <MB/s>          (every other rank's)
 *   device_bw mpi <size> <MB/s>
 *   device_bw mpi_ratio_to_dtod <size> <ratio>    (mpi / rank 0's dtod)
 *   device_bw latency <size> <us>                 (one line per --lat-sizes size)
 *   <passed> passed, <failed> failed              (check.h's last line)
 *
 * Flags: --sizes=LIST (comma separated, K/M/G suffixes, powers of 1024; default
 * 64K,128K,...,64M; --quick: 64K,1M,16M), --iters=N (copies / windows per
 * repetition for every size; default: about 256 MiB moved per repetition, 2..100;
 * --quick: 32 MiB), --reps=N (default 5, --quick 3), --window=N (default 16,
 * --quick 8), --parts=LIST (of dtod,mpi,lat; default all), --lat-sizes=LIST (like
 * --sizes; default 8), --host-lat (the lat part on host buffers: the job's host
 * latency), --lat-iters=N (default 2000, --quick 200; 1/10 of it from 1 MiB),
 * --device=N (default: local rank modulo the device count),
 * and check.h's --quick, --verbose, --inject-corruption (one rank's first checked
 * buffer gets a flipped byte: that figure must come out "unverified").
 */
#include <limits.h>

#include "check.h"
#include "cuda_buffers.h"

#define TAG_BW 31
#define TAG_ACK 32
#define TAG_PING 33
#define TAG_PONG 34
#define MAX_SIZES 32
#define MAX_REPS 64

static size_t sizes[MAX_SIZES];
static int nsizes;
static size_t lat_sizes[MAX_SIZES];
static int nlat_sizes;
static long iters_arg = -1;
static int reps = -1;
static int window = -1;
static long lat_iters = -1;
static int device_arg = -1;
static const char *parts = "dtod,mpi,lat";
static int host_lat;

static int want(const char *part) { return strstr(parts, part) != NULL; }

/* "64K" -> 65536; 0 when it does not parse. */
static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end != '\0' && *end != ',')
        return 0;
    return (size_t)v;
}

/* Fills out[] (MAX_SIZES long) from a comma-separated list; the count, 0 if it does not
 * parse. */
static int parse_sizes(const char *list, size_t *out)
{
    int n = 0;
    for (const char *p = list; *p;) {
        size_t v = parse_size(p);
        if (v == 0 || v > INT_MAX || n == MAX_SIZES)
            return 0;
        out[n++] = v;
        const char *comma = strchr(p, ',');
        if (!comma)
            break;
        p = comma + 1;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Copies (dtod) or windows (mpi) per repetition: about `target` bytes moved. */
static long iters_for(size_t size, size_t per_iter)
{
    if (iters_arg > 0)
        return iters_arg;
    size_t target = (size_t)(ck.quick ? 32 : 256) << 20;
    long n = (long)(target / (size * per_iter));
    return n < 2 ? 2 : n > 100 ? 100 : n;
}

/* A device buffer of n bytes plus check.h's guard, all CK_GUARD_BYTE. */
static CUdeviceptr dev_alloc(size_t n)
{
    CUdeviceptr d = 0;
    cu_check(cuMemAlloc(&d, n + CK_GUARD), "cuMemAlloc");
    cu_check(cuMemsetD8(d, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
    return d;
}

/* Prints "device_bw <key> <size> <value>" or "... unverified" on rank 0. */
static void report(const char *key, size_t size, double value, int ok, const char *fmt)
{
    if (ck.rank != 0)
        return;
    if (!ok) {
        printf("device_bw %s %zu unverified\n", key, size);
        return;
    }
    printf("device_bw %s %zu ", key, size);
    printf(fmt, value);
    printf("\n");
}

/* cuMemcpyDtoD on this rank's GPU, rank by rank. Returns rank 0's MB/s per size in
 * dtod0 (0 where unverified); every rank's figure is printed by rank 0. */
static void part_dtod(unsigned char *staging, size_t max, double *dtod0)
{
    CUdeviceptr a = dev_alloc(max), b = dev_alloc(max);
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        long iters = iters_for(n, 1);
        double mbs = 0;
        int ok = 1;
        for (int turn = 0; turn < ck.size; turn++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (turn != ck.rank)
                continue;
            double t[MAX_REPS];
            dev_fill(a, staging, n, ck.rank, ck.rank, TAG_BW, s);
            for (int rep = -1; rep < reps; rep++) {
                if (rep == reps - 1)
                    cu_check(cuMemsetD8(b, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
                cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
                double t0 = MPI_Wtime();
                for (long i = 0; i < iters; i++)
                    cu_check(cuMemcpyDtoD(b, a, n), "cuMemcpyDtoD");
                cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
                double t1 = MPI_Wtime();
                if (rep >= 0)
                    t[rep] = t1 - t0;
            }
            char what[96];
            snprintf(what, sizeof what, "cuMemcpyDtoD %zu B", n);
            ok = dev_verify(what, b, staging, n, ck.rank, ck.rank, TAG_BW, s);
            double sec = median(t, reps);
            mbs = ok && sec > 0 ? (double)n * (double)iters / sec / 1e6 : 0;
        }
        /* Rank 0 prints every rank's figure. */
        double all[2] = {mbs, ok};
        if (ck.rank == 0) {
            report("dtod", n, mbs, ok, "%.1f");
            dtod0[s] = ok ? mbs : 0;
            for (int r = 1; r < ck.size; r++) {
                MPI_Recv(all, 2, MPI_DOUBLE, r, TAG_BW, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                char key[32];
                snprintf(key, sizeof key, "dtod_rank%d", r);
                report(key, n, all[0], all[1] != 0, "%.1f");
            }
        } else {
            MPI_Send(all, 2, MPI_DOUBLE, 0, TAG_BW, MPI_COMM_WORLD);
        }
        ck_progress("dtod %zu B done", n);
    }
    cu_check(cuMemFree(a), "cuMemFree");
    cu_check(cuMemFree(b), "cuMemFree");
}

/* osu_bw on device buffers between ranks 0 and 1. */
static void part_mpi(unsigned char *staging, size_t max, const double *dtod0)
{
    int me = ck.rank;
    if (ck.size < 2) {
        if (me == 0)
            printf("device_bw mpi skipped: needs 2 ranks\n");
        return;
    }
    CUdeviceptr buf = 0, ack = 0;
    MPI_Request *req = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)window);
    if (me <= 1) {
        buf = dev_alloc(max);
        ack = dev_alloc(1);
    }
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        long iters = iters_for(n, (size_t)window);
        double t[MAX_REPS];
        int ok = 1;
        if (me == 0)
            dev_fill(buf, staging, n, 0, 1, TAG_BW, s);
        for (int rep = -1; rep < reps; rep++) {
            /* The receive buffer is cleared before the last repetition: what it
             * holds afterwards came in during that repetition. */
            if (me == 1 && rep == reps - 1)
                cu_check(cuMemsetD8(buf, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
            if (me <= 1)
                cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (me == 0) {
                for (long i = 0; i < iters; i++) {
                    for (int w = 0; w < window; w++)
                        MPI_Isend(ptr(buf), (int)n, MPI_BYTE, 1, TAG_BW, MPI_COMM_WORLD, &req[w]);
                    MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                    MPI_Recv(ptr(ack), 1, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                }
            } else if (me == 1) {
                for (long i = 0; i < iters; i++) {
                    for (int w = 0; w < window; w++)
                        MPI_Irecv(ptr(buf), (int)n, MPI_BYTE, 0, TAG_BW, MPI_COMM_WORLD, &req[w]);
                    MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                    MPI_Send(ptr(ack), 1, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
                }
            }
            double t1 = MPI_Wtime();
            if (rep >= 0)
                t[rep] = t1 - t0;
        }
        if (me == 1) {
            char what[96];
            snprintf(what, sizeof what, "MPI window of %d x %zu B device -> device", window, n);
            ok = dev_verify(what, buf, staging, n, 0, 1, TAG_BW, s);
        }
        MPI_Bcast(&ok, 1, MPI_INT, 1, MPI_COMM_WORLD);
        if (me == 0) {
            double sec = median(t, reps);
            double mbs = sec > 0 ? (double)n * (double)window * (double)iters / sec / 1e6 : 0;
            report("mpi", n, mbs, ok, "%.1f");
            if (want("dtod"))
                report("mpi_ratio_to_dtod", n, dtod0[s] > 0 ? mbs / dtod0[s] : 0,
                       ok && dtod0[s] > 0, "%.3f");
        }
        ck_progress("mpi %zu B done", n);
    }
    if (me <= 1) {
        cu_check(cuMemFree(buf), "cuMemFree");
        cu_check(cuMemFree(ack), "cuMemFree");
    }
    free(req);
}

/* Ping-pong of n bytes on device buffers between ranks 0 and 1. */
static void part_lat(unsigned char *staging, size_t n)
{
    int me = ck.rank;
    if (ck.size < 2)
        return;
    long iters = n >= (1 << 20) ? lat_iters / 10 + 1 : lat_iters;
    long warmup = iters / 10 + 1;
    double dt = 0;
    int ok = 1;
    if (me <= 1) {
        /* Device buffers, or with --host-lat host ones (the same job's host latency). */
        CUdeviceptr sdev = 0, rdev = 0;
        unsigned char *shost = NULL, *rhost = NULL;
        int peer = 1 - me;
        if (host_lat) {
            shost = ck_alloc(n);
            rhost = ck_alloc(n);
            ck_fill(shost, n, me, peer, TAG_PING, 0);
        } else {
            sdev = dev_alloc(n);
            rdev = dev_alloc(n);
            dev_fill(sdev, staging, n, me, peer, TAG_PING, 0);
        }
        void *sbuf = host_lat ? (void *)shost : ptr(sdev);
        void *rbuf = host_lat ? (void *)rhost : ptr(rdev);
        double t0 = 0;
        for (long i = -warmup; i < iters; i++) {
            if (i == 0) {
                /* The last receive is checked: cleared before the timed loop. */
                if (host_lat) {
                    memset(rhost, CK_GUARD_BYTE, n + CK_GUARD);
                } else {
                    cu_check(cuMemsetD8(rdev, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
                    cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
                }
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            if (me == 0) {
                MPI_Send(sbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
            }
        }
        dt = MPI_Wtime() - t0;
        if (host_lat) {
            ok = ck_verify("ping-pong host", rhost, n, peer, me, TAG_PING, 0);
            free(shost);
            free(rhost);
        } else {
            ok = dev_verify("ping-pong device", rdev, staging, n, peer, me, TAG_PING, 0);
            cu_check(cuMemFree(sdev), "cuMemFree");
            cu_check(cuMemFree(rdev), "cuMemFree");
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    report("latency", n, dt / (double)iters / 2 * 1e6, all_ok, "%.3f");
}

static void usage_exit(const char *arg)
{
    fprintf(stderr, "device_bw: bad argument '%s' (see the comment at the top of device_bw.c)\n",
            arg);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *sizes_arg = NULL, *lat_sizes_arg = "8";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--sizes=", 8) == 0)
            sizes_arg = a + 8;
        else if (strcmp(a, "--host-lat") == 0)
            host_lat = 1;
        else if (strncmp(a, "--lat-sizes=", 12) == 0)
            lat_sizes_arg = a + 12;
        else if (strncmp(a, "--iters=", 8) == 0)
            iters_arg = atol(a + 8);
        else if (strncmp(a, "--reps=", 7) == 0)
            reps = atoi(a + 7);
        else if (strncmp(a, "--window=", 9) == 0)
            window = atoi(a + 9);
        else if (strncmp(a, "--lat-iters=", 12) == 0)
            lat_iters = atol(a + 12);
        else if (strncmp(a, "--device=", 9) == 0)
            device_arg = atoi(a + 9);
        else if (strncmp(a, "--parts=", 8) == 0)
            parts = a + 8;
        else if (strcmp(a, "--quick") != 0 && strcmp(a, "--verbose") != 0 &&
                 strcmp(a, "--inject-corruption") != 0)
            usage_exit(a);
        if (strcmp(a, "--quick") == 0)
            ck.quick = 1; /* ck_init sets it again; the defaults below need it now */
    }
    /* -1: not given; anything else must be positive. */
    if (reps == 0 || reps < -1 || reps > MAX_REPS || window == 0 || window < -1 ||
        iters_arg == 0 || iters_arg < -1 || lat_iters == 0 || lat_iters < -1)
        usage_exit("--reps/--window/--iters/--lat-iters");
    if (reps < 0)
        reps = ck.quick ? 3 : 5;
    if (window < 0)
        window = ck.quick ? 8 : 16;
    if (lat_iters < 0)
        lat_iters = ck.quick ? 200 : 2000;
    if (sizes_arg == NULL)
        sizes_arg = ck.quick ? "64K,1M,16M" : "64K,128K,256K,512K,1M,2M,4M,8M,16M,32M,64M";
    if ((nsizes = parse_sizes(sizes_arg, sizes)) == 0)
        usage_exit(sizes_arg);
    if ((nlat_sizes = parse_sizes(lat_sizes_arg, lat_sizes)) == 0)
        usage_exit(lat_sizes_arg);

    int devices = 0, ordinal = 0;
    CUdevice dev = cu_open_device("device_bw", device_arg, &ordinal, &devices);

    ck_init(&argc, &argv, "device_bw", MPI_THREAD_SINGLE);
    char name[128] = "?";
    if (cuDeviceGetName(name, (int)sizeof name, dev) != CUDA_SUCCESS)
        snprintf(name, sizeof name, "(cuDeviceGetName failed)");
    if (ck.rank == 0)
        printf("device_bw info ranks %d window %d reps %d quick %d\n", ck.size, window, reps,
               ck.quick);
    for (int r = 0; r < ck.size; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (r == ck.rank)
            printf("device_bw rank %d device %d of %d name %s\n", ck.rank, ordinal, devices, name);
        fflush(stdout);
    }

    size_t max = 0;
    for (int s = 0; s < nsizes; s++)
        max = sizes[s] > max ? sizes[s] : max;
    for (int s = 0; s < nlat_sizes; s++)
        max = lat_sizes[s] > max ? lat_sizes[s] : max;
    unsigned char *staging = ck_alloc(max);
    double dtod0[MAX_SIZES] = {0};
    if (want("dtod"))
        part_dtod(staging, max, dtod0);
    if (want("mpi"))
        part_mpi(staging, max, dtod0);
    if (want("lat"))
        for (int s = 0; s < nlat_sizes; s++)
            part_lat(staging, lat_sizes[s]);
    free(staging);
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = ck_finish();
    cuDevicePrimaryCtxRelease(dev);
    return rc;
}
