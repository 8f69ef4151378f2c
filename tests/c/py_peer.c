/* The C side of tests/python/c_peer.py: program `csim` rank i talks to
 * rank i of program `pymodel` (universe rank csim_size + i).
 *   1. sends 1000 doubles i*1000+k (tag 1), receives them back plus 0.5;
 *   2. receives 64 int32 (tag 2) from any source, checks who sent them;
 *   3. sends 16 bytes (tag 3) that Python receives into 8: truncation;
 *   4. receives a 3 MiB float32 field (rendezvous) and checks it.
 * Prints "ok c-python". */
#include "common.h"

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int me, n;
    CHECK(tether_program_rank(&me));
    CHECK(tether_program_size(0, &n));
    int peer = n + me;

    double field[1000], back[1000];
    for (int k = 0; k < 1000; k++) field[k] = me * 1000 + k;
    CHECK(tether_send(field, 1000, TETHER_DOUBLE, peer, 1, TETHER_COMM_UNIVERSE));
    CHECK(tether_recv(back, 1000, TETHER_DOUBLE, peer, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
    for (int k = 0; k < 1000; k++) EXPECT(back[k] == field[k] + 0.5, "back[%d] = %f", k, back[k]);

    int32_t ints[64];
    tether_status st;
    CHECK(tether_recv(ints, 64, TETHER_INT32, TETHER_ANY_SOURCE, 2, TETHER_COMM_UNIVERSE, &st));
    EXPECT(st.source == peer && st.bytes == 256, "source %d bytes %lld", st.source, (long long)st.bytes);
    for (int k = 0; k < 64; k++) EXPECT(ints[k] == peer * 100 + k, "ints[%d] = %d", k, ints[k]);

    unsigned char sixteen[16] = {0};
    CHECK(tether_send(sixteen, 16, TETHER_BYTE, peer, 3, TETHER_COMM_UNIVERSE));

    size_t count = 3u << 18; /* 3 MiB of float32 */
    float *big = malloc(count * sizeof *big);
    CHECK(tether_recv(big, (int64_t)count, TETHER_FLOAT, peer, 4, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
    for (size_t k = 0; k < count; k++) EXPECT(big[k] == (float)(k % 1000), "big[%zu] = %f", k, big[k]);
    free(big);

    printf("ok c-python\n");
    CHECK(tether_finalize());
    return 0;
}
