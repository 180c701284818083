/*
 * rma_accumulate.c -- one-sided atomics in fence epochs (MPI_Win_create +
 * MPI_Win_fence), the path Open MPI 5.0's osc/rdma takes through a BTL's
 * active messages when the BTL has no native atomics (it replies through the
 * receive descriptor's endpoint).  Two windows per rank: NI ints and ND
 * doubles (values exact in binary, so sums compare exactly).  Checked:
 *  A. every rank MPI_Accumulate(MPI_SUM)s a pattern into every rank's windows
 *     (ints and doubles), ROUNDS times; after each closing fence every element
 *     of the local windows equals the initial value plus all contributions.
 *  B. MPI_Get of the right neighbour's whole windows: every element.
 *  C. MPI_Fetch_and_op(MPI_SUM) by every rank on one int and one double of
 *     rank 0: the fetched values form one chain (sorted, each is the previous
 *     plus the previous rank's increment, the first is the initial value) and
 *     rank 0's final value ends it.  MPI_NO_OP fetches of the right
 *     neighbour's slot return what it holds.
 *  D. MPI_Compare_and_swap: every rank on one int of rank 0 (exactly one wins,
 *     the others fetch the winner), every rank on the right neighbour's own
 *     slot (all win), and a compare that cannot match (nothing changes).
 * --quick: fewer rounds.
 */
#include "check.h"

#define NI 96
#define ND 40

static int *wi;
static double *wd;
static MPI_Win win_i, win_d;

static int int_init(int t, int k) { return t * 100000 + k * 3; }
static int int_add(int r, int t, int k, int round) { return (r + 1) * (k + 1) + 7 * t + round; }
static double dbl_init(int t, int k) { return t * 1000.0 + k * 0.5; }
static double dbl_add(int r, int t, int k, int round)
{
    return (r + 1) * 0.25 + k * 0.125 + t + round * 2.0;
}

/* What element k of rank t's windows holds after rounds 0..nround-1 of part A. */
static int int_expect(int t, int k, int nround)
{
    int v = int_init(t, k);
    for (int round = 0; round < nround; round++)
        for (int r = 0; r < ck.size; r++)
            v += int_add(r, t, k, round);
    return v;
}

static double dbl_expect(int t, int k, int nround)
{
    double v = dbl_init(t, k);
    for (int round = 0; round < nround; round++)
        for (int r = 0; r < ck.size; r++)
            v += dbl_add(r, t, k, round);
    return v;
}

static void fence(void)
{
    MPI_Win_fence(0, win_i);
    MPI_Win_fence(0, win_d);
}

/* One check for a whole array: reports the first element that differs. */
static void check_ints(const char *what, const int *got, int t, int nround)
{
    int bad = 0, first = -1;
    for (int k = 0; k < NI; k++)
        if (got[k] != int_expect(t, k, nround) && bad++ == 0)
            first = k;
    ck_check(bad == 0, "%s of rank %d after %d rounds: %d of %d ints wrong, first [%d] expected %d got %d",
             what, t, nround, bad, NI, first, first < 0 ? 0 : int_expect(t, first, nround),
             first < 0 ? 0 : got[first]);
}

static void check_doubles(const char *what, const double *got, int t, int nround)
{
    int bad = 0, first = -1;
    for (int k = 0; k < ND; k++)
        if (got[k] != dbl_expect(t, k, nround) && bad++ == 0)
            first = k;
    ck_check(bad == 0,
             "%s of rank %d after %d rounds: %d of %d doubles wrong, first [%d] expected %.3f got %.3f",
             what, t, nround, bad, ND, first, first < 0 ? 0.0 : dbl_expect(t, first, nround),
             first < 0 ? 0.0 : got[first]);
}

static void part_a_b(int rounds)
{
    int *ci = malloc(NI * sizeof *ci);
    double *cd = malloc(ND * sizeof *cd);
    for (int round = 0; round < rounds; round++) {
        fence();
        for (int d = 0; d < ck.size; d++) {
            int t = (ck.rank + d) % ck.size;
            for (int k = 0; k < NI; k++)
                ci[k] = int_add(ck.rank, t, k, round);
            for (int k = 0; k < ND; k++)
                cd[k] = dbl_add(ck.rank, t, k, round);
            MPI_Accumulate(ci, NI, MPI_INT, t, 0, NI, MPI_INT, MPI_SUM, win_i);
            MPI_Accumulate(cd, ND, MPI_DOUBLE, t, 0, ND, MPI_DOUBLE, MPI_SUM, win_d);
            /* The origin buffers are reusable only after the closing fence. */
            fence();
        }
        check_ints("A: accumulated ints", wi, ck.rank, round + 1);
        check_doubles("A: accumulated doubles", wd, ck.rank, round + 1);
    }
    /* B: read the right neighbour's windows back. */
    for (int k = 0; k < NI; k++)
        ci[k] = -1;
    for (int k = 0; k < ND; k++)
        cd[k] = -1.0;
    fence();
    MPI_Get(ci, NI, MPI_INT, ck_right(), 0, NI, MPI_INT, win_i);
    MPI_Get(cd, ND, MPI_DOUBLE, ck_right(), 0, ND, MPI_DOUBLE, win_d);
    fence();
    check_ints("B: MPI_Get ints", ci, ck_right(), rounds);
    check_doubles("B: MPI_Get doubles", cd, ck_right(), rounds);
    free(ci);
    free(cd);
}

/* Part C's chain check on every rank's (fetched, increment) pair. */
static void check_chain(const char *what, const double *fetched, double base, double final)
{
    int n = ck.size, ok = 1;
    int *used = calloc((size_t)n, sizeof *used);
    double at = base;
    for (int step = 0; step < n && ok; step++) {
        int who = -1;
        for (int r = 0; r < n; r++)
            if (!used[r] && fetched[r] == at)
                who = r;
        if (who < 0) {
            ok = ck_check(0, "%s: no rank fetched %.1f (step %d of the chain)", what, at, step);
            break;
        }
        used[who] = 1;
        at += who + 1;
    }
    if (ok) {
        ck_pass();
        ck_check(final == at, "%s: final value %.1f, the chain ends at %.1f", what, final, at);
    }
    free(used);
}

static void part_c(void)
{
    const int ibase = 5000;
    const double dbase = 250.5;
    fence();
    wi[0] = ibase;
    wd[0] = dbase;
    wi[1] = 40 + ck.rank;
    wd[1] = 0.5 + ck.rank;
    fence();
    int inc = ck.rank + 1, got = -1, peek = -1;
    double dinc = ck.rank + 1, dgot = -1.0, dpeek = -1.0;
    MPI_Fetch_and_op(&inc, &got, MPI_INT, 0, 0, MPI_SUM, win_i);
    MPI_Fetch_and_op(&dinc, &dgot, MPI_DOUBLE, 0, 0, MPI_SUM, win_d);
    MPI_Fetch_and_op(NULL, &peek, MPI_INT, ck_right(), 1, MPI_NO_OP, win_i);
    MPI_Fetch_and_op(NULL, &dpeek, MPI_DOUBLE, ck_right(), 1, MPI_NO_OP, win_d);
    fence();
    ck_check(peek == 40 + ck_right(), "C: MPI_NO_OP fetch of rank %d's int: expected %d got %d",
             ck_right(), 40 + ck_right(), peek);
    ck_check(dpeek == 0.5 + ck_right(), "C: MPI_NO_OP fetch of rank %d's double: expected %.1f got %.1f",
             ck_right(), 0.5 + ck_right(), dpeek);
    double mine[2] = {got, dgot};
    double *all = malloc(2 * (size_t)ck.size * sizeof *all);
    MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD);
    double finals[2] = {wi[0], wd[0]};
    MPI_Bcast(finals, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double *col = malloc((size_t)ck.size * sizeof *col);
    for (int c = 0; c < 2; c++) {
        for (int r = 0; r < ck.size; r++)
            col[r] = all[2 * r + c];
        check_chain(c == 0 ? "C: Fetch_and_op ints" : "C: Fetch_and_op doubles", col,
                    c == 0 ? ibase : dbase, finals[c]);
    }
    free(col);
    free(all);
}

static void part_d(void)
{
    fence();
    wi[2] = -1;
    wi[3] = 700 + ck.rank;
    wi[4] = 900 + ck.rank;
    fence();
    /* Everyone on rank 0's slot 2: one wins. */
    int cmp = -1, mine = ck.rank, got = -99;
    MPI_Compare_and_swap(&mine, &cmp, &got, MPI_INT, 0, 2, win_i);
    /* Everyone on the right neighbour's slot 3, which only this rank targets. */
    int cmp3 = 700 + ck_right(), swap3 = 800 + ck.rank, got3 = -99;
    MPI_Compare_and_swap(&swap3, &cmp3, &got3, MPI_INT, ck_right(), 3, win_i);
    fence();
    /* A compare that cannot match: slot 4 unchanged, the current value fetched. */
    int cmp4 = -5, swap4 = -6, got4 = -99;
    MPI_Compare_and_swap(&swap4, &cmp4, &got4, MPI_INT, ck_right(), 4, win_i);
    fence();
    ck_check(got3 == 700 + ck_right(), "D: CAS on rank %d's slot fetched %d, expected %d", ck_right(),
             got3, 700 + ck_right());
    ck_check(wi[3] == 800 + ck_left(), "D: slot swapped by rank %d holds %d, expected %d", ck_left(),
             wi[3], 800 + ck_left());
    ck_check(got4 == 900 + ck_right(), "D: failing CAS fetched %d, expected %d", got4, 900 + ck_right());
    ck_check(wi[4] == 900 + ck.rank, "D: failing CAS changed the slot to %d (expected %d)", wi[4],
             900 + ck.rank);
    int *all = malloc((size_t)ck.size * sizeof *all);
    MPI_Allgather(&got, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int final = wi[2];
    MPI_Bcast(&final, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int winners = 0, winner = -1, losers_ok = 1;
    for (int r = 0; r < ck.size; r++)
        if (all[r] == -1) {
            winners++;
            winner = r;
        }
    for (int r = 0; r < ck.size; r++)
        if (all[r] != -1 && all[r] != winner)
            losers_ok = 0;
    ck_check(winners == 1, "D: %d ranks won the compare-and-swap on rank 0 (expected 1)", winners);
    ck_check(losers_ok, "D: a losing rank did not fetch the winner %d", winner);
    ck_check(final == winner, "D: rank 0's slot holds %d, the winner was %d", final, winner);
    free(all);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "rma_accumulate", MPI_THREAD_SINGLE);
    int rounds = ck.quick ? 3 : 10;
    MPI_Alloc_mem(NI * sizeof *wi, MPI_INFO_NULL, &wi);
    MPI_Alloc_mem(ND * sizeof *wd, MPI_INFO_NULL, &wd);
    for (int k = 0; k < NI; k++)
        wi[k] = int_init(ck.rank, k);
    for (int k = 0; k < ND; k++)
        wd[k] = dbl_init(ck.rank, k);
    MPI_Win_create(wi, NI * sizeof *wi, sizeof *wi, MPI_INFO_NULL, MPI_COMM_WORLD, &win_i);
    MPI_Win_create(wd, ND * sizeof *wd, sizeof *wd, MPI_INFO_NULL, MPI_COMM_WORLD, &win_d);
    part_a_b(rounds);
    part_c();
    part_d();
    MPI_Win_free(&win_i);
    MPI_Win_free(&win_d);
    MPI_Free_mem(wi);
    MPI_Free_mem(wd);
    return ck_finish();
}
