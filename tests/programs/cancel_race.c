/*
 * cancel_race.c -- MPI_Cancel of receives racing their own completion, under
 * MPI_THREAD_MULTIPLE.
 *
 * Rank 0 posts MPI_Irecv(tag i), tells rank 1 to send message i (a token on
 * a duplicate communicator), waits a varying moment and cancels the receive,
 * while a second thread keeps the progress engine busy (MPI_Iprobe on another
 * duplicate), so the message often arrives and its completion is being
 * delivered by that thread while the first one cancels.  Whatever the outcome, each message must be received
 * exactly once with intact data: a cancelled receive reports
 * MPI_Test_cancelled true and the message is then taken by a blocking
 * MPI_Recv; an uncancelled one holds the message.  [needs >= 2 ranks; ranks
 * beyond 1 only take part in ck_finish]
 */
#include "check.h"
#include <pthread.h>
#include <stdatomic.h>

#define N 1000
#define LEN 24

static atomic_int done;
static MPI_Comm spin_comm, go_comm;
static volatile unsigned sink;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&done)) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, 77, spin_comm, &flag, MPI_STATUS_IGNORE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "cancel_race", MPI_THREAD_MULTIPLE);
    if (ck.size < 2) {
        ck_skip("cancel racing completion");
        return ck_finish();
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &spin_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &go_comm);
    unsigned char sb[LEN], rb[LEN + CK_GUARD];
    char what[96];
    int cancelled = 0;
    if (ck.rank == 1) {
        for (int i = 0; i < N; i++) {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, i, go_comm, MPI_STATUS_IGNORE);
            ck_fill(sb, LEN, 1, 0, i, i);
            MPI_Send(sb, LEN, MPI_BYTE, 0, i, MPI_COMM_WORLD);
        }
    } else if (ck.rank == 0) {
        pthread_t th;
        pthread_create(&th, NULL, spinner, NULL);
        for (int i = 0; i < N; i++) {
            MPI_Request rq;
            MPI_Status st;
            int was_cancelled = 0;
            ck_clear(rb, LEN);
            MPI_Irecv(rb, LEN, MPI_BYTE, 1, i, MPI_COMM_WORLD, &rq);
            MPI_Send(NULL, 0, MPI_BYTE, 1, i, go_comm);
            for (unsigned d = 0; d < (unsigned)(i % 100) * 2000; d++)
                sink += d;
            MPI_Cancel(&rq);
            MPI_Wait(&rq, &st);
            MPI_Test_cancelled(&st, &was_cancelled);
            snprintf(what, sizeof what, "message %d (%s)", i,
                     was_cancelled ? "cancelled, then received" : "received");
            if (was_cancelled) {
                cancelled++;
                ck_clear(rb, LEN);
                MPI_Recv(rb, LEN, MPI_BYTE, 1, i, MPI_COMM_WORLD, &st);
            }
            ck_verify(what, rb, LEN, 1, 0, i, i);
            ck_status(what, &st, 1, i, LEN);
        }
        atomic_store(&done, 1);
        pthread_join(th, NULL);
        ck_note("%d of %d receives cancelled before their message", cancelled, N);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&spin_comm);
    MPI_Comm_free(&go_comm);
    return ck_finish();
}
