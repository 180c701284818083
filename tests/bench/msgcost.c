/*
 * msgcost: the instructions one small message costs a transport, counted by callgrind
 * (deterministic, unlike time on a shared machine). tests/bench/count-instructions runs
 * it with rank 0 under `valgrind --tool=callgrind --collect-atstart=no` and divides.
 *
 *   msgcost isend N     rank 0: N times MPI_Isend of 8 bytes to rank 1 (completed
 *                       at once by the BTL's sendi), counted call by call; MPI_Wait
 *                       and the flow control (rank 1 answers every 64 messages, so a
 *                       full fast box never sends the message another way) are not
 *   msgcost idle N      rank 0: N times MPI_Test of a receive nothing matches yet: an
 *                       idle progress pass (every BTL polled, nothing arrived) and
 *                       ob1's test around it; rank 1 waits in a blocking receive
 *   msgcost recv N      rank 0: N messages of 8 bytes received, counted in the
 *                       MPI_Waitall of 64 receives posted before rank 1 sent them
 *                       and waited for after they arrived (rank 0 sleeps 20 ms
 *                       meanwhile, outside MPI): the progress passes that find the
 *                       messages and deliver them into the posted receives
 *   msgcost recv1 N     the same one message at a time (a ping-pong's receive: one
 *                       progress pass finds one message)
 *
 * Every message's 8 bytes are checked by rank 1. Prints "msgcost MODE N done" on
 * rank 0; exits non-zero on a wrong byte or argument.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define WINDOW 64

static int isend_cost(int rank, long n)
{
    int bad = 0;
    if (rank == 0) {
        for (long i = 0; i < n; i++) {
            long value = i;
            MPI_Request req;
            CALLGRIND_TOGGLE_COLLECT;
            MPI_Isend(&value, 8, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &req);
            CALLGRIND_TOGGLE_COLLECT;
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            if ((i + 1) % WINDOW == 0 || i + 1 == n)
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        long values[WINDOW];
        MPI_Request reqs[WINDOW];
        for (long first = 0; first < n; first += WINDOW) {
            long count = n - first < WINDOW ? n - first : WINDOW;
            for (long k = 0; k < count; k++)
                MPI_Irecv(&values[k], 8, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall((int) count, reqs, MPI_STATUSES_IGNORE);
            for (long k = 0; k < count; k++)
                if (values[k] != first + k) {
                    fprintf(stderr, "msgcost: message %ld carried %ld\n", first + k, values[k]);
                    bad = 1;
                }
            MPI_Send(NULL, 0, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
        }
    }
    return bad;
}

static int idle_cost(int rank, long n)
{
    long value = -1;
    if (rank == 0) {
        MPI_Request req;
        int done = 0;
        MPI_Irecv(&value, 8, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &req);
        for (long i = 0; i < n; i++) {
            CALLGRIND_TOGGLE_COLLECT;
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            CALLGRIND_TOGGLE_COLLECT;
            if (done) {
                fprintf(stderr, "msgcost: the receive matched before it was sent\n");
                return 1;
            }
        }
        MPI_Send(NULL, 0, MPI_BYTE, 1, 10, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (value != 42) {
            fprintf(stderr, "msgcost: received %ld, not 42\n", value);
            return 1;
        }
    } else {
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        value = 42;
        MPI_Send(&value, 8, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
    }
    return 0;
}

static int recv_cost(int rank, long n, long batch)
{
    int bad = 0;
    for (long first = 0; first < n; first += batch) {
        long count = n - first < batch ? n - first : batch;
        if (rank == 0) {
            long values[WINDOW];
            MPI_Request reqs[WINDOW];
            for (long k = 0; k < count; k++)
                MPI_Irecv(&values[k], 8, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &reqs[k]);
            MPI_Send(NULL, 0, MPI_BYTE, 1, 11, MPI_COMM_WORLD);
            /* Rank 1 sends the batch meanwhile; nothing here makes progress. */
            usleep(20000);
            CALLGRIND_TOGGLE_COLLECT;
            MPI_Waitall((int) count, reqs, MPI_STATUSES_IGNORE);
            CALLGRIND_TOGGLE_COLLECT;
            for (long k = 0; k < count; k++)
                if (values[k] != first + k) {
                    fprintf(stderr, "msgcost: message %ld carried %ld\n", first + k, values[k]);
                    bad = 1;
                }
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (long k = 0; k < count; k++) {
                long value = first + k;
                MPI_Send(&value, 8, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
            }
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc == 3 ? atol(argv[2]) : 0;
    int isend = argc == 3 && strcmp(argv[1], "isend") == 0;
    int idle = argc == 3 && strcmp(argv[1], "idle") == 0;
    int recv = argc == 3 && strcmp(argv[1], "recv") == 0;
    int recv1 = argc == 3 && strcmp(argv[1], "recv1") == 0;
    if (size != 2 || n <= 0 || !(isend || idle || recv || recv1)) {
        if (rank == 0)
            fprintf(stderr, "usage: msgcost isend|idle|recv|recv1 N (2 ranks)\n");
        MPI_Finalize();
        return 2;
    }
    /* Warm up: the peers connected, fast boxes set up, caches filled. */
    for (int i = 0; i < 3; i++)
        if (isend_cost(rank, 2 * WINDOW))
            MPI_Abort(MPI_COMM_WORLD, 1);
    CALLGRIND_ZERO_STATS;
    int bad = isend ? isend_cost(rank, n)
              : idle ? idle_cost(rank, n)
              : recv_cost(rank, n, recv ? WINDOW : 1);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("msgcost %s %ld done\n", argv[1], n);
    MPI_Finalize();
    return any;
}
