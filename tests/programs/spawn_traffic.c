/*
 * spawn_traffic.c -- dynamic processes: MPI_Comm_spawn, MPI_Comm_spawn_multiple and
 * spawned processes that spawn again, with verified traffic on every communicator
 * that joins the jobs.
 *
 * The same binary is parent and child: a process whose MPI_Comm_get_parent is not
 * MPI_COMM_NULL takes the role its argv names (--role=...). It spawns itself through
 * /proc/self/exe. Parts (--parts=ABCD, default all), each with its own jobs:
 *   A. MPI_Comm_spawn of 1 child;
 *   B. MPI_Comm_spawn of 3 children;
 *   C. MPI_Comm_spawn_multiple of two commands (this binary with argv --role=app0,
 *      1 process, and --role=app1, 2 processes): each child checks its role against
 *      MPI_APPNUM and its rank (one MPI_COMM_WORLD of 3);
 *   D. 2 children that spawn 2 grandchildren: traffic parent-child and
 *      child-grandchild, then MPI_Intercomm_create of (parents + children) with the
 *      grandchildren (bridged by the children's communicator with them), merged into
 *      one intracommunicator of three generations: every pair talks directly,
 *      parents and grandchildren included, and the collectives span all of them.
 * On each intercommunicator (spawn.h): every size from 0 B to 1 MiB + 1 both ways at
 * once, MPI_Ssend round trips, intercommunicator Bcast/Allreduce/Barrier; then
 * MPI_Intercomm_merge (rank order checked) with all-pairs traffic, Allreduce SUM/MAX
 * and Bcast with exact results. Every spawned job sums its counts and sends them to
 * its parent over the intercommunicator; the final line (rank 0 of the first job)
 * covers every process of every generation. Communicators between jobs are released
 * with MPI_Comm_disconnect (intercommunicators) and MPI_Comm_free (the merged ones:
 * MPI_Comm_disconnect of a merged intracommunicator hangs in PMIx_Fence on Open MPI
 * 4.1.4, stock transports included; --disconnect-merged shows it in A, B and C).
 * Run one part per mpirun: with Open MPI 4.1.4 on Debian's external PMIx 4.2, a second
 * spawn from the same job now and then never completes (a new child stays in
 * PMIx_Init; openpmix/openpmix#2735), whatever the transport.
 */
#include "spawn.h"

#define MAX_ARGS 10

/* --disconnect-merged: release the merged communicators of A, B and C with
 * MPI_Comm_disconnect (hangs on Open MPI 4.1.4; tests/dynamic.rs asserts it still does). */
static int disconnect_merged;

/* argv for a child: role, part, expected job size, tag base, and our own flags */
static void child_argv(char **out, char store[][48], const char *role, char part, int nkids,
                       int tagbase)
{
    int k = 0;
    snprintf(store[0], 48, "--role=%s", role);
    snprintf(store[1], 48, "--part=%c", part);
    snprintf(store[2], 48, "--nkids=%d", nkids);
    snprintf(store[3], 48, "--tagbase=%d", tagbase);
    for (; k < 4; k++)
        out[k] = store[k];
    if (ck.quick)
        out[k++] = (char *)"--quick";
    if (ck.verbose)
        out[k++] = (char *)"--verbose";
    if (disconnect_merged)
        out[k++] = (char *)"--disconnect-merged";
    out[k] = NULL;
}

static int spawn_checked(const char *what, char **cargv, int n, MPI_Comm comm, MPI_Comm *inter)
{
    int errs[16];
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_spawn(dyn_exe(), cargv, n, MPI_INFO_NULL, 0, comm, inter, errs);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    dyn_check_errcodes(what, rc, errs, n);
    if (rc != MPI_SUCCESS)
        return 0;
    int rs = -1;
    MPI_Comm_remote_size(*inter, &rs);
    return ck_check(rs == n, "%s: remote size %d, expected %d", what, rs, n);
}

static void release_merged(MPI_Comm *merged)
{
    if (disconnect_merged)
        MPI_Comm_disconnect(merged);
    else
        MPI_Comm_free(merged);
}

/* The parent's side of A, B and C once the intercommunicator exists. */
static void parent_side(MPI_Comm inter, const char *what, char part, int tagbase)
{
    dyn_inter_traffic(inter, 0, 1, 1, tagbase, part);
    MPI_Comm merged;
    MPI_Intercomm_merge(inter, 0, &merged);
    dyn_check_merged(inter, merged, 0, what);
    dyn_intra_traffic(merged, "merged", tagbase + 100, part);
    release_merged(&merged);
    dyn_recv_counts(inter, what);
    MPI_Comm_disconnect(&inter);
    ck_progress("%s: done", what);
}

static void part_spawn(char part, int nkids, int tagbase)
{
    char what[64], store[4][48], *cargv[MAX_ARGS];
    snprintf(what, sizeof what, "part %c (MPI_Comm_spawn of %d)", part, nkids);
    child_argv(cargv, store, "child", part, nkids, tagbase);
    MPI_Comm inter;
    if (spawn_checked(what, cargv, nkids, MPI_COMM_WORLD, &inter))
        parent_side(inter, what, part, tagbase);
}

static void part_multiple(int tagbase)
{
    const char *what = "part C (MPI_Comm_spawn_multiple of 1 + 2)";
    char store0[4][48], store1[4][48], *argv0[MAX_ARGS], *argv1[MAX_ARGS];
    child_argv(argv0, store0, "app0", 'C', 3, tagbase);
    child_argv(argv1, store1, "app1", 'C', 3, tagbase);
    char *cmds[2] = {(char *)dyn_exe(), (char *)dyn_exe()};
    char **argvs[2] = {argv0, argv1};
    int maxprocs[2] = {1, 2}, errs[3];
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    MPI_Comm inter;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD, &inter,
                                     errs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    dyn_check_errcodes(what, rc, errs, 3);
    if (rc != MPI_SUCCESS)
        return;
    int rs = -1;
    MPI_Comm_remote_size(inter, &rs);
    if (ck_check(rs == 3, "%s: remote size %d, expected 3", what, rs))
        parent_side(inter, what, 'C', tagbase);
}

/* Part D on the first job: children and grandchildren, then all three generations. */
static void part_generations(int tagbase)
{
    const char *what = "part D (children spawning grandchildren)";
    char store[4][48], *cargv[MAX_ARGS];
    child_argv(cargv, store, "mid", 'D', 2, tagbase);
    MPI_Comm inter_pm;
    if (!spawn_checked(what, cargv, 2, MPI_COMM_WORLD, &inter_pm))
        return;
    dyn_inter_traffic(inter_pm, 0, 1, 1, tagbase, 'D');
    MPI_Comm intra_pm;
    MPI_Intercomm_merge(inter_pm, 0, &intra_pm);
    dyn_check_merged(inter_pm, intra_pm, 0, "parents+children merge");
    dyn_intra_traffic(intra_pm, "parents+children", tagbase + 100, 'D');
    /* (parents + children) with the grandchildren; the local leader is child 0, who
     * reaches grandchild 0 through its communicator with them */
    MPI_Comm inter_xg, intra_all;
    MPI_Intercomm_create(intra_pm, ck.size, MPI_COMM_NULL, 0, 77, &inter_xg);
    MPI_Intercomm_merge(inter_xg, 0, &intra_all);
    dyn_check_merged(inter_xg, intra_all, 0, "three generations merge");
    int n = 0;
    MPI_Comm_size(intra_all, &n);
    ck_check(n == ck.size + 4, "three generations: %d processes, expected %d", n, ck.size + 4);
    dyn_intra_traffic(intra_all, "three generations", tagbase + 200, 'D');
    MPI_Comm_free(&intra_all);
    MPI_Comm_disconnect(&inter_xg);
    MPI_Comm_free(&intra_pm);
    dyn_recv_counts(inter_pm, what);
    MPI_Comm_disconnect(&inter_pm);
    ck_progress("%s: done", what);
}

/* A child of part D: spawns the grandchildren, talks to them and its parents. */
static void mid_role(MPI_Comm parent, int tagbase)
{
    int nparents = 0;
    MPI_Comm_remote_size(parent, &nparents);
    dyn_inter_traffic(parent, 1, 0, 0, tagbase, 'D');
    MPI_Comm intra_pm;
    MPI_Intercomm_merge(parent, 1, &intra_pm);
    dyn_check_merged(parent, intra_pm, 1, "parents+children merge");
    dyn_intra_traffic(intra_pm, "parents+children", tagbase + 100, 'D');

    char store[4][48], *cargv[MAX_ARGS];
    child_argv(cargv, store, "grandchild", 'D', 2, tagbase);
    MPI_Comm inter_mg;
    if (!spawn_checked("part D: grandchildren", cargv, 2, MPI_COMM_WORLD, &inter_mg))
        MPI_Abort(MPI_COMM_WORLD, 3); /* the parents would wait forever */
    dyn_inter_traffic(inter_mg, 1, 2, 1, tagbase + 500, 'D');
    MPI_Comm intra_cg;
    MPI_Intercomm_merge(inter_mg, 0, &intra_cg);
    dyn_check_merged(inter_mg, intra_cg, 0, "children+grandchildren merge");
    dyn_intra_traffic(intra_cg, "children+grandchildren", tagbase + 600, 'D');

    MPI_Comm inter_xg, intra_all;
    MPI_Intercomm_create(intra_pm, nparents, intra_cg, ck.size, 77, &inter_xg);
    MPI_Intercomm_merge(inter_xg, 0, &intra_all);
    dyn_check_merged(inter_xg, intra_all, 0, "three generations merge");
    dyn_intra_traffic(intra_all, "three generations", tagbase + 200, 'D');
    MPI_Comm_free(&intra_all);
    MPI_Comm_disconnect(&inter_xg);
    MPI_Comm_free(&intra_cg);
    dyn_recv_counts(inter_mg, "part D: grandchildren");
    MPI_Comm_disconnect(&inter_mg);
    MPI_Comm_free(&intra_pm);
}

static void grandchild_role(MPI_Comm parent, int tagbase)
{
    dyn_inter_traffic(parent, 2, 1, 0, tagbase + 500, 'D');
    MPI_Comm intra_cg;
    MPI_Intercomm_merge(parent, 1, &intra_cg);
    dyn_check_merged(parent, intra_cg, 1, "children+grandchildren merge");
    dyn_intra_traffic(intra_cg, "children+grandchildren", tagbase + 600, 'D');
    MPI_Comm inter_xg, intra_all;
    MPI_Intercomm_create(MPI_COMM_WORLD, 0, intra_cg, 0, 77, &inter_xg);
    MPI_Intercomm_merge(inter_xg, 1, &intra_all);
    dyn_check_merged(inter_xg, intra_all, 1, "three generations merge");
    dyn_intra_traffic(intra_all, "three generations", tagbase + 200, 'D');
    MPI_Comm_free(&intra_all);
    MPI_Comm_disconnect(&inter_xg);
    MPI_Comm_free(&intra_cg);
}

static int child_main(int argc, char **argv, MPI_Comm parent)
{
    const char *role = dyn_arg(argc, argv, "--role");
    const char *part = dyn_arg(argc, argv, "--part");
    const char *nk = dyn_arg(argc, argv, "--nkids");
    const char *tb = dyn_arg(argc, argv, "--tagbase");
    static char prog[64];
    snprintf(prog, sizeof prog, "spawn_traffic(%s)", role ? role : "?");
    ck.prog = prog;
    if (!role || !part || !nk || !tb) {
        ck_check(0, "spawned without --role, --part, --nkids and --tagbase");
        dyn_send_counts(parent);
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    int nkids = atoi(nk), tagbase = atoi(tb);
    ck_check(ck.size == nkids, "MPI_COMM_WORLD of the spawned job has %d processes, expected %d",
             ck.size, nkids);
    if (strcmp(role, "app0") == 0 || strcmp(role, "app1") == 0) {
        int *appnum = NULL, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
        int want = role[3] - '0';
        int rank_ok = want == 0 ? ck.rank == 0 : ck.rank == 1 || ck.rank == 2;
        ck_check(flag && *appnum == want && rank_ok,
                 "role %s: MPI_APPNUM %s%d (expected %d), world rank %d", role,
                 flag ? "" : "unset ", flag ? *appnum : -1, want, ck.rank);
    }
    if (strcmp(role, "mid") == 0) {
        mid_role(parent, tagbase);
    } else if (strcmp(role, "grandchild") == 0) {
        grandchild_role(parent, tagbase);
    } else {
        dyn_inter_traffic(parent, 1, 0, 0, tagbase, part[0]);
        MPI_Comm merged;
        MPI_Intercomm_merge(parent, 1, &merged);
        dyn_check_merged(parent, merged, 1, "merge");
        dyn_intra_traffic(merged, "merged", tagbase + 100, part[0]);
        release_merged(&merged);
    }
    dyn_send_counts(parent);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "spawn_traffic", MPI_THREAD_SINGLE);
    for (int i = 1; i < argc; i++)
        disconnect_merged |= strcmp(argv[i], "--disconnect-merged") == 0;
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return child_main(argc, argv, parent);
    const char *parts = dyn_arg(argc, argv, "--parts");
    if (!parts)
        parts = "ABCD";
    if (strchr(parts, 'A'))
        part_spawn('A', 1, 1000);
    if (strchr(parts, 'B'))
        part_spawn('B', 3, 2000);
    if (strchr(parts, 'C'))
        part_multiple(3000);
    if (strchr(parts, 'D'))
        part_generations(4000);
    return ck_finish();
}
