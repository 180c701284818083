/*
 * comm_reuse.c -- traffic on communicators whose context ids are freed and reused,
 * with ranks that name other processes each time.
 *
 * Per round, on fresh communicators, so that context ids are reused by communicators
 * whose ranks name other processes:
 *   A. the singleton communicators (split by rank once, at the start) joined into an
 *      intercommunicator with the neighbouring process (pairs 2k, 2k+1): a burst of
 *      messages (eager and large) both ways, source = remote rank 0 (our own rank 0
 *      too); freed.
 *   B. MPI_Comm_dup of MPI_COMM_WORLD (kept until the end of the round): a burst to
 *      the right neighbour, from the left.
 *   C. MPI_Comm_split with reversed keys (world rank r is rank size-1-r), which takes
 *      the id A freed (B holds the lower one): as B; then both are freed.
 * Every payload and status is verified. (rofi's host matching numbers messages per
 * communicator id and process pair: once it named the sender by its rank's process
 * in the intercommunicator, the remote one, and C after A hung.)
 * Needs an even number of ranks >= 2 for part C (pairs 2k, 2k+1); skips it otherwise.
 */
#include "check.h"

#define BURST 8

static size_t burst_size(int k)
{
    /* eager sizes, one just above 16 KiB, one large */
    static const size_t sizes[BURST] = {0, 1, 100, 4000, 4100, 16400, 70000, 300000};
    return sizes[k];
}

/* Sends BURST messages to dst and receives BURST from src on comm; payloads are
 * keyed by world ranks (wdst, wsrc) so a misrouted message fails its check. */
static void burst(MPI_Comm comm, const char *what, int dst, int src, int wdst, int wsrc,
                  int round)
{
    MPI_Request req[2 * BURST];
    unsigned char *sbuf[BURST], *rbuf[BURST];
    for (int k = 0; k < BURST; k++) {
        size_t n = burst_size(k);
        sbuf[k] = ck_alloc(n);
        rbuf[k] = ck_alloc(n);
        ck_fill(sbuf[k], n, ck.rank, wdst, 50 + k, round);
        MPI_Irecv(rbuf[k], (int)n, MPI_BYTE, src, 50 + k, comm, &req[k]);
    }
    for (int k = 0; k < BURST; k++)
        MPI_Isend(sbuf[k], (int)burst_size(k), MPI_BYTE, dst, 50 + k, comm, &req[BURST + k]);
    MPI_Status st[2 * BURST];
    MPI_Waitall(2 * BURST, req, st);
    for (int k = 0; k < BURST; k++) {
        size_t n = burst_size(k);
        ck_status(what, &st[k], src, 50 + k, n);
        ck_verify(what, rbuf[k], n, wsrc, ck.rank, 50 + k, round);
        free(sbuf[k]);
        free(rbuf[k]);
    }
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "comm_reuse", MPI_THREAD_SINGLE);
    const int rounds = ck.quick ? 3 : 6;
    /* Made first, so it keeps the lowest free id: the intercommunicator then takes the
     * one the dup just freed. */
    MPI_Comm self;
    MPI_Comm_split(MPI_COMM_WORLD, ck.rank, 0, &self);
    for (int round = 0; round < rounds; round++) {
        if (ck.size % 2 == 0) {
            int peer = ck.rank ^ 1;
            MPI_Comm inter;
            MPI_Intercomm_create(self, 0, MPI_COMM_WORLD, peer, 77, &inter);
            burst(inter, "intercomm", 0, 0, peer, peer, round);
            MPI_Comm_free(&inter);
        } else if (round == 0) {
            ck_note("SKIP intercommunicator pairs (odd number of ranks: %d)", ck.size);
        }

        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        burst(dup, "dup", ck_right(), ck_left(), ck_right(), ck_left(), round);

        MPI_Comm rev;
        MPI_Comm_split(MPI_COMM_WORLD, 0, ck.size - 1 - ck.rank, &rev);
        int me;
        MPI_Comm_rank(rev, &me);
        ck_check(me == ck.size - 1 - ck.rank, "reversed split: rank %d", me);
        /* In rev, world rank w is rank size-1-w: the right neighbour in world terms
         * is (me - 1), the left one (me + 1). */
        burst(rev, "reversed", (me + ck.size - 1) % ck.size, (me + 1) % ck.size, ck_right(),
              ck_left(), round);
        MPI_Comm_free(&rev);
        MPI_Comm_free(&dup);
    }
    MPI_Comm_free(&self);
    return ck_finish();
}
