/* The raw file-system baseline of the file transport's benchmark: the
 * same bytes written to a file and read back through the same directory,
 * with nothing else. One process, per window: `window` files each created,
 * written from the send buffer, closed and renamed into place, then each
 * opened, read into the receive buffer, closed and removed; this is the
 * least a file exchange must do (the removal included, or the directory
 * fills up). Same arguments and output as tether_pingpong's streaming part
 * (bench_common.h: --bw SIZES, --window N, --bw-iters N, --bw-warmup N),
 * plus --dir DIR (default: the current directory).
 *
 * Output: "bw <bytes> <MB/s>" per size, 1 MB = 1e6 bytes. */
#include "../p2p/bench_common.h"

#include <fcntl.h>
#include <unistd.h>

static void die(const char *what, const char *path)
{
    perror(path);
    fprintf(stderr, "raw_file: %s failed\n", what);
    exit(1);
}

static void write_all(int fd, const unsigned char *buf, long size, const char *path)
{
    for (long done = 0; done < size;) {
        ssize_t n = write(fd, buf + done, (size_t)(size - done));
        if (n <= 0)
            die("write", path);
        done += n;
    }
}

static void read_all(int fd, unsigned char *buf, long size, const char *path)
{
    for (long done = 0; done < size;) {
        ssize_t n = read(fd, buf + done, (size_t)(size - done));
        if (n <= 0)
            die("read", path);
        done += n;
    }
}

int main(int argc, char **argv)
{
    const char *dir = ".";
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else
            argv[kept++] = argv[i];
    }
    argc = kept;
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    long max = bench_max_size(&o);
    unsigned char *sbuf = bench_alloc(max), *rbuf = bench_alloc(max);
    char temp[4096], path[4096];
    printf("# raw_file: write, rename, read, remove in %s, window %d\n", dir, o.window);
    for (int s = 0; s < o.n_bw; s++) {
        long size = o.bw_sizes[s];
        long iters = bench_bw_iters(&o, size), warmup = bench_bw_warmup(&o, size);
        bench_fill(sbuf, size);
        double t0 = 0;
        for (long it = 0; it < iters + warmup; it++) {
            if (it == warmup)
                t0 = bench_now_us();
            sbuf[0] = bench_mark(it);
            for (int w = 0; w < o.window; w++) {
                snprintf(temp, sizeof temp, "%s/.tmp-raw-%d", dir, w);
                snprintf(path, sizeof path, "%s/raw-%d", dir, w);
                int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL, 0600);
                if (fd < 0)
                    die("open for writing", temp);
                write_all(fd, sbuf, size, temp);
                if (close(fd) != 0)
                    die("close", temp);
                if (rename(temp, path) != 0)
                    die("rename", path);
            }
            for (int w = 0; w < o.window; w++) {
                snprintf(path, sizeof path, "%s/raw-%d", dir, w);
                int fd = open(path, O_RDONLY);
                if (fd < 0)
                    die("open for reading", path);
                read_all(fd, rbuf, size, path);
                close(fd);
                if (unlink(path) != 0)
                    die("unlink", path);
            }
            if (rbuf[0] != bench_mark(it) || (size > 1 && memcmp(rbuf + 1, sbuf + 1, (size_t)size - 1) != 0)) {
                fprintf(stderr, "raw_file: data read back differs at size %ld\n", size);
                return 1;
            }
        }
        double t1 = bench_now_us();
        printf("bw %ld %.1f\n", size, (double)size * o.window * (double)iters / (t1 - t0));
        fflush(stdout);
    }
    return 0;
}
