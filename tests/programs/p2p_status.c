/*
 * p2p_status.c -- what every single-completion point-to-point call writes into
 * the caller's status and message handle (single-threaded).
 *
 * Before every call the status is filled with a sentinel (MPI_ERROR = 0x5eed).
 * Single-completion calls must leave MPI_ERROR alone (the MPI standard's
 * section on status; the error comes back as the return code).  Checked:
 *  A. matched traffic from the left ring neighbour (1 rank: itself), 0 B to
 *     300000 B: Recv, Irecv+Wait, Irecv+Test loop, Irecv+Waitany, Sendrecv,
 *     Sendrecv_replace, Probe/Iprobe+Recv, Mprobe+Mrecv, Improbe+Imrecv+Wait;
 *     source, tag, count, MPI_ERROR, handles (MPI_MESSAGE_NULL after Mrecv /
 *     Imrecv), every byte.
 *  B. unmatched Iprobe and Improbe (a tag nobody sends): flag 0, the message
 *     handle and the whole status untouched.
 *  C. MPI_PROC_NULL: Recv, Irecv+Wait, Probe, Iprobe, Mprobe, Improbe, and
 *     Mrecv/Imrecv of MPI_MESSAGE_NO_PROC: source MPI_PROC_NULL, tag
 *     MPI_ANY_TAG, count 0, the handles MPI_MESSAGE_NO_PROC / MPI_MESSAGE_NULL.
 *  D. a cancelled Irecv completed by Wait and by Test: MPI_Test_cancelled true,
 *     MPI_ERROR untouched; the tag is then used and verified.
 *  E. truncation (ERRORS_RETURN communicator) of eager-sized messages (the
 *     rendezvous sizes are trunc_large.c's, where 4.1.4 ob1 has a defect):
 *     Recv, Irecv+Wait, Mprobe+Mrecv, Improbe+Imrecv+Wait return an error of
 *     class MPI_ERR_TRUNCATE with source and tag right, count the buffer's or
 *     the message's size, nothing written past the buffer, MPI_ERROR untouched.
 *     Needs >= 2 ranks to be meaningful: 4.1.4's self BTL overruns a truncated
 *     receive buffer (the suite runs it at 2 and 4).
 * --parts=ABCDE selects parts (default: all).
 */
#include "check.h"

#define SENTINEL_ERROR 0x5eed

static const size_t SZ[] = {0, 1, 100, 4096, 65537, 300000};
#define NSZ ((int)(sizeof SZ / sizeof SZ[0]))

enum how {
    H_RECV,
    H_IRECV_WAIT,
    H_IRECV_TEST,
    H_IRECV_WAITANY,
    H_SENDRECV,
    H_SENDRECV_REPLACE,
    H_PROBE,
    H_IPROBE,
    H_MPROBE,
    H_IMPROBE,
    H_COUNT
};
static const char *HOW[] = {"Recv",     "Irecv+Wait",       "Irecv+Test",  "Irecv+Waitany",
                            "Sendrecv", "Sendrecv_replace", "Probe+Recv",  "Iprobe+Recv",
                            "Mprobe+Mrecv", "Improbe+Imrecv"};

static void sentinel(MPI_Status *st)
{
    memset(st, 0x6b, sizeof *st);
    st->MPI_ERROR = SENTINEL_ERROR;
}

static void error_untouched(const char *what, const char *call, const MPI_Status *st)
{
    ck_check(st->MPI_ERROR == SENTINEL_ERROR, "%s: %s changed status.MPI_ERROR from %#x to %#x",
             what, call, SENTINEL_ERROR, st->MPI_ERROR);
}

/* A probe (blocking or polled) whose status must be right and MPI_ERROR kept. */
static void probe(enum how h, int src, int tag, MPI_Message *msg, const char *what)
{
    MPI_Status st;
    int flag = 0;
    do {
        sentinel(&st);
        switch (h) {
        case H_PROBE:
            MPI_Probe(src, tag, MPI_COMM_WORLD, &st);
            flag = 1;
            break;
        case H_IPROBE:
            MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st);
            break;
        case H_MPROBE:
            MPI_Mprobe(src, tag, MPI_COMM_WORLD, msg, &st);
            flag = 1;
            break;
        default:
            MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag, msg, &st);
            break;
        }
    } while (!flag);
    error_untouched(what, "the probe", &st);
    if (h == H_MPROBE || h == H_IMPROBE)
        ck_check(*msg != MPI_MESSAGE_NULL && *msg != MPI_MESSAGE_NO_PROC,
                 "%s: matched probe gave no message handle", what);
}

static void part_a(void)
{
    int src = ck_left(), dst = ck_right(), me = ck.rank;
    char what[160];
    for (int h = 0; h < H_COUNT; h++) {
        for (int si = 0; si < NSZ; si++) {
            size_t n = SZ[si];
            int tag = 100 + h * NSZ + si;
            long idx = h * 100 + si;
            unsigned char *sb = ck_alloc(n), *rb = ck_alloc(n);
            MPI_Request sr = MPI_REQUEST_NULL, rq = MPI_REQUEST_NULL;
            MPI_Message msg = MPI_MESSAGE_NULL;
            MPI_Status st;
            int flag = 0, index = -1;
            snprintf(what, sizeof what, "A %s size %zu", HOW[h], n);
            ck_fill(sb, n, me, dst, tag, idx);
            if (h != H_SENDRECV && h != H_SENDRECV_REPLACE)
                MPI_Isend(sb, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &sr);
            sentinel(&st);
            switch (h) {
            case H_RECV:
                MPI_Recv(rb, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st);
                break;
            case H_IRECV_WAIT:
                MPI_Irecv(rb, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq);
                MPI_Wait(&rq, &st);
                break;
            case H_IRECV_TEST:
                MPI_Irecv(rb, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq);
                while (!flag) {
                    sentinel(&st);
                    MPI_Test(&rq, &flag, &st);
                }
                break;
            case H_IRECV_WAITANY:
                MPI_Irecv(rb, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq);
                MPI_Waitany(1, &rq, &index, &st);
                ck_check(index == 0, "%s: Waitany index %d", what, index);
                break;
            case H_SENDRECV:
                MPI_Sendrecv(sb, (int)n, MPI_BYTE, dst, tag, rb, (int)n, MPI_BYTE, src, tag,
                             MPI_COMM_WORLD, &st);
                break;
            case H_SENDRECV_REPLACE:
                memcpy(rb, sb, n);
                MPI_Sendrecv_replace(rb, (int)n, MPI_BYTE, dst, tag, src, tag, MPI_COMM_WORLD, &st);
                break;
            case H_PROBE:
            case H_IPROBE:
                probe((enum how)h, src, tag, &msg, what);
                sentinel(&st);
                MPI_Recv(rb, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st);
                break;
            case H_MPROBE:
                probe((enum how)h, src, tag, &msg, what);
                sentinel(&st);
                MPI_Mrecv(rb, (int)n, MPI_BYTE, &msg, &st);
                ck_check(msg == MPI_MESSAGE_NULL, "%s: handle not MPI_MESSAGE_NULL after Mrecv",
                         what);
                break;
            default:
                probe((enum how)h, src, tag, &msg, what);
                MPI_Imrecv(rb, (int)n, MPI_BYTE, &msg, &rq);
                ck_check(msg == MPI_MESSAGE_NULL, "%s: handle not MPI_MESSAGE_NULL after Imrecv",
                         what);
                sentinel(&st);
                MPI_Wait(&rq, &st);
                break;
            }
            error_untouched(what, "the receive", &st);
            ck_status(what, &st, src, tag, n);
            ck_verify(what, rb, n, src, me, tag, idx);
            MPI_Wait(&sr, MPI_STATUS_IGNORE);
            free(sb);
            free(rb);
        }
    }
}

static void part_b(void)
{
    char what[160];
    for (int i = 0; i < 200; i++) {
        MPI_Status st, before;
        MPI_Message msg = MPI_MESSAGE_NULL;
        int flag = -7;
        int src = i % 2 ? MPI_ANY_SOURCE : ck_left();
        snprintf(what, sizeof what, "B unmatched %s #%d", i % 4 < 2 ? "Iprobe" : "Improbe", i);
        sentinel(&st);
        before = st;
        if (i % 4 < 2)
            MPI_Iprobe(src, 999, MPI_COMM_WORLD, &flag, &st);
        else
            MPI_Improbe(src, 999, MPI_COMM_WORLD, &flag, &msg, &st);
        ck_check(flag == 0, "%s: flag %d", what, flag);
        ck_check(msg == MPI_MESSAGE_NULL, "%s: message handle changed", what);
        ck_check(memcmp(&before, &st, sizeof st) == 0, "%s: status changed (MPI_ERROR %#x)", what,
                 st.MPI_ERROR);
    }
}

static void proc_null_status(const char *what, const MPI_Status *st)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    ck_check(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && count == 0,
             "%s: source %d (expected MPI_PROC_NULL) tag %d (expected MPI_ANY_TAG) count %d",
             what, st->MPI_SOURCE, st->MPI_TAG, count);
}

static void part_c(void)
{
    char buf[8];
    MPI_Status st;
    MPI_Request rq;
    MPI_Message msg;
    int flag;

    sentinel(&st);
    MPI_Recv(buf, 8, MPI_BYTE, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st);
    proc_null_status("C Recv(PROC_NULL)", &st);

    sentinel(&st);
    MPI_Irecv(buf, 8, MPI_BYTE, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, &st);
    proc_null_status("C Irecv+Wait(PROC_NULL)", &st);

    sentinel(&st);
    MPI_Probe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st);
    proc_null_status("C Probe(PROC_NULL)", &st);

    sentinel(&st);
    flag = 0;
    MPI_Iprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &flag, &st);
    ck_check(flag == 1, "C Iprobe(PROC_NULL): flag %d", flag);
    proc_null_status("C Iprobe(PROC_NULL)", &st);

    sentinel(&st);
    msg = MPI_MESSAGE_NULL;
    MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &msg, &st);
    ck_check(msg == MPI_MESSAGE_NO_PROC, "C Mprobe(PROC_NULL): handle not MPI_MESSAGE_NO_PROC");
    proc_null_status("C Mprobe(PROC_NULL)", &st);
    sentinel(&st);
    MPI_Mrecv(buf, 8, MPI_BYTE, &msg, &st);
    ck_check(msg == MPI_MESSAGE_NULL, "C Mrecv(NO_PROC): handle not MPI_MESSAGE_NULL");
    proc_null_status("C Mrecv(NO_PROC)", &st);

    sentinel(&st);
    msg = MPI_MESSAGE_NULL;
    flag = 0;
    MPI_Improbe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &flag, &msg, &st);
    ck_check(flag == 1 && msg == MPI_MESSAGE_NO_PROC,
             "C Improbe(PROC_NULL): flag %d, handle %s", flag,
             msg == MPI_MESSAGE_NO_PROC ? "MPI_MESSAGE_NO_PROC" : "not MPI_MESSAGE_NO_PROC");
    proc_null_status("C Improbe(PROC_NULL)", &st);
    MPI_Imrecv(buf, 8, MPI_BYTE, &msg, &rq);
    ck_check(msg == MPI_MESSAGE_NULL, "C Imrecv(NO_PROC): handle not MPI_MESSAGE_NULL");
    sentinel(&st);
    MPI_Wait(&rq, &st);
    proc_null_status("C Imrecv(NO_PROC)+Wait", &st);
}

static void part_d(void)
{
    int src = ck_left(), dst = ck_right(), me = ck.rank;
    char what[160];
    for (int by_test = 0; by_test < 2; by_test++) {
        int tag = 700 + by_test, cancelled = 0, flag = 0;
        size_t n = 4096;
        unsigned char *rb = ck_alloc(n), *sb = ck_alloc(n);
        MPI_Request rq;
        MPI_Status st;
        snprintf(what, sizeof what, "D cancelled Irecv completed by %s", by_test ? "Test" : "Wait");
        /* Nobody sends this tag before the barrier: the receive cannot match. */
        MPI_Irecv(rb, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq);
        MPI_Cancel(&rq);
        sentinel(&st);
        if (by_test) {
            while (!flag) {
                sentinel(&st);
                MPI_Test(&rq, &flag, &st);
            }
        } else {
            MPI_Wait(&rq, &st);
        }
        MPI_Test_cancelled(&st, &cancelled);
        ck_check(cancelled, "%s: MPI_Test_cancelled false", what);
        error_untouched(what, by_test ? "MPI_Test" : "MPI_Wait", &st);
        MPI_Barrier(MPI_COMM_WORLD);
        /* The tag still works and carries its own message. */
        ck_fill(sb, n, me, dst, tag, 1);
        ck_clear(rb, n);
        MPI_Sendrecv(sb, (int)n, MPI_BYTE, dst, tag, rb, (int)n, MPI_BYTE, src, tag,
                     MPI_COMM_WORLD, &st);
        ck_status(what, &st, src, tag, n);
        ck_verify(what, rb, n, src, me, tag, 1);
        free(rb);
        free(sb);
    }
}

static void part_e(void)
{
    static const size_t big[] = {300, 1000, 2000, 3000};
    int src = ck_left(), dst = ck_right(), me = ck.rank;
    MPI_Comm comm;
    char what[160];
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    for (int h = 0; h < 4; h++) {
        for (int si = 0; si < 4; si++) {
            size_t n = big[si], cap = n / 3;
            int tag = 800 + h * 4 + si, rc = MPI_SUCCESS, count = -1, cls = -1;
            unsigned char *sb = ck_alloc(n), *rb = ck_alloc(cap);
            MPI_Request sr, rq;
            MPI_Message msg = MPI_MESSAGE_NULL;
            MPI_Status st;
            int flag = 0;
            static const char *name[] = {"Recv", "Irecv+Wait", "Mprobe+Mrecv",
                                         "Improbe+Imrecv+Wait"};
            snprintf(what, sizeof what, "E truncated %s %zu B into %zu B", name[h], n, cap);
            ck_fill(sb, n, me, dst, tag, si);
            MPI_Isend(sb, (int)n, MPI_BYTE, dst, tag, comm, &sr);
            sentinel(&st);
            switch (h) {
            case 0:
                rc = MPI_Recv(rb, (int)cap, MPI_BYTE, src, tag, comm, &st);
                break;
            case 1:
                MPI_Irecv(rb, (int)cap, MPI_BYTE, src, tag, comm, &rq);
                rc = MPI_Wait(&rq, &st);
                break;
            case 2:
                MPI_Mprobe(src, tag, comm, &msg, &st);
                sentinel(&st);
                rc = MPI_Mrecv(rb, (int)cap, MPI_BYTE, &msg, &st);
                break;
            default:
                while (!flag)
                    MPI_Improbe(src, tag, comm, &flag, &msg, &st);
                MPI_Imrecv(rb, (int)cap, MPI_BYTE, &msg, &rq);
                sentinel(&st);
                rc = MPI_Wait(&rq, &st);
                break;
            }
            if (rc != MPI_SUCCESS)
                MPI_Error_class(rc, &cls);
            ck_check(cls == MPI_ERR_TRUNCATE, "%s: returned %d (class %d), expected MPI_ERR_TRUNCATE",
                     what, rc, cls);
            error_untouched(what, name[h], &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            /* ob1 reports the size sent, others what landed: both are in use. */
            ck_check(st.MPI_SOURCE == src && st.MPI_TAG == tag &&
                         (count == (int)cap || count == (int)n),
                     "%s: source %d (expected %d) tag %d (expected %d) count %d (expected %zu "
                     "or %zu)",
                     what, st.MPI_SOURCE, src, st.MPI_TAG, tag, count, cap, n);
            /* The guard right after the buffer must be intact. */
            size_t bad = 0;
            for (size_t i = 0; i < CK_GUARD; i++)
                bad += rb[cap + i] != CK_GUARD_BYTE;
            ck_check(bad == 0, "%s: %zu guard bytes written past the buffer", what, bad);
            MPI_Wait(&sr, MPI_STATUS_IGNORE);
            free(sb);
            free(rb);
        }
    }
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    static void (*const part[])(void) = {part_a, part_b, part_c, part_d, part_e};
    const char *parts = "ABCDE";
    ck_init(&argc, &argv, "p2p_status", MPI_THREAD_SINGLE);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--parts=", 8) == 0)
            parts = argv[i] + 8;
    for (int p = 0; p < 5; p++) {
        if (!strchr(parts, 'A' + p))
            continue;
        part[p]();
        ck_progress("part %c done", 'A' + p);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return ck_finish();
}
