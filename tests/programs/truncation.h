/*
 * truncation.h -- the truncated-receive checks shared by p2p_cancel_trunc.c
 * (eager sizes) and trunc_large.c (rendezvous sizes).  Header-only, needs
 * check.h.
 *
 * trunc_traffic(): after a cancel or a truncation, ordinary traffic of 0 B to
 * 1 MiB + 1 on the same communicator must still arrive intact.
 *
 * trunc_cases(): for every (message size, smaller buffer size) pair, receive
 * through MPI_Recv, MPI_Irecv+MPI_Wait and MPI_Irecv+MPI_Waitall on a
 * communicator with MPI_ERRORS_RETURN and check the error class
 * (MPI_ERR_TRUNCATE; Waitall: MPI_ERR_IN_STATUS with it in the status), the
 * status source and tag, the guard bytes past the buffer, the sender's
 * completion, then trunc_traffic() on that communicator and on
 * MPI_COMM_WORLD.  Between ring neighbours (1 rank: itself).
 */
#ifndef CK_TRUNCATION_H
#define CK_TRUNCATION_H

#include "check.h"

static inline void trunc_traffic(MPI_Comm comm, const char *after, int tag, long idx)
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

enum trunc_how { TRUNC_RECV, TRUNC_WAIT, TRUNC_WAITALL, TRUNC_HOW_COUNT };

/* Receives into rb (rn bytes, too small) by `how`; returns the receive's rc. */
static inline int trunc_receive(enum trunc_how how, unsigned char *rb, size_t rn, int src, int tag,
                                MPI_Comm comm, MPI_Status *st, const char *what)
{
    MPI_Request rrq;
    int rc, cls = -1, stcls = -1;
    if (how == TRUNC_RECV) {
        rc = MPI_Recv(rb, (int)rn, MPI_BYTE, src, tag, comm, st);
    } else if (how == TRUNC_WAIT) {
        MPI_Irecv(rb, (int)rn, MPI_BYTE, src, tag, comm, &rrq);
        rc = MPI_Wait(&rrq, st);
    } else {
        MPI_Irecv(rb, (int)rn, MPI_BYTE, src, tag, comm, &rrq);
        rc = MPI_Waitall(1, &rrq, st);
    }
    MPI_Error_class(rc, &cls);
    if (how != TRUNC_WAITALL) {
        ck_check(cls == MPI_ERR_TRUNCATE, "%s: return code class %d, expected MPI_ERR_TRUNCATE (%d)",
                 what, cls, MPI_ERR_TRUNCATE);
        return rc;
    }
    if (st->MPI_ERROR != MPI_SUCCESS)
        MPI_Error_class(st->MPI_ERROR, &stcls);
    else
        stcls = MPI_SUCCESS;
    ck_check(rc == MPI_ERR_IN_STATUS && stcls == MPI_ERR_TRUNCATE,
             "%s: return code %d (class %d, expected MPI_ERR_IN_STATUS), status.MPI_ERROR "
             "class %d (expected MPI_ERR_TRUNCATE %d)",
             what, rc, cls, stcls, MPI_ERR_TRUNCATE);
    return rc;
}

/* sn[c]-byte messages into rn[c]-byte buffers for c < ncase; tags from tag_base. */
static inline void trunc_cases(const size_t *sn, const size_t *rn, int ncase, int tag_base)
{
    static const char *how_name[] = {"MPI_Recv", "MPI_Irecv+MPI_Wait", "MPI_Irecv+MPI_Waitall"};
    int dst = ck_right(), src = ck_left();
    MPI_Comm comm;
    char what[200];
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    for (int h = 0; h < TRUNC_HOW_COUNT; h++) {
        for (int c = 0; c < ncase; c++) {
            int tag = tag_base + h * 10 + c;
            unsigned char *sb = ck_alloc(sn[c]), *rb = ck_alloc(rn[c]);
            MPI_Request srq;
            MPI_Status st;
            ck_fill(sb, sn[c], ck.rank, dst, tag, c);
            snprintf(what, sizeof what, "truncation via %s: %zu-byte message into %zu-byte buffer",
                     how_name[h], sn[c], rn[c]);
            ck_progress("%s", what);
            MPI_Isend(sb, (int)sn[c], MPI_BYTE, dst, tag, comm, &srq);
            int rc = trunc_receive((enum trunc_how)h, rb, rn[c], src, tag, comm, &st, what);
            ck_progress("%s: receive completed (rc %d)", what, rc);
            ck_check(st.MPI_SOURCE == src && st.MPI_TAG == tag,
                     "%s: status source %d tag %d, expected %d %d", what, st.MPI_SOURCE, st.MPI_TAG,
                     src, tag);
            size_t gbad = 0, gfirst = 0;
            for (size_t i = 0; i < CK_GUARD; i++)
                if (rb[rn[c] + i] != CK_GUARD_BYTE && gbad++ == 0)
                    gfirst = i;
            ck_check(gbad == 0, "%s: %zu bytes written past the %zu-byte buffer (first at offset %zu)",
                     what, gbad, rn[c], rn[c] + gfirst);
            rc = MPI_Wait(&srq, MPI_STATUS_IGNORE);
            ck_check(rc == MPI_SUCCESS, "%s: sender's MPI_Wait returned %d", what, rc);
            ck_progress("%s: send completed (rc %d)", what, rc);
            MPI_Barrier(comm);
            /* free only after the barrier: a defective transport may still be
             * writing into rb (the guard check above reports it) */
            free(sb);
            free(rb);
            snprintf(what, sizeof what, "truncation (%s, case %d)", how_name[h], c);
            trunc_traffic(comm, what, tag, 100 + c);
            trunc_traffic(MPI_COMM_WORLD, what, tag, 200 + c);
        }
    }
    MPI_Comm_free(&comm);
}

#endif
