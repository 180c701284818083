/*
 * spawn_abort.c -- a spawned process calls MPI_Abort while everyone else waits.
 *
 * The first job spawns 2 children (this binary, through /proc/self/exe) and exchanges
 * verified traffic with them on the intercommunicator and on the merged
 * intracommunicator (spawn.h), so every transport connection and shared-memory
 * segment between the two jobs exists. Then child 1 prints
 *   spawn_abort(child) rank 1: calling MPI_Abort(MPI_COMM_WORLD, 7)
 * and aborts, while every other process blocks in an MPI_Recv from it that can never
 * complete. The run passes when mpirun ends the whole job (both jobs) quickly with a
 * non-zero status and nothing is left behind: that is for the harness to check
 * (tests/dynamic.rs). This program never prints an `N passed, M failed` line; if the
 * receive ever completes it prints FAIL and exits 1.
 * With --no-abort child 1 sends instead, and the run ends normally with the counts:
 * the control that shows the setup itself works.
 *
 * With --patience=S the waiting processes give up after S seconds, print
 *   spawn_abort rank R: nothing from the aborted child within S s: aborting too
 * and call MPI_Abort with the same code, as an application without fault tolerance
 * does once a peer stops answering. That is for Open MPI 5, whose runtime ends only the
 * job that called MPI_Abort and leaves the connected job to notice (stock tcp does, from
 * the closed socket, and aborts; a datagram or shared-memory transport has nothing to
 * notice, and MPI_Finalize would wait in its implicit disconnect for the dead job): the
 * run checks that both jobs still end quickly, with the code, leaving nothing behind.
 */
#include "spawn.h"

#define ABORT_CODE 7

static int no_abort(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--no-abort") == 0)
            return 1;
    return 0;
}

/* Everyone but child 1 waits on the merged communicator for a message from it, at most
 * `patience` seconds when it is positive. Returns 0 when it gave up. */
static int wait_for_child1(MPI_Comm merged, int child1, int expect_message, double patience)
{
    int v = -1;
    MPI_Status st;
    if (patience > 0) {
        MPI_Request req;
        int done = 0;
        double until = MPI_Wtime() + patience;
        MPI_Irecv(&v, 1, MPI_INT, child1, 55, merged, &req);
        while (MPI_Test(&req, &done, &st), !done) {
            if (MPI_Wtime() > until) {
                MPI_Cancel(&req);
                MPI_Wait(&req, &st);
                printf("%s rank %d: nothing from the aborted child within %.0f s: aborting "
                       "too\n",
                       ck.prog, ck.rank, patience);
                fflush(stdout);
                return 0;
            }
            usleep(1000);
        }
    } else {
        MPI_Recv(&v, 1, MPI_INT, child1, 55, merged, &st);
    }
    ck_check(expect_message && v == 1234,
             "the receive from the aborting child completed (value %d)", v);
    return 1;
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "spawn_abort", MPI_THREAD_SINGLE);
    int control = no_abort(argc, argv);
    const char *patience_arg = dyn_arg(argc, argv, "--patience");
    double patience = patience_arg ? atof(patience_arg) : 0;
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    MPI_Comm inter, merged;
    int first = parent == MPI_COMM_NULL;
    if (first) {
        char *cargv[3] = {(char *)"--role=child", control ? (char *)"--no-abort" : NULL, NULL};
        int errs[2];
        int rc = MPI_Comm_spawn(dyn_exe(), cargv, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                                errs);
        dyn_check_errcodes("spawn of 2", rc, errs, 2);
    } else {
        ck.prog = "spawn_abort(child)";
        inter = parent;
    }
    dyn_inter_traffic(inter, first ? 0 : 1, first ? 1 : 0, first, 100, 0);
    MPI_Intercomm_merge(inter, !first, &merged);
    dyn_check_merged(inter, merged, !first, "merge");
    dyn_intra_traffic(merged, "merged", 200, 0);

    int remote = 0, me = 0;
    MPI_Comm_remote_size(inter, &remote);
    MPI_Comm_rank(merged, &me);
    /* the parents come first in merged, then the children */
    int child1 = (first ? ck.size : remote) + 1;
    if (me == child1) {
        if (!control) {
            printf("%s rank %d: calling MPI_Abort(MPI_COMM_WORLD, %d)\n", ck.prog, ck.rank,
                   ABORT_CODE);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, ABORT_CODE);
        }
        int v = 1234;
        int n = 0;
        MPI_Comm_size(merged, &n);
        for (int p = 0; p < n; p++)
            if (p != me)
                MPI_Send(&v, 1, MPI_INT, p, 55, merged);
    } else if (!wait_for_child1(merged, child1, control, patience)) {
        MPI_Abort(MPI_COMM_WORLD, ABORT_CODE);
    }
    MPI_Comm_free(&merged);
    if (first) {
        dyn_recv_counts(inter, "children");
        MPI_Comm_disconnect(&inter);
        return ck_finish();
    }
    dyn_send_counts(inter);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return 0;
}
