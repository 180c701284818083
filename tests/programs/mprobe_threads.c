/*
 * mprobe_threads.c -- every probe with every receive, from 4 threads per rank at
 * once (MPI_THREAD_MULTIPLE), with every output of every call checked.
 *
 * Each thread t of a rank sends to the same-numbered thread of its right ring
 * neighbour and receives from its left one (1 rank: itself).  Phases:
 *   A  all threads on MPI_COMM_WORLD, thread t on tag 20 + t (fixed source/tag
 *      probes);
 *   B  thread t on its own MPI_Comm_dup, all on tag 20, probed with
 *      MPI_ANY_SOURCE / MPI_ANY_TAG (only thread t's peer sends on that comm);
 *   C  all threads on one shared communicator and one shared tag: any thread may
 *      take any message, so only matched probes (Mprobe/Improbe) are used; each
 *      message is identified by its size and must arrive exactly once.
 * A and B use the 8 probe/receive pairs: {Probe, Iprobe} x {Recv, Irecv} and
 * {Mprobe, Improbe} x {Mrecv, Imrecv}; C uses the 4 matched ones.  Sizes from
 * 0 B to 300000 B (eager and rendezvous).
 *
 * Checked for every call: MPI_ERROR keeps the sentinel put there before the
 * call (single-completion calls must not set it); an unmatched Iprobe/Improbe
 * leaves the flag 0, the message handle and the whole status untouched; a
 * matched probe gives the right MPI_SOURCE, MPI_TAG and count and a message
 * handle other than MPI_MESSAGE_NULL; Mrecv/Imrecv set the handle to
 * MPI_MESSAGE_NULL; the received status is right; every byte and the guard.
 * Unmatched-probe violations are counted per thread and reported as one check
 * per (phase, kind) with the number of bad calls.
 */
#include "check.h"
#include <pthread.h>

#define NTHREADS 4
#define SENTINEL_ERROR 0x5eed
#define TAG_BASE 20
#define SHARED_TAG 77

static const size_t SZ[] = {0, 1, 100, 4096, 65537, 300000};
#define NSZ ((int)(sizeof SZ / sizeof SZ[0]))

enum probe { P_PROBE, P_IPROBE, P_MPROBE, P_IMPROBE };
enum recv { R_RECV, R_IRECV, R_MRECV, R_IMRECV };
static const char *PROBE_NAME[] = {"Probe", "Iprobe", "Mprobe", "Improbe"};
static const char *RECV_NAME[] = {"Recv", "Irecv", "Mrecv", "Imrecv"};

static MPI_Comm own_comm[NTHREADS];
static MPI_Comm shared_comm;
static int rounds;

/* Phase C: message k (sent by thread k % NTHREADS of each rank) has size
 * size_of(k), from which the receiver recovers k. */
#define SHARED_PER_THREAD 12
#define SHARED_TOTAL (SHARED_PER_THREAD * NTHREADS)
static int shared_seen[SHARED_TOTAL];

static size_t size_of(int k)
{
    return (size_t)k * 3 + (k % 4 == 3 ? 70000 : 0);
}

static int k_of(size_t n)
{
    if (n >= 70000)
        n -= 70000;
    return n % 3 == 0 ? (int)(n / 3) : -1;
}

static void sentinel_status(MPI_Status *st)
{
    memset(st, 0x6b, sizeof *st);
    st->MPI_ERROR = SENTINEL_ERROR;
}

struct counts {
    long unmatched, flag_bad, handle_changed, status_changed, error_changed;
};

/* Polls Iprobe/Improbe until it matches, checking every unmatched call. */
static void poll_probe(enum probe p, int src, int tag, MPI_Comm comm, MPI_Message *msg,
                       MPI_Status *st, struct counts *c)
{
    for (;;) {
        MPI_Status before;
        int flag = -7;
        sentinel_status(st);
        before = *st;
        *msg = MPI_MESSAGE_NULL;
        if (p == P_IPROBE)
            MPI_Iprobe(src, tag, comm, &flag, st);
        else
            MPI_Improbe(src, tag, comm, &flag, msg, st);
        if (flag == 1)
            return;
        c->unmatched++;
        if (flag != 0)
            c->flag_bad++;
        if (*msg != MPI_MESSAGE_NULL)
            c->handle_changed++;
        if (st->MPI_ERROR != SENTINEL_ERROR)
            c->error_changed++;
        if (memcmp(&before, st, sizeof before) != 0)
            c->status_changed++;
    }
}

/* Probes with (psrc, ptag), then receives; returns the probed status in *out. */
static void probe_then_receive(enum probe p, enum recv r, int psrc, int ptag, MPI_Comm comm,
                               unsigned char **rb, MPI_Status *out, struct counts *c,
                               const char *what)
{
    MPI_Status st;
    MPI_Message msg = MPI_MESSAGE_NULL;
    int count = -1;
    if (p == P_PROBE || p == P_MPROBE) {
        sentinel_status(&st);
        if (p == P_PROBE)
            MPI_Probe(psrc, ptag, comm, &st);
        else
            MPI_Mprobe(psrc, ptag, comm, &msg, &st);
    } else {
        poll_probe(p, psrc, ptag, comm, &msg, &st, c);
    }
    ck_check(st.MPI_ERROR == SENTINEL_ERROR,
             "%s: %s changed status.MPI_ERROR from %#x to %#x", what, PROBE_NAME[p],
             SENTINEL_ERROR, st.MPI_ERROR);
    if (p == P_MPROBE || p == P_IMPROBE)
        ck_check(msg != MPI_MESSAGE_NULL, "%s: matched %s returned MPI_MESSAGE_NULL", what,
                 PROBE_NAME[p]);
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count < 0)
        count = 0;
    *rb = ck_alloc((size_t)count);
    *out = st;

    MPI_Status rst;
    MPI_Request rq = MPI_REQUEST_NULL;
    sentinel_status(&rst);
    switch (r) {
    case R_RECV:
        MPI_Recv(*rb, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, &rst);
        break;
    case R_IRECV:
        MPI_Irecv(*rb, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, &rq);
        MPI_Wait(&rq, &rst);
        break;
    case R_MRECV:
        MPI_Mrecv(*rb, count, MPI_BYTE, &msg, &rst);
        break;
    case R_IMRECV:
        MPI_Imrecv(*rb, count, MPI_BYTE, &msg, &rq);
        ck_check(msg == MPI_MESSAGE_NULL, "%s: handle not MPI_MESSAGE_NULL after Imrecv", what);
        MPI_Wait(&rq, &rst);
        break;
    }
    if (r == R_MRECV)
        ck_check(msg == MPI_MESSAGE_NULL, "%s: handle not MPI_MESSAGE_NULL after Mrecv", what);
    ck_check(rst.MPI_ERROR == SENTINEL_ERROR,
             "%s: %s changed status.MPI_ERROR from %#x to %#x", what,
             r == R_IRECV || r == R_IMRECV ? "MPI_Wait" : RECV_NAME[r], SENTINEL_ERROR,
             rst.MPI_ERROR);
    ck_status(what, &rst, st.MPI_SOURCE, st.MPI_TAG, (size_t)count);
}

static void report_counts(int t, char phase, const struct counts *c)
{
    ck_check(c->flag_bad == 0, "thread %d phase %c: %ld of %ld unmatched probes left flag != 0", t,
             phase, c->flag_bad, c->unmatched);
    ck_check(c->handle_changed == 0,
             "thread %d phase %c: %ld of %ld unmatched probes changed the message handle", t,
             phase, c->handle_changed, c->unmatched);
    ck_check(c->error_changed == 0,
             "thread %d phase %c: %ld of %ld unmatched probes changed status.MPI_ERROR", t, phase,
             c->error_changed, c->unmatched);
    ck_check(c->status_changed == 0,
             "thread %d phase %c: %ld of %ld unmatched probes changed the status", t, phase,
             c->status_changed, c->unmatched);
}

/* Phases A (own tag) and B (own communicator, wildcards). */
static void owned_phase(int t, int phase)
{
    MPI_Comm comm = phase == 0 ? MPI_COMM_WORLD : own_comm[t];
    int tag = phase == 0 ? TAG_BASE + t : TAG_BASE;
    int dst = ck_right(), src = ck_left(), me = ck.rank;
    int nmsg = 8 * NSZ;
    unsigned char **sb = calloc((size_t)nmsg, sizeof *sb);
    MPI_Request *rq = calloc((size_t)nmsg, sizeof *rq);
    struct counts c = {0, 0, 0, 0, 0};
    char what[200];
    for (int round = 0; round < rounds; round++) {
        /* message i = pair (i / NSZ) and size (i % NSZ), sent in order */
        for (int i = 0; i < nmsg; i++) {
            long idx = ((long)phase * 100 + t) * 100000L + round * 1000L + i;
            size_t n = SZ[i % NSZ];
            sb[i] = ck_alloc(n);
            ck_fill(sb[i], n, me, dst, tag, idx);
            MPI_Isend(sb[i], (int)n, MPI_BYTE, dst, tag, comm, &rq[i]);
        }
        for (int i = 0; i < nmsg; i++) {
            int pair = i / NSZ;
            enum probe p = (enum probe)(pair < 4 ? pair / 2 : 2 + (pair - 4) / 2);
            enum recv r = (enum recv)(pair < 4 ? pair % 2 : 2 + pair % 2);
            long idx = ((long)phase * 100 + t) * 100000L + round * 1000L + i;
            size_t n = SZ[i % NSZ];
            int psrc = phase == 0 ? src : MPI_ANY_SOURCE;
            int ptag = phase == 0 ? tag : MPI_ANY_TAG;
            unsigned char *rb = NULL;
            MPI_Status st;
            snprintf(what, sizeof what, "thread %d phase %c round %d %s+%s size %zu", t,
                     'A' + phase, round, PROBE_NAME[p], RECV_NAME[r], n);
            probe_then_receive(p, r, psrc, ptag, comm, &rb, &st, &c, what);
            ck_status(what, &st, src, tag, n);
            ck_verify(what, rb, n, src, me, tag, idx);
            free(rb);
        }
        MPI_Waitall(nmsg, rq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < nmsg; i++)
            free(sb[i]);
    }
    report_counts(t, (char)('A' + phase), &c);
    free(sb);
    free(rq);
}

/* Phase C: one communicator, one tag, any thread takes any message. */
static void shared_phase(int t)
{
    int dst = ck_right(), src = ck_left(), me = ck.rank;
    unsigned char *sb[SHARED_PER_THREAD];
    MPI_Request rq[SHARED_PER_THREAD];
    struct counts c = {0, 0, 0, 0, 0};
    char what[200];
    for (int j = 0; j < SHARED_PER_THREAD; j++) {
        int k = j * NTHREADS + t;
        size_t n = size_of(k);
        sb[j] = ck_alloc(n);
        ck_fill(sb[j], n, me, dst, SHARED_TAG, k);
        MPI_Isend(sb[j], (int)n, MPI_BYTE, dst, SHARED_TAG, shared_comm, &rq[j]);
    }
    /* Every thread receives as many messages as it sent, whichever they are. */
    for (int j = 0; j < SHARED_PER_THREAD; j++) {
        enum probe p = (enum probe)(P_MPROBE + (j + t) % 2);
        enum recv r = (enum recv)(R_MRECV + (j / 2 + t) % 2);
        int psrc = j % 3 == 0 ? MPI_ANY_SOURCE : src;
        int ptag = j % 3 == 1 ? MPI_ANY_TAG : SHARED_TAG;
        unsigned char *rb = NULL;
        MPI_Status st;
        snprintf(what, sizeof what, "thread %d phase C (shared tag) %s+%s #%d", t, PROBE_NAME[p],
                 RECV_NAME[r], j);
        probe_then_receive(p, r, psrc, ptag, shared_comm, &rb, &st, &c, what);
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        int k = count >= 0 ? k_of((size_t)count) : -1;
        if (ck_check(k >= 0 && k < SHARED_TOTAL && st.MPI_SOURCE == src &&
                         st.MPI_TAG == SHARED_TAG,
                     "%s: unexpected message: source %d tag %d count %d", what, st.MPI_SOURCE,
                     st.MPI_TAG, count)) {
            __atomic_fetch_add(&shared_seen[k], 1, __ATOMIC_RELAXED);
            ck_verify(what, rb, (size_t)count, src, me, SHARED_TAG, k);
        }
        free(rb);
    }
    MPI_Waitall(SHARED_PER_THREAD, rq, MPI_STATUSES_IGNORE);
    for (int j = 0; j < SHARED_PER_THREAD; j++)
        free(sb[j]);
    report_counts(t, 'C', &c);
}

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    owned_phase(t, 0);
    ck_progress("thread %d finished phase A", t);
    owned_phase(t, 1);
    ck_progress("thread %d finished phase B", t);
    shared_phase(t);
    ck_progress("thread %d finished phase C", t);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = ck_init(&argc, &argv, "mprobe_threads", MPI_THREAD_MULTIPLE);
    if (!ck_check(provided >= MPI_THREAD_MULTIPLE,
                  "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided only level %d", provided))
        return ck_finish();
    rounds = ck.quick ? 1 : 2;
    for (int t = 0; t < NTHREADS; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &own_comm[t]);
    MPI_Comm_dup(MPI_COMM_WORLD, &shared_comm);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(long)t) != 0) {
            fprintf(stderr, "mprobe_threads: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int k = 0; k < SHARED_TOTAL; k++)
        ck_check(shared_seen[k] == 1, "phase C: message %d from rank %d arrived %d times", k,
                 ck_left(), shared_seen[k]);
    for (int t = 0; t < NTHREADS; t++)
        MPI_Comm_free(&own_comm[t]);
    MPI_Comm_free(&shared_comm);
    return ck_finish();
}
