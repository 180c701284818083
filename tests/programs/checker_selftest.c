/*
 * checker_selftest.c -- proves the checker in check.h can fail.
 *
 * Runs a real exchange (ring neighbours; 1 rank: itself) of a tiny (1 B), a
 * small (100 B) and a large (4 MiB + 3) message and verifies them (must
 * pass).  Then, on the received buffers, it deliberately:
 *   - flips one bit at a chosen offset (tiny: 0; small: 57; large: 3 MiB + 1
 *     and the last byte) and asserts that ck_scan finds exactly 1 bad byte at
 *     exactly that offset with the right expected/actual values, and that
 *     ck_verify records exactly one failure whose message names that offset;
 *   - verifies against the wrong source, destination, tag and index;
 *   - shifts the payload by one byte, drops its last byte (truncation), and
 *     writes one byte past its end into the guard (overrun);
 *   - compares a buffer image that differs in one byte;
 *   - checks ck_check(0, ...) counts a failure.
 * The expected failures are recorded silently and then removed from the
 * tally; the program exits 0 and prints "N passed, 0 failed" only if every
 * corruption was detected exactly as expected.
 * (The end-to-end counterpart is `p2p_sizes --inject-corruption`, which
 * must exit non-zero with a failed count >= 1.)
 */
#include "check.h"

/* run f() expecting exactly one recorded failure whose text contains `needle` */
#define EXPECT_ONE_FAILURE(desc, needle, call)                                                     \
    do {                                                                                           \
        long before_f = ck.failed, before_p = ck.passed;                                          \
        ck.quiet = 1;                                                                              \
        ck.last_msg[0] = 0;                                                                        \
        call;                                                                                      \
        ck.quiet = 0;                                                                              \
        long nf = ck.failed - before_f, np = ck.passed - before_p;                                \
        ck.failed = before_f;                                                                      \
        ck.passed = before_p;                                                                      \
        ck_check(nf == 1 && np == 0 && strstr(ck.last_msg, (needle)) != NULL,                      \
                 "selftest: %s: expected exactly one failure mentioning \"%s\", got %ld failures " \
                 "and %ld passes, last message: \"%s\"",                                           \
                 (desc), (needle), nf, np, ck.last_msg);                                           \
    } while (0)

static void flip_test(const char *name, unsigned char *buf, size_t n, int src, int tag, long idx,
                      size_t off)
{
    char desc[160], needle[96];
    size_t first = (size_t)-1;
    unsigned exp = 0, got = 0;
    unsigned char orig = buf[off];
    uint32_t seed = ck_seed(src, ck.rank, tag, idx);

    buf[off] ^= 0x01; /* a single bit */
    size_t bad = ck_scan(buf, n, seed, &first, &exp, &got);
    ck_check(bad == 1 && first == off && exp == orig && got == (unsigned)(orig ^ 0x01),
             "selftest: %s: flipped bit at offset %zu (0x%02x -> 0x%02x): ck_scan found %zu bad "
             "bytes, first at %zu, expected 0x%02x got 0x%02x",
             name, off, orig, orig ^ 0x01, bad, first, exp, got);
    snprintf(desc, sizeof desc, "%s: ck_verify after flipping offset %zu", name, off);
    snprintf(needle, sizeof needle, "first bad offset %zu of %zu: expected 0x%02x got 0x%02x (1 bad bytes)",
             off, n, orig, orig ^ 0x01);
    EXPECT_ONE_FAILURE(desc, needle, ck_verify(name, buf, n, src, ck.rank, tag, idx));
    buf[off] = orig;
    ck_check(ck_scan(buf, n, seed, &first, &exp, &got) == 0,
             "selftest: %s: still bad after restoring offset %zu", name, off);
}

int main(int argc, char **argv)
{
    ck_init(&argc, &argv, "checker_selftest", MPI_THREAD_SINGLE);
    const size_t n[3] = {1, 100, (4u << 20) + 3};
    const char *name[3] = {"tiny (1 B)", "small (100 B)", "large (4 MiB + 3)"};
    int me = ck.rank, dst = ck_right(), src = ck_left();
    unsigned char *sb[3], *rb[3];
    MPI_Request rq[6];
    MPI_Status st[6];

    /* 1. a real exchange that must verify cleanly */
    for (int i = 0; i < 3; i++) {
        sb[i] = ck_alloc(n[i]);
        rb[i] = ck_alloc(n[i]);
        ck_fill(sb[i], n[i], me, dst, 40 + i, 7);
        MPI_Irecv(rb[i], (int)n[i], MPI_BYTE, src, 40 + i, MPI_COMM_WORLD, &rq[i]);
        MPI_Isend(sb[i], (int)n[i], MPI_BYTE, dst, 40 + i, MPI_COMM_WORLD, &rq[3 + i]);
    }
    MPI_Waitall(6, rq, st);
    for (int i = 0; i < 3; i++) {
        ck_verify(name[i], rb[i], n[i], src, me, 40 + i, 7);
        ck_status(name[i], &st[i], src, 40 + i, n[i]);
    }

    /* 2. single-byte corruption at known offsets */
    flip_test(name[0], rb[0], n[0], src, 40, 7, 0);
    flip_test(name[1], rb[1], n[1], src, 41, 7, 57);
    flip_test(name[2], rb[2], n[2], src, 42, 7, (3u << 20) + 1);
    flip_test(name[2], rb[2], n[2], src, 42, 7, n[2] - 1);

    /* 3. wrong identity: the pattern depends on src, dst, tag and index */
    EXPECT_ONE_FAILURE("wrong source", "first bad offset",
                       ck_verify("wrong src", rb[1], n[1], src + 1000, me, 41, 7));
    EXPECT_ONE_FAILURE("wrong destination", "first bad offset",
                       ck_verify("wrong dst", rb[1], n[1], src, me + 1000, 41, 7));
    EXPECT_ONE_FAILURE("wrong tag", "first bad offset",
                       ck_verify("wrong tag", rb[1], n[1], src, me, 42, 7));
    EXPECT_ONE_FAILURE("wrong index", "first bad offset",
                       ck_verify("wrong idx", rb[1], n[1], src, me, 41, 8));
    EXPECT_ONE_FAILURE("wrong index, large", "first bad offset 0 of",
                       ck_verify("wrong idx large", rb[2], n[2], src, me, 42, 8));

    /* 4. shifted, truncated, overrun */
    {
        unsigned char *c = ck_alloc(n[2]);
        memcpy(c + 1, rb[2], n[2] - 1);
        c[0] = rb[2][0] ^ 0xff;
        EXPECT_ONE_FAILURE("payload shifted by one byte", "first bad offset 0 of",
                           ck_verify("shifted", c, n[2], src, me, 42, 7));
        memcpy(c, rb[2], n[2]);
        c[n[2] - 1] = CK_GUARD_BYTE == rb[2][n[2] - 1] ? 0 : CK_GUARD_BYTE;
        {
            char needle[64];
            snprintf(needle, sizeof needle, "first bad offset %zu of %zu", n[2] - 1, n[2]);
            EXPECT_ONE_FAILURE("last byte missing (truncated)", needle,
                               ck_verify("truncated", c, n[2], src, me, 42, 7));
        }
        memcpy(c, rb[2], n[2]);
        c[n[2] + 5] = 0x00;
        {
            char needle[64];
            snprintf(needle, sizeof needle, "guard: first bad offset %zu of %zu", n[2] + 5, n[2]);
            EXPECT_ONE_FAILURE("one byte written past the end (overrun)", needle,
                               ck_verify("overrun", c, n[2], src, me, 42, 7));
        }
        free(c);
    }

    /* 5. image comparison (used for non-contiguous receives) */
    {
        unsigned char a[300], b[300];
        ck_fill_seed(a, sizeof a, 12345);
        memcpy(b, a, sizeof a);
        ck_check(ck_verify_image("identical images", a, b, sizeof a, 0, 0, 0, 0),
                 "selftest: identical images reported as different");
        b[211] ^= 0x80;
        EXPECT_ONE_FAILURE("image differing in byte 211", "first bad offset 211 of 300",
                           ck_verify_image("image", a, b, sizeof a, 0, 0, 0, 0));
    }

    /* 6. status check and generic check */
    {
        MPI_Status bad = st[1];
        bad.MPI_TAG = 999;
        EXPECT_ONE_FAILURE("status with wrong tag", "tag 999 (expected 41)",
                           ck_status("status", &bad, src, 41, n[1]));
    }
    EXPECT_ONE_FAILURE("ck_check(0)", "forced", ck_check(0, "forced failure"));

    /* 7. pattern properties: words of one message are distinct, streams differ */
    {
        uint32_t s = ck_seed(0, 1, 2, 3);
        int dup = 0;
        for (uint64_t w = 1; w < 4096; w++)
            dup += ck_word(s, w) == ck_word(s, w - 1);
        ck_check(dup == 0, "selftest: %d adjacent equal pattern words", dup);
        ck_check(ck_seed(0, 1, 2, 3) != ck_seed(1, 0, 2, 3) && ck_seed(0, 1, 2, 3) != ck_seed(0, 1, 3, 2),
                 "selftest: seeds collide when src/dst or tag/idx are swapped");
    }

    for (int i = 0; i < 3; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    return ck_finish();
}
