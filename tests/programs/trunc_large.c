/*
 * trunc_large.c -- truncation of messages above the eager limit (rendezvous).
 *
 * Same checks as part B of p2p_cancel_trunc.c, but every message is larger
 * than any stock BTL's eager limit (self 1 KiB, vader 4 KiB, tcp 64 KiB), so
 * the truncation happens in the rendezvous / RDMA-pipeline path.  Kept in
 * its own program because stock Open MPI 4.1.4 ob1 writes past the receive
 * buffer here (heap corruption, then a crash or hang), so this known
 * upstream defect is recorded per configuration without hiding the rest.
 *
 * On a communicator with MPI_ERRORS_RETURN, for MPI_Recv, MPI_Irecv+MPI_Wait
 * and MPI_Irecv+MPI_Waitall: error class MPI_ERR_TRUNCATE (Waitall:
 * MPI_ERR_IN_STATUS + status.MPI_ERROR), nothing written past the receive
 * buffer (64 guard bytes), the send completes without error, and traffic
 * afterwards is fully verified.  Between ring neighbours (1 rank: itself).
 */
#include "truncation.h"

int main(int argc, char **argv)
{
    static const size_t sn[] = {(1u << 20) + 1, 2u << 20, 65537 + 4096, 300000};
    static const size_t rn[] = {1000, 1u << 20, 65536, 0};
    ck_init(&argc, &argv, "trunc_large", MPI_THREAD_SINGLE);
    trunc_cases(sn, rn, ck.quick ? 2 : 4, 700);
    return ck_finish();
}
