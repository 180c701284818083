/*
 * p2p_matching.c -- message matching and request handling.
 *
 *  A. MPI_ANY_SOURCE / MPI_ANY_TAG (rank 0 receives from all others; status
 *     source, tag and count checked; every (source, tag) exactly once; per
 *     source the send order is kept), ANY_SOURCE + fixed tag, fixed source +
 *     ANY_TAG.                                         [needs >= 2 ranks]
 *  B. ordering: many same-tag messages of mixed sizes (0 B .. 1 MiB, eager and
 *     rendezvous interleaved) arrive in send order, both with pre-posted
 *     receives and as unexpected messages (received after a barrier).
 *  C. 1024 outstanding Isend + 1024 outstanding Irecv, completed with
 *     MPI_Waitall (distinct tags, receives posted in permuted order),
 *     MPI_Waitany and MPI_Testsome (all the same tag).
 *  D. MPI_Sendrecv and MPI_Sendrecv_replace at several sizes, both ring directions.
 *  E. persistent requests: Send_init / Recv_init, several rounds alternating
 *     MPI_Startall and MPI_Start, buffer contents changing per round.
 * B-E run between ring neighbours (with 1 rank: with itself).
 */
#include "check.h"

#define TAG_A 100
#define NREQ 1024

static size_t size_a(int src, int k)
{
    /* mixed sizes; one large (rendezvous) message per sender */
    if (k == 5)
        return 262144 + (size_t)src;
    return (size_t)((k * 131 + src * 17) % 3000);
}

static void part_a(void)
{
    if (ck.size < 2) {
        ck_skip("ANY_SOURCE / ANY_TAG");
        return;
    }
    const int K = ck.quick ? 10 : 24;
    const size_t maxn = 262144 + 64;
    int nsend = ck.size - 1;
    char what[160];

    for (int variant = 0; variant < 3; variant++) {
        if (ck.rank != 0) {
            MPI_Request *rq = malloc(sizeof(MPI_Request) * K);
            unsigned char **b = malloc(sizeof(unsigned char *) * K);
            for (int k = 0; k < K; k++) {
                size_t n = size_a(ck.rank, k);
                b[k] = ck_alloc(n);
                ck_fill(b[k], n, ck.rank, 0, TAG_A + k, variant * 1000 + k);
                MPI_Isend(b[k], (int)n, MPI_BYTE, 0, TAG_A + k, MPI_COMM_WORLD, &rq[k]);
            }
            MPI_Waitall(K, rq, MPI_STATUSES_IGNORE);
            for (int k = 0; k < K; k++)
                free(b[k]);
            free(b);
            free(rq);
        } else {
            unsigned char *rbuf = ck_alloc(maxn);
            char *seen = calloc((size_t)ck.size * K, 1);
            int *lastk = malloc(sizeof(int) * ck.size);
            for (int r = 0; r < ck.size; r++)
                lastk[r] = -1;
            static const char *vname[] = {"ANY_SOURCE+ANY_TAG", "ANY_SOURCE+fixed tag",
                                          "fixed source+ANY_TAG"};
            for (int i = 0; i < nsend * K; i++) {
                MPI_Status st;
                int want_src = MPI_ANY_SOURCE, want_tag = MPI_ANY_TAG;
                if (variant == 1)
                    want_tag = TAG_A + i / nsend;
                if (variant == 2)
                    want_src = ck.size - 1 - i / K; /* highest rank first */
                ck_clear(rbuf, maxn);
                MPI_Recv(rbuf, (int)maxn, MPI_BYTE, want_src, want_tag, MPI_COMM_WORLD, &st);
                int src = st.MPI_SOURCE, tag = st.MPI_TAG, k = tag - TAG_A, count = -1;
                MPI_Get_count(&st, MPI_BYTE, &count);
                snprintf(what, sizeof what, "%s receive #%d", vname[variant], i);
                if (!ck_check(src >= 1 && src < ck.size && k >= 0 && k < K &&
                                  (want_src == MPI_ANY_SOURCE || src == want_src) &&
                                  (want_tag == MPI_ANY_TAG || tag == want_tag),
                              "%s: status source %d tag %d out of range / not as requested "
                              "(want source %d tag %d)",
                              what, src, tag, want_src, want_tag))
                    continue;
                ck_check(!seen[src * K + k], "%s: (source %d, tag %d) received twice", what, src,
                         tag);
                seen[src * K + k] = 1;
                ck_check(k > lastk[src],
                         "%s: from source %d tag %d arrived after tag %d (send order broken)",
                         what, src, tag, TAG_A + lastk[src]);
                lastk[src] = k;
                size_t n = size_a(src, k);
                ck_check(count >= 0 && (size_t)count == n, "%s: count %d expected %zu", what,
                         count, n);
                ck_verify(what, rbuf, n, src, 0, tag, variant * 1000 + k);
            }
            free(rbuf);
            free(seen);
            free(lastk);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* ---------------------------------------------------------------- B */
static size_t size_b(int i)
{
    static const size_t cyc[] = {0, 1, 100, 4096, 12288, 65539, 7, 300, 16384, 1};
    if (i % 25 == 12)
        return (1u << 20) + 7; /* large, rendezvous on every transport */
    return cyc[i % 10] + (size_t)(i % 3);
}

static void part_b(void)
{
    const int M = ck.quick ? 100 : 300;
    const int tag = 7;
    int me = ck.rank, dst = ck_right(), src = ck_left();
    MPI_Comm comm;
    char what[160];
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    unsigned char **sb = malloc(sizeof(unsigned char *) * M);
    unsigned char **rb = malloc(sizeof(unsigned char *) * M);
    MPI_Request *sr = malloc(sizeof(MPI_Request) * M), *rr = malloc(sizeof(MPI_Request) * M);
    MPI_Status *rs = malloc(sizeof(MPI_Status) * M);
    for (int i = 0; i < M; i++) {
        sb[i] = ck_alloc(size_b(i));
        rb[i] = ck_alloc(size_b(i));
    }

    for (int sub = 0; sub < 2; sub++) {
        for (int i = 0; i < M; i++) {
            ck_fill(sb[i], size_b(i), me, dst, tag, sub * 100000 + i);
            ck_clear(rb[i], size_b(i));
        }
        if (sub == 0) {
            /* pre-posted receives, each exactly the expected size: a message
             * out of order is truncated (error) or fails the pattern */
            for (int i = 0; i < M; i++)
                MPI_Irecv(rb[i], (int)size_b(i), MPI_BYTE, src, tag, comm, &rr[i]);
            for (int i = 0; i < M; i++)
                MPI_Isend(sb[i], (int)size_b(i), MPI_BYTE, dst, tag, comm, &sr[i]);
            int rc = MPI_Waitall(M, rr, rs);
            ck_check(rc == MPI_SUCCESS, "ordering (pre-posted): MPI_Waitall on receives returned %d",
                     rc);
            for (int i = 0; i < M; i++) {
                snprintf(what, sizeof what, "ordering (pre-posted) message #%d", i);
                if (rc != MPI_SUCCESS && rs[i].MPI_ERROR != MPI_SUCCESS) {
                    ck_check(0, "%s: error %d in status", what, rs[i].MPI_ERROR);
                    continue;
                }
                ck_verify(what, rb[i], size_b(i), src, me, tag, sub * 100000 + i);
                ck_status(what, &rs[i], src, tag, size_b(i));
            }
            MPI_Waitall(M, sr, MPI_STATUSES_IGNORE);
        } else {
            /* unexpected: everything is sent (or its rendezvous started)
             * before the first receive is posted */
            size_t maxn = (1u << 20) + 16;
            unsigned char *big = ck_alloc(maxn);
            for (int i = 0; i < M; i++)
                MPI_Isend(sb[i], (int)size_b(i), MPI_BYTE, dst, tag, comm, &sr[i]);
            MPI_Barrier(comm);
            for (int i = 0; i < M; i++) {
                MPI_Status st;
                ck_clear(big, maxn);
                int rc = MPI_Recv(big, (int)maxn, MPI_BYTE, src, tag, comm, &st);
                snprintf(what, sizeof what, "ordering (unexpected) message #%d", i);
                if (!ck_check(rc == MPI_SUCCESS, "%s: MPI_Recv returned %d", what, rc))
                    continue;
                ck_status(what, &st, src, tag, size_b(i));
                ck_verify_g(what, big, size_b(i), src, me, tag, sub * 100000 + i, 0);
            }
            MPI_Waitall(M, sr, MPI_STATUSES_IGNORE);
            free(big);
        }
    }
    for (int i = 0; i < M; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(sr);
    free(rr);
    free(rs);
    MPI_Comm_free(&comm);
}

/* ---------------------------------------------------------------- C */
static size_t size_c(int i)
{
    if (i % 128 == 77)
        return 65536 + (size_t)i;
    return (size_t)((i * 37) % 2048);
}

static void part_c(void)
{
    int me = ck.rank, dst = ck_right(), src = ck_left();
    const int N = NREQ;
    unsigned char **sb = malloc(sizeof(unsigned char *) * N);
    unsigned char **rb = malloc(sizeof(unsigned char *) * N);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * N); /* [0,N) recv, [N,2N) send */
    MPI_Status *st = malloc(sizeof(MPI_Status) * 2 * N);
    int *idx = malloc(sizeof(int) * 2 * N);
    char *done = malloc((size_t)2 * N);
    char what[160];
    static const char *rname[] = {"Waitall (distinct tags)", "Waitany (same tag)",
                                  "Testsome (same tag)"};

    for (int i = 0; i < N; i++) {
        sb[i] = ck_alloc(size_c(i));
        rb[i] = ck_alloc(size_c(i));
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            int tag = round == 0 ? i : 5;
            ck_fill(sb[i], size_c(i), me, dst, tag, round * N + i);
            ck_clear(rb[i], size_c(i));
        }
        /* receives: round 0 in a permuted order (matched by tag) */
        for (int j = 0; j < N; j++) {
            int i = round == 0 ? (int)(((long)j * 389) % N) : j;
            int tag = round == 0 ? i : 5;
            MPI_Irecv(rb[i], (int)size_c(i), MPI_BYTE, src, tag, MPI_COMM_WORLD, &rq[i]);
        }
        for (int i = 0; i < N; i++) {
            int tag = round == 0 ? i : 5;
            MPI_Isend(sb[i], (int)size_c(i), MPI_BYTE, dst, tag, MPI_COMM_WORLD, &rq[N + i]);
        }
        memset(done, 0, (size_t)2 * N);
        int ncomplete = 0;
        if (round == 0) {
            MPI_Waitall(2 * N, rq, st);
            memset(done, 1, (size_t)2 * N);
            ncomplete = 2 * N;
        } else if (round == 1) {
            for (int k = 0; k < N; k++) {
                int i = -1;
                MPI_Status s;
                MPI_Waitany(N, rq, &i, &s);
                if (!ck_check(i >= 0 && i < N && !done[i], "%s: bad/duplicate index %d", rname[round], i))
                    continue;
                done[i] = 1;
                st[i] = s;
                ncomplete++;
            }
            MPI_Waitall(N, rq + N, st + N);
            ncomplete += N;
        } else {
            int outcount;
            MPI_Status *ts = malloc(sizeof(MPI_Status) * 2 * N);
            while (ncomplete < 2 * N) {
                MPI_Testsome(2 * N, rq, &outcount, idx, ts);
                if (outcount == MPI_UNDEFINED)
                    break;
                for (int k = 0; k < outcount; k++) {
                    int i = idx[k];
                    if (!ck_check(i >= 0 && i < 2 * N && !done[i], "%s: bad/duplicate index %d",
                                  rname[round], i))
                        continue;
                    done[i] = 1;
                    st[i] = ts[k];
                    ncomplete++;
                }
            }
            free(ts);
        }
        ck_check(ncomplete == 2 * N, "%s: %d of %d requests completed", rname[round], ncomplete,
                 2 * N);
        for (int i = 0; i < N; i++) {
            int tag = round == 0 ? i : 5;
            snprintf(what, sizeof what, "%s receive #%d", rname[round], i);
            ck_verify(what, rb[i], size_c(i), src, me, tag, round * N + i);
            ck_status(what, &st[i], src, tag, size_c(i));
        }
    }
    for (int i = 0; i < N; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(rq);
    free(st);
    free(idx);
    free(done);
}

/* ---------------------------------------------------------------- D */
static void part_d(void)
{
    static const size_t sz[] = {0, 1, 1000, 65536, (1u << 20) + 1, 4u << 20};
    int nsz = ck.quick ? 5 : 6;
    size_t maxn = 4u << 20;
    unsigned char *sbuf = ck_alloc(maxn), *rbuf = ck_alloc(maxn);
    int me = ck.rank;
    char what[160];
    for (int dir = 0; dir < 2; dir++) {
        int dst = dir == 0 ? ck_right() : ck_left(), src = dir == 0 ? ck_left() : ck_right();
        for (int si = 0; si < nsz; si++) {
            size_t n = sz[si];
            MPI_Status st;
            int tag = 300 + dir * 10 + si;
            ck_fill(sbuf, n, me, dst, tag, 1);
            ck_clear(rbuf, n);
            MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, dst, tag, rbuf, (int)n, MPI_BYTE, src, tag,
                         MPI_COMM_WORLD, &st);
            snprintf(what, sizeof what, "Sendrecv dir %d size %zu", dir, n);
            ck_verify(what, rbuf, n, src, me, tag, 1);
            ck_status(what, &st, src, tag, n);

            /* replace: buffer goes out with me->dst and comes back with src->me */
            ck_clear(rbuf, n);
            ck_fill(rbuf, n, me, dst, tag, 2);
            MPI_Sendrecv_replace(rbuf, (int)n, MPI_BYTE, dst, tag, src, tag, MPI_COMM_WORLD, &st);
            snprintf(what, sizeof what, "Sendrecv_replace dir %d size %zu", dir, n);
            ck_verify(what, rbuf, n, src, me, tag, 2);
            ck_status(what, &st, src, tag, n);
        }
    }
    free(sbuf);
    free(rbuf);
}

/* ---------------------------------------------------------------- E */
static void part_e(void)
{
    const size_t sz[3] = {8, 70000, ck.quick ? 262144 + 5 : (2u << 20) + 5};
    const int rounds = ck.quick ? 3 : 6;
    int me = ck.rank, dst = ck_right(), src = ck_left();
    unsigned char *sb[3], *rb[3];
    MPI_Request rq[6]; /* 0..2 recv, 3..5 send */
    MPI_Status st[6];
    char what[160];
    for (int j = 0; j < 3; j++) {
        sb[j] = ck_alloc(sz[j]);
        rb[j] = ck_alloc(sz[j]);
        MPI_Recv_init(rb[j], (int)sz[j], MPI_BYTE, src, 50 + j, MPI_COMM_WORLD, &rq[j]);
        MPI_Send_init(sb[j], (int)sz[j], MPI_BYTE, dst, 50 + j, MPI_COMM_WORLD, &rq[3 + j]);
    }
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < 3; j++) {
            ck_fill(sb[j], sz[j], me, dst, 50 + j, 1000 + r);
            ck_clear(rb[j], sz[j]);
        }
        if (r % 2 == 0) {
            MPI_Startall(6, rq);
        } else {
            for (int j = 0; j < 6; j++)
                MPI_Start(&rq[j]);
        }
        MPI_Waitall(6, rq, st);
        for (int j = 0; j < 3; j++) {
            snprintf(what, sizeof what, "persistent round %d (%s) request %d size %zu", r,
                     r % 2 == 0 ? "Startall" : "Start", j, sz[j]);
            ck_verify(what, rb[j], sz[j], src, me, 50 + j, 1000 + r);
            ck_status(what, &st[j], src, 50 + j, sz[j]);
        }
        ck_check(rq[0] != MPI_REQUEST_NULL && rq[3] != MPI_REQUEST_NULL,
                 "persistent round %d: request became MPI_REQUEST_NULL after completion", r);
    }
    for (int j = 0; j < 6; j++)
        MPI_Request_free(&rq[j]);
    for (int j = 0; j < 3; j++) {
        free(sb[j]);
        free(rb[j]);
    }
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "p2p_matching", MPI_THREAD_SINGLE);
    part_a();
    MPI_Barrier(MPI_COMM_WORLD);
    part_b();
    MPI_Barrier(MPI_COMM_WORLD);
    part_c();
    MPI_Barrier(MPI_COMM_WORLD);
    part_d();
    MPI_Barrier(MPI_COMM_WORLD);
    part_e();
    return ck_finish();
}
