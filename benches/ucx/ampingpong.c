/* Raw UCP active-message ping-pong and bandwidth, the baseline for
 * tether-ucx's examples/ampingpong.rs (same scheme, same output).
 *
 * One command runs both ranks: the process forks before touching UCX,
 * the two exchange worker addresses over pipes, then
 *   latency:   ITERS round trips of an 8 B AM (no header), eager;
 *   bandwidth: BW_ITERS 16 MiB AMs with UCP_AM_SEND_FLAG_RNDV, each
 *              received with ucp_am_recv_data_nbx into a preallocated
 *              buffer and answered by a 0 B AM.
 * Progress by spinning on ucp_worker_progress. UCX_TLS/UCX_NET_DEVICES
 * come from the environment; BENCH_ERR_MODE=peer selects
 * UCP_ERR_HANDLING_MODE_PEER (default NONE; PEER refuses plain sm). Build: see README.md. */
#include <ucp/api/ucp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>

#define AM_ID 7
#define LAT_SIZE 8
#define BW_SIZE (16u << 20)

static ucp_worker_h worker;
static unsigned long received;
static void *rndv_desc;
static size_t rndv_len;

static void die(const char *what, ucs_status_t s) {
    fprintf(stderr, "%s: %s\n", what, ucs_status_string(s));
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static ucs_status_t am_cb(void *arg, const void *hdr, size_t hlen, void *data,
                          size_t len, const ucp_am_recv_param_t *p) {
    (void)arg; (void)hdr; (void)hlen;
    received++;
    if (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        rndv_desc = data;
        rndv_len = len;
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

static void wait_req(void *r, const char *what) {
    if (r == NULL) return;
    if (UCS_PTR_IS_ERR(r)) die(what, UCS_PTR_STATUS(r));
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucs_status_t s = ucp_request_check_status(r);
    ucp_request_free(r);
    if (s != UCS_OK) die(what, s);
}

static void send_am(ucp_ep_h ep, const void *buf, size_t len, uint32_t flags) {
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
    p.datatype = ucp_dt_make_contig(1);
    p.flags = flags;
    wait_req(ucp_am_send_nbx(ep, AM_ID, NULL, 0, buf, len, &p), "ucp_am_send_nbx");
}

static void wait_recv(unsigned long n) {
    while (received < n) ucp_worker_progress(worker);
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

static void run(int rank, int rfd, int wfd, long iters, long bw_iters) {
    ucp_params_t cp = {0};
    cp.field_mask = UCP_PARAM_FIELD_FEATURES;
    cp.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
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
    /* The handler goes in before the address is published. */
    ucp_am_handler_param_t hp = {0};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = AM_ID;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = am_cb;
    if ((s = ucp_worker_set_am_recv_handler(worker, &hp)) != UCS_OK) die("set_am_recv_handler", s);
    ucp_address_t *addr;
    size_t alen;
    if ((s = ucp_worker_get_address(worker, &addr, &alen)) != UCS_OK) die("get_address", s);
    xwrite(wfd, &alen, sizeof alen);
    xwrite(wfd, addr, alen);
    ucp_worker_release_address(worker, addr);
    size_t plen;
    xread(rfd, &plen, sizeof plen);
    void *peer = malloc(plen);
    xread(rfd, peer, plen);
    ucp_ep_params_t ep_p = {0};
    ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_p.address = peer;
    const char *em = getenv("BENCH_ERR_MODE"); /* "peer" or "none" (default) */
    ep_p.err_mode = em && !strcmp(em, "peer") ? UCP_ERR_HANDLING_MODE_PEER
                                              : UCP_ERR_HANDLING_MODE_NONE;
    ucp_ep_h ep;
    if ((s = ucp_ep_create(worker, &ep_p, &ep)) != UCS_OK) die("ucp_ep_create", s);

    char small[LAT_SIZE] = {0};
    long warm = iters / 10 + 10;
    unsigned long n = 0;
    double t0 = 0;
    for (long i = 0; i < warm + iters; i++) {
        if (i == warm) t0 = now();
        if (rank == 0) {
            send_am(ep, small, LAT_SIZE, 0);
            wait_recv(++n);
        } else {
            wait_recv(++n);
            send_am(ep, small, LAT_SIZE, 0);
        }
    }
    double lat = (now() - t0) / iters / 2 * 1e6;

    char *big = malloc(BW_SIZE);
    memset(big, rank + 1, BW_SIZE);
    for (long i = 0; i < 2 + bw_iters; i++) {
        if (i == 2) t0 = now();
        if (rank == 0) {
            send_am(ep, big, BW_SIZE, UCP_AM_SEND_FLAG_RNDV);
            wait_recv(++n);
        } else {
            wait_recv(++n);
            if (rndv_desc == NULL || rndv_len != BW_SIZE) { fprintf(stderr, "no rndv\n"); exit(1); }
            ucp_request_param_t p = {0};
            p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
            p.datatype = ucp_dt_make_contig(1);
            void *d = rndv_desc;
            rndv_desc = NULL;
            wait_req(ucp_am_recv_data_nbx(worker, d, big, BW_SIZE, &p), "ucp_am_recv_data_nbx");
            send_am(ep, NULL, 0, 0);
        }
    }
    double bw = (double)BW_SIZE * bw_iters / (now() - t0) / 1e6;
    if (rank == 0) {
        const char *tls = getenv("UCX_TLS");
        printf("c    UCX_TLS=%s lat_8B_us=%.3f bw_16MiB_MBps=%.0f (iters %ld, %ld)\n",
               tls ? tls : "(unset)", lat, bw, iters, bw_iters);
    }
    /* Both ranks finish their last exchange before closing. */
    char byte = 0;
    xwrite(wfd, &byte, 1);
    xread(rfd, &byte, 1);
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
    free(big);
    free(peer);
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 10000;
    long bw_iters = argc > 2 ? atol(argv[2]) : 20;
    int a[2], b[2];
    if (pipe(a) || pipe(b)) { perror("pipe"); return 1; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        run(1, a[0], b[1], iters, bw_iters);
        return 0;
    }
    run(0, b[0], a[1], iters, bw_iters);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
