/*
 * windowcost: the instructions one bulk message costs each side, counted by callgrind: the
 * split between the MTL or BTL, the PML, the provider and libc that a bandwidth test's time
 * hides. Rank 0 sends N windows of 64 messages of SIZE bytes (MPI_Isend, MPI_Waitall);
 * rank 1 receives them into posted receives and answers each window with 4 bytes, as
 * mpibench's bw test does. Collection is toggled around the N windows (5 before them
 * warm up), on whichever rank runs under
 *   valgrind --tool=callgrind --collect-atstart=no
 * (wrap one rank: `sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec valgrind ...
 * "$@"; else exec "$@"; fi' sh windowcost N SIZE`); divide the totals by N * 64. Rank 0
 * fills the last window's messages with a pattern of message and window (outside the
 * count), rank 1 checks every byte of them. Exits non-zero on a wrong byte or argument;
 * prints "windowcost N SIZE done".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

#define WINDOW 64

static unsigned char pattern(int window, int message, size_t i)
{
    return (unsigned char)(window * 31 + message * 7 + (int)(i % 251));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    long n = argc > 2 ? atol(argv[1]) : 0;
    long size = argc > 2 ? atol(argv[2]) : 0;
    if (n < 1 || size < 1 || size > (1L << 24)) {
        if (me == 0)
            fprintf(stderr, "usage: windowcost N SIZE (N >= 1, 1 <= SIZE <= 16 MiB)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char *buf = malloc((size_t)size * WINDOW);
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Request rq[WINDOW];
    int ack = 0;
    for (long w = -5; w < n; w++) {
        if (w == 0)
            CALLGRIND_TOGGLE_COLLECT;
        if (w == n - 1) {
            /* The last window carries the checked pattern (rank 1's buffer cleared
             * first), written outside the count. */
            CALLGRIND_TOGGLE_COLLECT;
            for (int j = 0; j < WINDOW; j++)
                for (long i = 0; i < size; i++)
                    buf[j * size + i] = me == 0 ? pattern((int)w, j, (size_t)i) : 0;
            CALLGRIND_TOGGLE_COLLECT;
        }
        if (me == 0) {
            for (int j = 0; j < WINDOW; j++)
                MPI_Isend(buf + j * size, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &rq[j]);
            MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            for (int j = 0; j < WINDOW; j++)
                MPI_Irecv(buf + j * size, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &rq[j]);
            MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        }
    }
    CALLGRIND_TOGGLE_COLLECT;
    if (me == 1)
        for (int j = 0; j < WINDOW && !bad; j++)
            for (long i = 0; i < size; i++)
                if (buf[j * size + i] != pattern((int)(n - 1), j, (size_t)i)) {
                    fprintf(stderr, "windowcost: message %d byte %ld wrong\n", j, i);
                    bad = 1;
                    break;
                }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0 && !bad)
        printf("windowcost %ld %ld done\n", n, size);
    free(buf);
    MPI_Finalize();
    return bad ? 3 : 0;
}
