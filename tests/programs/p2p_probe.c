/*
 * p2p_probe.c -- probing and matched-message receives (without Ssend; the
 * Ssend + Mprobe/Mrecv combination lives in ssend_mrecv.c).
 *
 *  A. MPI_Probe (fixed source/tag): status source/tag/count, then allocate
 *     exactly count bytes and MPI_Recv.
 *  B. MPI_Iprobe polled until found, then MPI_Recv.
 *  C. MPI_Probe(ANY_SOURCE, ANY_TAG) at rank 0 with every other rank sending,
 *     then receive with the probed source/tag.              [needs >= 2 ranks]
 *  D. MPI_Mprobe + MPI_Mrecv and MPI_Improbe + MPI_Imrecv (fixed source/tag).
 *  E. MPI_Mprobe(ANY_SOURCE, ANY_TAG) at rank 0 from all others + MPI_Mrecv. [>= 2]
 *  F. two messages with the same (source, tag) mprobed in order and then
 *     MPI_Mrecv'd in the reverse order: each handle gets its own message.
 *  G. MPI_Mprobe / MPI_Improbe / MPI_Probe on MPI_PROC_NULL.
 * Sizes 0 B .. 1 MiB (eager and rendezvous).  A, B, D, F are between ring
 * neighbours (with 1 rank: with itself).
 */
#include "check.h"

static const size_t SZ[] = {0, 1, 100, 4096, 65537, (1u << 20) + 3};
#define NSZ ((int)(sizeof SZ / sizeof SZ[0]))

/* post Isends of all sizes to dst with tags base+si; returns buffers/requests */
static void send_all(int dst, int base, long idx, unsigned char **sb, MPI_Request *rq)
{
    for (int si = 0; si < NSZ; si++) {
        sb[si] = ck_alloc(SZ[si]);
        ck_fill(sb[si], SZ[si], ck.rank, dst, base + si, idx);
        MPI_Isend(sb[si], (int)SZ[si], MPI_BYTE, dst, base + si, MPI_COMM_WORLD, &rq[si]);
    }
}

static void finish_sends(unsigned char **sb, MPI_Request *rq)
{
    MPI_Waitall(NSZ, rq, MPI_STATUSES_IGNORE);
    for (int si = 0; si < NSZ; si++)
        free(sb[si]);
}

/* receive side of A/B/D: mode 0 Probe, 1 Iprobe, 2 Mprobe, 3 Improbe */
static void probe_recv(int mode, int src, int base, long idx)
{
    static const char *mname[] = {"Probe+Recv", "Iprobe+Recv", "Mprobe+Mrecv", "Improbe+Imrecv"};
    char what[160];
    /* reverse size order: the probe must pick the message by tag */
    for (int si = NSZ - 1; si >= 0; si--) {
        int tag = base + si, count = -1;
        MPI_Status st;
        MPI_Message msg = MPI_MESSAGE_NULL;
        snprintf(what, sizeof what, "%s size %zu", mname[mode], SZ[si]);
        if (mode == 0) {
            MPI_Probe(src, tag, MPI_COMM_WORLD, &st);
        } else if (mode == 1) {
            int flag = 0;
            while (!flag)
                MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st);
        } else if (mode == 2) {
            MPI_Mprobe(src, tag, MPI_COMM_WORLD, &msg, &st);
        } else {
            int flag = 0;
            while (!flag)
                MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag, &msg, &st);
        }
        MPI_Get_count(&st, MPI_BYTE, &count);
        ck_status(what, &st, src, tag, SZ[si]);
        if (count < 0)
            count = 0;
        unsigned char *rb = ck_alloc((size_t)count);
        MPI_Status rst;
        if (mode < 2) {
            MPI_Recv(rb, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rst);
        } else if (mode == 2) {
            MPI_Mrecv(rb, count, MPI_BYTE, &msg, &rst);
            ck_check(msg == MPI_MESSAGE_NULL, "%s: message handle not MPI_MESSAGE_NULL after Mrecv",
                     what);
        } else {
            MPI_Request rq;
            MPI_Imrecv(rb, count, MPI_BYTE, &msg, &rq);
            ck_check(msg == MPI_MESSAGE_NULL,
                     "%s: message handle not MPI_MESSAGE_NULL after Imrecv", what);
            MPI_Wait(&rq, &rst);
        }
        ck_verify(what, rb, (size_t)count, src, ck.rank, tag, idx);
        ck_status(what, &rst, src, tag, SZ[si]);
        free(rb);
    }
}

static void part_abd(void)
{
    for (int mode = 0; mode < 4; mode++) {
        unsigned char *sb[NSZ];
        MPI_Request rq[NSZ];
        int base = 100 + mode * 10;
        send_all(ck_right(), base, mode, sb, rq);
        probe_recv(mode, ck_left(), base, mode);
        finish_sends(sb, rq);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* C and E: everyone sends K messages to rank 0 which probes ANY/ANY */
static void part_ce(int matched)
{
    const char *name = matched ? "Mprobe(ANY_SOURCE,ANY_TAG)+Mrecv" : "Probe(ANY_SOURCE,ANY_TAG)+Recv";
    if (ck.size < 2) {
        ck_skip(name);
        return;
    }
    const int K = 12, base = 200 + matched * 50;
    char what[160];
    if (ck.rank != 0) {
        unsigned char *sb[12];
        MPI_Request rq[12];
        for (int k = 0; k < K; k++) {
            size_t n = SZ[k % NSZ] + (size_t)ck.rank;
            sb[k] = ck_alloc(n);
            ck_fill(sb[k], n, ck.rank, 0, base + k, matched);
            MPI_Isend(sb[k], (int)n, MPI_BYTE, 0, base + k, MPI_COMM_WORLD, &rq[k]);
        }
        MPI_Waitall(K, rq, MPI_STATUSES_IGNORE);
        for (int k = 0; k < K; k++)
            free(sb[k]);
    } else {
        int *next = calloc((size_t)ck.size, sizeof(int));
        for (int i = 0; i < K * (ck.size - 1); i++) {
            MPI_Status st, rst;
            MPI_Message msg;
            int count = -1;
            if (matched)
                MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
            else
                MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            int src = st.MPI_SOURCE, tag = st.MPI_TAG, k = tag - base;
            MPI_Get_count(&st, MPI_BYTE, &count);
            snprintf(what, sizeof what, "%s #%d", name, i);
            if (!ck_check(src >= 1 && src < ck.size && k >= 0 && k < K && count >= 0,
                          "%s: probed source %d tag %d count %d out of range", what, src, tag,
                          count)) {
                /* drain it anyway so the run can finish */
                unsigned char *tmp = ck_alloc(count > 0 ? (size_t)count : 0);
                if (matched)
                    MPI_Mrecv(tmp, count, MPI_BYTE, &msg, &rst);
                else
                    MPI_Recv(tmp, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rst);
                free(tmp);
                continue;
            }
            ck_check(k == next[src], "%s: from source %d got tag %d, expected tag %d (send order)",
                     what, src, tag, base + next[src]);
            next[src] = k + 1;
            size_t n = SZ[k % NSZ] + (size_t)src;
            ck_check((size_t)count == n, "%s: probed count %d expected %zu", what, count, n);
            unsigned char *rb = ck_alloc((size_t)count);
            if (matched)
                MPI_Mrecv(rb, count, MPI_BYTE, &msg, &rst);
            else
                MPI_Recv(rb, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rst);
            ck_verify(what, rb, (size_t)count, src, 0, tag, matched);
            ck_status(what, &rst, src, tag, (size_t)count);
            free(rb);
        }
        free(next);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* F: two same-tag messages, mprobe both, Mrecv in reverse order */
static void part_f(void)
{
    const size_t n0 = 3000, n1 = (1u << 20) + 11; /* eager first, rendezvous second */
    int dst = ck_right(), src = ck_left(), tag = 400;
    unsigned char *s0 = ck_alloc(n0), *s1 = ck_alloc(n1), *r0 = ck_alloc(n0), *r1 = ck_alloc(n1);
    MPI_Request rq[2];
    MPI_Message m0, m1;
    MPI_Status st0, st1;
    ck_fill(s0, n0, ck.rank, dst, tag, 0);
    ck_fill(s1, n1, ck.rank, dst, tag, 1);
    MPI_Isend(s0, (int)n0, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(s1, (int)n1, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq[1]);
    MPI_Mprobe(src, tag, MPI_COMM_WORLD, &m0, &st0);
    MPI_Mprobe(src, tag, MPI_COMM_WORLD, &m1, &st1);
    ck_status("Mprobe first of two same-tag messages", &st0, src, tag, n0);
    ck_status("Mprobe second of two same-tag messages", &st1, src, tag, n1);
    MPI_Mrecv(r1, (int)n1, MPI_BYTE, &m1, &st1);
    MPI_Mrecv(r0, (int)n0, MPI_BYTE, &m0, &st0);
    ck_verify("Mrecv second message first (reverse order)", r1, n1, src, ck.rank, tag, 1);
    ck_verify("Mrecv first message last (reverse order)", r0, n0, src, ck.rank, tag, 0);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    free(s0);
    free(s1);
    free(r0);
    free(r1);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* G: MPI_PROC_NULL */
static void part_g(void)
{
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;
    int count = -1, flag = 0;
    char b[4];
    MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &msg, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    ck_check(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL &&
                 st.MPI_TAG == MPI_ANY_TAG && count == 0,
             "Mprobe(MPI_PROC_NULL): message %s, source %d tag %d count %d",
             msg == MPI_MESSAGE_NO_PROC ? "NO_PROC" : "not NO_PROC", st.MPI_SOURCE, st.MPI_TAG,
             count);
    MPI_Mrecv(b, 4, MPI_BYTE, &msg, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    ck_check(msg == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL && count == 0,
             "Mrecv(MPI_MESSAGE_NO_PROC): source %d count %d", st.MPI_SOURCE, count);
    MPI_Improbe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &msg, &st);
    ck_check(flag && msg == MPI_MESSAGE_NO_PROC, "Improbe(MPI_PROC_NULL): flag %d", flag);
    MPI_Mrecv(b, 4, MPI_BYTE, &msg, &st);
    flag = 0;
    MPI_Iprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &st);
    ck_check(flag && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe(MPI_PROC_NULL): flag %d source %d",
             flag, st.MPI_SOURCE);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "p2p_probe", MPI_THREAD_SINGLE);
    int reps = ck.quick ? 1 : 3;
    for (int r = 0; r < reps; r++) {
        part_abd();
        part_ce(0);
        part_ce(1);
        part_f();
    }
    part_g();
    return ck_finish();
}
