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
#include "pair.h"

#define AM_ID 7
#define LAT_SIZE 8
#define BW_SIZE (16u << 20)

static unsigned long received;
static void *rndv_desc;
static size_t rndv_len;

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

struct args {
    long iters, bw_iters;
};

static void run(int rank, int rfd, int wfd, void *arg) {
    long iters = ((struct args *)arg)->iters, bw_iters = ((struct args *)arg)->bw_iters;
    ucp_context_h ctx = start_worker(UCP_FEATURE_AM | UCP_FEATURE_WAKEUP);
    ucs_status_t s;
    /* The handler goes in before the address is published. */
    ucp_am_handler_param_t hp = {0};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = AM_ID;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = am_cb;
    if ((s = ucp_worker_set_am_recv_handler(worker, &hp)) != UCS_OK) die("set_am_recv_handler", s);
    const char *em = getenv("BENCH_ERR_MODE"); /* "peer" or "none" (default) */
    void *peer;
    ucp_ep_h ep = connect_pair(rfd, wfd,
                               em && !strcmp(em, "peer") ? UCP_ERR_HANDLING_MODE_PEER
                                                         : UCP_ERR_HANDLING_MODE_NONE,
                               &peer);

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
    stop_worker(ctx, ep);
    free(big);
    free(peer);
}

int main(int argc, char **argv) {
    struct args args = {argc > 1 ? atol(argv[1]) : 10000, argc > 2 ? atol(argv[2]) : 20};
    return run_pair(run, &args);
}
