/*
 * sendrecv_sweep.c -- thousands of small MPI_Sendrecv calls, the pattern of
 * mpi4py's test_msgspec array tests (testArray5/6).
 *
 * For each of ten basic types (signed and unsigned char, short, int, long;
 * float, double) and arrays of n = 1..9 elements, every slice [p, q) with
 * 0 <= p < n, p <= q <= n is sent from offset p and received at offset p of
 * a receive array, whose other elements must stay untouched:
 *
 *  A. to self on MPI_COMM_SELF (what mpi4py's tests do);
 *  B. around the ring on MPI_COMM_WORLD (to the right, from the left; with
 *     1 rank the neighbour is the rank itself).
 *
 * 2100 exchanges per part. Every received array is compared whole with its
 * expected image (payload slice, untouched rest, guard), and every status
 * with the source, tag and byte count. A transport that makes each tiny
 * message wait (a provider progress thread that must get a core first) takes
 * minutes instead of well under a second.
 */
#include "check.h"

#define MAXN 9

static const struct {
    MPI_Datatype type;
    const char *name;
} TYPES[] = {
    {MPI_SIGNED_CHAR, "signed char"}, {MPI_SHORT, "short"},
    {MPI_INT, "int"},                 {MPI_LONG, "long"},
    {MPI_UNSIGNED_CHAR, "unsigned char"}, {MPI_UNSIGNED_SHORT, "unsigned short"},
    {MPI_UNSIGNED, "unsigned"},       {MPI_UNSIGNED_LONG, "unsigned long"},
    {MPI_FLOAT, "float"},             {MPI_DOUBLE, "double"},
};
#define NTYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

/* dst and src are ranks in comm and in MPI_COMM_WORLD alike (comm is either
 * MPI_COMM_SELF with both 0, or MPI_COMM_WORLD); the payload pattern names
 * world ranks, so pattern_dst and pattern_src are given separately. */
static void sweep(const char *part, MPI_Comm comm, int dst, int src, int pattern_dst,
                  int pattern_src, int tag)
{
    unsigned char s[MAXN * 8], r[MAXN * 8 + CK_GUARD], exp[MAXN * 8 + CK_GUARD];
    char what[160];
    long idx = 0;
    for (int t = 0; t < NTYPES; t++) {
        int size = 0;
        MPI_Type_size(TYPES[t].type, &size);
        for (int n = 1; n <= MAXN; n++) {
            for (int p = 0; p < n; p++) {
                for (int q = p; q <= n; q++, idx++) {
                    size_t off = (size_t)p * (size_t)size, len = (size_t)(q - p) * (size_t)size;
                    uint32_t seed = ck_seed(pattern_src, ck.rank, tag, idx);
                    ck_fill(s, (size_t)n * (size_t)size, ck.rank, pattern_dst, tag, idx);
                    memset(r, CK_GUARD_BYTE, sizeof r);
                    memset(exp, CK_GUARD_BYTE, sizeof exp);
                    ck_fill_seed_at(exp + off, len, seed, off);
                    MPI_Status st;
                    MPI_Sendrecv(s + off, q - p, TYPES[t].type, dst, tag, r + off, q - p,
                                 TYPES[t].type, src, tag, comm, &st);
                    snprintf(what, sizeof what, "%s: %s[%d] elements [%d, %d)", part,
                             TYPES[t].name, n, p, q);
                    ck_verify_image(what, r, exp, (size_t)n * (size_t)size + CK_GUARD,
                                    pattern_src, ck.rank, tag, idx);
                    ck_status(what, &st, src, tag, len);
                }
            }
        }
    }
    ck_progress("%s: %ld exchanges", part, idx);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "sendrecv_sweep", MPI_THREAD_SINGLE);
    sweep("A (self, MPI_COMM_SELF)", MPI_COMM_SELF, 0, 0, ck.rank, ck.rank, 0);
    sweep("B (ring, MPI_COMM_WORLD)", MPI_COMM_WORLD, ck_right(), ck_left(), ck_right(),
          ck_left(), 1);
    return ck_finish();
}
