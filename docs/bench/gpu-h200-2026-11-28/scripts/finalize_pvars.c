/*
 * finalize_pvars.c -- linked into tests/cuda/malloc_bcast_free for the H200 run of
 * 2026-11-28 (release.sh): MPI_Init / MPI_Init_thread open MPI_T handles on rsmcuda's
 * CUDA IPC pvars right after PMPI_Init (Open MPI reads a counter through a handle as
 * its growth since the handle was made), and MPI_Finalize reads them on every rank and
 * has rank 0 print the job's sums in one line before PMPI_Finalize. The program itself
 * is unchanged. A pvar that does not exist (stock smcuda's job: rsmcuda not loaded) is
 * printed as "absent".
 *
 *   pvars: btl_rsmcuda_cuda_ipc_cache_misses=N ... (sum over R ranks)
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static const char *names[] = {
    "btl_rsmcuda_cuda_ipc_cache_hits",      "btl_rsmcuda_cuda_ipc_cache_misses",
    "btl_rsmcuda_cuda_ipc_cache_evictions", "btl_rsmcuda_cuda_ipc_released",
    "btl_rsmcuda_cuda_ipc_release_notices", "btl_rsmcuda_cuda_failures",
};
#define N (sizeof names / sizeof names[0])

static MPI_T_pvar_session pvar_session;
static MPI_T_pvar_handle handles[N];
static int have[N];

static void open_pvars(void)
{
    int provided, num = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&pvar_session);
    MPI_T_pvar_get_num(&num);
    for (size_t k = 0; k < N; k++) {
        for (int i = 0; i < num && !have[k]; i++) {
            char name[256], desc[1024];
            int name_len = sizeof name, desc_len = sizeof desc, verbosity, var_class, bind,
                readonly, continuous, atomic, count = 0;
            MPI_Datatype type;
            MPI_T_enum enumtype;
            if (MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type,
                                    &enumtype, desc, &desc_len, &bind, &readonly,
                                    &continuous, &atomic) != MPI_SUCCESS ||
                strcmp(name, names[k]) != 0)
                continue;
            if (type == MPI_UNSIGNED_LONG_LONG &&
                MPI_T_pvar_handle_alloc(pvar_session, i, NULL, &handles[k], &count) == MPI_SUCCESS &&
                count == 1) {
                have[k] = 1;
                if (!continuous)
                    MPI_T_pvar_start(pvar_session, handles[k]);
            }
        }
    }
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        open_pvars();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        open_pvars();
    return rc;
}

int MPI_Finalize(void)
{
    unsigned long long mine[N], sum[N];
    int ok[N], all[N], rank = 0, size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    for (size_t k = 0; k < N; k++) {
        mine[k] = 0;
        ok[k] = have[k] && MPI_T_pvar_read(pvar_session, handles[k], &mine[k]) == MPI_SUCCESS;
        if (have[k])
            MPI_T_pvar_handle_free(pvar_session, &handles[k]);
    }
    MPI_T_pvar_session_free(&pvar_session);
    MPI_T_finalize();
    PMPI_Reduce(mine, sum, N, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(ok, all, N, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("pvars:");
        for (size_t k = 0; k < N; k++) {
            if (all[k])
                printf(" %s=%llu", names[k], sum[k]);
            else
                printf(" %s=absent", names[k]);
        }
        printf(" (sum over %d ranks)\n", size);
        fflush(stdout);
    }
    return PMPI_Finalize();
}
