/*
 * spawn_first_barrier.c -- MPI_Comm_spawn_multiple of 1 + 2 children whose first and
 * only traffic with their parent is one MPI_Barrier on the intercommunicator, followed at
 * once by MPI_Comm_disconnect.
 *
 * Why: each side meets the other first inside the barrier, and the parent's side of it
 * may be over (its message sent, the children's received) before a child has added the
 * parent as a peer. Open MPI 5's MPI_Comm_disconnect then waits in a PMIx fence that
 * makes no progress calls, so a transport that dropped the parent's message as coming
 * from an unknown sender, and resends only from progress calls, hangs the job (rusnic
 * did, in about one run of three; tests/dynamic.rs runs this several times).
 *
 * Checks: the parent, that the children's group has 3 processes; each child, its
 * MPI_APPNUM (0 for the first command, 1 for the second), its world's size (3) and the
 * parent group's size. Each side prints its own "N passed, M failed" line (the parent's
 * job and the children's), so a run that passed prints two, both with 0 failed.
 */
#include "spawn.h"

int main(int argc, char **argv)
{
    const char *child = dyn_arg(argc, argv, "--child");
    ck_init(&argc, &argv, child ? "spawn_first_barrier(child)" : "spawn_first_barrier",
            MPI_THREAD_SINGLE);
    MPI_Comm parent, inter;
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        char *commands[2] = {(char *) dyn_exe(), (char *) dyn_exe()};
        char *first[] = {"--child=first", NULL}, *second[] = {"--child=second", NULL};
        char **arguments[2] = {first, second};
        int counts[2] = {1, 2};
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
        int errcodes[3] = {-1, -1, -1};
        MPI_Comm_spawn_multiple(2, commands, arguments, counts, infos, 0, MPI_COMM_WORLD,
                                &inter, errcodes);
        MPI_Barrier(inter);
        int remote = -1;
        MPI_Comm_remote_size(inter, &remote);
        ck_check(remote == 3, "children's group has %d processes, expected 3", remote);
        for (int i = 0; i < 3; i++)
            ck_check(errcodes[i] == MPI_SUCCESS, "spawn error code %d of child %d", errcodes[i],
                     i);
        MPI_Comm_disconnect(&inter);
    } else {
        MPI_Barrier(parent);
        int *appnum = NULL, flag = 0, world = -1, remote = -1;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
        int expected = strcmp(child, "first") == 0 ? 0 : 1;
        ck_check(flag && *appnum == expected, "MPI_APPNUM %d (set: %d), expected %d",
                 flag ? *appnum : -1, flag, expected);
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        ck_check(world == 3, "children's world has %d processes, expected 3", world);
        MPI_Comm_remote_size(parent, &remote);
        ck_check(remote >= 1, "parent group has %d processes", remote);
        MPI_Comm_disconnect(&parent);
    }
    return ck_finish();
}
