/* Two threads of each process call the library at once: the thread that
 * initialised it and a second one, each exchanging its own stream of
 * messages (tag 1 and tag 2) with the same thread of the peer, by
 * non-blocking calls that each hold the library briefly. The C API's
 * lock is biased to the first thread until the second one comes
 * (crates/tether-capi/src/lock.rs): every message must arrive whole, in
 * order, on its stream, while the bias ends mid-run. Between ranks 0 and
 * 1 of the universe.
 *
 * First, a child of fork() (which starts without the parent's
 * membarrier registration) has a second thread take the library's lock,
 * which revokes the bias there: it must get in. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define MESSAGES 2000
#define LEN 24

struct stream {
    int tag;
    int peer;
};

static void *exchange(void *arg) {
    const struct stream *s = arg;
    unsigned char out[LEN], in[LEN];
    for (int i = 0; i < MESSAGES; i++) {
        uint64_t seed = (uint64_t)s->tag * 1000003u + (uint64_t)i;
        fill(out, LEN, seed);
        tether_request send, recv;
        CHECK(tether_irecv(in, LEN, TETHER_BYTE, s->peer, s->tag, TETHER_COMM_UNIVERSE, &recv));
        CHECK(tether_isend(out, LEN, TETHER_BYTE, s->peer, s->tag, TETHER_COMM_UNIVERSE, &send));
        int sent = 0, received = 0;
        tether_status st;
        while (!sent || !received) {
            if (!sent) CHECK(tether_test(&send, &sent, TETHER_STATUS_IGNORE));
            if (!received) CHECK(tether_test(&recv, &received, &st));
        }
        EXPECT(st.bytes == LEN && st.tag == s->tag, "stream %d message %d: %lld bytes, tag %d",
               s->tag, i, (long long)st.bytes, st.tag);
        for (size_t k = 0; k < LEN; k++)
            EXPECT(in[k] == pattern_byte(seed, k), "stream %d message %d byte %zu", s->tag, i, k);
    }
    return NULL;
}

static void *read_a_hint(void *arg) {
    char value[64];
    *(int *)arg = tether_hint_get("EAGER_LIMIT", value, sizeof value);
    return NULL;
}

/* A forked child's second thread takes the lock the child's only other
 * thread (the owner, by inheritance) holds the bias of. */
static void lock_in_a_forked_child(void) {
    fflush(stdout);
    pid_t child = fork();
    EXPECT(child >= 0, "fork failed");
    if (child == 0) {
        int rc = -1;
        pthread_t t;
        if (pthread_create(&t, NULL, read_a_hint, &rc) != 0 || pthread_join(t, NULL) != 0) _exit(2);
        _exit(rc == TETHER_SUCCESS ? 0 : 3);
    }
    int status;
    EXPECT(waitpid(child, &status, 0) == child, "waitpid failed");
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child's thread: status %d", status);
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    lock_in_a_forked_child();
    int me;
    CHECK(tether_universe_rank(&me));
    struct stream first = {1, 1 - me}, second = {2, 1 - me};
    pthread_t other;
    EXPECT(pthread_create(&other, NULL, exchange, &second) == 0, "pthread_create failed");
    exchange(&first);
    EXPECT(pthread_join(other, NULL) == 0, "pthread_join failed");
    CHECK(tether_finalize());
    printf("ok threads %d\n", me);
    return 0;
}
