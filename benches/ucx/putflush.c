/* Raw UCP one-sided operations, the baseline for window operations of
 * Tether's ucx transport with TETHER_UCX_RMA=on (compare.py --rma).
 *
 * One command runs both ranks: the process forks before touching UCX,
 * the two exchange worker addresses over pipes, rank 1 maps a window
 * (ucp_mem_map of malloc'ed memory, as tether_win_create does) and sends
 * its packed key and address; then rank 0 times, ITERS times each:
 *   put:  an 8 B ucp_put_nbx, then ucp_ep_flush_nbx;
 *   get:  an 8 B ucp_get_nbx, then a flush;
 *   fadd: an 8 B ucp_atomic_op_nbx(ADD) fetching the old value, then a
 *         flush (the last value fetched is checked).
 * Rank 1 spins on ucp_worker_progress meanwhile (over tcp and host shared
 * memory UCX emulates these with messages the target serves), until rank
 * 0 says it is done over the pipe. UCX_TLS/UCX_NET_DEVICES come from the
 * environment. Build: see README.md. */
#include <ucp/api/ucp.h>
#include <fcntl.h>
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

static void wait_req(void *r, const char *what) {
    if (r == NULL) return;
    if (UCS_PTR_IS_ERR(r)) die(what, UCS_PTR_STATUS(r));
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucs_status_t s = ucp_request_check_status(r);
    ucp_request_free(r);
    if (s != UCS_OK) die(what, s);
}

static void flush(ucp_ep_h ep) {
    ucp_request_param_t p = {0};
    wait_req(ucp_ep_flush_nbx(ep, &p), "ucp_ep_flush_nbx");
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

/* Sends `len` bytes with their length first. */
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

/* Times `iters` operations of kind `what` (after a tenth as warm-up): us each. */
static double timed(ucp_ep_h ep, ucp_rkey_h rkey, uint64_t remote, const char *what, long iters) {
    uint64_t value = 1, fetched = 0;
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(strcmp(what, "fadd") ? 1 : 8);
    if (!strcmp(what, "fadd")) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        p.reply_buffer = &fetched;
    }
    long warm = iters / 10 + 10;
    double t0 = 0;
    for (long i = 0; i < warm + iters; i++) {
        if (i == warm) t0 = now();
        void *r;
        if (!strcmp(what, "put")) r = ucp_put_nbx(ep, &value, 8, remote, rkey, &p);
        else if (!strcmp(what, "get")) r = ucp_get_nbx(ep, &value, 8, remote, rkey, &p);
        else r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &value, 1, remote + 8, rkey, &p);
        wait_req(r, what);
        flush(ep);
    }
    double us = (now() - t0) / iters * 1e6;
    if (!strcmp(what, "fadd") && fetched != (uint64_t)(warm + iters - 1)) {
        fprintf(stderr, "fetch-add check failed: %llu\n", (unsigned long long)fetched);
        exit(1);
    }
    return us;
}

static void run(int rank, int rfd, int wfd, long iters) {
    ucp_params_t cp = {0};
    cp.field_mask = UCP_PARAM_FIELD_FEATURES;
    cp.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP;
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
    ucp_address_t *addr;
    size_t alen;
    if ((s = ucp_worker_get_address(worker, &addr, &alen)) != UCS_OK) die("get_address", s);
    send_blob(wfd, addr, alen);
    ucp_worker_release_address(worker, addr);
    void *peer = recv_blob(rfd);
    ucp_ep_params_t ep_p = {0};
    ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_p.address = peer;
    ucp_ep_h ep;
    if ((s = ucp_ep_create(worker, &ep_p, &ep)) != UCS_OK) die("ucp_ep_create", s);

    if (rank == 1) {
        size_t size = 4096;
        uint64_t *window = calloc(1, size);
        ucp_mem_map_params_t mp = {0};
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = window;
        mp.length = size;
        ucp_mem_h memh;
        if ((s = ucp_mem_map(ctx, &mp, &memh)) != UCS_OK) die("ucp_mem_map", s);
        void *packed;
        size_t plen;
        if ((s = ucp_rkey_pack(ctx, memh, &packed, &plen)) != UCS_OK) die("ucp_rkey_pack", s);
        send_blob(wfd, packed, plen);
        ucp_rkey_buffer_release(packed);
        uint64_t base = (uint64_t)(uintptr_t)window;
        xwrite(wfd, &base, sizeof base);
        /* Serve until rank 0 is done (its byte arrives on the pipe). */
        fcntl(rfd, F_SETFL, O_NONBLOCK);
        char byte;
        while (read(rfd, &byte, 1) != 1) ucp_worker_progress(worker);
        ucp_mem_unmap(ctx, memh);
        free(window);
    } else {
        void *packed = recv_blob(rfd);
        uint64_t base;
        xread(rfd, &base, sizeof base);
        ucp_rkey_h rkey;
        if ((s = ucp_ep_rkey_unpack(ep, packed, &rkey)) != UCS_OK) die("ucp_ep_rkey_unpack", s);
        double put = timed(ep, rkey, base, "put", iters);
        double get = timed(ep, rkey, base, "get", iters);
        double fadd = timed(ep, rkey, base, "fadd", iters);
        const char *tls = getenv("UCX_TLS");
        printf("c    UCX_TLS=%s put_8B_us=%.3f get_8B_us=%.3f fadd_8B_us=%.3f (iters %ld)\n",
               tls ? tls : "(unset)", put, get, fadd, iters);
        ucp_rkey_destroy(rkey);
        free(packed);
        char byte = 0;
        xwrite(wfd, &byte, 1);
    }
    ucp_request_param_t cp2 = {0};
    cp2.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp2.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *r = ucp_ep_close_nbx(ep, &cp2);
    if (r != NULL && !UCS_PTR_IS_ERR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
        ucp_request_free(r);
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    free(peer);
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 10000;
    int a[2], b[2];
    if (pipe(a) || pipe(b)) { perror("pipe"); return 1; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        run(1, a[0], b[1], iters);
        return 0;
    }
    run(0, b[0], a[1], iters);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
