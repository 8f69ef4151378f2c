/* Rank 0 sends one message of 3 GiB to rank 1, which checks every word. */
#include "common.h"

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int me;
    CHECK(tether_universe_rank(&me));
    const int64_t words = (3ll << 30) / 8;
    uint64_t *buf = xmalloc((size_t)words * 8);
    if (me == 0) {
        for (int64_t i = 0; i < words; i++) buf[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        CHECK(tether_send(buf, words * 8, TETHER_BYTE, 1, 0, TETHER_COMM_UNIVERSE));
    } else {
        memset(buf, 0, (size_t)words * 8);
        tether_status st;
        CHECK(tether_recv(buf, words, TETHER_UINT64, 0, 0, TETHER_COMM_UNIVERSE, &st));
        int64_t count;
        CHECK(tether_get_count(&st, TETHER_UINT64, &count));
        EXPECT(count == words, "count %lld", (long long)count);
        for (int64_t i = 0; i < words; i++)
            EXPECT(buf[i] == (uint64_t)i * 0x9E3779B97F4A7C15ull, "word %lld wrong", (long long)i);
        printf("received %lld bytes intact\n", (long long)st.bytes);
    }
    free(buf);
    CHECK(tether_finalize());
    return 0;
}
