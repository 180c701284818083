/*
 * p2p_sizes.c -- point-to-point at every size around every protocol threshold.
 *
 * Sizes: 0, 1, 7, 8 and 2^k - 1, 2^k, 2^k + 1 for k = 1..24 (16 MiB).
 * (--quick: up to 2^20, and only 2^k above 64 KiB.)
 * Each rank sends to its ring neighbour and receives from the other one, in
 * both ring directions (with 2 ranks: both directions between the pair), with
 *   mode 0: MPI_Send / MPI_Recv   (even ranks send first, odd ranks receive first)
 *   mode 1: MPI_Isend / MPI_Irecv / MPI_Waitall
 *   mode 2: MPI_Ssend / MPI_Recv  at a few sizes
 *   mode 3: MPI_Issend / MPI_Irecv at a few sizes
 * Every received byte, the guard after it, and the status are verified.
 * --inject-corruption flips one received byte (to test the harness).
 */
#include "check.h"

#define MAXSIZES 128

static size_t sizes[MAXSIZES];
static int nsizes;

static void add_size(size_t s)
{
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] == s)
            return;
    sizes[nsizes++] = s;
}

static void build_sizes(void)
{
    int maxk = ck.quick ? 20 : 24;
    add_size(0);
    add_size(1);
    add_size(7);
    add_size(8);
    for (int k = 1; k <= maxk; k++) {
        size_t p = (size_t)1 << k;
        if (ck.quick && k > 16) {
            add_size(p);
            continue;
        }
        add_size(p - 1);
        add_size(p);
        add_size(p + 1);
    }
}

static const char *mode_name[] = {"Send/Recv", "Isend/Irecv", "Ssend/Recv", "Issend/Irecv"};

/* one exchange: send n bytes to dst, receive n bytes from src */
static void exchange(int mode, int dir, int si, size_t n, unsigned char *sbuf, unsigned char *rbuf)
{
    int me = ck.rank;
    int dst = dir == 0 ? ck_right() : ck_left();
    int src = dir == 0 ? ck_left() : ck_right();
    int tag = mode * 1000 + dir * 200 + si;
    long idx = (long)n;
    char what[160];
    MPI_Status st;

    ck_fill(sbuf, n, me, dst, tag, idx);
    ck_clear(rbuf, n);

    if (mode == 0 || mode == 2) {
        int sendfirst = (me % 2) == 0;
        if (sendfirst) {
            if (mode == 0)
                MPI_Send(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
            else
                MPI_Ssend(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
        }
        MPI_Recv(rbuf, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st);
        if (!sendfirst) {
            if (mode == 0)
                MPI_Send(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
            else
                MPI_Ssend(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
        }
    } else {
        MPI_Request rq[2];
        MPI_Status sts[2];
        MPI_Irecv(rbuf, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq[0]);
        if (mode == 1)
            MPI_Isend(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq[1]);
        else
            MPI_Issend(sbuf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, sts);
        st = sts[0];
    }
    ck_maybe_inject(rbuf, n);
    snprintf(what, sizeof what, "%s dir %d size %zu", mode_name[mode], dir, n);
    ck_verify(what, rbuf, n, src, me, tag, idx);
    ck_status(what, &st, src, tag, n);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "p2p_sizes", MPI_THREAD_SINGLE);
    build_sizes();
    if (ck.size < 2) {
        ck_skip("all point-to-point size tests");
        return ck_finish();
    }
    size_t maxn = sizes[nsizes - 1];
    unsigned char *sbuf = ck_alloc(maxn), *rbuf = ck_alloc(maxn);

    for (int mode = 0; mode < 2; mode++)
        for (int dir = 0; dir < 2; dir++)
            for (int si = 0; si < nsizes; si++)
                exchange(mode, dir, si, sizes[si], sbuf, rbuf);

    static const size_t ssizes[] = {0, 1, 4096, 65537, (1u << 20) + 1};
    for (int mode = 2; mode < 4; mode++)
        for (int dir = 0; dir < 2; dir++)
            for (int si = 0; si < (int)(sizeof ssizes / sizeof ssizes[0]); si++)
                exchange(mode, dir, si, ssizes[si], sbuf, rbuf);

    free(sbuf);
    free(rbuf);
    return ck_finish();
}
