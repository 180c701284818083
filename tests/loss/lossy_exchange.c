/* lossy_exchange: data-verifying point-to-point exchange meant to run under packet loss.
 *
 *   mpicc -O2 -o build/loss/lossy_exchange tests/loss/lossy_exchange.c
 *   mpirun -np 2 ... lossy_exchange [--rounds R] [--max-bytes B]
 *
 * Every round, every rank exchanges with its ring neighbours (MPI_Isend/MPI_Irecv, both
 * directions at once) messages of sizes 0, 1, 7, 64, 1000, 4096, 65536+3, 1 MiB+5 ... up to
 * --max-bytes, each filled with a pattern unique to (round, source, size, byte index), and
 * every received byte is checked. Then a blocking ping-pong of the same sizes and an
 * MPI_Allreduce of a checksum. Exit status 0 only if everything matched on every rank.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pat(int round, int src, size_t size, size_t i)
{
    uint64_t x = (uint64_t)round * 0x9e3779b97f4a7c15ull ^ (uint64_t)src << 40 ^ size << 8 ^ i;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (unsigned char)x;
}

static long check(const unsigned char *b, int round, int src, size_t size, int me,
                  const char *what)
{
    for (size_t i = 0; i < size; i++) {
        if (b[i] != pat(round, src, size, i)) {
            fprintf(stderr,
                    "lossy_exchange: rank %d %s round %d from %d size %zu: byte %zu is 0x%02x, "
                    "expected 0x%02x\n",
                    me, what, round, src, size, i, b[i], pat(round, src, size, i));
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 5;
    size_t max_bytes = 4u << 20;
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc)
            max_bytes = strtoull(argv[++i], NULL, 0);
    }
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const size_t base[] = {0, 1, 7, 64, 1000, 4096, 12288 + 1, 65536 + 3, 262144,
                           (1u << 20) + 5, 4u << 20, 16u << 20};
    size_t sizes[sizeof base / sizeof base[0]];
    int nsizes = 0;
    for (size_t k = 0; k < sizeof base / sizeof base[0]; k++)
        if (base[k] <= max_bytes)
            sizes[nsizes++] = base[k];

    size_t cap = sizes[nsizes - 1] ? sizes[nsizes - 1] : 1;
    unsigned char *s_r = malloc(cap), *s_l = malloc(cap), *r_r = malloc(cap), *r_l = malloc(cap);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    long errors = 0, bytes = 0;
    double t0 = MPI_Wtime();

    for (int round = 0; round < rounds; round++) {
        for (int k = 0; k < nsizes; k++) {
            size_t n = sizes[k];
            for (size_t i = 0; i < n; i++)
                s_r[i] = s_l[i] = pat(round, me, n, i);
            memset(r_r, 0xee, n);
            memset(r_l, 0xee, n);
            MPI_Request rq[4];
            MPI_Irecv(r_l, (int)n, MPI_BYTE, left, 100 + k, MPI_COMM_WORLD, &rq[0]);
            MPI_Irecv(r_r, (int)n, MPI_BYTE, right, 200 + k, MPI_COMM_WORLD, &rq[1]);
            MPI_Isend(s_r, (int)n, MPI_BYTE, right, 100 + k, MPI_COMM_WORLD, &rq[2]);
            MPI_Isend(s_l, (int)n, MPI_BYTE, left, 200 + k, MPI_COMM_WORLD, &rq[3]);
            MPI_Status st[4];
            MPI_Waitall(4, rq, st);
            int c0, c1;
            MPI_Get_count(&st[0], MPI_BYTE, &c0);
            MPI_Get_count(&st[1], MPI_BYTE, &c1);
            if ((size_t)c0 != n || (size_t)c1 != n) {
                fprintf(stderr, "lossy_exchange: rank %d size %zu: counts %d %d\n", me, n, c0, c1);
                errors++;
            }
            errors += check(r_l, round, left, n, me, "ring-left");
            errors += check(r_r, round, right, n, me, "ring-right");
            bytes += 2 * (long)n;

            /* ping-pong between pairs (0,1), (2,3), ... */
            int peer = me ^ 1;
            if (peer < np) {
                if (me & 1) {
                    MPI_Recv(r_l, (int)n, MPI_BYTE, peer, 300, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    errors += check(r_l, round, peer, n, me, "ping");
                    MPI_Send(s_r, (int)n, MPI_BYTE, peer, 301, MPI_COMM_WORLD);
                } else {
                    MPI_Send(s_r, (int)n, MPI_BYTE, peer, 300, MPI_COMM_WORLD);
                    MPI_Recv(r_l, (int)n, MPI_BYTE, peer, 301, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    errors += check(r_l, round, peer, n, me, "pong");
                }
                bytes += (long)n;
            }
        }
        long sum = 0, total = 0, expect = 0;
        for (int r = 0; r < np; r++)
            expect += (long)(r + 1) * (round + 1);
        sum = (long)(me + 1) * (round + 1);
        MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (total != expect) {
            fprintf(stderr, "lossy_exchange: rank %d allreduce %ld != %ld\n", me, total, expect);
            errors++;
        }
    }
    long all_errors = 0, all_bytes = 0;
    MPI_Reduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bytes, &all_bytes, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0;
    if (me == 0)
        printf("lossy_exchange: %d ranks, %d rounds x %d sizes (max %zu B), %ld bytes received "
               "and verified in %.2f s: %s\n",
               np, rounds, nsizes, sizes[nsizes - 1], all_bytes, dt,
               all_errors ? "FAILED" : "OK");
    free(s_r);
    free(s_l);
    free(r_r);
    free(r_l);
    MPI_Finalize();
    return all_errors ? 1 : 0;
}
