/*
 * rma_sizes.c -- MPI_Put and MPI_Get of contiguous bytes from 1 byte to 4 MiB, in
 * fence epochs and in passive-target (lock/unlock) epochs, every byte checked. On
 * Open MPI 5.0 a BTL without native put (or get) reaches osc/rdma through the BTL
 * base's active-message RDMA, which cuts an operation longer than one fragment
 * (btl_max_send_size) into several packets and sends the same descriptor again from
 * its completion callback, to the endpoint that callback names; messages of one
 * fragment take one packet. Sizes straddle the common fragment sizes.
 *
 * Each rank exposes a window of WIN bytes; rank r puts into rank r+1 (mod n) at offset
 * 0 and gets from rank r-1 at offset WIN/2 (written there by its owner before the
 * epoch), for each size:
 *  A. fence epoch: put, then fence, then the target checks its window;
 *  B. fence epoch: get, then fence, then the origin checks what it read;
 *  C. lock(exclusive)/put/unlock on the right neighbour, then a barrier, then the
 *     target checks (under a lock of its own window);
 *  D. lock(shared)/get/unlock from the left neighbour, checked at once.
 * The bytes past the message in every destination must be untouched (guard).
 * --quick: fewer sizes.
 */
#include "check.h"

/* Each half holds the largest message and its guard. */
#define HALF ((4u << 20) + 4096)
#define WIN (2 * HALF)

static const size_t full_sizes[] = {1,         7,           4096,          8192 - 1,
                                    32 * 1024, 32 * 1024 + 1, 64 * 1024 + 3, 100000,
                                    1 << 20,   (4 << 20) - 3, 4 << 20};
static const size_t quick_sizes[] = {1, 32 * 1024 + 1, 100000, (4 << 20) - 3};

static unsigned char *win_buf;
static MPI_Win win;

/* The bytes of `size` that `src` sends to `dst` in part `part`, size index `idx`. */
static void fill(unsigned char *buf, size_t size, int src, int dst, int part, long idx)
{
    ck_fill(buf, size, src, dst, part, idx);
}

/* Clears what rank `me` will receive into: its window's lower half (puts land there)
 * and a local buffer for gets; both get check.h's guard byte beyond the message. */
static void clear(unsigned char *buf, size_t size)
{
    memset(buf, CK_GUARD_BYTE, size + CK_GUARD);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "rma_sizes", MPI_THREAD_SINGLE);
    int me = ck.rank, n = ck.size;
    int right = (me + 1) % n, left = (me + n - 1) % n;
    const size_t *sizes = ck.quick ? quick_sizes : full_sizes;
    size_t nsizes = ck.quick ? sizeof quick_sizes / sizeof *quick_sizes
                             : sizeof full_sizes / sizeof *full_sizes;
    if (MPI_Alloc_mem(WIN, MPI_INFO_NULL, &win_buf) != MPI_SUCCESS) {
        fprintf(stderr, "rma_sizes: MPI_Alloc_mem failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Win_create(win_buf, WIN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    unsigned char *origin = ck_alloc(HALF);
    unsigned char *got = ck_alloc(HALF);

    for (size_t i = 0; i < nsizes; i++) {
        size_t size = sizes[i];
        char what[96];

        /* A: put in a fence epoch. */
        clear(win_buf, size);
        fill(origin, size, me, right, 1, (long)i);
        MPI_Win_fence(0, win);
        MPI_Put(origin, (int)size, MPI_BYTE, right, 0, (int)size, MPI_BYTE, win);
        MPI_Win_fence(0, win);
        snprintf(what, sizeof what, "fence put of %zu bytes from %d", size, left);
        ck_verify(what, win_buf, size, left, me, 1, (long)i);

        /* B: get in a fence epoch, from what each rank wrote into its upper half. */
        fill(win_buf + HALF, size, me, me, 2, (long)i);
        clear(got, size);
        MPI_Win_fence(0, win);
        MPI_Get(got, (int)size, MPI_BYTE, left, HALF, (int)size, MPI_BYTE, win);
        MPI_Win_fence(0, win);
        snprintf(what, sizeof what, "fence get of %zu bytes from %d", size, left);
        ck_verify(what, got, size, left, left, 2, (long)i);

        /* C: exclusive lock, put, unlock; the target looks after a barrier. */
        clear(win_buf, size);
        fill(origin, size, me, right, 3, (long)i);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
        MPI_Put(origin, (int)size, MPI_BYTE, right, 0, (int)size, MPI_BYTE, win);
        MPI_Win_unlock(right, win);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win);
        snprintf(what, sizeof what, "locked put of %zu bytes from %d", size, left);
        ck_verify(what, win_buf, size, left, me, 3, (long)i);
        MPI_Win_unlock(me, win);

        /* D: shared lock, get, unlock (the upper halves still hold part B's bytes). */
        clear(got, size);
        MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win);
        MPI_Get(got, (int)size, MPI_BYTE, left, HALF, (int)size, MPI_BYTE, win);
        MPI_Win_unlock(left, win);
        snprintf(what, sizeof what, "locked get of %zu bytes from %d", size, left);
        ck_verify(what, got, size, left, left, 2, (long)i);
        MPI_Barrier(MPI_COMM_WORLD);
    }

    MPI_Win_free(&win);
    MPI_Free_mem(win_buf);
    free(origin);
    free(got);
    return ck_finish();
}
