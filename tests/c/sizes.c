/* Message sizes across every protocol boundary, both directions between
 * ranks 0 and 1: 0 B, the one-line frame's payload limit (40 B) +-1, the
 * shared-memory ring's one-piece frame limit (ring bytes - 64 B prefix -
 * 64 B kept free) and the ring size itself +-1, the eager limit +-1, and
 * 64 MiB. Each message is echoed back and checked.
 *
 * With SIZES_DENY_READV=1 in its environment, the process first installs
 * a seccomp filter that fails process_vm_readv with EPERM (as some
 * container policies do) while process_vm_writev stays allowed; with
 * SIZES_DENY_MEMBARRIER=1, one that fails membarrier with EPERM. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "common.h"

/* Installs a seccomp filter that fails system call `nr` with EPERM. */
static void deny(unsigned int nr) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = (unsigned short)(sizeof filter / sizeof filter[0]), .filter = filter};
    EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS failed");
    EXPECT(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "seccomp filter refused");
}

/* Whether environment variable `key` is "1". */
static int env_is_1(const char *key) {
    const char *value = getenv(key);
    return value && !strcmp(value, "1");
}

static int64_t setting(const char *key) {
    char value[64];
    CHECK(tether_hint_get(key, value, sizeof value));
    return atoll(value);
}

int main(int argc, char **argv) {
    if (env_is_1("SIZES_DENY_READV")) deny(__NR_process_vm_readv);
    if (env_is_1("SIZES_DENY_MEMBARRIER")) deny(__NR_membarrier);
    CHECK(tether_init(&argc, &argv));
    int me;
    CHECK(tether_universe_rank(&me));
    int64_t ring = 1, eager = setting("EAGER_LIMIT");
    while (ring < setting("SHM_RING_BYTES")) ring *= 2;
    const int64_t sizes[] = {0,         1,         39,        40,         41,
                             ring - 129, ring - 128, ring - 127, ring - 65, ring - 64,
                             ring - 63, ring - 1,  ring,      ring + 1,  eager - 1,
                             eager,     eager + 1, 64ll << 20};
    const int n = (int)(sizeof sizes / sizeof sizes[0]);
    unsigned char *buf = xmalloc(64u << 20);
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)sizes[i];
        tether_status st;
        if (me == 0) {
            fill(buf, len, (uint64_t)i);
            CHECK(tether_send(buf, (int64_t)len, TETHER_BYTE, 1, i, TETHER_COMM_UNIVERSE));
            memset(buf, 0, len);
            CHECK(tether_recv(buf, 64 << 20, TETHER_BYTE, 1, i, TETHER_COMM_UNIVERSE, &st));
        } else {
            CHECK(tether_recv(buf, 64 << 20, TETHER_BYTE, 0, i, TETHER_COMM_UNIVERSE, &st));
            CHECK(tether_send(buf, st.bytes, TETHER_BYTE, 0, i, TETHER_COMM_UNIVERSE));
        }
        EXPECT(st.bytes == (int64_t)len, "size %zu came back as %lld bytes", len, (long long)st.bytes);
        long long bad = first_mismatch(buf, len, (uint64_t)i);
        EXPECT(bad < 0, "message of %zu bytes wrong at byte %lld", len, bad);
        if (me == 0) printf("size %zu ok\n", len);
    }
    free(buf);
    CHECK(tether_finalize());
    printf("ok sizes\n");
    return 0;
}
