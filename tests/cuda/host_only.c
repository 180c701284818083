/*
 * host_only.c -- an MPI program that never calls CUDA (so it has no CUDA context)
 * moving many small host messages: what a CPU-only application does on a GPU node
 * with a CUDA-aware Open MPI. Pairs (2k, 2k+1) exchange --count messages (default
 * 4000, --quick 1000) of 8 to 1024 bytes each way, every byte checked.
 */
#include "check.h"

#define TAG 21

int main(int argc, char **argv)
{
    int rc = ck_init(&argc, &argv, "host_only", MPI_THREAD_SINGLE);
    if (rc)
        return rc;
    long count = ck.quick ? 1000 : 4000;
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--count=", 8))
            count = atol(argv[i] + 8);
    int peer = ck.rank ^ 1;
    if (peer < ck.size) {
        unsigned char sbuf[1024], rbuf[1024 + CK_GUARD];
        for (long idx = 0; idx < count; idx++) {
            size_t n = (size_t)8 << (idx % 8); /* 8 .. 1024 bytes */
            ck_fill(sbuf, n, ck.rank, peer, TAG, idx);
            memset(rbuf, CK_GUARD_BYTE, n + CK_GUARD);
            MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, peer, TAG, rbuf, (int)n, MPI_BYTE, peer, TAG,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ck_verify("Sendrecv host", rbuf, n, peer, ck.rank, TAG, idx);
        }
    }
    return ck_finish();
}
