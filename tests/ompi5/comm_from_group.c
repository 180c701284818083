/*
 * comm_from_group.c -- communicators made by MPI_Comm_create_from_group
 * (MPI Sessions, MPI-4) on Open MPI 5.0, where ob1 gives them extended CIDs: the first message
 * to each peer on such a communicator carries an extra CID header, and a peer that
 * meets a new CID answers with a CID-only message (a 32-byte header, no match
 * header after it).  Each communicator's first messages have a different size (0,
 * 16, 32 ... bytes, eager and rendezvous), every rank sends to every other rank,
 * and every byte is verified (check.h).  Then MPI_Comm_compare / MPI_Comm_free and
 * MPI_Comm_create_group on the world group, with traffic on that too.
 *
 * rsmcuda on 5.0 hung here: ob1 writes a match header's hdr_ctx just past a
 * CID-only payload, which was the next fast box record's header.
 *
 * Open MPI 5.0 only (MPI_Comm_create_from_group is MPI-4): tests/ompi5_sessions.rs.
 */
#include "check.h"

#define NCOMMS 6
#define ROUNDS 3

static const size_t first_size[NCOMMS] = {0, 16, 32, 56, 4000, 300000};
static const size_t later_size[] = {1, 8, 24, 33, 200, 1024, 8192, 70000};
#define NLATER (sizeof(later_size) / sizeof(later_size[0]))

/* Every rank sends n bytes to every other rank on comm (tag, idx) and checks what
 * it receives, guard included. */
static void exchange(MPI_Comm comm, const char *what, size_t n, int tag, long idx)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    unsigned char **sbuf = calloc((size_t)size, sizeof(*sbuf));
    unsigned char **rbuf = calloc((size_t)size, sizeof(*rbuf));
    MPI_Request *req = calloc(2 * (size_t)size, sizeof(*req));
    MPI_Status *st = calloc(2 * (size_t)size, sizeof(*st));
    int nreq = 0;
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        rbuf[p] = ck_alloc(n);
        MPI_Irecv(rbuf[p], (int)n, MPI_BYTE, p, tag, comm, &req[nreq++]);
    }
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        sbuf[p] = ck_alloc(n);
        ck_fill(sbuf[p], n, rank, p, tag, idx);
        MPI_Isend(sbuf[p], (int)n, MPI_BYTE, p, tag, comm, &req[nreq++]);
    }
    int rc = MPI_Waitall(nreq, req, st);
    ck_check(rc == MPI_SUCCESS, "%s: MPI_Waitall returned %d", what, rc);
    int k = 0;
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        ck_status(what, &st[k++], p, tag, n);
        ck_verify(what, rbuf[p], n, p, rank, tag, idx);
    }
    for (int p = 0; p < size; p++) {
        free(sbuf[p]);
        free(rbuf[p]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(st);
}

static void traffic(MPI_Comm comm, const char *name, size_t first, int base_tag)
{
    char what[128];
    snprintf(what, sizeof what, "%s first %zu bytes", name, first);
    exchange(comm, what, first, base_tag, 0);
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t i = 0; i < NLATER; i++) {
            snprintf(what, sizeof what, "%s round %d %zu bytes", name, r, later_size[i]);
            exchange(comm, what, later_size[i], base_tag + 1 + (int)i, r + 1);
        }
    }
    /* A collective on it too: every rank's rank, summed. */
    int size, one = 1, sum = 0;
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    ck_check(sum == size, "%s: allreduce gave %d, expected %d", name, sum, size);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "comm_from_group", MPI_THREAD_SINGLE);
    MPI_Group world_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);

    for (int c = 0; c < NCOMMS; c++) {
        char tag[64], name[64];
        snprintf(tag, sizeof tag, "rmca.comm_from_group.%d", c);
        snprintf(name, sizeof name, "from_group %d", c);
        MPI_Comm comm = MPI_COMM_NULL;
        int rc = MPI_Comm_create_from_group(world_group, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                            &comm);
        if (!ck_check(rc == MPI_SUCCESS && comm != MPI_COMM_NULL,
                      "%s: MPI_Comm_create_from_group returned %d", name, rc))
            continue;
        int result = -1;
        MPI_Comm_compare(comm, MPI_COMM_WORLD, &result);
        ck_check(result == MPI_CONGRUENT, "%s: MPI_Comm_compare gave %d, expected congruent", name,
                 result);
        traffic(comm, name, first_size[c], 100 * (c + 1));
        MPI_Comm_free(&comm);
    }

    /* MPI_Comm_create_group after them (the rest of the original reproducer). */
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_create_group(MPI_COMM_WORLD, world_group, 7, &comm);
    if (ck_check(rc == MPI_SUCCESS && comm != MPI_COMM_NULL,
                 "MPI_Comm_create_group returned %d", rc)) {
        traffic(comm, "create_group", 32, 1000);
        MPI_Comm_free(&comm);
    }

    MPI_Group_free(&world_group);
    return ck_finish();
}
