/*
 * ssend_mrecv.c -- synchronous sends received through matched probes.
 *
 * Kept separate from p2p_probe.c because Open MPI 4.1.4's stock OFI MTL
 * deadlocks on it (the synchronous-send acknowledgement is never sent when a
 * message is received via MPI_Mprobe/MPI_Mrecv), so a known upstream defect
 * can be recorded per configuration without hiding the rest of the suite.
 *
 *  A. MPI_Ssend  -> MPI_Mprobe  + MPI_Mrecv   (even ranks send first, odd ranks probe first)
 *  B. MPI_Issend -> MPI_Improbe + MPI_Imrecv
 *  C. MPI_Issend -> MPI_Mprobe(ANY_SOURCE, ANY_TAG) + MPI_Mrecv
 * Sizes 0 B .. 1 MiB, between ring neighbours.  Rank 0 prints a progress
 * line before each part so a hang can be located.          [needs >= 2 ranks]
 * --parts=ABC selects parts (default: all), e.g. --parts=BC to see whether
 * only the blocking form hangs on a given transport; --verbose prints a line
 * per rank before each message.
 */
#include "check.h"

static const size_t SZ[] = {0, 1, 1024, 65537, (1u << 20) + 1};
#define NSZ ((int)(sizeof SZ / sizeof SZ[0]))

static void mrecv_one(const char *what, int mode, int src, int tag, size_t n, long idx)
{
    MPI_Message msg;
    MPI_Status st, rst;
    int count = -1;
    int psrc = mode == 2 ? MPI_ANY_SOURCE : src, ptag = mode == 2 ? MPI_ANY_TAG : tag;
    if (mode == 1) {
        int flag = 0;
        while (!flag)
            MPI_Improbe(psrc, ptag, MPI_COMM_WORLD, &flag, &msg, &st);
    } else {
        MPI_Mprobe(psrc, ptag, MPI_COMM_WORLD, &msg, &st);
    }
    ck_status(what, &st, src, tag, n);
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count < 0)
        count = 0;
    unsigned char *rb = ck_alloc((size_t)count);
    if (mode == 1) {
        MPI_Request rq;
        MPI_Imrecv(rb, count, MPI_BYTE, &msg, &rq);
        MPI_Wait(&rq, &rst);
    } else {
        MPI_Mrecv(rb, count, MPI_BYTE, &msg, &rst);
    }
    ck_verify(what, rb, (size_t)count, src, ck.rank, tag, idx);
    ck_status(what, &rst, src, tag, n);
    free(rb);
}

int main(int argc, char **argv)
{
    static const char *mname[] = {"Ssend -> Mprobe+Mrecv", "Issend -> Improbe+Imrecv",
                                  "Issend -> Mprobe(ANY_SOURCE,ANY_TAG)+Mrecv"};
    const char *parts = "ABC";
    ck_init(&argc, &argv, "ssend_mrecv", MPI_THREAD_SINGLE);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--parts=", 8) == 0)
            parts = argv[i] + 8;
    if (ck.size < 2) {
        ck_skip("Ssend + Mprobe/Mrecv");
        return ck_finish();
    }
    int me = ck.rank, dst = ck_right(), src = ck_left();
    unsigned char *sb = ck_alloc(SZ[NSZ - 1]);
    char what[160];
    for (int mode = 0; mode < 3; mode++) {
        if (!strchr(parts, 'A' + mode))
            continue;
        if (me == 0)
            ck_note("part %c: %s", 'A' + mode, mname[mode]);
        for (int si = 0; si < NSZ; si++) {
            size_t n = SZ[si];
            int tag = 10 * mode + si;
            snprintf(what, sizeof what, "%s size %zu", mname[mode], n);
            ck_progress("%s: start", what);
            ck_fill(sb, n, me, dst, tag, mode);
            if (mode == 0) {
                if (me % 2 == 0)
                    MPI_Ssend(sb, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
                mrecv_one(what, mode, src, tag, n, mode);
                if (me % 2 != 0)
                    MPI_Ssend(sb, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
            } else {
                MPI_Request rq;
                MPI_Issend(sb, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq);
                mrecv_one(what, mode, src, tag, n, mode);
                MPI_Wait(&rq, MPI_STATUS_IGNORE);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(sb);
    return ck_finish();
}
