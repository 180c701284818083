/*
 * p2p_cancel_trunc.c -- receive cancellation and message truncation.
 *
 *  A. MPI_Cancel of a posted MPI_Irecv that never matches (fixed source,
 *     ANY_SOURCE, completion by MPI_Wait or polled MPI_Test, and a persistent
 *     receive): MPI_Test_cancelled must report true.  Then messages with the
 *     very tag of the cancelled receives are exchanged and fully verified
 *     (a cancelled receive must not swallow them), at eager and large sizes.
 *  B. truncation on a communicator with MPI_ERRORS_RETURN: a receive buffer
 *     smaller than an eager-sized message (<= 512 B, below every stock BTL's
 *     eager limit; truncated rendezvous messages are in trunc_large.c because
 *     stock ob1 4.1.4 corrupts memory there) gives MPI_ERR_TRUNCATE from
 *     MPI_Recv, from MPI_Wait, and (as MPI_ERR_IN_STATUS + status.MPI_ERROR)
 *     from MPI_Waitall; nothing is written past the receive buffer; the send
 *     side completes without error; the following traffic on the same
 *     communicator and on MPI_COMM_WORLD is fully verified.
 * Between ring neighbours (with 1 rank: with itself).
 */
#include "truncation.h"

#define TAG_CANCEL 9999

static void part_a(void)
{
    static const char *vname[] = {"Irecv(fixed source)+Cancel+Wait",
                                  "Irecv(ANY_SOURCE)+Cancel+Wait",
                                  "Irecv(fixed source)+Cancel+Test loop",
                                  "Recv_init+Start+Cancel+Wait (persistent)"};
    unsigned char buf[256];
    for (int v = 0; v < 4; v++) {
        MPI_Request rq;
        MPI_Status st;
        int src = v == 1 ? MPI_ANY_SOURCE : ck_left(), flag = 0;
        if (v == 3) {
            MPI_Recv_init(buf, (int)sizeof buf, MPI_BYTE, src, TAG_CANCEL, MPI_COMM_WORLD, &rq);
            MPI_Start(&rq);
        } else {
            MPI_Irecv(buf, (int)sizeof buf, MPI_BYTE, src, TAG_CANCEL, MPI_COMM_WORLD, &rq);
        }
        ck_progress("%s", vname[v]);
        MPI_Cancel(&rq);
        if (v == 2) {
            while (!flag)
                MPI_Test(&rq, &flag, &st);
        } else {
            MPI_Wait(&rq, &st);
        }
        flag = 0;
        MPI_Test_cancelled(&st, &flag);
        ck_check(flag, "%s: MPI_Test_cancelled returned false", vname[v]);
        if (v == 3)
            MPI_Request_free(&rq);
        else
            ck_check(rq == MPI_REQUEST_NULL, "%s: request not MPI_REQUEST_NULL after completion",
                     vname[v]);
        /* nobody sends TAG_CANCEL before every rank has cancelled */
        MPI_Barrier(MPI_COMM_WORLD);
        trunc_traffic(MPI_COMM_WORLD, vname[v], TAG_CANCEL, v);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* B: truncation of eager-sized messages */
static void part_b(void)
{
    static const size_t sn[] = {100, 512, 1, 300, 64, 200};
    static const size_t rn[] = {50, 1, 0, 299, 0, 100};
    trunc_cases(sn, rn, ck.quick ? 4 : 6, 500);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "p2p_cancel_trunc", MPI_THREAD_SINGLE);
    part_a();
    part_b();
    return ck_finish();
}
