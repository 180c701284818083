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
#include "check.h"

#define TAG_CANCEL 9999

static void verify_traffic(MPI_Comm comm, const char *after, int tag, long idx)
{
    static const size_t sz[] = {0, 100, 70000, (1u << 20) + 1};
    int dst = ck_right(), src = ck_left();
    char what[200];
    for (int i = 0; i < 4; i++) {
        size_t n = sz[i];
        ck_progress("traffic after %s, size %zu", after, n);
        unsigned char *sb = ck_alloc(n), *rb = ck_alloc(n);
        MPI_Request rq[2];
        MPI_Status st[2];
        ck_fill(sb, n, ck.rank, dst, tag, idx * 10 + i);
        MPI_Irecv(rb, (int)n, MPI_BYTE, src, tag, comm, &rq[0]);
        MPI_Isend(sb, (int)n, MPI_BYTE, dst, tag, comm, &rq[1]);
        int rc = MPI_Waitall(2, rq, st);
        snprintf(what, sizeof what, "traffic after %s, size %zu", after, n);
        ck_check(rc == MPI_SUCCESS, "%s: MPI_Waitall returned %d (recv status error %d, send %d)",
                 what, rc, rc == MPI_ERR_IN_STATUS ? st[0].MPI_ERROR : 0,
                 rc == MPI_ERR_IN_STATUS ? st[1].MPI_ERROR : 0);
        ck_verify(what, rb, n, src, ck.rank, tag, idx * 10 + i);
        ck_status(what, &st[0], src, tag, n);
        free(sb);
        free(rb);
    }
}

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
        verify_traffic(MPI_COMM_WORLD, vname[v], TAG_CANCEL, v);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* B: truncation */
static void part_b(void)
{
    static const size_t sn[] = {100, 512, 1, 300, 64, 200};
    static const size_t rn[] = {50, 1, 0, 299, 0, 100};
    static const char *how[] = {"MPI_Recv", "MPI_Irecv+MPI_Wait", "MPI_Irecv+MPI_Waitall"};
    int ncase = ck.quick ? 4 : 6;
    int dst = ck_right(), src = ck_left();
    MPI_Comm comm;
    char what[200];
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    for (int h = 0; h < 3; h++) {
        for (int c = 0; c < ncase; c++) {
            int tag = 500 + h * 10 + c;
            unsigned char *sb = ck_alloc(sn[c]), *rb = ck_alloc(rn[c]);
            MPI_Request srq, rrq;
            MPI_Status st;
            int rc, cls = -1, stcls = -1;
            ck_fill(sb, sn[c], ck.rank, dst, tag, c);
            snprintf(what, sizeof what, "truncation via %s: %zu-byte message into %zu-byte buffer",
                     how[h], sn[c], rn[c]);
            ck_progress("%s", what);
            MPI_Isend(sb, (int)sn[c], MPI_BYTE, dst, tag, comm, &srq);
            if (h == 0) {
                rc = MPI_Recv(rb, (int)rn[c], MPI_BYTE, src, tag, comm, &st);
                MPI_Error_class(rc, &cls);
                ck_check(cls == MPI_ERR_TRUNCATE, "%s: return code class %d, expected MPI_ERR_TRUNCATE (%d)",
                         what, cls, MPI_ERR_TRUNCATE);
            } else if (h == 1) {
                MPI_Irecv(rb, (int)rn[c], MPI_BYTE, src, tag, comm, &rrq);
                rc = MPI_Wait(&rrq, &st);
                MPI_Error_class(rc, &cls);
                ck_check(cls == MPI_ERR_TRUNCATE, "%s: return code class %d, expected MPI_ERR_TRUNCATE (%d)",
                         what, cls, MPI_ERR_TRUNCATE);
            } else {
                MPI_Status sts[1];
                MPI_Irecv(rb, (int)rn[c], MPI_BYTE, src, tag, comm, &rrq);
                rc = MPI_Waitall(1, &rrq, sts);
                st = sts[0];
                MPI_Error_class(rc, &cls);
                if (st.MPI_ERROR != MPI_SUCCESS)
                    MPI_Error_class(st.MPI_ERROR, &stcls);
                else
                    stcls = MPI_SUCCESS;
                ck_check(rc == MPI_ERR_IN_STATUS && stcls == MPI_ERR_TRUNCATE,
                         "%s: return code %d (class %d, expected MPI_ERR_IN_STATUS), status.MPI_ERROR "
                         "class %d (expected MPI_ERR_TRUNCATE %d)",
                         what, rc, cls, stcls, MPI_ERR_TRUNCATE);
            }
            ck_progress("%s: receive completed (rc %d)", what, rc);
            ck_check(st.MPI_SOURCE == src && st.MPI_TAG == tag,
                     "%s: status source %d tag %d, expected %d %d", what, st.MPI_SOURCE, st.MPI_TAG,
                     src, tag);
            /* nothing may be written past the receive buffer */
            size_t gbad = 0, gfirst = 0;
            for (size_t i = 0; i < CK_GUARD; i++)
                if (rb[rn[c] + i] != CK_GUARD_BYTE && gbad++ == 0)
                    gfirst = i;
            ck_check(gbad == 0, "%s: %zu bytes written past the %zu-byte buffer (first at offset %zu)",
                     what, gbad, rn[c], rn[c] + gfirst);
            rc = MPI_Wait(&srq, MPI_STATUS_IGNORE);
            ck_check(rc == MPI_SUCCESS, "%s: sender's MPI_Wait returned %d", what, rc);
            ck_progress("%s: send completed (rc %d)", what, rc);
            free(sb);
            free(rb);
            MPI_Barrier(comm);
            snprintf(what, sizeof what, "truncation (%s, case %d)", how[h], c);
            verify_traffic(comm, what, tag, 100 + c);
            verify_traffic(MPI_COMM_WORLD, what, tag, 200 + c);
        }
    }
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "p2p_cancel_trunc", MPI_THREAD_SINGLE);
    part_a();
    part_b();
    return ck_finish();
}
