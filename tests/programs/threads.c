/*
 * threads.c -- MPI_THREAD_MULTIPLE: 4 threads per rank exchanging concurrently.
 *
 * MPI_Init_thread(MPI_THREAD_MULTIPLE); anything less is reported as a
 * failure (no silent downgrade).  Each of the 4 threads of a rank exchanges
 * with the same-numbered thread of its ring neighbours (1 rank: itself):
 *   phase A: all threads on MPI_COMM_WORLD, thread t uses tag 10 + t
 *   phase B: thread t on its own MPI_Comm_dup of MPI_COMM_WORLD, all threads
 *            use the SAME tag, so only the communicator separates them
 * Each phase: several iterations over sizes 0 B .. 1 MiB (Isend/Irecv/Waitall
 * on even iterations, MPI_Sendrecv on odd ones), every byte verified with
 * the pattern (src, dst, tag, idx = phase/thread/iteration/size).
 * Build with -pthread.
 */
#include "check.h"
#include <pthread.h>

#define NTHREADS 4

static MPI_Comm comms[NTHREADS];
static int iters;

static void *worker(void *arg)
{
    static const size_t sz[] = {0, 1, 100, 4096, 65537, (1u << 20) + 1};
    int t = (int)(long)arg, me = ck.rank, dst = ck_right(), src = ck_left();
    size_t maxn = sz[5];
    unsigned char *sb = ck_alloc(maxn), *rb = ck_alloc(maxn);
    char what[160];
    for (int phase = 0; phase < 2; phase++) {
        MPI_Comm comm = phase == 0 ? MPI_COMM_WORLD : comms[t];
        int tag = phase == 0 ? 10 + t : 10;
        for (int it = 0; it < iters; it++) {
            for (int si = 0; si < 6; si++) {
                if (si == 5 && it % 4 != 3)
                    continue; /* the 1 MiB message only every 4th iteration */
                size_t n = sz[si];
                long idx = phase * 1000000L + t * 10000L + it * 10L + si;
                MPI_Status st;
                ck_fill(sb, n, me, dst, tag, idx);
                ck_clear(rb, n);
                if (it % 2 == 0) {
                    MPI_Request rq[2];
                    MPI_Status sts[2];
                    MPI_Irecv(rb, (int)n, MPI_BYTE, src, tag, comm, &rq[0]);
                    MPI_Isend(sb, (int)n, MPI_BYTE, dst, tag, comm, &rq[1]);
                    MPI_Waitall(2, rq, sts);
                    st = sts[0];
                } else {
                    MPI_Sendrecv(sb, (int)n, MPI_BYTE, dst, tag, rb, (int)n, MPI_BYTE, src, tag, comm,
                                 &st);
                }
                snprintf(what, sizeof what, "thread %d phase %c (%s) iter %d size %zu", t,
                         'A' + phase, phase == 0 ? "distinct tags on COMM_WORLD" : "own dup comm",
                         it, n);
                ck_verify(what, rb, n, src, me, tag, idx);
                ck_status(what, &st, src, tag, n);
            }
        }
        ck_progress("thread %d finished phase %c", t, 'A' + phase);
    }
    free(sb);
    free(rb);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = ck_init(&argc, &argv, "threads", MPI_THREAD_MULTIPLE);
    if (!ck_check(provided >= MPI_THREAD_MULTIPLE,
                  "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided only level %d "
                  "(SINGLE=%d FUNNELED=%d SERIALIZED=%d MULTIPLE=%d); not running the threaded tests",
                  provided, MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                  MPI_THREAD_MULTIPLE))
        return ck_finish();
    int q = -1;
    MPI_Query_thread(&q);
    ck_check(q == provided, "MPI_Query_thread returned %d, MPI_Init_thread provided %d", q, provided);
    iters = ck.quick ? 4 : 16;
    for (int t = 0; t < NTHREADS; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(long)t) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        MPI_Comm_free(&comms[t]);
    return ck_finish();
}
