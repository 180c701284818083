/*
 * neg_stride.c -- messages to self whose receive (or send) type walks memory backwards
 * (vectors with a negative stride, nested in other constructors), for several base
 * types; every element and every byte the type does not name is checked.
 *
 * Why: Open MPI 5.0.7 places such a message wrongly when a negative-stride vector of
 * MPI_C_DOUBLE_COMPLEX is nested in an indexed type and the message is long enough to
 * arrive in several fragments (MPICH's pt2pt/sendself finds 27 errors on every
 * transport; 4.1.4 passes). Part A is the plain vectors, which pass everywhere; part B the
 * nested receive type that fails on 5.0.7 (tests/ompi5.rs asserts it there, so a
 * release that fixes it is noticed).
 *
 * Output: one FAIL line per wrong case, then "N passed, M failed" (check.h's contract).
 * Flags: --parts=AB (default both).
 */
#include "check.h"

/* A datatype with a count and the byte displacement of each of its base elements, in
 * type order, from the origin of its buffer. */
struct layout {
    MPI_Datatype type;
    int count;
    int n;           /* base elements */
    MPI_Aint *pos;   /* n displacements */
    const char *what;
    int owned;       /* the type is ours to free */
};

/* Value of element k of message `salt`: distinct bytes per element and case. */
static void element(unsigned char *dst, int esize, int k, int salt)
{
    for (int b = 0; b < esize; b++)
        dst[b] = (unsigned char) (0x11 + 7 * k + 3 * b + 13 * salt + (k >> 8));
}

/* Lowest and highest byte a layout touches. */
static void bounds(const struct layout *l, int esize, MPI_Aint *lo, MPI_Aint *hi)
{
    *lo = 0;
    *hi = 0;
    for (int k = 0; k < l->n; k++) {
        if (l->pos[k] < *lo)
            *lo = l->pos[k];
        if (l->pos[k] + esize > *hi)
            *hi = l->pos[k] + esize;
    }
}

/* Sends `send` to this rank and receives it with `recv`; checks every byte of the
 * receive buffer (elements in type order, fill bytes elsewhere) and the count. */
static void exchange(MPI_Datatype base, const char *base_name, const struct layout *send,
                     const struct layout *recv, int salt)
{
    int esize;
    MPI_Type_size(base, &esize);
    MPI_Aint slo, shi, rlo, rhi;
    bounds(send, esize, &slo, &shi);
    bounds(recv, esize, &rlo, &rhi);
    size_t sspan = (size_t) (shi - slo) + 2 * CK_GUARD, rspan = (size_t) (rhi - rlo) + 2 * CK_GUARD;
    unsigned char *sbuf = malloc(sspan), *rbuf = malloc(rspan), *expect = malloc(rspan);
    unsigned char *sorigin = sbuf + CK_GUARD - slo, *rorigin = rbuf + CK_GUARD - rlo;
    memset(sbuf, 0x5A, sspan);
    memset(rbuf, CK_GUARD_BYTE, rspan);
    memset(expect, CK_GUARD_BYTE, rspan);
    for (int k = 0; k < send->n; k++)
        element(sorigin + send->pos[k], esize, k, salt);
    for (int k = 0; k < recv->n && k < send->n; k++)
        element(expect + (rorigin - rbuf) + recv->pos[k], esize, k, salt);

    MPI_Request req;
    MPI_Status status;
    MPI_Irecv(rorigin, recv->count, recv->type, ck.rank, salt, MPI_COMM_WORLD, &req);
    MPI_Send(sorigin, send->count, send->type, ck.rank, salt, MPI_COMM_WORLD);
    MPI_Wait(&req, &status);

    long bad = 0;
    MPI_Aint first = -1;
    for (size_t b = 0; b < rspan; b++)
        if (rbuf[b] != expect[b]) {
            if (first < 0)
                first = (MPI_Aint) b - (rorigin - rbuf);
            bad++;
        }
    int got = -1;
    MPI_Get_count(&status, base, &got);
    ck_check(bad == 0 && got == send->n,
             "%s: sent as %s, received as %s: %ld bad bytes (first at displacement %ld), "
             "count %d of %d",
             base_name, send->what, recv->what, bad, (long) first, got, send->n);
    free(sbuf);
    free(rbuf);
    free(expect);
}

static struct layout contiguous(MPI_Datatype base, int esize, int n)
{
    struct layout l = {base, n, n, malloc(sizeof(MPI_Aint) * (size_t) n), "contiguous", 0};
    for (int k = 0; k < n; k++)
        l.pos[k] = (MPI_Aint) k * esize;
    return l;
}

/* `instances` of vector(count, blocklen, stride) of base. */
static struct layout vector(MPI_Datatype base, int esize, int count, int blocklen, int stride,
                            int instances)
{
    static char what[128];
    struct layout l = {MPI_DATATYPE_NULL, instances, count * blocklen * instances, NULL, what, 1};
    MPI_Type_vector(count, blocklen, stride, base, &l.type);
    MPI_Type_commit(&l.type);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(l.type, &lb, &extent);
    l.pos = malloc(sizeof(MPI_Aint) * (size_t) l.n);
    int k = 0;
    for (int r = 0; r < instances; r++)
        for (int i = 0; i < count; i++)
            for (int j = 0; j < blocklen; j++)
                l.pos[k++] = r * extent + ((MPI_Aint) i * stride + j) * esize;
    snprintf(what, sizeof what, "%d x vector(%d, %d, %d)", instances, count, blocklen, stride);
    return l;
}

/* MPICH's failing receive type: indexed(1 block of `copies`, displacement 0) of
 * vector(n, 1, -2) of base, received once. */
static struct layout indexed_of_backward_vector(MPI_Datatype base, int esize, int n, int copies)
{
    struct layout l = {MPI_DATATYPE_NULL, 1, n * copies, malloc(sizeof(MPI_Aint) * (size_t) n * copies),
                       "indexed(1 block of 2) of vector(n, 1, -2)", 1};
    MPI_Datatype vec;
    MPI_Type_vector(n, 1, -2, base, &vec);
    int blocklens[1] = {copies}, displs[1] = {0};
    MPI_Type_indexed(1, blocklens, displs, vec, &l.type);
    MPI_Type_commit(&l.type);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(vec, &lb, &extent);
    MPI_Type_free(&vec);
    for (int r = 0, k = 0; r < copies; r++)
        for (int i = 0; i < n; i++)
            l.pos[k++] = r * extent - (MPI_Aint) 2 * i * esize;
    return l;
}

/* MPICH's send type: `count` x hvector(2, 1, stride_bytes) of contiguous(1, base). */
static struct layout hvector_pairs(MPI_Datatype base, int count, MPI_Aint stride_bytes)
{
    struct layout l = {MPI_DATATYPE_NULL, count, 2 * count, malloc(sizeof(MPI_Aint) * 2 * (size_t) count),
                       "hvector(2, 1, 1.5 elements) of contiguous(1)", 1};
    MPI_Datatype one;
    MPI_Type_contiguous(1, base, &one);
    MPI_Type_create_hvector(2, 1, stride_bytes, one, &l.type);
    MPI_Type_commit(&l.type);
    MPI_Type_free(&one);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(l.type, &lb, &extent);
    for (int q = 0, k = 0; q < count; q++)
        for (int j = 0; j < 2; j++)
            l.pos[k++] = q * extent + j * stride_bytes;
    return l;
}

static void release(struct layout *l)
{
    if (l->owned)
        MPI_Type_free(&l->type);
    free(l->pos);
}

struct base {
    MPI_Datatype type;
    const char *name;
};

int main(int argc, char **argv)
{
    const char *parts = "AB";
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--parts=", 8) == 0)
            parts = argv[i] + 8;
    ck_init(&argc, &argv, "neg_stride", MPI_THREAD_SINGLE);
    const struct base bases[] = {
        {MPI_DOUBLE, "MPI_DOUBLE"},
        {MPI_INT, "MPI_INT"},
        {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"},
        {MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX"},
    };
    static const int shapes[][4] = {
        /* count, blocklen, stride, instances */
        {4, 1, -2, 1},    {3, 2, -3, 1},  {3, 2, -3, 2},    {2, 3, -4, 3}, {5, 1, -1, 1},
        {1024, 1, -2, 1}, {300, 3, -5, 2}, {4096, 2, -3, 1}, {17, 16, -32, 64},
    };
    int salt = 0;
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        int esize;
        MPI_Type_size(bases[b].type, &esize);
        if (strchr(parts, 'A')) {
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                struct layout vec = vector(bases[b].type, esize, shapes[s][0], shapes[s][1],
                                           shapes[s][2], shapes[s][3]);
                struct layout flat = contiguous(bases[b].type, esize, vec.n);
                exchange(bases[b].type, bases[b].name, &flat, &vec, ++salt);
                exchange(bases[b].type, bases[b].name, &vec, &flat, ++salt);
                release(&vec);
                release(&flat);
            }
        }
        if (strchr(parts, 'B')) {
            /* 8192 elements as MPICH sends them: one in a short message, one long enough
             * to travel in several fragments. */
            for (int n = 4; n <= 4096; n *= 1024) {
                struct layout recv = indexed_of_backward_vector(bases[b].type, esize, n, 2);
                struct layout send = hvector_pairs(bases[b].type, n, (MPI_Aint) esize * 3 / 2);
                exchange(bases[b].type, bases[b].name, &send, &recv, ++salt);
                release(&recv);
                release(&send);
            }
        }
    }
    return ck_finish();
}
