/*
 * datatypes.c -- non-contiguous derived datatypes.
 *
 * Types (byte layout of one instance written out by hand below and checked
 * against MPI_Type_size / MPI_Type_get_extent):
 *   vector     MPI_Type_vector(5, 3, 7, MPI_INT)
 *   hvector    MPI_Type_create_hvector(4, 1, 24 B, MPI_DOUBLE)
 *   indexed    MPI_Type_indexed, blocks {2,1,3,2} at {10,0,5,15} ints
 *              (non-monotonic: the packed order is the typemap order)
 *   struct     {char; double; int[3]} at {0, 8, 16}, resized to 32 B (gaps 1..7, 28..31)
 *   resized    vector(2, 2, 3, MPI_INT) resized to extent 32 B
 * For each type and total payload of about 100 B, 4 KB, 64 KiB, 1 MiB, 4 MiB
 * (--quick: up to 512 KiB), between ring neighbours (1 rank: itself):
 *   typed -> contiguous : the contiguous receive must hold the packed stream
 *   contiguous -> typed : payload bytes land at the type's positions, every
 *                         gap byte of the receive buffer is untouched
 *   typed -> typed      : same, both sides non-contiguous
 * The packed stream is the usual pattern (src, dst, tag, idx); gap bytes hold
 * a different pattern on each side, so a gap written or read shows up.
 */
#include "check.h"

#define MAXB 8

struct tdesc {
    const char *name;
    MPI_Datatype type;   /* the non-contiguous type */
    MPI_Datatype contig; /* type of the contiguous side (same type signature) */
    int contig_per_inst; /* contig elements per instance */
    size_t size;         /* payload bytes per instance */
    size_t extent;       /* bytes between instances */
    int nb;              /* blocks in typemap order */
    size_t boff[MAXB], blen[MAXB];
};

static struct tdesc T[5];
static int NT;

static void make_types(void)
{
    struct tdesc *t;
    MPI_Datatype tmp;

    t = &T[NT++];
    t->name = "vector(5,3,7,INT)";
    MPI_Type_vector(5, 3, 7, MPI_INT, &t->type);
    t->contig = MPI_INT;
    t->contig_per_inst = 15;
    t->size = 60;
    t->extent = (size_t)((4 * 7 + 3) * 4);
    t->nb = 5;
    for (int b = 0; b < 5; b++) {
        t->boff[b] = (size_t)(b * 28);
        t->blen[b] = 12;
    }

    t = &T[NT++];
    t->name = "hvector(4,1,24B,DOUBLE)";
    MPI_Type_create_hvector(4, 1, 24, MPI_DOUBLE, &t->type);
    t->contig = MPI_DOUBLE;
    t->contig_per_inst = 4;
    t->size = 32;
    t->extent = 3 * 24 + 8;
    t->nb = 4;
    for (int b = 0; b < 4; b++) {
        t->boff[b] = (size_t)(b * 24);
        t->blen[b] = 8;
    }

    t = &T[NT++];
    t->name = "indexed({2,1,3,2}@{10,0,5,15},INT)";
    {
        int bl[4] = {2, 1, 3, 2}, dp[4] = {10, 0, 5, 15};
        MPI_Type_indexed(4, bl, dp, MPI_INT, &t->type);
        t->contig = MPI_INT;
        t->contig_per_inst = 8;
        t->size = 32;
        t->extent = 17 * 4;
        t->nb = 4;
        for (int b = 0; b < 4; b++) {
            t->boff[b] = (size_t)dp[b] * 4;
            t->blen[b] = (size_t)bl[b] * 4;
        }
    }

    t = &T[NT++];
    t->name = "struct{char;double;int[3]} resized to 32";
    {
        int bl[3] = {1, 1, 3};
        MPI_Aint dp[3] = {0, 8, 16};
        MPI_Datatype ty[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
        MPI_Type_create_struct(3, bl, dp, ty, &tmp);
        MPI_Type_create_resized(tmp, 0, 32, &t->type);
        MPI_Type_free(&tmp);
        /* contiguous side: the same signature packed without gaps */
        MPI_Aint pdp[3] = {0, 1, 9};
        MPI_Type_create_struct(3, bl, pdp, ty, &tmp);
        MPI_Type_create_resized(tmp, 0, 21, &t->contig);
        MPI_Type_free(&tmp);
        MPI_Type_commit(&t->contig);
        t->contig_per_inst = 1;
        t->size = 21;
        t->extent = 32;
        t->nb = 3;
        t->boff[0] = 0;
        t->blen[0] = 1;
        t->boff[1] = 8;
        t->blen[1] = 8;
        t->boff[2] = 16;
        t->blen[2] = 12;
    }

    t = &T[NT++];
    t->name = "vector(2,2,3,INT) resized to 32";
    MPI_Type_vector(2, 2, 3, MPI_INT, &tmp);
    MPI_Type_create_resized(tmp, 0, 32, &t->type);
    MPI_Type_free(&tmp);
    t->contig = MPI_INT;
    t->contig_per_inst = 4;
    t->size = 16;
    t->extent = 32;
    t->nb = 2;
    t->boff[0] = 0;
    t->blen[0] = 8;
    t->boff[1] = 12;
    t->blen[1] = 8;

    for (int i = 0; i < NT; i++) {
        int sz;
        MPI_Aint lb, ext;
        MPI_Type_commit(&T[i].type);
        MPI_Type_size(T[i].type, &sz);
        MPI_Type_get_extent(T[i].type, &lb, &ext);
        ck_check(sz >= 0 && (size_t)sz == T[i].size && lb == 0 && (size_t)ext == T[i].extent,
                 "%s: MPI size %d lb %ld extent %ld, expected size %zu lb 0 extent %zu", T[i].name,
                 sz, (long)lb, (long)ext, T[i].size, T[i].extent);
    }
}

/* typed-buffer image: gap pattern everywhere, the stream at the type's positions */
static void build_image(unsigned char *buf, const struct tdesc *t, size_t count, uint32_t stream,
                        uint32_t gap)
{
    uint64_t off = 0;
    ck_fill_seed(buf, count * t->extent, gap);
    for (size_t k = 0; k < count; k++)
        for (int b = 0; b < t->nb; b++) {
            ck_fill_seed_at(buf + k * t->extent + t->boff[b], t->blen[b], stream, off);
            off += t->blen[b];
        }
}

static void run(const struct tdesc *t, int ti, int si, size_t target, int mode)
{
    static const char *mname[] = {"typed->contiguous", "contiguous->typed", "typed->typed"};
    int me = ck.rank, dst = ck_right(), src = ck_left();
    size_t count = (target + t->size - 1) / t->size;
    size_t payload = count * t->size, tbytes = count * t->extent;
    int tag = 1000 + ti * 100 + si * 10 + mode;
    long idx = (long)count;
    int send_typed = mode != 1, recv_typed = mode != 0;
    size_t sbytes = send_typed ? tbytes : payload, rbytes = recv_typed ? tbytes : payload;
    unsigned char *sb = ck_alloc(sbytes), *rb = ck_alloc(rbytes);
    char what[200];
    snprintf(what, sizeof what, "%s %s count %zu (%zu payload bytes)", t->name, mname[mode], count,
             payload);
    ck_progress("%s", what);

    /* sender side: stream me -> dst */
    if (send_typed)
        build_image(sb, t, count, ck_seed(me, dst, tag, idx), ck_seed(me, dst, tag, ~idx));
    else
        ck_fill(sb, payload, me, dst, tag, idx);
    /* receiver side: gap pattern of its own */
    uint32_t rgap = ck_seed(-1, me, tag, idx);
    if (recv_typed)
        ck_fill_seed(rb, rbytes, rgap);

    MPI_Request rq[2];
    MPI_Status st[2];
    if (recv_typed)
        MPI_Irecv(rb, (int)count, t->type, src, tag, MPI_COMM_WORLD, &rq[0]);
    else
        MPI_Irecv(rb, (int)count * t->contig_per_inst, t->contig, src, tag, MPI_COMM_WORLD, &rq[0]);
    if (send_typed)
        MPI_Isend(sb, (int)count, t->type, dst, tag, MPI_COMM_WORLD, &rq[1]);
    else
        MPI_Isend(sb, (int)count * t->contig_per_inst, t->contig, dst, tag, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, st);

    int n = -1;
    MPI_Get_count(&st[0], recv_typed ? t->type : t->contig, &n);
    long expn = recv_typed ? (long)count : (long)count * t->contig_per_inst;
    ck_check(st[0].MPI_SOURCE == src && st[0].MPI_TAG == tag && n == expn,
             "%s: status source %d tag %d count %d, expected %d %d %ld", what, st[0].MPI_SOURCE,
             st[0].MPI_TAG, n, src, tag, expn);

    if (!recv_typed) {
        ck_verify(what, rb, payload, src, me, tag, idx);
    } else {
        unsigned char *exp = malloc(tbytes + CK_GUARD);
        build_image(exp, t, count, ck_seed(src, me, tag, idx), rgap);
        memset(exp + tbytes, CK_GUARD_BYTE, CK_GUARD);
        ck_verify_image(what, rb, exp, tbytes + CK_GUARD, src, me, tag, idx);
        free(exp);
    }
    free(sb);
    free(rb);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "datatypes", MPI_THREAD_SINGLE);
    make_types();
    static const size_t targets[] = {100, 4000, 65536, 1u << 20, 4u << 20};
    int ntarget = 5;
    if (ck.quick)
        ntarget = 4;
    for (int ti = 0; ti < NT; ti++)
        for (int si = 0; si < ntarget; si++) {
            size_t target = targets[si];
            if (ck.quick && si == 3)
                target = 512u << 10;
            for (int mode = 0; mode < 3; mode++)
                run(&T[ti], ti, si, target, mode);
        }
    for (int ti = 0; ti < NT; ti++) {
        MPI_Type_free(&T[ti].type);
        if (T[ti].contig != MPI_INT && T[ti].contig != MPI_DOUBLE)
            MPI_Type_free(&T[ti].contig);
    }
    return ck_finish();
}
