/*
 * collectives.c -- collectives over MPI_COMM_WORLD (any number of ranks).
 *
 *  Barrier   : the rank that sleeps 200 ms before entering holds everybody
 *              else (>= 190 ms from a point they reported before it slept), for
 *              each rank in turn; 200 barriers.
 *  Bcast     : every root, 0 B .. 4 MiB, payload = pattern(root -> all).
 *  Reduce / Allreduce (also MPI_IN_PLACE): MPI_SUM and MPI_MAX on int and
 *              double, 1 .. 262144 elements, values chosen so every result is
 *              exact (small integers / dyadic fractions) and compared exactly.
 *  Alltoall  : block sizes 0 B .. 1 MiB/np, block i->j = pattern(i, j).
 *  Alltoallv : irregular counts including zeros, blocks in reverse order with
 *              16-byte gaps in both buffers; gaps of the receive buffer must
 *              stay untouched.
 *  Gather / Gatherv: every root, several sizes; Gatherv with irregular counts
 *              (some zero), reversed displacements and gaps.
 */
#include "check.h"
#include <unistd.h>

#define GAP 16

static void t_barrier(void)
{
    /* The sleeper starts its 200 ms only after every other rank has told it that it
     * started its clock, so a correct barrier holds each of them >= 200 ms whatever
     * the delays (a retransmission can make ranks leave a barrier 200 ms apart). */
    for (int sleeper = 0; sleeper < ck.size && ck.size > 1; sleeper++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (ck.rank == sleeper) {
            for (int i = 0; i < ck.size - 1; i++)
                MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            usleep(200000);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            double t0 = MPI_Wtime();
            MPI_Send(NULL, 0, MPI_BYTE, sleeper, 77, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            double dt = MPI_Wtime() - t0;
            ck_check(dt >= 0.19, "Barrier: left after %.3f s while rank %d was still sleeping 0.2 s",
                     dt, sleeper);
        }
    }
    for (int i = 0; i < 200; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    ck_pass();
}

static void t_bcast(void)
{
    static const size_t sz[] = {0, 1, 7, 1000, 65537, (1u << 20) + 3, 4u << 20};
    int nsz = ck.quick ? 6 : 7;
    unsigned char *buf = ck_alloc(4u << 20);
    char what[128];
    for (int root = 0; root < ck.size; root++)
        for (int si = 0; si < nsz; si++) {
            size_t n = sz[si];
            ck_clear(buf, n);
            if (ck.rank == root)
                ck_fill(buf, n, root, -1, si, 1);
            MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
            snprintf(what, sizeof what, "Bcast root %d size %zu", root, n);
            ck_verify(what, buf, n, root, -1, si, 1);
        }
    free(buf);
}

/* values contributed by rank r at index i */
static int ival(int op, int r, size_t i)
{
    if (op == 0) /* sum */
        return (r + 1) * (int)(i % 1000) - r * 3;
    return (int)(ck_word(ck_seed(r, 0, 77, 0), i) % 200001u) - 100000; /* max */
}
static double dval(int op, int r, size_t i)
{
    if (op == 0)
        return (double)((r + 1) * (int)(i % 977)) * 0.5 - (double)r * 0.25;
    return (double)((int)(ck_word(ck_seed(r, 0, 78, 0), i) % 400001u) - 200000) / 8.0;
}

static void t_reduce(void)
{
    static const size_t cnt[] = {1, 1000, 262144};
    static const char *opn[] = {"MPI_SUM", "MPI_MAX"};
    static const char *how[] = {"Reduce", "Allreduce", "Allreduce(IN_PLACE)"};
    char what[160];
    for (int ci = 0; ci < 3; ci++) {
        size_t n = cnt[ci];
        int *is = malloc(n * sizeof(int)), *ir = malloc(n * sizeof(int)), *ie = malloc(n * sizeof(int));
        double *ds = malloc(n * sizeof(double)), *dr = malloc(n * sizeof(double)),
               *de = malloc(n * sizeof(double));
        for (int op = 0; op < 2; op++) {
            MPI_Op mop = op == 0 ? MPI_SUM : MPI_MAX;
            for (size_t i = 0; i < n; i++) {
                ie[i] = ival(op, 0, i);
                de[i] = dval(op, 0, i);
                for (int r = 1; r < ck.size; r++) {
                    int v = ival(op, r, i);
                    double d = dval(op, r, i);
                    ie[i] = op == 0 ? ie[i] + v : (v > ie[i] ? v : ie[i]);
                    de[i] = op == 0 ? de[i] + d : (d > de[i] ? d : de[i]);
                }
            }
            for (int h = 0; h < 3; h++) {
                int root = (int)((ci + (size_t)op + (size_t)h) % (size_t)ck.size);
                for (size_t i = 0; i < n; i++) {
                    is[i] = ival(op, ck.rank, i);
                    ds[i] = dval(op, ck.rank, i);
                    ir[i] = -7;
                    dr[i] = -7.0;
                }
                if (h == 0) {
                    MPI_Reduce(is, ir, (int)n, MPI_INT, mop, root, MPI_COMM_WORLD);
                    MPI_Reduce(ds, dr, (int)n, MPI_DOUBLE, mop, root, MPI_COMM_WORLD);
                } else if (h == 1) {
                    MPI_Allreduce(is, ir, (int)n, MPI_INT, mop, MPI_COMM_WORLD);
                    MPI_Allreduce(ds, dr, (int)n, MPI_DOUBLE, mop, MPI_COMM_WORLD);
                } else {
                    memcpy(ir, is, n * sizeof(int));
                    memcpy(dr, ds, n * sizeof(double));
                    MPI_Allreduce(MPI_IN_PLACE, ir, (int)n, MPI_INT, mop, MPI_COMM_WORLD);
                    MPI_Allreduce(MPI_IN_PLACE, dr, (int)n, MPI_DOUBLE, mop, MPI_COMM_WORLD);
                }
                if (h == 0 && ck.rank != root)
                    continue;
                size_t bi = n, bd = n, nbi = 0, nbd = 0;
                for (size_t i = 0; i < n; i++) {
                    if (ir[i] != ie[i] && nbi++ == 0)
                        bi = i;
                    if (dr[i] != de[i] && nbd++ == 0)
                        bd = i;
                }
                snprintf(what, sizeof what, "%s %s int count %zu root %d", how[h], opn[op], n, root);
                ck_check(nbi == 0, "%s: first wrong element %zu: expected %d got %d (%zu wrong)", what,
                         bi, bi < n ? ie[bi] : 0, bi < n ? ir[bi] : 0, nbi);
                snprintf(what, sizeof what, "%s %s double count %zu root %d", how[h], opn[op], n,
                         root);
                ck_check(nbd == 0, "%s: first wrong element %zu: expected %.17g got %.17g (%zu wrong)",
                         what, bd, bd < n ? de[bd] : 0.0, bd < n ? dr[bd] : 0.0, nbd);
            }
        }
        free(is);
        free(ir);
        free(ie);
        free(ds);
        free(dr);
        free(de);
    }
}

static void t_alltoall(void)
{
    size_t sz[] = {0, 1, 100, 65536, (1u << 20) / (size_t)ck.size};
    int P = ck.size, me = ck.rank;
    char what[160];
    for (int si = 0; si < 5; si++) {
        size_t n = sz[si];
        unsigned char *sb = ck_alloc(n * (size_t)P), *rb = ck_alloc(n * (size_t)P);
        for (int j = 0; j < P; j++)
            ck_fill(sb + (size_t)j * n, n, me, j, 900 + si, 1);
        MPI_Alltoall(sb, (int)n, MPI_BYTE, rb, (int)n, MPI_BYTE, MPI_COMM_WORLD);
        for (int i = 0; i < P; i++) {
            snprintf(what, sizeof what, "Alltoall block size %zu from rank %d", n, i);
            ck_verify_g(what, rb + (size_t)i * n, n, i, me, 900 + si, 1, i == P - 1);
        }
        free(sb);
        free(rb);
    }
}

/* Alltoallv count from i to j */
static int a2av_count(int i, int j, int it, int base)
{
    return ((i * 7 + j * 3 + it) % 5) * base;
}

static void t_alltoallv(void)
{
    static const int bases[] = {1, 1000, 30000};
    int P = ck.size, me = ck.rank;
    char what[160];
    int *sc = malloc(sizeof(int) * P), *sd = malloc(sizeof(int) * P), *rc = malloc(sizeof(int) * P),
        *rd = malloc(sizeof(int) * P);
    for (int it = 0; it < 3; it++) {
        int base = bases[it];
        /* blocks in reverse peer order with GAP bytes before each */
        size_t stot = 0, rtot = 0;
        for (int j = P - 1; j >= 0; j--) {
            sc[j] = a2av_count(me, j, it, base);
            stot += GAP;
            sd[j] = (int)stot;
            stot += (size_t)sc[j];
            rc[j] = a2av_count(j, me, it, base);
            rtot += GAP;
            rd[j] = (int)rtot;
            rtot += (size_t)rc[j];
        }
        unsigned char *sb = ck_alloc(stot), *rb = ck_alloc(rtot), *exp = ck_alloc(rtot);
        uint32_t gap = ck_seed(me, -2, it, 0);
        ck_fill_seed(rb, rtot, gap);
        ck_fill_seed(exp, rtot, gap);
        for (int j = 0; j < P; j++) {
            ck_fill(sb + sd[j], (size_t)sc[j], me, j, 950 + it, 2);
            ck_fill(exp + rd[j], (size_t)rc[j], j, me, 950 + it, 2);
        }
        MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        snprintf(what, sizeof what, "Alltoallv base %d (whole receive buffer incl. gaps)", base);
        ck_verify_image(what, rb, exp, rtot + CK_GUARD, -1, me, 950 + it, 2);
        free(sb);
        free(rb);
        free(exp);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void t_gather(void)
{
    static const size_t sz[] = {1, 1000, 65537, 1u << 20};
    int P = ck.size, me = ck.rank;
    int nsz = ck.quick ? 3 : 4;
    char what[160];
    for (int root = 0; root < P; root++) {
        for (int si = 0; si < nsz; si++) {
            size_t n = sz[si];
            unsigned char *sb = ck_alloc(n), *rb = ck_alloc(me == root ? n * (size_t)P : 0);
            ck_fill(sb, n, me, root, 1100 + si, 3);
            MPI_Gather(sb, (int)n, MPI_BYTE, rb, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
            if (me == root)
                for (int i = 0; i < P; i++) {
                    snprintf(what, sizeof what, "Gather root %d size %zu block of rank %d", root, n, i);
                    ck_verify_g(what, rb + (size_t)i * n, n, i, root, 1100 + si, 3, i == P - 1);
                }
            free(sb);
            free(rb);
        }
        /* Gatherv: count of rank i = ((i + root) % 3) * base, reversed displacements */
        for (int bi = 0; bi < 2; bi++) {
            int base = bi == 0 ? 333 : 200000;
            int *cnts = malloc(sizeof(int) * P), *dsp = malloc(sizeof(int) * P);
            size_t tot = 0;
            for (int i = P - 1; i >= 0; i--) {
                cnts[i] = ((i + root) % 3) * base;
                tot += GAP;
                dsp[i] = (int)tot;
                tot += (size_t)cnts[i];
            }
            unsigned char *sb = ck_alloc((size_t)cnts[me]);
            unsigned char *rb = ck_alloc(me == root ? tot : 0), *exp = ck_alloc(me == root ? tot : 0);
            ck_fill(sb, (size_t)cnts[me], me, root, 1200 + bi, 4);
            if (me == root) {
                uint32_t gap = ck_seed(me, -3, bi, 0);
                ck_fill_seed(rb, tot, gap);
                ck_fill_seed(exp, tot, gap);
                for (int i = 0; i < P; i++)
                    ck_fill(exp + dsp[i], (size_t)cnts[i], i, root, 1200 + bi, 4);
            }
            MPI_Gatherv(sb, cnts[me], MPI_BYTE, rb, cnts, dsp, MPI_BYTE, root, MPI_COMM_WORLD);
            if (me == root) {
                snprintf(what, sizeof what, "Gatherv root %d base %d (whole buffer incl. gaps)", root,
                         base);
                ck_verify_image(what, rb, exp, tot + CK_GUARD, -1, root, 1200 + bi, 4);
            }
            free(sb);
            free(rb);
            free(exp);
            free(cnts);
            free(dsp);
        }
    }
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "collectives", MPI_THREAD_SINGLE);
    ck_progress("Barrier");
    t_barrier();
    ck_progress("Bcast");
    t_bcast();
    ck_progress("Reduce/Allreduce");
    t_reduce();
    ck_progress("Alltoall");
    t_alltoall();
    ck_progress("Alltoallv");
    t_alltoallv();
    ck_progress("Gather/Gatherv");
    t_gather();
    return ck_finish();
}
