/* The scaffolding shared by the raw UCP baselines of benches/ucx: two
 * ranks made by one fork, worker addresses and other blobs exchanged over
 * pipes, one endpoint each way, progress by spinning. Each program
 * defines its own run() and main(); a failure prints the UCX call and
 * its status and exits 1. */
#ifndef BENCHES_UCX_PAIR_H
#define BENCHES_UCX_PAIR_H

#include <ucp/api/ucp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>

static ucp_worker_h worker;

static void die(const char *what, ucs_status_t s) {
    fprintf(stderr, "%s: %s\n", what, ucs_status_string(s));
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Progresses until the request `r` (or a status) is done; dies on error. */
static void wait_req(void *r, const char *what) {
    if (r == NULL) return;
    if (UCS_PTR_IS_ERR(r)) die(what, UCS_PTR_STATUS(r));
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucs_status_t s = ucp_request_check_status(r);
    ucp_request_free(r);
    if (s != UCS_OK) die(what, s);
}

static void xwrite(int fd, const void *b, size_t n) {
    if (write(fd, b, n) != (ssize_t)n) { perror("write"); exit(1); }
}
static void xread(int fd, void *b, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)b + got, n - got);
        if (r <= 0) { perror("read"); exit(1); }
        got += r;
    }
}

/* Sends `len` bytes with their length first; recv_blob mallocs them. */
static void send_blob(int fd, const void *b, size_t len) {
    xwrite(fd, &len, sizeof len);
    xwrite(fd, b, len);
}
static void *recv_blob(int fd) {
    size_t len;
    xread(fd, &len, sizeof len);
    void *b = malloc(len);
    xread(fd, b, len);
    return b;
}

/* A context with `features` (UCX_* from the environment) and the global
 * single-threaded worker. */
static ucp_context_h start_worker(uint64_t features) {
    ucp_params_t cp = {0};
    cp.field_mask = UCP_PARAM_FIELD_FEATURES;
    cp.features = features;
    ucp_config_t *cfg;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg);
    if (s != UCS_OK) die("ucp_config_read", s);
    ucp_context_h ctx;
    s = ucp_init(&cp, cfg, &ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK) die("ucp_init", s);
    ucp_worker_params_t wp = {0};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((s = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK) die("ucp_worker_create", s);
    return ctx;
}

/* Publishes the worker's address to the other rank, reads its address and
 * connects to it in `err_mode`. Handlers must be registered before. The
 * peer's address is returned in `*peer` (free it after the endpoint). */
static ucp_ep_h connect_pair(int rfd, int wfd, ucp_err_handling_mode_t err_mode, void **peer) {
    ucp_address_t *addr;
    size_t alen;
    ucs_status_t s = ucp_worker_get_address(worker, &addr, &alen);
    if (s != UCS_OK) die("get_address", s);
    send_blob(wfd, addr, alen);
    ucp_worker_release_address(worker, addr);
    *peer = recv_blob(rfd);
    ucp_ep_params_t ep_p = {0};
    ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_p.address = *peer;
    ep_p.err_mode = err_mode;
    ucp_ep_h ep;
    if ((s = ucp_ep_create(worker, &ep_p, &ep)) != UCS_OK) die("ucp_ep_create", s);
    return ep;
}

/* Closes `ep` (forcing), then the worker and the context. */
static void stop_worker(ucp_context_h ctx, ucp_ep_h ep) {
    ucp_request_param_t cp = {0};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *r = ucp_ep_close_nbx(ep, &cp);
    if (r != NULL && !UCS_PTR_IS_ERR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
        ucp_request_free(r);
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
}

/* Forks before touching UCX and runs rank 1 in the child, rank 0 here,
 * each with the pipe ends to the other; returns main's exit code. */
static int run_pair(void (*run)(int rank, int rfd, int wfd, void *arg), void *arg) {
    int a[2], b[2];
    if (pipe(a) || pipe(b)) { perror("pipe"); return 1; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        run(1, a[0], b[1], arg);
        exit(0);
    }
    run(0, b[0], a[1], arg);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

#endif
