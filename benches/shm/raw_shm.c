/* Raw shared-memory baselines for benches/compare_shm.py, written for the
 * benchmark (no library):
 *
 *   raw_shm flag ITERS          ping-pong of 8 bytes between two forked
 *                               processes busy-polling on a flag in a shared
 *                               mapping: "latency 8 <us, half round trip>"
 *   raw_shm flag-tight ITERS    the same, polling without a pause hint
 *   raw_shm flag-answer ITERS SPINS
 *                               the same, each side running SPINS iterations
 *                               of an empty loop (about a cycle each) between
 *                               seeing a message and answering it: the least
 *                               any code between a receive and the next send
 *                               (a library's calls, the program's own work)
 *                               adds to the loop (docs/journal/
 *                               2026-11-25-shm-writers-without-fence.md)
 *   raw_shm flag-lfence ITERS   the same, with an LFENCE after the poll load
 *                               that sees a message (x86): the processor may
 *                               no longer run the answer ahead of the message
 *   raw_shm cma SIZE REPS       process_vm_readv of SIZE bytes from a child's
 *                               buffer into ours: "bw SIZE <MB/s>"
 *   raw_shm memcpy SIZE REPS    memcpy between two buffers of this process:
 *                               "bw SIZE <MB/s>"   (1 MB = 1e6 bytes)
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What a polling loop does between two loads of the flag. A pause hint
 * (x86 PAUSE) makes the ping-pong faster on the machines measured here
 * (0.038 to 0.044 us against 0.058 to 0.061 without, AMD EPYC): the
 * waiting core asks for the flag's line less often while the other core
 * writes it. The faster loop is the baseline; `flag-tight` keeps the
 * other for comparison. */
static int pause_between_polls = 1;

static inline void poll_pause(void) {
    if (!pause_between_polls) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Empty loop iterations between seeing a message and answering it. */
static long answer_spins = 0;
/* Whether an LFENCE follows the poll load that sees a message. */
static int fence_after_poll = 0;

static inline void before_answer(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (fence_after_poll) __builtin_ia32_lfence();
#endif
    for (long j = 0; j < answer_spins; j++) __asm__ volatile("" ::: "memory");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct line {
    _Atomic uint64_t seq;
    char payload[8];
    char pad[48];
};

static void flag(long iters) {
    struct line *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED) { perror("mmap"); exit(1); }
    struct line *ping = &l[0], *pong = &l[1];
    long warm = iters / 10;
    pid_t child = fork();
    if (child == 0) {
        char buf[8];
        for (uint64_t i = 1; i <= (uint64_t)(iters + warm); i++) {
            while (atomic_load_explicit(&ping->seq, memory_order_acquire) != i) poll_pause();
            memcpy(buf, ping->payload, 8);
            before_answer();
            memcpy(pong->payload, buf, 8);
            atomic_store_explicit(&pong->seq, i, memory_order_release);
        }
        _exit(0);
    }
    char buf[8] = "pingpong";
    double t0 = 0;
    for (uint64_t i = 1; i <= (uint64_t)(iters + warm); i++) {
        if (i == (uint64_t)warm + 1) t0 = now();
        if (i > 1) before_answer();
        memcpy(ping->payload, buf, 8);
        atomic_store_explicit(&ping->seq, i, memory_order_release);
        while (atomic_load_explicit(&pong->seq, memory_order_acquire) != i) poll_pause();
        memcpy(buf, pong->payload, 8);
    }
    double t = now() - t0;
    waitpid(child, NULL, 0);
    printf("latency 8 %.3f\n", t / iters / 2 * 1e6);
}

static void cma(long size, long reps) {
    char *src = malloc(size), *dst = malloc(size);
    memset(src, 1, size);
    memset(dst, 0, size);
    int go[2];
    if (pipe(go)) { perror("pipe"); exit(1); }
    pid_t child = fork();
    if (child == 0) {
        char c;
        if (read(go[0], &c, 1) < 0) _exit(1);
        _exit(0);
    }
    /* The child's copy of `src` is at the same address (fork). */
    struct iovec local = {dst, size}, remote = {src, size};
    double t0 = 0;
    for (long r = -2; r < reps; r++) {
        if (r == 0) t0 = now();
        if (process_vm_readv(child, &local, 1, &remote, 1, 0) != size) { perror("process_vm_readv"); exit(1); }
    }
    double t = now() - t0;
    if (write(go[1], "x", 1) < 0) exit(1);
    waitpid(child, NULL, 0);
    printf("bw %ld %.1f\n", size, (double)size * reps / t / 1e6);
}

static void copy(long size, long reps) {
    char *src = malloc(size), *dst = malloc(size);
    memset(src, 1, size);
    memset(dst, 0, size);
    double t0 = 0;
    for (long r = -2; r < reps; r++) {
        if (r == 0) t0 = now();
        memcpy(dst, src, size);
        __asm__ volatile("" ::"r"(dst) : "memory");
    }
    double t = now() - t0;
    printf("bw %ld %.1f\n", size, (double)size * reps / t / 1e6);
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "flag")) flag(atol(argv[2]));
    else if (argc >= 3 && !strcmp(argv[1], "flag-tight")) {
        pause_between_polls = 0;
        flag(atol(argv[2]));
    }
    else if (argc >= 3 && !strcmp(argv[1], "flag-lfence")) {
#if defined(__x86_64__) || defined(__i386__)
        fence_after_poll = 1;
        flag(atol(argv[2]));
#else
        fprintf(stderr, "raw_shm: flag-lfence is for x86 only\n");
        return 2;
#endif
    }
    else if (argc >= 4 && !strcmp(argv[1], "flag-answer")) {
        answer_spins = atol(argv[3]);
        flag(atol(argv[2]));
    }
    else if (argc >= 4 && !strcmp(argv[1], "cma")) cma(atol(argv[2]), atol(argv[3]));
    else if (argc >= 4 && !strcmp(argv[1], "memcpy")) copy(atol(argv[2]), atol(argv[3]));
    else { fprintf(stderr, "usage: raw_shm flag|flag-tight|flag-lfence ITERS | flag-answer ITERS SPINS | cma SIZE REPS | memcpy SIZE REPS\n"); return 2; }
    return 0;
}
