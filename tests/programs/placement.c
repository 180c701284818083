/*
 * placement.c -- where the ranks run: each rank's MPI_Get_processor_name, gathered at
 * rank 0, which prints one line per rank:
 *     placement: rank R on NAME
 * Used by the across-hosts tests to show that the ranks really sit on different
 * (namespace) hosts. It replaces running /bin/hostname under mpirun: Open MPI 5.0.7's
 * runtime (PRRTE 3.0) now and then never learns that a remote process which exited
 * within milliseconds of its launch has ended, and mpirun then waits forever (about one
 * job in fifteen on two loaded cores); an MPI process meets every daemon in MPI_Init's
 * fence first, so its end is always reported.
 *
 * Checks: the gathered names are non-empty and NUL-terminated; the last line is
 * "N passed, M failed" as in every program here.
 */
#include "check.h"

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "placement", MPI_THREAD_SINGLE);
    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 0, sizeof name);
    int len = 0;
    MPI_Get_processor_name(name, &len);
    ck_check(len > 0 && len < MPI_MAX_PROCESSOR_NAME, "processor name length %d", len);
    char *all = NULL;
    if (ck.rank == 0) {
        all = calloc((size_t) ck.size, MPI_MAX_PROCESSOR_NAME);
        if (all == NULL) {
            fprintf(stderr, "placement: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
               0, MPI_COMM_WORLD);
    if (ck.rank == 0) {
        for (int r = 0; r < ck.size; r++) {
            const char *theirs = all + (size_t) r * MPI_MAX_PROCESSOR_NAME;
            size_t n = strnlen(theirs, MPI_MAX_PROCESSOR_NAME);
            if (ck_check(n > 0 && n < MPI_MAX_PROCESSOR_NAME, "rank %d's name has length %zu",
                         r, n))
                printf("placement: rank %d on %s\n", r, theirs);
        }
        fflush(stdout);
        free(all);
    }
    return ck_finish();
}
