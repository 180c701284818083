/*
 * foreign_traffic.c -- verified traffic for a fixed time, for tests that attack the
 * transport from outside the job meanwhile (tests/foreign/forge.py).
 *
 * Rounds of ring exchanges (MPI_Isend / MPI_Irecv, both directions) at 8 B, 1000 B,
 * 70000 B (above the eager limit), 1 MiB and 4 MiB (emulated PUT on rusnic), always
 * from and into the same buffers, so a replayed or forged PUT of an earlier round
 * would land in memory that is registered again. Every byte, the guard after it and
 * the status are verified in every round. Rank 0 decides when the time is up.
 *
 *   foreign_traffic [--seconds S]   (default 8)
 */
#include "check.h"

static const size_t sizes[] = {8, 1000, 70000, 1u << 20, 4u << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static void exchange(int round, int dir, int si, unsigned char *sbuf, unsigned char *rbuf)
{
    size_t n = sizes[si];
    int me = ck.rank;
    int dst = dir == 0 ? ck_right() : ck_left();
    int src = dir == 0 ? ck_left() : ck_right();
    int tag = dir * 100 + si;
    long idx = (long)round * 16 + si;
    char what[160];
    MPI_Request rq[2];
    MPI_Status sts[2];

    ck_fill(sbuf, n, me, dst, tag, idx);
    ck_clear(rbuf, n);
    MPI_Irecv(rbuf, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, sts);
    ck_maybe_inject(rbuf, n);
    snprintf(what, sizeof what, "round %d dir %d size %zu", round, dir, n);
    ck_verify(what, rbuf, n, src, me, tag, idx);
    ck_status(what, &sts[0], src, tag, n);
}

int main(int argc, char **argv)
{
    double seconds = 8;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--seconds") == 0)
            seconds = atof(argv[i + 1]);
    ck_init(&argc, &argv, "foreign_traffic", MPI_THREAD_SINGLE);
    if (ck.size < 2) {
        ck_skip("exchanges (one rank)");
        return ck_finish();
    }
    size_t maxn = sizes[NSIZES - 1];
    unsigned char *sbuf = ck_alloc(maxn), *rbuf = ck_alloc(maxn);
    double start = MPI_Wtime();
    int go = 1, rounds = 0;
    while (go) {
        for (int dir = 0; dir < 2; dir++)
            for (int si = 0; si < NSIZES; si++)
                exchange(rounds, dir, si, sbuf, rbuf);
        rounds++;
        go = MPI_Wtime() - start < seconds;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (ck.rank == 0)
        ck_note("%d rounds in %.1f s", rounds, MPI_Wtime() - start);
    free(sbuf);
    free(rbuf);
    return ck_finish();
}
