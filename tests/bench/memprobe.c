/*
 * memprobe: what a transport keeps in memory once every rank has talked to every
 * other rank (tests/bench/README.md, `rmca-bench --memory`).
 *
 *   memprobe [--no-contact] [--small N] [--large B]
 *
 * After MPI_Init every rank exchanges, with every peer in turn (a shift pattern of
 * MPI_Sendrecv, so no pair waits on another), N small messages (default 32: vader
 * sets up a fast box after 16 to a peer), then one of --large bytes (default 256 KiB:
 * the rendezvous / large-fragment path) each way. After a barrier each rank reads its
 * own /proc/self/smaps_rollup and /proc/self/smaps, and prints
 *
 *   MEM rank=R ranks=N phase=init|contact rss=B pss=B private_dirty=B anonymous=B
 *   SEG rank=R dev=MAJ:MIN inode=I size=B rss=B pss=B alloc=B path=P
 *
 * (bytes; `init` right after MPI_Init, `contact` after the exchange), one SEG line
 * per shared mapping (`s` in its permissions: the shared-memory segments, never a
 * library) with `alloc` the bytes its file has allocated (tmpfs/memfd pages that
 * exist, from stat() of /proc/self/map_files/<range>; -1 when unreadable). A second
 * barrier keeps every rank inside MPI until all have read their maps, so every
 * segment is still mapped when it is counted.
 *
 * --no-contact: the baseline (e.g. `--mca btl self`, where no rank can reach
 * another): no message, no barrier; the maps are read right after MPI_Init.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int rank, size;

/* The value in bytes of `key:` (given in kB) in smaps_rollup, -1 if absent. */
static long long rollup_field(const char *text, const char *key)
{
    size_t klen = strlen(key);
    const char *line = text;
    while (line && *line) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            return strtoll(line + klen + 1, NULL, 10) * 1024;
        }
        line = strchr(line, '\n');
        if (line) {
            line++;
        }
    }
    return -1;
}

static void print_rollup(const char *phase)
{
    static char text[16384];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    text[n] = '\0';
    printf("MEM rank=%d ranks=%d phase=%s rss=%lld pss=%lld private_dirty=%lld "
           "anonymous=%lld\n",
           rank, size, phase, rollup_field(text, "Rss"), rollup_field(text, "Pss"),
           rollup_field(text, "Private_Dirty"), rollup_field(text, "Anonymous"));
}

struct mapping {
    unsigned long start, end;
    char perms[8], dev[16], path[512];
    unsigned long inode;
    long long rss, pss;
};

static void print_segment(const struct mapping *m)
{
    char link[128];
    struct stat st;
    long long alloc = -1;
    snprintf(link, sizeof link, "/proc/self/map_files/%lx-%lx", m->start, m->end);
    if (stat(link, &st) == 0) {
        alloc = (long long)st.st_blocks * 512;
    }
    printf("SEG rank=%d dev=%s inode=%lu size=%lu rss=%lld pss=%lld alloc=%lld path=%s\n",
           rank, m->dev, m->inode, m->end - m->start, m->rss, m->pss, alloc,
           m->path[0] ? m->path : "[anonymous]");
}

/* One SEG line per shared mapping of /proc/self/smaps. */
static void print_segments(void)
{
    char line[1024];
    struct mapping m;
    int have = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) {
        return;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end, inode;
        char perms[8], off[32], dev[16];
        int used = 0;
        if (sscanf(line, "%lx-%lx %7s %31s %15s %lu %n", &start, &end, perms, off, dev,
                   &inode, &used) == 6 && used > 0) {
            if (have && m.perms[3] == 's') {
                print_segment(&m);
            }
            memset(&m, 0, sizeof m);
            m.start = start;
            m.end = end;
            m.inode = inode;
            snprintf(m.perms, sizeof m.perms, "%s", perms);
            snprintf(m.dev, sizeof m.dev, "%s", dev);
            snprintf(m.path, sizeof m.path, "%s", line + used);
            m.path[strcspn(m.path, "\n")] = '\0';
            have = 1;
        } else if (have && strncmp(line, "Rss:", 4) == 0) {
            m.rss = strtoll(line + 4, NULL, 10) * 1024;
        } else if (have && strncmp(line, "Pss:", 4) == 0) {
            m.pss = strtoll(line + 4, NULL, 10) * 1024;
        }
    }
    if (have && m.perms[3] == 's') {
        print_segment(&m);
    }
    fclose(f);
}

static void contact(int small, int large)
{
    char *out = malloc(large > 8 ? large : 8), *in = malloc(large > 8 ? large : 8);
    memset(out, rank, large > 8 ? large : 8);
    for (int shift = 1; shift < size; shift++) {
        int to = (rank + shift) % size, from = (rank - shift + size) % size;
        for (int i = 0; i < small; i++) {
            MPI_Sendrecv(out, 8, MPI_BYTE, to, 1, in, 8, MPI_BYTE, from, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        }
        if (large > 0) {
            MPI_Sendrecv(out, large, MPI_BYTE, to, 2, in, large, MPI_BYTE, from, 2,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (in[0] != (char)from || in[large - 1] != (char)from) {
                fprintf(stderr, "memprobe: rank %d: wrong bytes from rank %d\n", rank, from);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
    }
    free(out);
    free(in);
}

int main(int argc, char **argv)
{
    int with_contact = 1, small = 32, large = 256 << 10;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-contact") == 0) {
            with_contact = 0;
        } else if (strcmp(argv[i], "--small") == 0 && i + 1 < argc) {
            small = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--large") == 0 && i + 1 < argc) {
            large = atoi(argv[++i]);
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: memprobe [--no-contact] [--small N] [--large B]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    print_rollup("init");
    if (with_contact) {
        contact(small, large);
        MPI_Barrier(MPI_COMM_WORLD);
        print_rollup("contact");
    }
    print_segments();
    fflush(stdout);
    if (with_contact) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
