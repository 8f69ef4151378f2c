/* ZeroMQ ping-pong baseline of `tether bench latency --baselines zmq`
 * (compiled at run time with `cc -O2 zmq_pingpong.c -lzmq`).
 *
 *   zmq_pingpong SIZE WARMUP ITERS [SIZE WARMUP ITERS]...
 *
 * The process forks: the parent binds a ZMQ_PAIR socket to
 * tcp://127.0.0.1:* and passes the endpoint through a pipe, the child
 * connects and echoes every message; each side has its own context,
 * created after the fork. Per size the parent prints
 *   latency SIZE MICROSECONDS      (half the round trip of zmq_send/zmq_recv)
 * A short or missing message is an error (exit 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what) {
    fprintf(stderr, "zmq_pingpong: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static void transfer(void *sock, char *buf, long size, int send_first) {
    for (int step = 0; step < 2; step++) {
        int sending = (step == 0) == send_first;
        int n = sending ? zmq_send(sock, buf, (size_t)size, 0) : zmq_recv(sock, buf, (size_t)size, 0);
        if (n != size) die(sending ? "zmq_send" : "zmq_recv");
    }
}

int main(int argc, char **argv) {
    if (argc < 4 || (argc - 1) % 3 != 0) {
        fprintf(stderr, "usage: zmq_pingpong SIZE WARMUP ITERS [SIZE WARMUP ITERS]...\n");
        return 64;
    }
    int groups = (argc - 1) / 3;
    long largest = 1;
    for (int g = 0; g < groups; g++) {
        long size = atol(argv[1 + 3 * g]);
        if (size > largest) largest = size;
    }
    char *buf = calloc(1, (size_t)largest);
    int pipefd[2];
    if (!buf || pipe(pipefd) != 0) { perror("zmq_pingpong"); return 1; }
    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_PAIR);
    if (!sock) die("zmq_socket");
    char endpoint[256] = {0};
    if (child == 0) {
        close(pipefd[1]);
        if (read(pipefd[0], endpoint, sizeof endpoint - 1) <= 0) { perror("read endpoint"); _exit(1); }
        if (zmq_connect(sock, endpoint) != 0) die("zmq_connect");
    } else {
        close(pipefd[0]);
        size_t len = sizeof endpoint;
        if (zmq_bind(sock, "tcp://127.0.0.1:*") != 0) die("zmq_bind");
        if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, endpoint, &len) != 0) die("zmq_getsockopt");
        if (write(pipefd[1], endpoint, strlen(endpoint)) < 0) { perror("write endpoint"); return 1; }
        close(pipefd[1]);
    }
    for (int g = 0; g < groups; g++) {
        long size = atol(argv[1 + 3 * g]), warmup = atol(argv[2 + 3 * g]), iters = atol(argv[3 + 3 * g]);
        double t0 = 0;
        for (long it = 0; it < warmup + iters; it++) {
            if (it == warmup) t0 = now_us();
            transfer(sock, buf, size, child != 0);
        }
        if (child != 0) {
            printf("latency %ld %.3f\n", size, (now_us() - t0) / (2.0 * (double)iters));
            fflush(stdout);
        }
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    if (child == 0) _exit(0);
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
