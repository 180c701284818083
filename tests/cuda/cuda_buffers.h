/*
 * cuda_buffers.h -- what the CUDA programs of tests/cuda share: a checked driver call,
 * the device and context chosen before MPI_Init, device buffers with check.h's guard,
 * filled and verified through a host staging buffer. Driver API only (cuda.h,
 * -lcuda), so the programs run unchanged on a real GPU and on the test stand-in.
 * Include after check.h.
 */
#ifndef CUDA_BUFFERS_H
#define CUDA_BUFFERS_H

#include <cuda.h>

/* A failed driver call ends the job, naming the call and the CUresult. */
static inline void cu_check(CUresult r, const char *call)
{
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        cuGetErrorName(r, &name);
        fprintf(stderr, "%s rank %d: %s failed: %s (%d)\n", ck.prog, ck.rank, call,
                name ? name : "?", (int)r);
        if (ck.rank >= 0)
            MPI_Abort(MPI_COMM_WORLD, 3);
        exit(3);
    }
}

static inline void *ptr(CUdeviceptr d) { return (void *)(uintptr_t)d; }

/* cuInit and the primary context of device `wanted` (or, when negative, of the local
 * rank modulo the device count) made current: before MPI_Init, as CUDA-aware MPI
 * programs do it. Returns the device; its ordinal and the count in *ordinal, *count.
 * RMCA_CU_SCHED=spin|yield|blocking sets the context's scheduling flags first (how a
 * thread waits for the GPU in a synchronous call; the driver's default is auto). */
static inline CUdevice cu_open_device(const char *prog, int wanted, int *ordinal, int *count)
{
    CUdevice dev;
    CUcontext ctx;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    ck.prog = prog;
    cu_check(cuInit(0), "cuInit");
    cu_check(cuDeviceGetCount(count), "cuDeviceGetCount");
    if (*count < 1) {
        fprintf(stderr, "%s: no CUDA device\n", prog);
        exit(3);
    }
    *ordinal = wanted >= 0 ? wanted : (local ? atoi(local) : 0) % *count;
    cu_check(cuDeviceGet(&dev, *ordinal), "cuDeviceGet");
    const char *sched = getenv("RMCA_CU_SCHED");
    if (sched && *sched && strcmp(sched, "auto") != 0) {
        unsigned int flags = strcmp(sched, "spin") == 0       ? CU_CTX_SCHED_SPIN
                             : strcmp(sched, "yield") == 0    ? CU_CTX_SCHED_YIELD
                             : strcmp(sched, "blocking") == 0 ? CU_CTX_SCHED_BLOCKING_SYNC
                                                              : ~0u;
        if (flags == ~0u) {
            fprintf(stderr, "%s: RMCA_CU_SCHED=%s: not one of auto, spin, yield, blocking\n",
                    prog, sched);
            exit(2);
        }
        cu_check(cuDevicePrimaryCtxSetFlags(dev, flags), "cuDevicePrimaryCtxSetFlags");
    }
    cu_check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    cu_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    return dev;
}

/* Fills device buffer d with the payload src -> dst (tag, idx), through host. */
static inline void dev_fill(CUdeviceptr d, unsigned char *staging, size_t n, int src, int dst,
                            int tag, long idx)
{
    ck_fill(staging, n, src, dst, tag, idx);
    if (n > 0)
        cu_check(cuMemcpyHtoD(d, staging, n), "cuMemcpyHtoD");
}

/* Copies the payload and its guard back to host and checks both. */
static inline int dev_verify(const char *what, CUdeviceptr d, unsigned char *staging, size_t n,
                             int src, int dst, int tag, long idx)
{
    cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
    cu_check(cuMemcpyDtoH(staging, d, n + CK_GUARD), "cuMemcpyDtoH");
    ck_maybe_inject(staging, n);
    return ck_verify(what, staging, n, src, dst, tag, idx);
}

#endif
