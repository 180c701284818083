/*
 * collcost: the instructions one small collective costs a rank, counted by callgrind:
 * N calls of MPI_Alltoall (or MPI_Allreduce) of 8 bytes per rank over MPI_COMM_WORLD,
 * after 100 uncounted ones, collection toggled around the N on whichever rank runs under
 *   valgrind --tool=callgrind --collect-atstart=no
 * (wrap one rank as for windowcost.c); divide its totals by N. With more ranks than cores
 * the figure includes the progress passes a rank spins while its peers run, so read it
 * with the same rank count and binding for both transports. Every call's result is
 * checked on every rank; exits non-zero on a wrong byte or argument, prints
 * "collcost TEST N done".
 *
 *   mpirun -np 4 --bind-to none ... collcost alltoall|allreduce N
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

#define MAX_RANKS 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int alltoall = argc > 2 && !strcmp(argv[1], "alltoall");
    int allreduce = argc > 2 && !strcmp(argv[1], "allreduce");
    long n = argc > 2 ? atol(argv[2]) : 0;
    if ((!alltoall && !allreduce) || n < 1 || np > MAX_RANKS) {
        if (me == 0)
            fprintf(stderr, "usage: collcost alltoall|allreduce N (at most %d ranks)\n",
                    MAX_RANKS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char send[8 * MAX_RANKS], recv[8 * MAX_RANKS];
    int in[2], out[2];
    for (long it = -100; it < n; it++) {
        if (it == 0)
            CALLGRIND_TOGGLE_COLLECT;
        if (alltoall) {
            for (int p = 0; p < np; p++)
                memset(send + 8 * p, (me * 16 + p + (int)it) & 0xff, 8);
            MPI_Alltoall(send, 8, MPI_BYTE, recv, 8, MPI_BYTE, MPI_COMM_WORLD);
            for (int p = 0; p < np; p++)
                for (int b = 0; b < 8; b++)
                    bad |= recv[8 * p + b] != ((p * 16 + me + (int)it) & 0xff);
        } else {
            in[0] = me + (int)(it & 0xffff);
            in[1] = 1;
            MPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            bad |= out[0] != np * (np - 1) / 2 + np * (int)(it & 0xffff) || out[1] != np;
        }
    }
    CALLGRIND_TOGGLE_COLLECT;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0 && !bad)
        printf("collcost %s %ld done\n", argv[1], n);
    if (bad && me == 0)
        fprintf(stderr, "collcost: a wrong result\n");
    MPI_Finalize();
    return bad ? 3 : 0;
}
