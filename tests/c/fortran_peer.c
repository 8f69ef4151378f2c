/* The C half of the mixed-language test (tests/fortran/mixed.f90): ccode
 * rank i receives fcode rank i's 2x3x4 Fortran array (a(i,j,k) at
 * (i-1) + 2(j-1) + 6(k-1)), checks it element by element, and answers with
 * its sum and the array doubled; then both programs allreduce, C's
 * TETHER_DOUBLE and TETHER_INT meeting Fortran's TETHER_DOUBLE_PRECISION
 * and TETHER_INTEGER. */
#include "common.h"

int main(void) {
    CHECK(tether_init(NULL, NULL));
    int ids[2], comm, r, p;
    CHECK(tether_program_find("fcode", &ids[0]));
    CHECK(tether_program_find("ccode", &ids[1]));
    CHECK(tether_comm_create(2, ids, &comm));
    CHECK(tether_comm_rank(comm, &r));
    CHECK(tether_comm_size(comm, &p));
    int peer = r - p / 2;

    double a[24], total = 0;
    tether_status st;
    CHECK(tether_recv(a, 24, TETHER_DOUBLE, peer, 1, comm, &st));
    EXPECT(st.bytes == 24 * 8 && st.source == peer, "24 doubles from fcode:%d, got %lld bytes from %d", peer,
           (long long)st.bytes, st.source);
    for (int k = 1; k <= 4; k++)
        for (int j = 1; j <= 3; j++)
            for (int i = 1; i <= 2; i++) {
                double want = i + 10 * j + 100 * k + 1000 * peer;
                double got = a[(i - 1) + 2 * (j - 1) + 6 * (k - 1)];
                EXPECT(got == want, "a(%d,%d,%d) == %g, got %g", i, j, k, want, got);
            }
    for (int n = 0; n < 24; n++) {
        total += a[n];
        a[n] *= 2;
    }
    CHECK(tether_send(&total, 1, TETHER_DOUBLE, peer, 2, comm));
    CHECK(tether_send(a, 24, TETHER_DOUBLE, peer, 3, comm));
    double mine[2] = {total, 1}, sums[2];
    CHECK(tether_allreduce(mine, sums, 2, TETHER_DOUBLE, TETHER_SUM, comm));
    int ints[2] = {r, 1}, counts[2];
    CHECK(tether_allreduce(ints, counts, 2, TETHER_INT, TETHER_SUM, comm));
    EXPECT(sums[0] == 2.0 * (6516 + 30516) && sums[1] == p && counts[0] == p * (p - 1) / 2 && counts[1] == p,
           "sums over both programs, got %g %g %d %d", sums[0], sums[1], counts[0], counts[1]);
    CHECK(tether_comm_free(&comm));
    CHECK(tether_finalize());
    printf("C checked the Fortran array of fcode:%d\n", peer);
    return 0;
}
