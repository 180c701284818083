/*
 * driver_costs.c -- what each CUDA driver call a device-memory message can be built
 * from costs on this machine, timed alone: the copies (synchronous, or asynchronous and
 * then waited for in several ways, to and from pageable, page-locked and registered
 * host memory), the questions about a pointer, the IPC handle calls, and a copy out of
 * a peer's memory opened through CUDA IPC. The figures choose the protocol of a small
 * device message (rsmcuda's README, "CUDA path"); they are not pass/fail.
 *
 * Rank 0 times everything that needs one process while rank 1 waits; then rank 0
 * exports a device allocation and rank 1 times the IPC calls on it; then ranks 0 and 1
 * ping-pong device bytes by several routes with no MPI call in the loop (pp_*, the
 * floor of a one-way message by that route; see pingpongs()). 2 ranks or more, ranks 0
 * and 1 on one node (the others wait). Driver API only (cuda.h, -lcuda): runs on the test stand-in too,
 * where the times mean nothing.
 *
 * Output (rank 0 and rank 1, microseconds of CLOCK_MONOTONIC per call or sequence):
 *   driver_costs info iters <N> sched <RMCA_CU_SCHED or auto> device <name>
 *   driver_costs <what> <bytes> median <us> p10 <us> p90 <us>
 *   <passed> passed, <failed> failed        (check.h's; a copy's bytes are checked)
 *
 * Flags: --iters=N (default 1000, --quick 100), check.h's --quick, --verbose.
 */
#include <time.h>

#include "check.h"
#include "cuda_buffers.h"

#define MAX_ITERS 100000
#define COPY_MAX (64 * 1024)

static long iters = -1;
static double samples[MAX_ITERS];

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One timed sequence: what `body` does once, given its argument. */
typedef void (*body_fn)(void *arg);

/* Runs body iters times after iters/10 untimed, prints median and 10th/90th percentile. */
static void timed(const char *what, size_t bytes, body_fn body, void *arg, long n)
{
    for (long i = 0; i < n / 10 + 1; i++)
        body(arg);
    for (long i = 0; i < n; i++) {
        double t0 = now_us();
        body(arg);
        samples[i] = now_us() - t0;
    }
    qsort(samples, (size_t)n, sizeof *samples, cmp_double);
    printf("driver_costs %s %zu median %.3f p10 %.3f p90 %.3f\n", what, bytes, samples[n / 2],
           samples[n / 10], samples[n * 9 / 10]);
    fflush(stdout);
}

/* What the copy sequences work on. */
struct copy {
    CUdeviceptr dev, dev2;
    unsigned char *pageable, *pinned, *registered;
    CUstream stream;
    CUevent event;
    size_t n;
};

/* Records `e` on `s` and polls it until the work before it is done. */
static void record_and_spin(CUevent e, CUstream s)
{
    cu_check(cuEventRecord(e, s), "cuEventRecord");
    CUresult r;
    while ((r = cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
        ;
    cu_check(r, "cuEventQuery");
}

static void spin_stream(CUstream s)
{
    CUresult r;
    while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
        ;
    cu_check(r, "cuStreamQuery");
}

static void dtoh_pageable(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoH(c->pageable, c->dev, c->n), "cuMemcpyDtoH");
}
static void dtoh_pinned(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoH(c->pinned, c->dev, c->n), "cuMemcpyDtoH");
}
static void dtoh_registered(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoH(c->registered, c->dev, c->n), "cuMemcpyDtoH");
}
static void htod_pageable(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyHtoD(c->dev2, c->pageable, c->n), "cuMemcpyHtoD");
}
static void htod_pinned(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyHtoD(c->dev2, c->pinned, c->n), "cuMemcpyHtoD");
}
/* Open MPI 4.1's convertor with mpi_common_cuda_cumemcpy_async=0. */
static void unified_dtoh_pageable(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpy((CUdeviceptr)(uintptr_t)c->pageable, c->dev, c->n), "cuMemcpy");
}
/* Open MPI 4.1's convertor by default: cuMemcpyAsync, then cuStreamSynchronize. */
static void unified_async_dtoh_pageable_sync(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyAsync((CUdeviceptr)(uintptr_t)c->pageable, c->dev, c->n, c->stream),
             "cuMemcpyAsync");
    cu_check(cuStreamSynchronize(c->stream), "cuStreamSynchronize");
}
static void async_dtoh_pinned_sync(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoHAsync(c->pinned, c->dev, c->n, c->stream), "cuMemcpyDtoHAsync");
    cu_check(cuStreamSynchronize(c->stream), "cuStreamSynchronize");
}
static void async_dtoh_pinned_spin_stream(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoHAsync(c->pinned, c->dev, c->n, c->stream), "cuMemcpyDtoHAsync");
    spin_stream(c->stream);
}
static void async_dtoh_pinned_spin_event(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoHAsync(c->pinned, c->dev, c->n, c->stream), "cuMemcpyDtoHAsync");
    record_and_spin(c->event, c->stream);
}
static void async_dtoh_registered_spin_event(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoHAsync(c->registered, c->dev, c->n, c->stream), "cuMemcpyDtoHAsync");
    record_and_spin(c->event, c->stream);
}
static void async_htod_pinned_spin_event(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyHtoDAsync(c->dev2, c->pinned, c->n, c->stream), "cuMemcpyHtoDAsync");
    record_and_spin(c->event, c->stream);
}
static void async_htod_registered_spin_event(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyHtoDAsync(c->dev2, c->registered, c->n, c->stream), "cuMemcpyHtoDAsync");
    record_and_spin(c->event, c->stream);
}
static void dtod_sync(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoD(c->dev2, c->dev, c->n), "cuMemcpyDtoD");
}
static void async_dtod_spin_event(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoDAsync(c->dev2, c->dev, c->n, c->stream), "cuMemcpyDtoDAsync");
    record_and_spin(c->event, c->stream);
}
static void async_dtod_only(void *a)
{
    struct copy *c = a;
    cu_check(cuMemcpyDtoDAsync(c->dev2, c->dev, c->n, c->stream), "cuMemcpyDtoDAsync");
}
static void event_record_query(void *a)
{
    struct copy *c = a;
    record_and_spin(c->event, c->stream);
}
static void memtype_of_device(void *a)
{
    struct copy *c = a;
    unsigned int type = 0;
    cu_check(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, c->dev),
             "cuPointerGetAttribute");
}
static void memtype_of_host(void *a)
{
    struct copy *c = a;
    unsigned int type = 0;
    /* Host memory the driver does not know: an error is the answer, not a failure. */
    (void)cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                (CUdeviceptr)(uintptr_t)c->pageable);
}
static void four_attributes(void *a)
{
    struct copy *c = a;
    CUpointer_attribute which[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_CONTEXT,
                                    CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned int type = 0, managed = 0;
    CUcontext ctx = NULL;
    unsigned long long id = 0;
    void *out[4] = {&type, &ctx, &id, &managed};
    cu_check(cuPointerGetAttributes(4, which, out, c->dev), "cuPointerGetAttributes");
}
static void address_range(void *a)
{
    struct copy *c = a;
    CUdeviceptr base = 0;
    size_t size = 0;
    cu_check(cuMemGetAddressRange(&base, &size, c->dev), "cuMemGetAddressRange");
}
static void ipc_get_handle(void *a)
{
    struct copy *c = a;
    CUipcMemHandle h;
    cu_check(cuIpcGetMemHandle(&h, c->dev), "cuIpcGetMemHandle");
}
static void sync_memops(void *a)
{
    struct copy *c = a;
    int on = 1;
    cu_check(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, c->dev),
             "cuPointerSetAttribute");
}
static void ctx_current(void *a)
{
    (void)a;
    CUcontext ctx = NULL;
    cu_check(cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
}

/* The peer side of CUDA IPC: rank 1 on rank 0's exported allocation. */
struct ipc {
    CUipcMemHandle handle;
    CUdeviceptr mapped, own;
    CUstream stream;
    CUevent event;
    size_t n;
};

static void ipc_open_close(void *a)
{
    struct ipc *p = a;
    CUdeviceptr d = 0;
    cu_check(cuIpcOpenMemHandle(&d, p->handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
             "cuIpcOpenMemHandle");
    cu_check(cuIpcCloseMemHandle(d), "cuIpcCloseMemHandle");
}
static void ipc_copy_spin_event(void *a)
{
    struct ipc *p = a;
    cu_check(cuMemcpyDtoDAsync(p->own, p->mapped, p->n, p->stream), "cuMemcpyDtoDAsync");
    record_and_spin(p->event, p->stream);
}

static const size_t copy_sizes[] = {8, 4096, COPY_MAX};

static void single_process(unsigned char *check)
{
    struct copy c = {0};
    cu_check(cuMemAlloc(&c.dev, COPY_MAX), "cuMemAlloc");
    cu_check(cuMemAlloc(&c.dev2, COPY_MAX), "cuMemAlloc");
    c.pageable = ck_alloc(COPY_MAX);
    cu_check(cuMemAllocHost((void **)&c.pinned, COPY_MAX), "cuMemAllocHost");
    c.registered = ck_alloc(COPY_MAX);
    cu_check(cuMemHostRegister(c.registered, COPY_MAX, 0), "cuMemHostRegister");
    /* A blocking stream, ordered after the legacy stream as Open MPI's are. */
    cu_check(cuStreamCreate(&c.stream, 0), "cuStreamCreate");
    cu_check(cuEventCreate(&c.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    dev_fill(c.dev, check, COPY_MAX, 0, 0, 1, 0);

    static const struct {
        const char *name;
        body_fn body;
    } copies[] = {
        {"dtoh_sync_pageable", dtoh_pageable},
        {"dtoh_sync_pinned", dtoh_pinned},
        {"dtoh_sync_registered", dtoh_registered},
        {"htod_sync_pageable", htod_pageable},
        {"htod_sync_pinned", htod_pinned},
        {"cuMemcpy_dtoh_pageable", unified_dtoh_pageable},
        {"cuMemcpyAsync_dtoh_pageable+streamsync", unified_async_dtoh_pageable_sync},
        {"dtoh_async_pinned+streamsync", async_dtoh_pinned_sync},
        {"dtoh_async_pinned+spin_stream", async_dtoh_pinned_spin_stream},
        {"dtoh_async_pinned+spin_event", async_dtoh_pinned_spin_event},
        {"dtoh_async_registered+spin_event", async_dtoh_registered_spin_event},
        {"htod_async_pinned+spin_event", async_htod_pinned_spin_event},
        {"htod_async_registered+spin_event", async_htod_registered_spin_event},
        {"dtod_sync", dtod_sync},
        {"dtod_async+spin_event", async_dtod_spin_event},
    };
    for (size_t s = 0; s < sizeof copy_sizes / sizeof *copy_sizes; s++) {
        c.n = copy_sizes[s];
        for (size_t i = 0; i < sizeof copies / sizeof *copies; i++)
            timed(copies[i].name, c.n, copies[i].body, &c, iters);
        /* The copies moved rank 0's pattern: every destination must hold it. */
        cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
        ck_verify_g("dtoh pageable", c.pageable, c.n, 0, 0, 1, 0, 0);
        ck_verify_g("dtoh pinned", c.pinned, c.n, 0, 0, 1, 0, 0);
        ck_verify_g("dtoh registered", c.registered, c.n, 0, 0, 1, 0, 0);
        unsigned char *back = ck_alloc(c.n);
        cu_check(cuMemcpyDtoH(back, c.dev2, c.n), "cuMemcpyDtoH");
        ck_verify_g("dtod / htod destination", back, c.n, 0, 0, 1, 0, 0);
        free(back);
    }
    /* Only issuing an asynchronous copy (no wait): the CPU's share of one. */
    c.n = 8;
    timed("dtod_async_issue_only", 8, async_dtod_only, &c, iters);
    cu_check(cuStreamSynchronize(c.stream), "cuStreamSynchronize");

    static const struct {
        const char *name;
        body_fn body;
    } questions[] = {
        {"event_record+spin_idle_stream", event_record_query},
        {"pointer_memtype_device", memtype_of_device},
        {"pointer_memtype_host", memtype_of_host},
        {"pointer_4_attributes", four_attributes},
        {"mem_get_address_range", address_range},
        {"ipc_get_mem_handle", ipc_get_handle},
        {"pointer_set_sync_memops", sync_memops},
        {"ctx_get_current", ctx_current},
    };
    for (size_t i = 0; i < sizeof questions / sizeof *questions; i++)
        timed(questions[i].name, 0, questions[i].body, &c, iters);

    cu_check(cuEventDestroy(c.event), "cuEventDestroy");
    cu_check(cuStreamDestroy(c.stream), "cuStreamDestroy");
    cu_check(cuMemHostUnregister(c.registered), "cuMemHostUnregister");
    free(c.registered);
    cu_check(cuMemFreeHost(c.pinned), "cuMemFreeHost");
    free(c.pageable);
    cu_check(cuMemFree(c.dev), "cuMemFree");
    cu_check(cuMemFree(c.dev2), "cuMemFree");
}

/* Rank 0 exports an allocation holding its pattern; rank 1 opens it, copies from it. */
static void two_processes(unsigned char *check)
{
    struct ipc p = {0};
    CUdeviceptr exported = 0;
    if (ck.rank == 0) {
        cu_check(cuMemAlloc(&exported, COPY_MAX), "cuMemAlloc");
        dev_fill(exported, check, COPY_MAX, 0, 1, 2, 0);
        cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
        cu_check(cuIpcGetMemHandle(&p.handle, exported), "cuIpcGetMemHandle");
        MPI_Send(&p.handle, (int)sizeof p.handle, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
    } else if (ck.rank == 1) {
        MPI_Recv(&p.handle, (int)sizeof p.handle, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        long few = iters / 10 + 1;
        timed("ipc_open+close", 0, ipc_open_close, &p, few);
        cu_check(cuIpcOpenMemHandle(&p.mapped, p.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 "cuIpcOpenMemHandle");
        cu_check(cuMemAlloc(&p.own, COPY_MAX), "cuMemAlloc");
        cu_check(cuStreamCreate(&p.stream, 0), "cuStreamCreate");
        cu_check(cuEventCreate(&p.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
        for (size_t s = 0; s < sizeof copy_sizes / sizeof *copy_sizes; s++) {
            p.n = copy_sizes[s];
            timed("ipc_dtod_async+spin_event", p.n, ipc_copy_spin_event, &p, iters);
            unsigned char *back = ck_alloc(p.n);
            cu_check(cuMemcpyDtoH(back, p.own, p.n), "cuMemcpyDtoH");
            ck_verify_g("copy out of the peer's IPC mapping", back, p.n, 0, 1, 2, 0, 0);
            free(back);
        }
        cu_check(cuEventDestroy(p.event), "cuEventDestroy");
        cu_check(cuStreamDestroy(p.stream), "cuStreamDestroy");
        cu_check(cuMemFree(p.own), "cuMemFree");
        cu_check(cuIpcCloseMemHandle(p.mapped), "cuIpcCloseMemHandle");
    }
    MPI_Barrier(MPI_COMM_WORLD); /* rank 0 frees its allocation only after the peer closed */
    if (exported)
        cu_check(cuMemFree(exported), "cuMemFree");
}

/* Ping-pong floors: ranks 0 and 1 signal through flags in MPI shared memory (no MPI
 * call in the timed loop) and move n device bytes by one route per round trip; half the
 * round trip is the least a one-way device message by that route can cost here.
 *   pp_flag          the flags alone (host signalling)
 *   pp_staged        sender: cuMemcpyDtoH into its stage in the shared memory (page
 *                    locked by cuMemHostRegister in both), flag; receiver: cuMemcpyHtoD
 *   pp_ipc           flag only; receiver: cuMemcpyDtoDAsync out of the sender's buffer
 *                    opened by CUDA IPC once, then an event query loop
 *   pp_ipc_ce        the same copy by cuMemcpyBatchAsync with the driver asked to
 *                    prefer a copy engine (CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
 *                    skipped where the driver lacks it)
 *   pp_dtoh          sender: cuMemcpyDtoH into its stage, flag; receiver: nothing more
 *   pp_htod          sender: flag; receiver: cuMemcpyHtoD from the sender's stage
 *   pp_local         sender: cuMemcpyDtoDAsync within its own memory and an event query
 *                    loop, flag (GPU work that alternates between the two processes) */
#define PP_STAGE (64 * 1024)
#define PP_SLOT (PP_STAGE + 4096)

struct pp {
    unsigned char *base; /* the shared window: one slot per rank, flag first */
    CUdeviceptr sdev, rdev, peer_sdev;
    CUstream stream;
    CUevent event;
    int me, peer;
};

static volatile uint64_t *pp_flag_of(struct pp *p, int rank)
{
    return (volatile uint64_t *)(void *)(p->base + (size_t)rank * PP_SLOT);
}
static unsigned char *pp_stage_of(struct pp *p, int rank)
{
    return p->base + (size_t)rank * PP_SLOT + 4096;
}
static void pp_signal(struct pp *p, uint64_t seq)
{
    __atomic_store_n(pp_flag_of(p, p->peer), seq, __ATOMIC_RELEASE);
}
static void pp_wait(struct pp *p, uint64_t seq)
{
    while (__atomic_load_n(pp_flag_of(p, p->me), __ATOMIC_ACQUIRE) != seq)
        ;
}

enum pp_route { PP_FLAG, PP_STAGED, PP_IPC, PP_IPC_CE, PP_DTOH, PP_HTOD, PP_LOCAL };

/* cuMemcpyBatchAsync as CUDA 12.8/12.9 declare it, found through cuGetProcAddress. */
typedef CUresult (*batch_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                             CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);
static batch_fn memcpy_batch;

/* The IPC copy of n bytes into this rank's buffer, queued by cuMemcpyBatchAsync with
 * the driver asked to prefer a copy engine. */
static CUresult copy_engine_copy(struct pp *p, size_t n)
{
    CUdeviceptr dst = p->rdev, src = p->peer_sdev;
    size_t size = n, idx = 0, fail = 0;
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
    attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
    attr.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    return memcpy_batch(&dst, &src, &size, 1, &attr, &idx, 1, &fail, p->stream);
}

static void pp_copy_engine(struct pp *p, size_t n)
{
    cu_check(copy_engine_copy(p, n), "cuMemcpyBatchAsync");
    record_and_spin(p->event, p->stream);
}

/* One message of n bytes from this rank to the peer (send side) or back (receive). */
static void pp_send(struct pp *p, enum pp_route route, size_t n, uint64_t seq)
{
    if (route == PP_STAGED || route == PP_DTOH) {
        cu_check(cuMemcpyDtoH(pp_stage_of(p, p->me), p->sdev, n), "cuMemcpyDtoH");
    } else if (route == PP_LOCAL) {
        cu_check(cuMemcpyDtoDAsync(p->rdev, p->sdev, n, p->stream), "cuMemcpyDtoDAsync");
        record_and_spin(p->event, p->stream);
    }
    pp_signal(p, seq);
}
static void pp_receive(struct pp *p, enum pp_route route, size_t n, uint64_t seq)
{
    pp_wait(p, seq);
    if (route == PP_STAGED || route == PP_HTOD) {
        cu_check(cuMemcpyHtoD(p->rdev, pp_stage_of(p, p->peer), n), "cuMemcpyHtoD");
    } else if (route == PP_IPC_CE) {
        pp_copy_engine(p, n);
    } else if (route == PP_IPC) {
        cu_check(cuMemcpyDtoDAsync(p->rdev, p->peer_sdev, n, p->stream), "cuMemcpyDtoDAsync");
        record_and_spin(p->event, p->stream);
    }
}

static void pingpongs(unsigned char *check)
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int node_rank = 0;
    MPI_Comm_rank(node, &node_rank);
    MPI_Win win;
    struct pp p = {0};
    p.me = ck.rank;
    p.peer = 1 - ck.rank;
    int in_pair = ck.rank <= 1 && node_rank == ck.rank;
    MPI_Aint mine = in_pair ? PP_SLOT : 0;
    MPI_Win_allocate_shared(mine, 1, MPI_INFO_NULL, node, &p.base, &win);
    if (in_pair) {
        MPI_Aint size = 0;
        int unit = 0;
        MPI_Win_shared_query(win, 0, &size, &unit, &p.base); /* slots are contiguous */
        memset(pp_stage_of(&p, p.me) - 4096, 0, 4096);
        cu_check(cuMemHostRegister(p.base, 2 * PP_SLOT, CU_MEMHOSTREGISTER_PORTABLE),
                 "cuMemHostRegister");
        cu_check(cuMemAlloc(&p.sdev, PP_STAGE), "cuMemAlloc");
        cu_check(cuMemAlloc(&p.rdev, PP_STAGE), "cuMemAlloc");
        cu_check(cuStreamCreate(&p.stream, 0), "cuStreamCreate");
        cu_check(cuEventCreate(&p.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
        dev_fill(p.sdev, check, PP_STAGE, p.me, p.peer, 5, 0);
        cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
        CUipcMemHandle mine_h, theirs;
        cu_check(cuIpcGetMemHandle(&mine_h, p.sdev), "cuIpcGetMemHandle");
        MPI_Sendrecv(&mine_h, (int)sizeof mine_h, MPI_BYTE, p.peer, 8, &theirs,
                     (int)sizeof theirs, MPI_BYTE, p.peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        cu_check(cuIpcOpenMemHandle(&p.peer_sdev, theirs, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 "cuIpcOpenMemHandle");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    static const struct {
        const char *name;
        enum pp_route route;
    } routes[] = {{"pp_flag", PP_FLAG},   {"pp_staged", PP_STAGED}, {"pp_ipc", PP_IPC},
                  {"pp_ipc_ce", PP_IPC_CE}, {"pp_dtoh", PP_DTOH},     {"pp_htod", PP_HTOD},
                  {"pp_local", PP_LOCAL}};
    static const size_t pp_sizes[] = {8, 4096, 16384, 32768, 49152, PP_STAGE};
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *fn = NULL;
    if (cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12090, CU_GET_PROC_ADDRESS_DEFAULT,
                         &found) == CUDA_SUCCESS &&
        found == CU_GET_PROC_ADDRESS_SUCCESS)
        memcpy_batch = (batch_fn)fn;
    /* A driver (or the stand-in) may name it and still not do it: one trial copy. */
    int ce_ok = 1;
    if (in_pair && memcpy_batch) {
        ce_ok = copy_engine_copy(&p, 8) == CUDA_SUCCESS;
        cu_check(cuStreamSynchronize(p.stream), "cuStreamSynchronize");
    } else if (in_pair) {
        ce_ok = 0;
    }
    int all_ce_ok = 0;
    MPI_Allreduce(&ce_ok, &all_ce_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ce_ok)
        memcpy_batch = NULL;
    if (ck.rank == 0 && !all_ce_ok)
        printf("driver_costs info pp_ipc_ce skipped: cuMemcpyBatchAsync unavailable\n");
    uint64_t seq = 0;
    for (size_t r = 0; r < sizeof routes / sizeof *routes; r++) {
        for (size_t s = 0; s < sizeof pp_sizes / sizeof *pp_sizes; s++) {
            size_t n = pp_sizes[s];
            if ((routes[r].route == PP_FLAG && s > 0) ||
                (routes[r].route == PP_IPC_CE && memcpy_batch == NULL))
                continue;
            if (in_pair) {
                cu_check(cuMemsetD8(p.rdev, CK_GUARD_BYTE, PP_STAGE), "cuMemsetD8");
                cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (!in_pair)
                continue;
            long total = iters + iters / 10 + 1;
            for (long i = 0; i < total; i++) {
                double t0 = now_us();
                if (p.me == 0) {
                    pp_send(&p, routes[r].route, n, ++seq);
                    pp_receive(&p, routes[r].route, n, ++seq);
                } else {
                    pp_receive(&p, routes[r].route, n, ++seq);
                    pp_send(&p, routes[r].route, n, ++seq);
                }
                if (i >= total - iters)
                    samples[i - (total - iters)] = (now_us() - t0) / 2;
            }
            if (p.me == 0) {
                qsort(samples, (size_t)iters, sizeof *samples, cmp_double);
                printf("driver_costs %s %zu median %.3f p10 %.3f p90 %.3f\n", routes[r].name, n,
                       samples[iters / 2], samples[iters / 10], samples[iters * 9 / 10]);
                fflush(stdout);
            }
            /* What the receiver's device buffer must hold: the peer's bytes. */
            if (routes[r].route == PP_STAGED || routes[r].route == PP_IPC ||
                routes[r].route == PP_IPC_CE || routes[r].route == PP_HTOD) {
                unsigned char *back = ck_alloc(n);
                cu_check(cuMemcpyDtoH(back, p.rdev, n), "cuMemcpyDtoH");
                char what[64];
                snprintf(what, sizeof what, "%s of %zu bytes", routes[r].name, n);
                ck_verify_g(what, back, n, p.peer, p.me, 5, 0, 0);
                free(back);
            }
        }
    }
    if (in_pair) {
        cu_check(cuIpcCloseMemHandle(p.peer_sdev), "cuIpcCloseMemHandle");
        cu_check(cuEventDestroy(p.event), "cuEventDestroy");
        cu_check(cuStreamDestroy(p.stream), "cuStreamDestroy");
        cu_check(cuMemFree(p.sdev), "cuMemFree");
        cu_check(cuMemFree(p.rdev), "cuMemFree");
        cu_check(cuMemHostUnregister(p.base), "cuMemHostUnregister");
    }
    MPI_Barrier(MPI_COMM_WORLD); /* no rank frees the window while the peer uses it */
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--iters=", 8) == 0)
            iters = atol(argv[i] + 8);
        else if (strcmp(argv[i], "--quick") == 0)
            ck.quick = 1;
        else if (strcmp(argv[i], "--verbose") != 0) {
            fprintf(stderr, "driver_costs: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (iters < 0)
        iters = ck.quick ? 100 : 1000;
    if (iters < 10 || iters > MAX_ITERS) {
        fprintf(stderr, "driver_costs: --iters must be 10..%d\n", MAX_ITERS);
        return 2;
    }
    int devices = 0, ordinal = 0;
    CUdevice dev = cu_open_device("driver_costs", -1, &ordinal, &devices);
    ck_init(&argc, &argv, "driver_costs", MPI_THREAD_SINGLE);
    if (ck.size < 2) {
        fprintf(stderr, "driver_costs: needs 2 ranks or more\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char name[128] = "?";
    cuDeviceGetName(name, (int)sizeof name, dev);
    const char *sched = getenv("RMCA_CU_SCHED");
    if (ck.rank == 0)
        printf("driver_costs info iters %ld sched %s device %s\n", iters,
               sched && *sched ? sched : "auto", name);
    unsigned char *check = ck_alloc(COPY_MAX);
    if (ck.rank == 0)
        single_process(check);
    MPI_Barrier(MPI_COMM_WORLD);
    two_processes(check);
    pingpongs(check);
    free(check);
    int rc = ck_finish();
    cuDevicePrimaryCtxRelease(dev);
    return rc;
}
