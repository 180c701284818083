/*
 * device_buffers.c -- MPI on CUDA device memory, every byte checked.
 *
 * Runs unchanged on a real GPU and on the test stand-in (tools/cuda-standin):
 * it uses the CUDA driver API only (cuda.h, -lcuda), copies every payload in
 * through cuMemcpyHtoD and every received one back through cuMemcpyDtoH, and
 * checks it with check.h's pattern and guard.  Pairs are (2k, 2k+1).
 *
 * Parts (--parts=, default all):
 *   p  point-to-point on device buffers: Send/Recv, Isend/Irecv both ways at
 *      once, Sendrecv, 1 B .. 64 MiB (--quick: .. 4 MiB), each size three
 *      times from the same buffers (a transport caching IPC mappings hits)
 *   r  a freed and reallocated send buffer (the same address when the driver
 *      reuses it) carries new bytes: no stale mapping of the old allocation
 *   h  host buffers in the same job, and device <-> host in both directions
 *   c  collectives on device buffers: Bcast (1 MiB), Allreduce (sum of ints)
 *
 * Other flags: --device=N (default: local rank modulo the device count),
 * --managed (every "device" buffer from cuMemAllocManaged instead),
 * --pvar=NAME (repeatable: each rank prints "pvar NAME VALUE" at the end, the
 * MPI_T performance variable's count since MPI_Init, or "pvar NAME absent"),
 * and check.h's.
 */
#include "check.h"
#include "cuda_buffers.h"

#define TAG_P2P 11
#define TAG_ISEND 12
#define TAG_SENDRECV 13
#define TAG_REUSE 14
#define TAG_HOST 15
#define TAG_MIXED 16
#define REPEATS 3
#define MAX_PVARS 16

static const char *parts = "prhc";
static int device_arg = -1;
static int managed;
static const char *pvar_names[MAX_PVARS];
static int npvars;

/* A device buffer of n payload bytes plus the guard, all CK_GUARD_BYTE. */
static CUdeviceptr dev_alloc(size_t n)
{
    CUdeviceptr d = 0;
    if (managed)
        cu_check(cuMemAllocManaged(&d, n + CK_GUARD, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
    else
        cu_check(cuMemAlloc(&d, n + CK_GUARD), "cuMemAlloc");
    cu_check(cuMemsetD8(d, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
    return d;
}

static void dev_clear(CUdeviceptr d, size_t n)
{
    cu_check(cuMemsetD8(d, CK_GUARD_BYTE, n + CK_GUARD), "cuMemsetD8");
}

static int partner(void)
{
    int p = ck.rank ^ 1;
    return p < ck.size ? p : -1;
}

static void part_p2p(size_t max, unsigned char *staging)
{
    int peer = partner();
    if (peer < 0)
        return;
    CUdeviceptr sbuf = dev_alloc(max), rbuf = dev_alloc(max);
    long idx = 0;
    for (size_t n = 1; n <= max; n = n < 64 ? n * 8 : n * 4) {
        for (int rep = 0; rep < REPEATS; rep++, idx++) {
            char what[96];
            MPI_Status st;
            /* Send/Recv: the lower rank sends first. */
            dev_fill(sbuf, staging, n, ck.rank, peer, TAG_P2P, idx);
            dev_clear(rbuf, n);
            if (ck.rank < peer) {
                MPI_Send(ptr(sbuf), (int)n, MPI_BYTE, peer, TAG_P2P, MPI_COMM_WORLD);
                MPI_Recv(ptr(rbuf), (int)n, MPI_BYTE, peer, TAG_P2P, MPI_COMM_WORLD, &st);
            } else {
                MPI_Recv(ptr(rbuf), (int)n, MPI_BYTE, peer, TAG_P2P, MPI_COMM_WORLD, &st);
                MPI_Send(ptr(sbuf), (int)n, MPI_BYTE, peer, TAG_P2P, MPI_COMM_WORLD);
            }
            snprintf(what, sizeof what, "Send/Recv %zu B device", n);
            ck_status(what, &st, peer, TAG_P2P, n);
            dev_verify(what, rbuf, staging, n, peer, ck.rank, TAG_P2P, idx);

            /* Isend/Irecv both ways at once. */
            dev_fill(sbuf, staging, n, ck.rank, peer, TAG_ISEND, idx);
            dev_clear(rbuf, n);
            MPI_Request req[2];
            MPI_Status sts[2];
            MPI_Irecv(ptr(rbuf), (int)n, MPI_BYTE, peer, TAG_ISEND, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(ptr(sbuf), (int)n, MPI_BYTE, peer, TAG_ISEND, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, sts);
            snprintf(what, sizeof what, "Isend/Irecv %zu B device", n);
            ck_status(what, &sts[0], peer, TAG_ISEND, n);
            dev_verify(what, rbuf, staging, n, peer, ck.rank, TAG_ISEND, idx);

            /* Sendrecv. */
            dev_fill(sbuf, staging, n, ck.rank, peer, TAG_SENDRECV, idx);
            dev_clear(rbuf, n);
            MPI_Sendrecv(ptr(sbuf), (int)n, MPI_BYTE, peer, TAG_SENDRECV, ptr(rbuf), (int)n,
                         MPI_BYTE, peer, TAG_SENDRECV, MPI_COMM_WORLD, &st);
            snprintf(what, sizeof what, "Sendrecv %zu B device", n);
            ck_status(what, &st, peer, TAG_SENDRECV, n);
            dev_verify(what, rbuf, staging, n, peer, ck.rank, TAG_SENDRECV, idx);
        }
        ck_progress("p2p %zu B done", n);
    }
    cu_check(cuMemFree(sbuf), "cuMemFree");
    cu_check(cuMemFree(rbuf), "cuMemFree");
}

/* Each rank of a pair sends from a buffer, frees it, allocates one of the same
 * size (often at the same address) with other bytes, and sends again. */
static void part_reuse(unsigned char *staging)
{
    int peer = partner();
    if (peer < 0)
        return;
    const size_t n = (ck.quick ? 1 : 8) << 20;
    CUdeviceptr rbuf = dev_alloc(n);
    CUdeviceptr sbuf = dev_alloc(n);
    int reused = 0;
    for (long round = 0; round < 3; round++) {
        if (round > 0) {
            CUdeviceptr old = sbuf;
            cu_check(cuMemFree(sbuf), "cuMemFree");
            sbuf = dev_alloc(n);
            reused += sbuf == old;
        }
        dev_fill(sbuf, staging, n, ck.rank, peer, TAG_REUSE, round);
        dev_clear(rbuf, n);
        MPI_Status st;
        MPI_Sendrecv(ptr(sbuf), (int)n, MPI_BYTE, peer, TAG_REUSE, ptr(rbuf), (int)n, MPI_BYTE,
                     peer, TAG_REUSE, MPI_COMM_WORLD, &st);
        char what[96];
        snprintf(what, sizeof what, "reallocated buffer round %ld", round);
        dev_verify(what, rbuf, staging, n, peer, ck.rank, TAG_REUSE, round);
    }
    printf("device_buffers rank %d: reallocated send buffer at the same address %d of 2 times\n",
           ck.rank, reused);
    cu_check(cuMemFree(sbuf), "cuMemFree");
    cu_check(cuMemFree(rbuf), "cuMemFree");
}

static void part_host(size_t max, unsigned char *staging)
{
    int peer = partner();
    if (peer < 0)
        return;
    unsigned char *hs = ck_alloc(max), *hr = ck_alloc(max);
    CUdeviceptr ds = dev_alloc(max), dr = dev_alloc(max);
    long idx = 0;
    for (size_t n = 1; n <= max; n *= 64, idx++) {
        char what[96];
        MPI_Status st;
        /* host -> host */
        ck_fill(hs, n, ck.rank, peer, TAG_HOST, idx);
        ck_clear(hr, n);
        MPI_Sendrecv(hs, (int)n, MPI_BYTE, peer, TAG_HOST, hr, (int)n, MPI_BYTE, peer, TAG_HOST,
                     MPI_COMM_WORLD, &st);
        snprintf(what, sizeof what, "host %zu B", n);
        ck_verify(what, hr, n, peer, ck.rank, TAG_HOST, idx);
        /* device -> host on one side, host -> device on the other, then swapped */
        for (int dir = 0; dir < 2; dir++) {
            int dev_sender = (ck.rank < peer) == (dir == 0);
            void *sendp = hs, *recvp = hr;
            if (dev_sender) {
                dev_fill(ds, staging, n, ck.rank, peer, TAG_MIXED + dir, idx);
                sendp = ptr(ds);
                ck_clear(hr, n);
            } else {
                ck_fill(hs, n, ck.rank, peer, TAG_MIXED + dir, idx);
                dev_clear(dr, n);
                recvp = ptr(dr);
            }
            MPI_Sendrecv(sendp, (int)n, MPI_BYTE, peer, TAG_MIXED + dir, recvp, (int)n, MPI_BYTE,
                         peer, TAG_MIXED + dir, MPI_COMM_WORLD, &st);
            if (dev_sender) {
                snprintf(what, sizeof what, "device -> host %zu B (host side)", n);
                ck_verify(what, hr, n, peer, ck.rank, TAG_MIXED + dir, idx);
            } else {
                snprintf(what, sizeof what, "host -> device %zu B (device side)", n);
                dev_verify(what, dr, staging, n, peer, ck.rank, TAG_MIXED + dir, idx);
            }
        }
    }
    free(hs);
    free(hr);
    cu_check(cuMemFree(ds), "cuMemFree");
    cu_check(cuMemFree(dr), "cuMemFree");
}

static void part_coll(unsigned char *staging)
{
    const size_t n = 1 << 20;
    CUdeviceptr d = dev_alloc(n);
    if (ck.rank == 0)
        dev_fill(d, staging, n, 0, -1, 21, 0);
    else
        dev_clear(d, n);
    MPI_Bcast(ptr(d), (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    dev_verify("Bcast 1 MiB device", d, staging, n, 0, -1, 21, 0);
    cu_check(cuMemFree(d), "cuMemFree");

    const int count = 1 << 16;
    int *h = (int *)malloc(sizeof(int) * count);
    CUdeviceptr in = dev_alloc(sizeof(int) * count), out = dev_alloc(sizeof(int) * count);
    for (int i = 0; i < count; i++)
        h[i] = (ck.rank + 1) * (i % 1000 + 1);
    cu_check(cuMemcpyHtoD(in, h, sizeof(int) * count), "cuMemcpyHtoD");
    MPI_Allreduce(ptr(in), ptr(out), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    cu_check(cuMemcpyDtoH(h, out, sizeof(int) * count), "cuMemcpyDtoH");
    long ranks_sum = (long)ck.size * (ck.size + 1) / 2;
    int bad = 0, first = -1;
    for (int i = 0; i < count; i++) {
        if (h[i] != (int)(ranks_sum * (i % 1000 + 1))) {
            bad++;
            if (first < 0)
                first = i;
        }
    }
    ck_check(bad == 0, "Allreduce sum of %d ints on device: %d wrong, first at %d", count, bad,
             first);
    free(h);
    cu_check(cuMemFree(in), "cuMemFree");
    cu_check(cuMemFree(out), "cuMemFree");
}

/* MPI_T counters count from the moment a handle exists, so the handles are made
 * right after MPI_Init and read at the end. */
static MPI_T_pvar_session pvar_session;
static MPI_T_pvar_handle pvar_handles[MAX_PVARS];
static int pvar_state[MAX_PVARS]; /* 0 absent, 1 readable, -1 unreadable */

static void start_pvars(void)
{
    if (npvars == 0)
        return;
    int provided, num = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&pvar_session);
    MPI_T_pvar_get_num(&num);
    for (int k = 0; k < npvars; k++) {
        for (int i = 0; i < num && pvar_state[k] == 0; i++) {
            char name[256], desc[1024];
            int name_len = sizeof name, desc_len = sizeof desc, verbosity, var_class, bind,
                readonly, continuous, atomic, count = 0;
            MPI_Datatype type;
            MPI_T_enum enumtype;
            if (MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type, &enumtype,
                                    desc, &desc_len, &bind, &readonly, &continuous,
                                    &atomic) != MPI_SUCCESS ||
                strcmp(name, pvar_names[k]) != 0)
                continue;
            pvar_state[k] = -1;
            if (type == MPI_UNSIGNED_LONG_LONG &&
                MPI_T_pvar_handle_alloc(pvar_session, i, NULL, &pvar_handles[k], &count) ==
                    MPI_SUCCESS &&
                count == 1) {
                pvar_state[k] = 1;
                if (!continuous)
                    MPI_T_pvar_start(pvar_session, pvar_handles[k]);
            }
        }
    }
}

static void print_pvars(void)
{
    if (npvars == 0)
        return;
    for (int k = 0; k < npvars; k++) {
        unsigned long long value = 0;
        if (pvar_state[k] == 0) {
            printf("device_buffers rank %d: pvar %s absent\n", ck.rank, pvar_names[k]);
        } else if (pvar_state[k] < 0 ||
                   MPI_T_pvar_read(pvar_session, pvar_handles[k], &value) != MPI_SUCCESS) {
            printf("device_buffers rank %d: pvar %s unreadable\n", ck.rank, pvar_names[k]);
        } else {
            printf("device_buffers rank %d: pvar %s %llu\n", ck.rank, pvar_names[k], value);
            MPI_T_pvar_handle_free(pvar_session, &pvar_handles[k]);
        }
    }
    MPI_T_pvar_session_free(&pvar_session);
    MPI_T_finalize();
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--parts=", 8) == 0)
            parts = argv[i] + 8;
        else if (strncmp(argv[i], "--device=", 9) == 0)
            device_arg = atoi(argv[i] + 9);
        else if (strcmp(argv[i], "--managed") == 0)
            managed = 1;
        else if (strncmp(argv[i], "--pvar=", 7) == 0 && npvars < MAX_PVARS)
            pvar_names[npvars++] = argv[i] + 7;
    }
    int devices = 0, ordinal = 0;
    CUdevice dev = cu_open_device("device_buffers", device_arg, &ordinal, &devices);

    ck_init(&argc, &argv, "device_buffers", MPI_THREAD_SINGLE);
    start_pvars();
    printf("device_buffers rank %d: device %d of %d\n", ck.rank, ordinal, devices);
    size_t max = ck.quick ? (size_t)4 << 20 : (size_t)64 << 20;
    unsigned char *staging = ck_alloc(max);
    if (strchr(parts, 'p'))
        part_p2p(max, staging);
    if (strchr(parts, 'r'))
        part_reuse(staging);
    if (strchr(parts, 'h'))
        part_host(max, staging);
    if (strchr(parts, 'c'))
        part_coll(staging);
    free(staging);
    MPI_Barrier(MPI_COMM_WORLD);
    print_pvars();
    int rc = ck_finish();
    cuDevicePrimaryCtxRelease(dev);
    return rc;
}
