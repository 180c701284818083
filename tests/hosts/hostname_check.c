/* hostname_check: every rank reports its MPI processor name and its network namespace,
 * then the ranks exchange verified data in a ring and with MPI_Allreduce.
 * Exit code 0 only when every check passes on every rank.
 *
 *   mpicc -O2 -o build/hosts/hostname_check tests/hosts/hostname_check.c
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RING_BYTES (1 << 20) /* 1 MiB: past the eager limit of every transport */

static void netns_id(char *buf, size_t len)
{
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0)
        snprintf(buf, len, "net:[%lu]", (unsigned long)st.st_ino);
    else
        snprintf(buf, len, "?");
}

static unsigned char pattern(int src, size_t i)
{
    return (unsigned char)((src * 131u + i * 7u + (i >> 8)) & 0xff);
}

int main(int argc, char **argv)
{
    int rank, size, len, errors = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    char ns[64];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);
    netns_id(ns, sizeof ns);

    /* gather "name netns" strings at rank 0 and print them in rank order */
    char line[MPI_MAX_PROCESSOR_NAME + 64];
    char *all = NULL;
    snprintf(line, sizeof line, "%s %s", name, ns);
    if (rank == 0)
        all = malloc((size_t)size * sizeof line);
    MPI_Gather(line, (int)sizeof line, MPI_CHAR, all, (int)sizeof line, MPI_CHAR, 0,
               MPI_COMM_WORLD);

    /* ring exchange of 1 MiB, every byte checked */
    unsigned char *sbuf = malloc(RING_BYTES), *rbuf = malloc(RING_BYTES);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (size_t i = 0; i < RING_BYTES; i++)
        sbuf[i] = pattern(rank, i);
    memset(rbuf, 0, RING_BYTES);
    MPI_Sendrecv(sbuf, RING_BYTES, MPI_BYTE, right, 7, rbuf, RING_BYTES, MPI_BYTE, left, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (size_t i = 0; i < RING_BYTES; i++) {
        if (rbuf[i] != pattern(left, i)) {
            fprintf(stderr, "rank %d: ring byte %zu from rank %d is 0x%02x, expected 0x%02x\n",
                    rank, i, left, rbuf[i], pattern(left, i));
            errors++;
            break;
        }
    }
    long sum = rank + 1, total = 0;
    MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (total != (long)size * (size + 1) / 2) {
        fprintf(stderr, "rank %d: allreduce %ld, expected %ld\n", rank, total,
                (long)size * (size + 1) / 2);
        errors++;
    }
    int all_errors = 0;
    MPI_Reduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("rank %d: node=%s\n", r, all + (size_t)r * sizeof line);
        printf("hostname_check: %d ranks, ring 1 MiB verified + allreduce: %s\n", size,
               all_errors ? "FAILED" : "OK");
        free(all);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return all_errors ? 1 : 0;
}
