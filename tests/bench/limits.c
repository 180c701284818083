/* limits: the physical limits an MPI transport on this machine is compared against.
 * No MPI.
 *
 *   cc -O2 -o build/bench/limits tests/bench/limits.c
 *   limits [--test memcpy|udp_rtt|udp_mmsg_rtt|tcp_rtt|all] [--min B] [--max B] [--sizes a,b,c]
 *          [--rtt-size B] [--target-ms T] [--reps R] [--no-pin] [--no-spin] [--quick]
 *
 * memcpy:  for each size (default sweep 0 .. 16 MiB, powers of two) memcpy between two
 *          buffers that were touched first (cache-warm: sizes that fit the caches stay in
 *          them), iterations calibrated to the target time per size (n = 1, 4, 16, ... until a
 *          batch takes 1/20 of the target, then the fastest of three such batches), R timed
 *          blocks, median.
 *          value = bytes copied per second (MB/s, 1e6 B; each byte is read once and written
 *          once, so memory traffic is twice that).
 * udp_rtt: a forked child echoes datagrams on 127.0.0.1 (both sockets bound to ephemeral
 *          ports before fork); value = median over R blocks of the mean round trip (us)
 * udp_mmsg_rtt: the same with the system calls of a two-channel datagram transport
 *          (rusnic's): each side has two sockets, polls them in turn with recvmmsg (32
 *          slots) and sends with sendmmsg, the datagram gathered from a 32-byte header
 *          and the payload: that structure's floor, with no protocol work at all
 * tcp_rtt: the same over a TCP connection on 127.0.0.1 with TCP_NODELAY
 *          (MPI ping-pong latency is a half round trip: compare it with value / 2)
 * By default the parent is pinned to CPU 0 and the child to CPU 1 (like mpirun --bind-to
 * core with two ranks); --no-pin leaves scheduling to the kernel. By default both sides
 * busy-poll their socket (MSG_DONTWAIT in a loop), as MPI ranks poll for progress; --no-spin
 * blocks in the kernel instead, which in a VM adds the cost of waking an idle vCPU.
 * Output: "RESULT test=<t> size=<bytes> iters=<n> value=<x> unit=<MB/s|us>" on stdout, a
 * table on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "size_arg.h"

#define MAX_SIZES 64

static size_t sizes[MAX_SIZES];
static int nsizes;
static size_t rtt_size = 8;
static double target_s = 0.2;
static int reps = 7;
static int pin = 1;
static int spin = 1;
static int do_memcpy = 1, do_udp = 1, do_tcp = 1;

static void die(const char *what)
{
    fprintf(stderr, "limits: %s: %s\n", what, errno ? strerror(errno) : "error");
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void pin_to(int cpu)
{
    if (!pin)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % CPU_SETSIZE, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fprintf(stderr, "limits: could not pin to CPU %d (%s), continuing\n", cpu,
                strerror(errno));
}

static void result(const char *test, size_t size, long iters, double value, double lo,
                   double hi, const char *unit)
{
    printf("RESULT test=%s size=%zu iters=%ld value=%.4f unit=%s\n", test, size, iters, value,
           unit);
    fflush(stdout);
    fprintf(stderr, "  %-8s %12zu %10ld %14.4f %14.4f %14.4f %s\n", test, size, iters, value, lo,
            hi, unit);
}

static void header(const char *test)
{
    fprintf(stderr, "\n# %-8s %12s %10s %14s %14s %14s\n", test, "size(B)", "iters", "median",
            "min", "max");
}

/* ---------------------------------------------------------------- memcpy */
static void bench_memcpy(void)
{
    size_t maxsize = 1;
    for (int k = 0; k < nsizes; k++)
        if (sizes[k] > maxsize)
            maxsize = sizes[k];
    unsigned char *src = aligned_alloc(4096, (maxsize + 4095) / 4096 * 4096);
    unsigned char *dst = aligned_alloc(4096, (maxsize + 4095) / 4096 * 4096);
    if (!src || !dst)
        die("aligned_alloc");
    memset(src, 0x5a, maxsize);
    memset(dst, 0, maxsize);
    pin_to(0);
    header("memcpy");
    double *v = malloc(sizeof(double) * (size_t)reps);
    for (int k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        /* calibrate (and warm the caches): n_it = 1, 4, 16, ... until >= target / 20 */
        long it = 1;
        double t_it;
        for (;;) {
            double t0 = now();
            for (long i = 0; i < it; i++) {
                memcpy(dst, src, n);
                __asm__ volatile("" ::"r"(dst), "r"(src) : "memory");
            }
            double t = now() - t0;
            if (t >= target_s / 20 || it >= (1L << 30)) {
                t_it = t / (double)it;
                break;
            }
            it *= 4;
        }
        for (int again = 0; again < 2; again++) { /* keep the fastest of three batches */
            double t0 = now();
            for (long i = 0; i < it; i++) {
                memcpy(dst, src, n);
                __asm__ volatile("" ::"r"(dst), "r"(src) : "memory");
            }
            double t = (now() - t0) / (double)it;
            if (t < t_it)
                t_it = t;
        }
        long iters = (long)(target_s / reps / (t_it > 0 ? t_it : 1e-9));
        if (iters < 1)
            iters = 1;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (long i = 0; i < iters; i++) {
                memcpy(dst, src, n);
                __asm__ volatile("" ::"r"(dst), "r"(src) : "memory");
            }
            double t = now() - t0;
            v[r] = (double)n * (double)iters / t / 1e6;
        }
        if (memcmp(dst, src, n) != 0) {
            fprintf(stderr, "limits: memcpy result mismatch at size %zu\n", n);
            exit(1);
        }
        double lo, hi, med;
        med = median(v, reps);
        lo = v[0];
        hi = v[reps - 1];
        result("memcpy", n, iters * reps, med, lo, hi, "MB/s");
    }
    free(v);
    free(src);
    free(dst);
}

/* ---------------------------------------------------------------- round trips */
static int full_io(int fd, void *buf, size_t n, int writing)
{
    size_t done = 0;
    int flags = spin ? MSG_DONTWAIT : 0;
    while (done < n) {
        ssize_t r = writing ? send(fd, (char *)buf + done, n - done, flags)
                            : recv(fd, (char *)buf + done, n - done, flags);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int bound_socket(int type, struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, type, 0);
    if (fd < 0)
        die("socket");
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr->sin_port = 0; /* ephemeral */
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr) != 0)
        die("bind 127.0.0.1:0");
    socklen_t len = sizeof *addr;
    if (getsockname(fd, (struct sockaddr *)addr, &len) != 0)
        die("getsockname");
    return fd;
}

/* one round trip of rtt_size bytes; returns 0 or -1 */
typedef int (*rt_fn)(int fd, unsigned char *buf, const struct sockaddr_in *peer);

static int udp_rt(int fd, unsigned char *buf, const struct sockaddr_in *peer)
{
    size_t n = rtt_size ? rtt_size : 0;
    if (sendto(fd, buf, n, 0, (const struct sockaddr *)peer, sizeof *peer) != (ssize_t)n)
        return -1;
    ssize_t r;
    do
        r = recv(fd, buf, n ? n : 1, spin ? MSG_DONTWAIT : 0);
    while (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK));
    return r == (ssize_t)n ? 0 : -1;
}

static int tcp_rt(int fd, unsigned char *buf, const struct sockaddr_in *peer)
{
    (void)peer;
    if (rtt_size == 0)
        return 0;
    if (full_io(fd, buf, rtt_size, 1) || full_io(fd, buf, rtt_size, 0))
        return -1;
    return 0;
}

static void measure_rtt(const char *test, rt_fn fn, int fd, const struct sockaddr_in *peer)
{
    unsigned char *buf = malloc(rtt_size ? rtt_size : 1);
    memset(buf, 0x33, rtt_size ? rtt_size : 1);
    /* warm-up + calibration */
    long it = 16;
    double t_it;
    for (;;) {
        double t0 = now();
        for (long i = 0; i < it; i++)
            if (fn(fd, buf, peer))
                die(test);
        double t = now() - t0;
        if (t >= target_s / 20 || it >= (1L << 24)) {
            t_it = t / (double)it;
            break;
        }
        it *= 4;
    }
    for (int again = 0; again < 2; again++) { /* keep the fastest of three batches */
        double t0 = now();
        for (long i = 0; i < it; i++)
            if (fn(fd, buf, peer))
                die(test);
        double t = (now() - t0) / (double)it;
        if (t < t_it)
            t_it = t;
    }
    long iters = (long)(target_s / reps / (t_it > 0 ? t_it : 1e-9));
    if (iters < 16)
        iters = 16;
    double *v = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++)
            if (fn(fd, buf, peer))
                die(test);
        v[r] = (now() - t0) * 1e6 / (double)iters;
    }
    double med = median(v, reps);
    header(test);
    result(test, rtt_size, iters * reps, med, v[0], v[reps - 1], "us");
    free(v);
    free(buf);
}

/* Forks the echo peer of a round-trip test: returns 0 in the child, pinned to CPU 1,
 * and the child's pid in the parent. Output is flushed first so that nothing buffered
 * is written twice. */
static pid_t fork_echo_peer(void)
{
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0)
        pin_to(1);
    return child;
}

static void bench_udp(void)
{
    struct sockaddr_in a, b;
    int fa = bound_socket(SOCK_DGRAM, &a);
    int fb = bound_socket(SOCK_DGRAM, &b);
    pid_t child = fork_echo_peer();
    if (child == 0) { /* echo peer */
        close(fa);
        unsigned char buf[65536];
        for (;;) {
            struct sockaddr_in from;
            socklen_t len = sizeof from;
            ssize_t r = recvfrom(fb, buf, sizeof buf, spin ? MSG_DONTWAIT : 0,
                                 (struct sockaddr *)&from, &len);
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                    continue;
                _exit(1);
            }
            if (sendto(fb, buf, (size_t)r, 0, (struct sockaddr *)&from, len) != r)
                _exit(1);
        }
    }
    close(fb);
    pin_to(0);
    measure_rtt("udp_rtt", udp_rt, fa, &b);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    close(fa);
}

/* ------------------------------------------------- two-channel datagram system calls */
#define MMSG_SLOTS 32
#define MMSG_HEADER 32

struct mmsg_side {
    int fds[2];
    struct sockaddr_in to; /* the other side's first socket */
    unsigned char header[MMSG_HEADER];
    struct mmsghdr msgs[MMSG_SLOTS];
    struct iovec iovs[MMSG_SLOTS];
    unsigned char *slots; /* MMSG_SLOTS buffers of 65536 bytes */
};

static struct mmsg_side mmsg_parent;

static void mmsg_init(struct mmsg_side *side)
{
    side->slots = malloc((size_t)MMSG_SLOTS * 65536);
    if (!side->slots)
        die("malloc");
    memset(side->header, 0xb5, sizeof side->header);
    memset(side->msgs, 0, sizeof side->msgs);
    for (int i = 0; i < MMSG_SLOTS; i++) {
        side->iovs[i].iov_base = side->slots + (size_t)i * 65536;
        side->iovs[i].iov_len = 65536;
        side->msgs[i].msg_hdr.msg_iov = &side->iovs[i];
        side->msgs[i].msg_hdr.msg_iovlen = 1;
    }
}

static int mmsg_send(struct mmsg_side *side, unsigned char *payload, size_t n)
{
    struct iovec iov[2] = {{side->header, MMSG_HEADER}, {payload, n}};
    struct mmsghdr m;
    memset(&m, 0, sizeof m);
    m.msg_hdr.msg_name = &side->to;
    m.msg_hdr.msg_namelen = sizeof side->to;
    m.msg_hdr.msg_iov = iov;
    m.msg_hdr.msg_iovlen = n ? 2 : 1;
    return syscall(SYS_sendmmsg, side->fds[0], &m, 1, MSG_DONTWAIT) == 1 ? 0 : -1;
}

/* Polls the two sockets in turn until a datagram arrives; returns its payload length. */
static long mmsg_poll(struct mmsg_side *side)
{
    for (int ch = 0;; ch ^= 1) {
        long r = syscall(SYS_recvmmsg, side->fds[ch], side->msgs, MMSG_SLOTS,
                         spin ? MSG_DONTWAIT : 0, NULL);
        if (r > 0)
            return (long)side->msgs[0].msg_len - MMSG_HEADER;
        if (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (!spin)
            ch ^= 1; /* blocking: wait on the first socket, where the echo arrives */
    }
}

static int udp_mmsg_rt(int fd, unsigned char *buf, const struct sockaddr_in *peer)
{
    (void)fd;
    (void)peer;
    if (mmsg_send(&mmsg_parent, buf, rtt_size))
        return -1;
    return mmsg_poll(&mmsg_parent) == (long)rtt_size ? 0 : -1;
}

static void bench_udp_mmsg(void)
{
    struct mmsg_side child_side;
    struct sockaddr_in pa[2], ca[2];
    for (int i = 0; i < 2; i++) {
        mmsg_parent.fds[i] = bound_socket(SOCK_DGRAM, &pa[i]);
        child_side.fds[i] = bound_socket(SOCK_DGRAM, &ca[i]);
    }
    mmsg_parent.to = ca[0];
    child_side.to = pa[0];
    pid_t child = fork_echo_peer();
    if (child == 0) { /* echo peer */
        mmsg_init(&child_side);
        for (;;) {
            long n = mmsg_poll(&child_side);
            if (n < 0 || mmsg_send(&child_side, child_side.slots + MMSG_HEADER, (size_t)n))
                _exit(1);
        }
    }
    for (int i = 0; i < 2; i++)
        close(child_side.fds[i]);
    pin_to(0);
    mmsg_init(&mmsg_parent);
    measure_rtt("udp_mmsg_rtt", udp_mmsg_rt, mmsg_parent.fds[0], &ca[0]);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    for (int i = 0; i < 2; i++)
        close(mmsg_parent.fds[i]);
    free(mmsg_parent.slots);
}

static void bench_tcp(void)
{
    struct sockaddr_in a;
    int lfd = bound_socket(SOCK_STREAM, &a);
    int one = 1;
    if (listen(lfd, 1) != 0)
        die("listen");
    pid_t child = fork_echo_peer();
    if (child == 0) { /* echo peer */
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            _exit(1);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        unsigned char *buf = malloc(rtt_size ? rtt_size : 1);
        for (;;)
            if (rtt_size == 0 || full_io(c, buf, rtt_size, 0) || full_io(c, buf, rtt_size, 1))
                _exit(0);
    }
    close(lfd);
    pin_to(0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    measure_rtt("tcp_rtt", tcp_rt, fd, &a);
    close(fd);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
}

/* ---------------------------------------------------------------- options */
static size_t parse_size(const char *s)
{
    int ok;
    size_t v = size_arg(s, &ok);
    if (!ok) {
        fprintf(stderr, "limits: bad size '%s'\n", s);
        exit(2);
    }
    return v;
}

static void set_sizes(const char *s)
{
    char *copy = strdup(s), *save = NULL;
    nsizes = 0;
    for (char *t = strtok_r(copy, ",", &save); t && nsizes < MAX_SIZES; t = strtok_r(NULL, ",", &save))
        sizes[nsizes++] = parse_size(t);
    free(copy);
}

int main(int argc, char **argv)
{
    size_t lo = 0, hi = 16u << 20;
    int explicit_sizes = 0, have_range = 0, quick = 0, r = -1;
    double target_ms = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int needs = !strcmp(a, "--test") || !strcmp(a, "--min") || !strcmp(a, "--max") ||
                    !strcmp(a, "--sizes") || !strcmp(a, "--rtt-size") ||
                    !strcmp(a, "--target-ms") || !strcmp(a, "--reps");
        if (needs && !v) {
            fprintf(stderr, "limits: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--test")) {
            do_memcpy = strstr(v, "memcpy") || !strcmp(v, "all");
            do_udp = strstr(v, "udp") || !strcmp(v, "all");
            do_tcp = strstr(v, "tcp") || !strcmp(v, "all");
            i++;
        } else if (!strcmp(a, "--min")) { lo = parse_size(v); have_range = 1; i++; }
        else if (!strcmp(a, "--max")) { hi = parse_size(v); have_range = 1; i++; }
        else if (!strcmp(a, "--sizes")) { set_sizes(v); explicit_sizes = 1; i++; }
        else if (!strcmp(a, "--rtt-size")) { rtt_size = parse_size(v); i++; }
        else if (!strcmp(a, "--target-ms")) { target_ms = atof(v); i++; }
        else if (!strcmp(a, "--reps")) { r = atoi(v); i++; }
        else if (!strcmp(a, "--no-pin")) pin = 0;
        else if (!strcmp(a, "--no-spin")) spin = 0;
        else if (!strcmp(a, "--quick")) quick = 1;
        else {
            fprintf(stderr, "usage: limits [--test memcpy|udp_rtt|udp_mmsg_rtt|tcp_rtt|all] [--min B] "
                            "[--max B] [--sizes a,b,c] [--rtt-size B] [--target-ms T] "
                            "[--reps R] [--no-pin] [--no-spin] [--quick]\n");
            return 2;
        }
    }
    if (quick && !explicit_sizes && !have_range)
        set_sizes("0,8,1k,64k,1m");
    else if (!explicit_sizes) {
        nsizes = 0;
        if (lo == 0)
            sizes[nsizes++] = 0;
        for (size_t s = 1; s <= hi && nsizes < MAX_SIZES; s <<= 1)
            if (s >= lo)
                sizes[nsizes++] = s;
    }
    target_s = (target_ms >= 0 ? target_ms : quick ? 20 : 200) / 1e3;
    reps = r > 0 ? r : quick ? 3 : 7;
    if (rtt_size > 65507) {
        fprintf(stderr, "limits: --rtt-size must fit one UDP datagram (<= 65507)\n");
        return 2;
    }
    printf("# limits: target_ms=%.0f reps=%d pin=%d spin=%d rtt_size=%zu\n", target_s * 1e3, reps,
           pin, spin, rtt_size);
    fflush(stdout);
    if (do_memcpy)
        bench_memcpy();
    if (do_udp) {
        bench_udp();
        bench_udp_mmsg();
    }
    if (do_tcp)
        bench_tcp();
    return 0;
}
