/*
 * spawn.h -- shared code of the dynamic-process programs (spawn_traffic.c,
 * spawn_abort.c): finding our own binary, traffic on an intercommunicator and on a
 * merged intracommunicator, and handing a spawned job's pass/fail counts to its parent.
 *
 * Payload identities: on an intercommunicator a process is `level * 100 + local rank`
 * (level 0: the job mpirun started, 1: its children, 2: grandchildren), so a message
 * from the wrong side or the wrong rank fails its check; on an intracommunicator it is
 * the rank in that communicator. Every part uses its own tag range.
 */
#ifndef CK_SPAWN_H
#define CK_SPAWN_H

#include "check.h"

#include <limits.h>
#include <unistd.h>

#define DYN_TAG_COUNTS 9999

/* The absolute path of this binary (argv[0] may be relative to mpirun's cwd). */
static inline const char *dyn_exe(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: readlink /proc/self/exe failed\n", ck.prog);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    path[n] = '\0';
    return path;
}

/* The value of `--key=value` in argv, or NULL. */
static inline const char *dyn_arg(int argc, char **argv, const char *key)
{
    size_t len = strlen(key);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], key, len) == 0 && argv[i][len] == '=')
            return argv[i] + len + 1;
    return NULL;
}

/* Eager and rendezvous on every transport here: inject sizes (rofi 255 B), vader's
 * 4 KiB, rofi host matching's 16320 B, tcp's 64 KiB, and 1 MiB + 1. */
static const size_t dyn_sizes[] = {0, 1, 255, 256, 4097, 16321, 65537, 1048577};
#define DYN_NSIZES ((int)(sizeof dyn_sizes / sizeof dyn_sizes[0]))

/* Sizes of the blocking MPI_Ssend round trips and of the all-pairs traffic. */
static const size_t dyn_few[] = {0, 1, 4097, 65537, 1048577};
#define DYN_NFEW ((int)(sizeof dyn_few / sizeof dyn_few[0]))

static inline int dyn_id(int level, int rank) { return level * 100 + rank; }

/*
 * Traffic on an intercommunicator between this group (level `mine`) and the remote
 * one (level `theirs`); `first` is 1 on exactly one side (the spawning one).
 *  1. every local rank to every remote rank and back at once: Isend/Irecv/Waitall of
 *     every size in dyn_sizes, payload, guard and status (source, tag, count) checked;
 *  2. blocking round trips, pair by pair in (first-side rank, other-side rank) order:
 *     MPI_Ssend then MPI_Recv on the first side, MPI_Recv then MPI_Ssend on the other;
 *  3. intercommunicator collectives: Bcast of 70000 B from the first side's rank 0,
 *     Allreduce (each side gets the other side's sum, exact), Barrier.
 */
static inline void dyn_inter_traffic(MPI_Comm inter, int mine, int theirs, int first, int tagbase,
                                     long idx)
{
    int me, ls, rs;
    MPI_Comm_rank(inter, &me);
    MPI_Comm_size(inter, &ls);
    MPI_Comm_remote_size(inter, &rs);
    const int self_id = dyn_id(mine, me);

    /* 1. all sizes, both directions at once */
    int nreq = 2 * rs * DYN_NSIZES;
    MPI_Request *req = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)nreq);
    MPI_Status *st = (MPI_Status *)malloc(sizeof(MPI_Status) * (size_t)nreq);
    unsigned char **sbuf = (unsigned char **)calloc((size_t)nreq, sizeof(unsigned char *));
    unsigned char **rbuf = sbuf + rs * DYN_NSIZES;
    for (int q = 0; q < rs; q++)
        for (int i = 0; i < DYN_NSIZES; i++) {
            int k = q * DYN_NSIZES + i;
            size_t n = dyn_sizes[i];
            rbuf[k] = ck_alloc(n);
            MPI_Irecv(rbuf[k], (int)n, MPI_BYTE, q, tagbase + i, inter, &req[k]);
        }
    for (int q = 0; q < rs; q++)
        for (int i = 0; i < DYN_NSIZES; i++) {
            int k = q * DYN_NSIZES + i;
            size_t n = dyn_sizes[i];
            sbuf[k] = ck_alloc(n);
            ck_fill(sbuf[k], n, self_id, dyn_id(theirs, q), tagbase + i, idx);
            MPI_Isend(sbuf[k], (int)n, MPI_BYTE, q, tagbase + i, inter,
                      &req[rs * DYN_NSIZES + k]);
        }
    MPI_Waitall(nreq, req, st);
    for (int q = 0; q < rs; q++)
        for (int i = 0; i < DYN_NSIZES; i++) {
            int k = q * DYN_NSIZES + i;
            size_t n = dyn_sizes[i];
            ck_status("intercomm Irecv", &st[k], q, tagbase + i, n);
            ck_verify("intercomm Irecv", rbuf[k], n, dyn_id(theirs, q), self_id, tagbase + i,
                      idx);
            free(rbuf[k]);
            free(sbuf[k]);
        }
    free(sbuf);
    free(st);
    free(req);
    ck_progress("intercomm tags %d: nonblocking exchange done", tagbase);

    /* 2. blocking synchronous round trips */
    for (int q = 0; q < rs; q++)
        for (int i = 0; i < DYN_NFEW; i++) {
            size_t n = dyn_few[i];
            int tag = tagbase + 20 + i;
            unsigned char *s = ck_alloc(n), *r = ck_alloc(n);
            MPI_Status rst;
            ck_fill(s, n, self_id, dyn_id(theirs, q), tag, idx);
            if (first) {
                MPI_Ssend(s, (int)n, MPI_BYTE, q, tag, inter);
                MPI_Recv(r, (int)n, MPI_BYTE, q, tag, inter, &rst);
            } else {
                MPI_Recv(r, (int)n, MPI_BYTE, q, tag, inter, &rst);
                MPI_Ssend(s, (int)n, MPI_BYTE, q, tag, inter);
            }
            ck_status("intercomm Ssend/Recv", &rst, q, tag, n);
            ck_verify("intercomm Ssend/Recv", r, n, dyn_id(theirs, q), self_id, tag, idx);
            free(s);
            free(r);
        }
    ck_progress("intercomm tags %d: synchronous round trips done", tagbase);

    /* 3. intercommunicator collectives */
    const size_t bn = 70000;
    unsigned char *b = ck_alloc(bn);
    int first_level = first ? mine : theirs;
    if (first) {
        ck_fill(b, bn, dyn_id(first_level, 0), -1, tagbase + 30, idx);
        MPI_Bcast(b, (int)bn, MPI_BYTE, me == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    } else {
        MPI_Bcast(b, (int)bn, MPI_BYTE, 0, inter);
        ck_verify("intercomm Bcast", b, bn, dyn_id(first_level, 0), -1, tagbase + 30, idx);
    }
    free(b);

    enum { NV = 1000 };
    int *v = (int *)malloc(sizeof(int) * NV), *sum = (int *)malloc(sizeof(int) * NV);
    for (int j = 0; j < NV; j++)
        v[j] = (self_id + 1) * (j % 5 + 1);
    MPI_Allreduce(v, sum, NV, MPI_INT, MPI_SUM, inter);
    int remote_ids = 0;
    for (int q = 0; q < rs; q++)
        remote_ids += dyn_id(theirs, q) + 1;
    int bad = -1;
    for (int j = 0; j < NV && bad < 0; j++)
        if (sum[j] != remote_ids * (j % 5 + 1))
            bad = j;
    ck_check(bad < 0, "intercomm Allreduce(SUM) of the remote group: element %d is %d, expected %d",
             bad, bad < 0 ? 0 : sum[bad], bad < 0 ? 0 : remote_ids * (bad % 5 + 1));
    free(v);
    free(sum);
    MPI_Barrier(inter);
    (void)ls;
    ck_progress("intercomm tags %d: collectives done", tagbase);
}

/*
 * Traffic on an intracommunicator joining several jobs (ids are ranks in `comm`):
 * every rank to every other at dyn_few sizes (Isend/Irecv/Waitall), Allreduce SUM and
 * MAX with exact results, a 1 MiB + 1 Bcast from the highest rank (a spawned process)
 * and a small one from rank 0, Barrier.
 */
static inline void dyn_intra_traffic(MPI_Comm comm, const char *what, int tagbase, long idx)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int nreq = 2 * n * DYN_NFEW;
    MPI_Request *req = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)nreq);
    MPI_Status *st = (MPI_Status *)malloc(sizeof(MPI_Status) * (size_t)nreq);
    unsigned char **sbuf = (unsigned char **)calloc((size_t)nreq, sizeof(unsigned char *));
    unsigned char **rbuf = sbuf + n * DYN_NFEW;
    for (int k = 0; k < nreq; k++)
        req[k] = MPI_REQUEST_NULL;
    for (int p = 0; p < n; p++)
        for (int i = 0; i < DYN_NFEW && p != me; i++) {
            int k = p * DYN_NFEW + i;
            rbuf[k] = ck_alloc(dyn_few[i]);
            MPI_Irecv(rbuf[k], (int)dyn_few[i], MPI_BYTE, p, tagbase + i, comm, &req[k]);
        }
    for (int p = 0; p < n; p++)
        for (int i = 0; i < DYN_NFEW && p != me; i++) {
            int k = p * DYN_NFEW + i;
            sbuf[k] = ck_alloc(dyn_few[i]);
            ck_fill(sbuf[k], dyn_few[i], me, p, tagbase + i, idx);
            MPI_Isend(sbuf[k], (int)dyn_few[i], MPI_BYTE, p, tagbase + i, comm,
                      &req[n * DYN_NFEW + k]);
        }
    MPI_Waitall(nreq, req, st);
    char label[128];
    snprintf(label, sizeof label, "%s all-pairs", what);
    for (int p = 0; p < n; p++)
        for (int i = 0; i < DYN_NFEW && p != me; i++) {
            int k = p * DYN_NFEW + i;
            ck_status(label, &st[k], p, tagbase + i, dyn_few[i]);
            ck_verify(label, rbuf[k], dyn_few[i], p, me, tagbase + i, idx);
            free(rbuf[k]);
            free(sbuf[k]);
        }
    free(sbuf);
    free(st);
    free(req);
    ck_progress("%s: all-pairs done", what);

    enum { NV = 10000 };
    int *v = (int *)malloc(sizeof(int) * NV), *r = (int *)malloc(sizeof(int) * NV);
    for (int j = 0; j < NV; j++)
        v[j] = (me + 1) * (j % 7 + 1);
    MPI_Allreduce(v, r, NV, MPI_INT, MPI_SUM, comm);
    int bad = -1;
    for (int j = 0; j < NV && bad < 0; j++)
        if (r[j] != (j % 7 + 1) * n * (n + 1) / 2)
            bad = j;
    ck_check(bad < 0, "%s Allreduce(SUM): element %d is %d, expected %d", what, bad,
             bad < 0 ? 0 : r[bad], bad < 0 ? 0 : (bad % 7 + 1) * n * (n + 1) / 2);
    MPI_Allreduce(v, r, NV, MPI_INT, MPI_MAX, comm);
    bad = -1;
    for (int j = 0; j < NV && bad < 0; j++)
        if (r[j] != (j % 7 + 1) * n)
            bad = j;
    ck_check(bad < 0, "%s Allreduce(MAX): element %d is %d, expected %d", what, bad,
             bad < 0 ? 0 : r[bad], bad < 0 ? 0 : (bad % 7 + 1) * n);
    free(v);
    free(r);

    const size_t bn = 1048577;
    unsigned char *b = ck_alloc(bn);
    if (me == n - 1)
        ck_fill(b, bn, me, -1, tagbase + 40, idx);
    MPI_Bcast(b, (int)bn, MPI_BYTE, n - 1, comm);
    snprintf(label, sizeof label, "%s Bcast from rank %d", what, n - 1);
    ck_verify(label, b, bn, n - 1, -1, tagbase + 40, idx);
    free(b);
    int small[4] = {0, 0, 0, 0};
    if (me == 0)
        for (int j = 0; j < 4; j++)
            small[j] = 1000 * n + j;
    MPI_Bcast(small, 4, MPI_INT, 0, comm);
    ck_check(small[0] == 1000 * n && small[3] == 1000 * n + 3,
             "%s Bcast from rank 0: got {%d, .., %d}, expected {%d, .., %d}", what, small[0],
             small[3], 1000 * n, 1000 * n + 3);
    MPI_Barrier(comm);
    ck_progress("%s: collectives done", what);
}

/* Checks the merged communicator's size and that this side's ranks come first
 * (high == 0) or after the other side's (high == 1). */
static inline void dyn_check_merged(MPI_Comm inter, MPI_Comm merged, int high, const char *what)
{
    int lr, ls, rs, mr, ms;
    MPI_Comm_rank(inter, &lr);
    MPI_Comm_size(inter, &ls);
    MPI_Comm_remote_size(inter, &rs);
    MPI_Comm_rank(merged, &mr);
    MPI_Comm_size(merged, &ms);
    int expect = high ? rs + lr : lr;
    ck_check(ms == ls + rs && mr == expect,
             "%s: merged size %d rank %d, expected size %d rank %d", what, ms, mr, ls + rs,
             expect);
}

/* Child side, at the end: sums this job's counters (which already include what its
 * own children reported) over its MPI_COMM_WORLD and sends them to the parent's rank 0
 * over the intercommunicator. */
static inline void dyn_send_counts(MPI_Comm parent)
{
    long local[2] = {__atomic_load_n(&ck.passed, __ATOMIC_RELAXED),
                     __atomic_load_n(&ck.failed, __ATOMIC_RELAXED)};
    long total[2] = {0, 0};
    MPI_Reduce(local, total, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (ck.rank == 0)
        MPI_Send(total, 2, MPI_LONG, 0, DYN_TAG_COUNTS, parent);
}

/* Parent side: rank 0 receives the children's counts and adds them to its own. */
static inline void dyn_recv_counts(MPI_Comm children, const char *what)
{
    int me;
    MPI_Comm_rank(children, &me);
    if (me != 0)
        return;
    long counts[2] = {0, 0};
    MPI_Status st;
    MPI_Recv(counts, 2, MPI_LONG, 0, DYN_TAG_COUNTS, children, &st);
    int n = -1;
    MPI_Get_count(&st, MPI_LONG, &n);
    if (ck_check(n == 2 && st.MPI_SOURCE == 0, "%s: counts message from %d with %d longs", what,
                 st.MPI_SOURCE, n)) {
        __atomic_fetch_add(&ck.passed, counts[0], __ATOMIC_RELAXED);
        __atomic_fetch_add(&ck.failed, counts[1], __ATOMIC_RELAXED);
        ck_progress("%s: children report %ld passed, %ld failed", what, counts[0], counts[1]);
    }
}

/* MPI_Comm_spawn's error codes: all MPI_SUCCESS. */
static inline void dyn_check_errcodes(const char *what, int rc, const int *errs, int n)
{
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (errs[i] != MPI_SUCCESS)
            bad = i;
    ck_check(rc == MPI_SUCCESS && bad < 0, "%s: spawn returned %d, error code %d of process %d",
             what, rc, bad < 0 ? 0 : errs[bad], bad);
}

#endif /* CK_SPAWN_H */
