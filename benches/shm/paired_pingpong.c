/* Paired 8-byte ping-pong: Tether's blocking send/recv and a raw flag
 * ping-pong in a shared mapping, in alternating blocks between the same
 * two processes. On a virtual machine the hypervisor moves the two CPUs
 * nearer or farther apart from one second to the next (one cache-line
 * transfer costs 0.04 us or 0.15 us here), so two programs run one after
 * the other can see different machines; blocks of a few milliseconds
 * each, one right after the other, see the same one. The medians of the
 * blocks and of each pair's ratio are reported. The raw blocks here were
 * seen to run slower than raw_shm.c's `flag` in some runs (0.048 against
 * 0.038 us, not explained), so benches/compare_shm.py judges Tether's
 * blocks against the faster of the two raw loops.
 *
 *   tether run --name a -n 1 ./paired_pingpong [BLOCKS [ITERS]] : \
 *              --name b -n 1 ./paired_pingpong [BLOCKS [ITERS]]
 *
 * Universe rank 0 prints, in microseconds per half round trip:
 *
 *   paired raw <median> tether <median> ratio <median> min <r> max <r> blocks <n>
 *
 * The raw loop is raw_shm.c's `flag` loop (a sequence number stored with
 * release, polled with acquire loads and a pause hint between them, the
 * 8 bytes copied in and out of the same line); its mapping is a memfd of
 * rank 0 that rank 1 opens through /proc (named to it through Tether), so
 * nothing is left behind whatever happens to the processes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <tether.h>

#define TAG 7

static void check(int rc, const char *what)
{
    if (rc == TETHER_SUCCESS)
        return;
    char detail[TETHER_MAX_ERROR_STRING];
    tether_last_error(detail, sizeof detail);
    fprintf(stderr, "paired_pingpong: %s failed: %s\n", what, detail);
    tether_abort(3);
    exit(3);
}

#define T(call) check((call), #call)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void poll_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

struct line {
    _Atomic uint64_t seq;
    char payload[8];
    char pad[48];
};

/* The raw loop: `iters` round trips from sequence number `*seq` on, the
 * two sides' loops exactly as raw_shm.c's `flag`. */
static void raw_block(int rank, struct line *ping, struct line *pong, uint64_t *seq, long iters, char *buf)
{
    uint64_t first = *seq + 1, last = *seq + (uint64_t)iters;
    *seq = last;
    if (rank == 0) {
        for (uint64_t i = first; i <= last; i++) {
            memcpy(ping->payload, buf, 8);
            atomic_store_explicit(&ping->seq, i, memory_order_release);
            while (atomic_load_explicit(&pong->seq, memory_order_acquire) != i)
                poll_pause();
            memcpy(buf, pong->payload, 8);
        }
    } else {
        for (uint64_t i = first; i <= last; i++) {
            while (atomic_load_explicit(&ping->seq, memory_order_acquire) != i)
                poll_pause();
            memcpy(buf, ping->payload, 8);
            memcpy(pong->payload, buf, 8);
            atomic_store_explicit(&pong->seq, i, memory_order_release);
        }
    }
}

/* The same ping-pong through Tether (as benches/p2p/tether_pingpong.c). */
static void tether_block(int rank, long iters, char *buf)
{
    for (long k = 0; k < iters; k++) {
        if (rank == 0) {
            T(tether_send(buf, 8, TETHER_BYTE, 1, TAG, TETHER_COMM_UNIVERSE));
            T(tether_recv(buf, 8, TETHER_BYTE, 1, TAG, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        } else {
            T(tether_recv(buf, 8, TETHER_BYTE, 0, TAG, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
            T(tether_send(buf, 8, TETHER_BYTE, 0, TAG, TETHER_COMM_UNIVERSE));
        }
    }
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Maps the shared lines: a memfd of rank 0, which rank 1 opens through
 * /proc while rank 0 holds it open (until the barrier). */
static struct line *map_lines(int rank)
{
    char path[64] = "";
    int fd = -1;
    if (rank == 0) {
        fd = memfd_create("tether-paired", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, 4096) != 0) {
            perror("memfd_create");
            tether_abort(3);
        }
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), fd);
    }
    T(tether_bcast(path, sizeof path, TETHER_BYTE, 0, TETHER_COMM_UNIVERSE));
    if (rank != 0 && (fd = open(path, O_RDWR)) < 0) {
        perror(path);
        tether_abort(3);
    }
    struct line *lines = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (lines == MAP_FAILED) {
        perror("mmap");
        tether_abort(3);
    }
    T(tether_barrier(TETHER_COMM_UNIVERSE));
    close(fd);
    return lines;
}

int main(int argc, char **argv)
{
    int blocks = argc > 1 ? atoi(argv[1]) : 200;
    long iters = argc > 2 ? atol(argv[2]) : 5000;
    if (blocks < 1 || iters < 1) {
        fprintf(stderr, "usage: paired_pingpong [BLOCKS >= 1 [ITERS >= 1]]\n");
        return 2;
    }
    T(tether_init(&argc, &argv));
    int rank, size;
    T(tether_comm_rank(TETHER_COMM_UNIVERSE, &rank));
    T(tether_comm_size(TETHER_COMM_UNIVERSE, &size));
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "paired_pingpong: needs exactly 2 processes, got %d\n", size);
        tether_finalize();
        return 2;
    }
    struct line *lines = map_lines(rank);
    double *raw = calloc(blocks, sizeof *raw), *tether = calloc(blocks, sizeof *tether);
    double *ratio = calloc(blocks, sizeof *ratio);
    char buf[8] = "pingpong";
    uint64_t seq = 0;
    /* Warm-up: one block of each, not counted. */
    raw_block(rank, &lines[0], &lines[1], &seq, iters, buf);
    tether_block(rank, iters, buf);
    for (int b = 0; b < blocks; b++) {
        double t0 = now();
        raw_block(rank, &lines[0], &lines[1], &seq, iters, buf);
        double t1 = now();
        tether_block(rank, iters, buf);
        double t2 = now();
        raw[b] = (t1 - t0) / iters / 2 * 1e6;
        tether[b] = (t2 - t1) / iters / 2 * 1e6;
        ratio[b] = tether[b] / raw[b];
    }
    if (rank == 0) {
        double r = median(ratio, blocks);
        printf("paired raw %.4f tether %.4f ratio %.3f min %.3f max %.3f blocks %d\n", median(raw, blocks),
               median(tether, blocks), r, ratio[0], ratio[blocks - 1], blocks);
    }
    munmap(lines, 4096);
    free(raw);
    free(tether);
    free(ratio);
    T(tether_finalize());
    return 0;
}
