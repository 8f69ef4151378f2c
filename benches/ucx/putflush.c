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
#include "pair.h"

#include <fcntl.h>

static void flush(ucp_ep_h ep) {
    ucp_request_param_t p = {0};
    wait_req(ucp_ep_flush_nbx(ep, &p), "ucp_ep_flush_nbx");
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

static void run(int rank, int rfd, int wfd, void *arg) {
    long iters = *(long *)arg;
    ucp_context_h ctx =
        start_worker(UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP);
    void *peer;
    ucp_ep_h ep = connect_pair(rfd, wfd, UCP_ERR_HANDLING_MODE_NONE, &peer);
    ucs_status_t s;

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
    stop_worker(ctx, ep);
    free(peer);
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 10000;
    return run_pair(run, &iters);
}
