/*
 * malloc_bcast_free.c -- cuMemAlloc -> MPI_Bcast -> cuMemFree, over and over (the loop
 * of Open MPI issue #12971, where smcuda's cached IPC mappings kept every freed buffer's
 * device memory alive), every byte checked.
 *
 * Iteration i allocates a device buffer of sizes[i % 4] bytes (8 B, 4 KiB, 64 KiB,
 * 1 MiB: small and large messages, whatever route each takes) plus check.h's guard,
 * the root (i % size, so every rank owns buffers and every pair of the tree carries
 * them) fills it with a pattern of iteration i, MPI_Bcast, every rank copies all of it
 * back to host and checks every byte and the guard, then frees it. A driver that hands
 * the freed address out again (the stand-in always does, a GPU often) makes a stale
 * IPC mapping of the previous buffer show as old bytes: a mismatch says which earlier
 * iteration's bytes arrived. With --spread=K (default 3) a throw-away allocation of
 * (i % K) x 2 MiB taken before the buffer moves it among K addresses, or more where
 * IPC mappings the process holds take address space, as an application's other
 * allocations do, so a cache keyed by address also meets buffers at addresses it has
 * not seen for a while (K = 1: always the same address).
 *
 * On the driver stand-in (tools/cuda-standin, found with dlsym), after each
 * iteration's frees and a barrier every rank asks what it still holds: IPC mappings
 * of allocations their owner has freed (live.ipc_mappings_freed, their bytes) and IPC
 * mappings open at all. Rank 0 prints the job's totals, the largest after any
 * iteration and after the last:
 *   malloc_bcast_free: held after free: max M mappings (B bytes), last L (LB bytes);
 *   open mappings: max O, last OL
 * (one line). On a real driver that line says "not measured" and gives instead the
 * device's free memory (cuMemGetInfo, after the frees and the barrier) after the first
 * iteration and after the last: what ompi#12971 watched shrink.
 *
 * With --uses=U (default 1) each buffer is broadcast U times (new bytes each time)
 * before it is freed: a transport may keep the mapping of a buffer read more than
 * once, and only the buffer's owner knows when it is freed.
 *
 * Flags: --iterations=N (default 1000; --quick 200), --spread=K, --uses=U, and
 * check.h's.
 */
#include <dlfcn.h>

#include "check.h"
#include "cuda_buffers.h"

#define TAG 31
#define SLOT ((size_t)2 << 20)

static const size_t sizes[] = {8, 4096, 64 << 10, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

typedef int (*count_fn)(const char *, unsigned long long *);

/* The stand-in's counter, 0 when it does not exist (never counted). */
static unsigned long long standin_count(count_fn count, const char *name)
{
    unsigned long long v = 0;
    if (count(name, &v) != 0)
        v = 0;
    return v;
}

/* After a mismatch: which earlier broadcast's bytes (index iteration * uses + use, of a
 * buffer at least as long) the buffer holds, or -1. A stale IPC mapping of a freed
 * buffer shows as one. */
static long stale_source(const unsigned char *got, size_t n, long idx, int uses)
{
    for (long j = idx - 1; j >= 0 && j >= idx - 64; j--) {
        long iter = j / uses;
        if (sizes[iter % NSIZES] < n)
            continue;
        size_t first;
        unsigned exp, g;
        if (ck_scan(got, n, ck_seed((int)(iter % ck.size), -1, TAG, j), &first, &exp, &g) == 0)
            return j;
    }
    return -1;
}

int main(int argc, char **argv)
{
    long iterations = -1;
    int spread = 3, uses = 1;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--iterations=", 13) == 0)
            iterations = atol(argv[i] + 13);
        else if (strncmp(argv[i], "--spread=", 9) == 0)
            spread = atoi(argv[i] + 9);
        else if (strncmp(argv[i], "--uses=", 7) == 0)
            uses = atoi(argv[i] + 7);
    }
    if (spread < 1 || uses < 1) {
        fprintf(stderr, "malloc_bcast_free: --spread and --uses must be at least 1\n");
        return 2;
    }
    int devices = 0, ordinal = 0;
    CUdevice dev = cu_open_device("malloc_bcast_free", -1, &ordinal, &devices);
    ck_init(&argc, &argv, "malloc_bcast_free", MPI_THREAD_SINGLE);
    if (iterations < 0)
        iterations = ck.quick ? 200 : 1000;
    count_fn count = (count_fn)dlsym(RTLD_DEFAULT, "rmcaCudaStandinCount");
    /* Every rank decides alike: a collective follows each iteration only if all have it. */
    int have = count != NULL, all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    unsigned char *staging = ck_alloc(sizes[NSIZES - 1]);
    /* Job totals: [0] mappings of freed allocations, [1] their bytes, [2] open mappings. */
    unsigned long long max[3] = {0, 0, 0}, last[3] = {0, 0, 0};
    long same_address = 0;
    CUdeviceptr previous = 0;
    size_t free_first = 0, free_last = 0;
    for (long i = 0; i < iterations; i++) {
        size_t n = sizes[i % NSIZES];
        int root = (int)(i % ck.size);
        CUdeviceptr pad = 0, d = 0;
        if (i % spread != 0)
            cu_check(cuMemAlloc(&pad, (size_t)(i % spread) * SLOT), "cuMemAlloc (pad)");
        cu_check(cuMemAlloc(&d, n + CK_GUARD), "cuMemAlloc");
        if (pad)
            cu_check(cuMemFree(pad), "cuMemFree (pad)");
        if (i % spread == 0) {
            same_address += i > 0 && d == previous;
            previous = d;
        }
        for (int use = 0; use < uses; use++) {
            /* The pattern's index: iteration and use, so each broadcast has new bytes. */
            long idx = i * uses + use;
            cu_check(cuMemsetD8(d, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
            if (ck.rank == root)
                dev_fill(d, staging, n, root, -1, TAG, idx);
            MPI_Bcast(ptr(d), (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
            char what[96];
            snprintf(what, sizeof what, "iteration %ld use %d: Bcast of %zu B from rank %d", i,
                     use, n, root);
            if (!dev_verify(what, d, staging, n, root, -1, TAG, idx)) {
                long j = stale_source(staging, n, idx, uses);
                if (j >= 0)
                    printf("FAIL malloc_bcast_free rank %d: iteration %ld use %d received the "
                           "bytes of iteration %ld use %ld: a mapping of a freed buffer at "
                           "address 0x%llx\n",
                           ck.rank, i, use, j / uses, j % uses, (unsigned long long)d);
            }
        }
        cu_check(cuMemFree(d), "cuMemFree");
        MPI_Barrier(MPI_COMM_WORLD);
        if (!all_have) {
            /* A GPU: what the device has free once every rank freed its buffer. */
            size_t free_bytes = 0, total = 0;
            cu_check(cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
            if (i == 0)
                free_first = free_bytes;
            free_last = free_bytes;
            continue;
        }
        unsigned long long mine[3] = {standin_count(count, "live.ipc_mappings_freed"),
                                      standin_count(count, "live.ipc_freed_bytes"),
                                      standin_count(count, "live.ipc_mappings")};
        MPI_Allreduce(mine, last, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        for (int k = 0; k < 3; k++)
            max[k] = last[k] > max[k] ? last[k] : max[k];
        if (ck.verbose && ck.rank == 0)
            ck_progress("iteration %ld: held after free %llu (%llu bytes), open %llu", i,
                        last[0], last[1], last[2]);
    }
    if (ck.rank == 0) {
        ck_note("%ld iterations at %d ranks, spread %d, uses %d; rank 0 got the same address "
                "again %ld of %ld times",
                iterations, ck.size, spread, uses, same_address,
                iterations > 0 ? (iterations - 1) / spread : 0);
        if (all_have)
            ck_note("held after free: max %llu mappings (%llu bytes), last %llu (%llu bytes); "
                    "open mappings: max %llu, last %llu",
                    max[0], max[1], last[0], last[1], max[2], last[2]);
        else
            ck_note("held after free: not measured (no driver stand-in); device memory free "
                    "after the first iteration %zu MiB, after the last %zu MiB",
                    free_first >> 20, free_last >> 20);
    }
    free(staging);
    int rc = ck_finish();
    cuDevicePrimaryCtxRelease(dev);
    return rc;
}
