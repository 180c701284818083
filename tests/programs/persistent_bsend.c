/* Persistent buffered sends started again (MPI_Bsend_init + MPI_Start + MPI_Wait),
 * the payload changing on every start, every received byte verified.
 *
 *   A  restart before the receiver took the previous message: ROUNDS starts back to
 *      back, then a barrier, then the receives (single thread).
 *   B  restart after the receiver took the previous message: each round is received
 *      and a barrier passed before the next start (single thread).
 *   C  part A in 4 threads at once, each on its own duplicate of MPI_COMM_WORLD
 *      (MPI_THREAD_MULTIPLE), as in the original report.
 *   D  threads streaming (MPI_THREAD_MULTIPLE): ranks in pairs (2k sends, 2k+1
 *      receives; a rank without a partner sends to itself, then receives), 4 threads
 *      per rank, each starting one persistent buffered send of 4194304 MPI_INT
 *      (16 MiB; --quick 262144) 8 times back to back while its partner thread takes
 *      them with a persistent receive, first all threads on one communicator with a
 *      tag each, then each thread on its own duplicate with one tag. The attached
 *      buffer holds exactly the 32 messages a rank can have in flight
 *      (32 * (pack size + MPI_BSEND_OVERHEAD)), the least MPI allows: an MTL that
 *      keeps an extra copy must not take the room the PML's own slot needs.
 *
 * Sizes: 2048, 4096 and 4194304 MPI_INT (8 KiB, 16 KiB, 16 MiB; --quick: the last
 * 262144). With rofi's host matching 8 KiB is an eager message sent with a completion
 * (above the inject size), 16 KiB and up a rendezvous.
 * Each rank sends to its right neighbour and receives from its left one (itself with
 * 1 rank). Part A is what crashes cm in Open MPI 4.1.4 (mca_pml_cm_start builds the
 * new request with the packed byte count as element count: opal_convertor_pack reads
 * 4x the buffer); part B shows the stale-payload defect of 4.1.4's cm and ob1
 * (fixed upstream by open-mpi/ompi#12797). See components/rofi/README.md.
 * Receives use MPI_ERRORS_RETURN communicators, so a wrong-sized message is a FAIL
 * line rather than an abort. --parts=ABCD picks parts. */
#include "check.h"

#include <pthread.h>

#define ROUNDS 3
#define THREADS 4
#define STREAM_STARTS 8

static int nsizes;
static int sizes[3] = {2048, 4096, 4194304};

/* idx of round r of size s: distinct payload for every start */
static long idx_of(int s, int r) { return 16L * s + r; }

/* ROUNDS starts of one persistent buffered send of n ints on comm, refilling the
 * buffer before each start. Returns the number of starts that went out. */
static int start_rounds(MPI_Comm comm, const char *part, int *buf, int n, int tag, int s,
                        int first, int count)
{
    MPI_Request req;
    int dst = ck_right(), sent = 0;
    MPI_Bsend_init(buf, n, MPI_INT, dst, tag, comm, &req);
    for (int r = first; r < first + count; r++) {
        ck_fill(buf, (size_t)n * sizeof(int), ck.rank, dst, tag, idx_of(s, r));
        int rc = MPI_Start(&req);
        if (!ck_check(rc == MPI_SUCCESS, "%s: MPI_Start of round %d (%d ints) returned %d",
                      part, r, n, rc))
            break; /* the request never completes: do not wait on it */
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        ck_check(rc == MPI_SUCCESS, "%s: MPI_Wait of round %d returned %d", part, r, rc);
        sent++;
    }
    if (sent == count)
        MPI_Request_free(&req);
    return sent;
}

static void receive_rounds(MPI_Comm comm, const char *part, unsigned char *rbuf, int n, int tag,
                           int s, int first, int count)
{
    size_t bytes = (size_t)n * sizeof(int);
    int src = ck_left();
    for (int r = first; r < first + count; r++) {
        MPI_Status st;
        ck_clear(rbuf, bytes);
        int rc = MPI_Recv(rbuf, n, MPI_INT, src, tag, comm, &st);
        if (!ck_check(rc == MPI_SUCCESS, "%s: MPI_Recv of round %d (%d ints) returned %d%s",
                      part, r, n, rc, rc == MPI_ERR_TRUNCATE ? " (MPI_ERR_TRUNCATE)" : ""))
            continue;
        ck_status(part, &st, src, tag, bytes);
        ck_verify(part, rbuf, bytes, src, ck.rank, tag, idx_of(s, r));
    }
}

/* Part A on comm with tag: every start before any receive. */
static void restart_before_receipt(MPI_Comm comm, const char *part, int tag, int *buf,
                                   unsigned char *rbuf)
{
    for (int s = 0; s < nsizes; s++) {
        int sent = start_rounds(comm, part, buf, sizes[s], tag, s, 0, ROUNDS);
        ck_progress("%s: %d ints: %d starts done", part, sizes[s], sent);
        MPI_Barrier(comm);
        receive_rounds(comm, part, rbuf, sizes[s], tag, s, 0, ROUNDS);
        MPI_Barrier(comm);
    }
}

/* Part B: every round received (and a barrier passed) before the next start. */
static void restart_after_receipt(MPI_Comm comm, int *buf, unsigned char *rbuf)
{
    for (int s = 0; s < nsizes; s++) {
        MPI_Request req;
        int n = sizes[s], dst = ck_right(), tag = 20, ok = 1;
        MPI_Bsend_init(buf, n, MPI_INT, dst, tag, comm, &req);
        for (int r = 0; r < ROUNDS && ok; r++) {
            ck_fill(buf, (size_t)n * sizeof(int), ck.rank, dst, tag, idx_of(s, r));
            int rc = MPI_Start(&req);
            ok = ck_check(rc == MPI_SUCCESS, "B: MPI_Start of round %d (%d ints) returned %d",
                          r, n, rc);
            if (ok)
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            receive_rounds(comm, "B", rbuf, n, tag, s, r, 1);
            MPI_Barrier(comm);
        }
        if (ok)
            MPI_Request_free(&req);
    }
}

struct thread_arg {
    MPI_Comm comm;
    int t;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = (struct thread_arg *)p;
    size_t max = (size_t)sizes[nsizes - 1] * sizeof(int);
    int *buf = (int *)ck_alloc(max);
    unsigned char *rbuf = ck_alloc(max);
    restart_before_receipt(a->comm, "C", 100 + a->t, buf, rbuf);
    free(buf);
    free(rbuf);
    return NULL;
}

/* Part D: one thread's stream of persistent buffered sends to its partner, or the
 * partner's persistent receives of it (both, in that order, paired with itself). */
struct stream_arg {
    MPI_Comm comm;
    const char *part;
    pthread_barrier_t *start;
    int n, tag;
};

static long stream_idx(int tag, int r) { return 1000L * tag + r; }

static void *stream_main(void *p)
{
    struct stream_arg *a = (struct stream_arg *)p;
    int partner = (ck.rank ^ 1) < ck.size ? ck.rank ^ 1 : ck.rank;
    int sends = ck.rank % 2 == 0 || partner == ck.rank;
    int receives = ck.rank % 2 == 1 || partner == ck.rank;
    size_t bytes = (size_t)a->n * sizeof(int);
    unsigned char *buf = ck_alloc(bytes);
    pthread_barrier_wait(a->start);
    if (sends) {
        MPI_Request req;
        int started = 0;
        MPI_Bsend_init(buf, a->n, MPI_INT, partner, a->tag, a->comm, &req);
        for (int r = 0; r < STREAM_STARTS; r++) {
            ck_fill(buf, bytes, ck.rank, partner, a->tag, stream_idx(a->tag, r));
            int rc = MPI_Start(&req);
            if (!ck_check(rc == MPI_SUCCESS, "%s: MPI_Start %d of tag %d (%d ints) returned %d",
                          a->part, r, a->tag, a->n, rc))
                break; /* the request never completes: do not wait on it */
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            ck_check(rc == MPI_SUCCESS, "%s: MPI_Wait %d of tag %d returned %d", a->part, r,
                     a->tag, rc);
            started++;
        }
        if (started == STREAM_STARTS)
            MPI_Request_free(&req);
    }
    if (receives) {
        MPI_Request req;
        MPI_Recv_init(buf, a->n, MPI_INT, partner, a->tag, a->comm, &req);
        for (int r = 0; r < STREAM_STARTS; r++) {
            MPI_Status st;
            ck_clear(buf, bytes);
            int rc = MPI_Start(&req);
            if (!ck_check(rc == MPI_SUCCESS, "%s: receive start %d of tag %d returned %d",
                          a->part, r, a->tag, rc))
                break;
            rc = MPI_Wait(&req, &st);
            if (!ck_check(rc == MPI_SUCCESS, "%s: receive %d of tag %d returned %d%s", a->part,
                          r, a->tag, rc, rc == MPI_ERR_TRUNCATE ? " (MPI_ERR_TRUNCATE)" : ""))
                continue;
            ck_status(a->part, &st, partner, a->tag, bytes);
            ck_verify(a->part, buf, bytes, partner, ck.rank, a->tag, stream_idx(a->tag, r));
        }
        MPI_Request_free(&req);
    }
    free(buf);
    return NULL;
}

/* Part D: THREADS streams on one communicator (a tag each), then on a duplicate each. */
static void stream_threads(int n)
{
    MPI_Comm shared, own[THREADS];
    MPI_Comm_dup(MPI_COMM_WORLD, &shared);
    MPI_Comm_set_errhandler(shared, MPI_ERRORS_RETURN);
    for (int t = 0; t < THREADS; t++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &own[t]);
        MPI_Comm_set_errhandler(own[t], MPI_ERRORS_RETURN);
    }
    for (int layout = 0; layout < 2; layout++) {
        pthread_t th[THREADS];
        struct stream_arg args[THREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, THREADS);
        for (int t = 0; t < THREADS; t++) {
            args[t] = (struct stream_arg){layout == 0 ? shared : own[t],
                                          layout == 0 ? "D (one comm)" : "D (comm each)",
                                          &start, n, layout == 0 ? 200 + t : 300};
            pthread_create(&th[t], NULL, stream_main, &args[t]);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&start);
        ck_progress("D: layout %d done", layout);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    for (int t = 0; t < THREADS; t++)
        MPI_Comm_free(&own[t]);
    MPI_Comm_free(&shared);
}

int main(int argc, char **argv)
{
    const char *parts = "ABCD";
    int provided = ck_init(&argc, &argv, "persistent_bsend", MPI_THREAD_MULTIPLE);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--parts=", 8) == 0)
            parts = argv[i] + 8;
    nsizes = 3;
    if (ck.quick)
        sizes[nsizes - 1] = 262144;

    /* Room for every start of one thread's size in flight at once (ROUNDS), one more
     * for an MTL that holds its own copy while the PML's is still allocated, times
     * the threads of part C. */
    int pack = 0;
    MPI_Pack_size(sizes[nsizes - 1], MPI_INT, MPI_COMM_WORLD, &pack);
    int attach = (ROUNDS + 1) * THREADS * (pack + MPI_BSEND_OVERHEAD);
    /* Part D: exactly its STREAM_STARTS * THREADS messages in flight. */
    int stream_n = ck.quick ? 262144 : 4194304, stream_pack = 0;
    MPI_Pack_size(stream_n, MPI_INT, MPI_COMM_WORLD, &stream_pack);
    if (strchr(parts, 'D') && STREAM_STARTS * THREADS * (stream_pack + MPI_BSEND_OVERHEAD) > attach)
        attach = STREAM_STARTS * THREADS * (stream_pack + MPI_BSEND_OVERHEAD);
    void *bsend = malloc((size_t)attach);
    MPI_Buffer_attach(bsend, attach);

    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    size_t max = (size_t)sizes[nsizes - 1] * sizeof(int);
    int *buf = (int *)ck_alloc(max);
    unsigned char *rbuf = ck_alloc(max);

    if (strchr(parts, 'A'))
        restart_before_receipt(comm, "A", 10, buf, rbuf);
    if (strchr(parts, 'B'))
        restart_after_receipt(comm, buf, rbuf);
    free(buf);
    free(rbuf);

    if (strchr(parts, 'C') &&
        ck_check(provided == MPI_THREAD_MULTIPLE, "C: MPI_THREAD_MULTIPLE not provided (%d)",
                 provided)) {
        pthread_t th[THREADS];
        struct thread_arg args[THREADS];
        for (int t = 0; t < THREADS; t++) {
            MPI_Comm_dup(MPI_COMM_WORLD, &args[t].comm);
            MPI_Comm_set_errhandler(args[t].comm, MPI_ERRORS_RETURN);
            args[t].t = t;
        }
        for (int t = 0; t < THREADS; t++)
            pthread_create(&th[t], NULL, thread_main, &args[t]);
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        for (int t = 0; t < THREADS; t++)
            MPI_Comm_free(&args[t].comm);
    }

    if (strchr(parts, 'D') &&
        ck_check(provided == MPI_THREAD_MULTIPLE, "D: MPI_THREAD_MULTIPLE not provided (%d)",
                 provided))
        stream_threads(stream_n);

    MPI_Comm_free(&comm);
    void *detached;
    MPI_Buffer_detach(&detached, &attach);
    free(bsend);
    return ck_finish();
}
