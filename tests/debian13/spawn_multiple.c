/*
 * spawn_multiple.c -- the smallest MPI_Comm_spawn_multiple: one rank spawns two
 * commands (this binary, argv[1]), one process each; the children disconnect and end.
 * tests/debian13/inside runs it with Debian 13's mpirun, which dies of SIGSEGV on it
 * (openmpi-bin 5.0.7-1), whatever the transport; our own 5.0.7 build runs the same
 * calls (tests/programs/spawn_traffic.c, part C).
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-OF-THIS-BINARY\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *cmds[2] = {argv[1], argv[1]};
    int maxprocs[2] = {1, 1}, errs[2];
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    int rc = MPI_Comm_spawn_multiple(2, cmds, MPI_ARGVS_NULL, maxprocs, infos, 0,
                                     MPI_COMM_WORLD, &inter, errs);
    int remote = -1;
    MPI_Comm_remote_size(inter, &remote);
    printf("spawn_multiple: rc %d, remote size %d\n", rc, remote);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return rc == MPI_SUCCESS && remote == 2 ? 0 : 1;
}
