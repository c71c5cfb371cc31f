/* infile: opening a file to read without blocking on what is not one (see core/infile.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/infile.h"
#include "hetrain/core.h"

typedef unsigned long long ull;

/* What a non-regular file is, for the message. */
static const char *kind(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "of another kind";
}

int het_infile_open(const char *path, const char *what, uint64_t max_bytes, int *fd,
                    uint64_t *size) {
    *fd = -1;
    if (size) *size = 0;
    if (!path || !*path) return het_error_set(HET_EINVAL, "empty path, expected %s", what);
    int k = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (k < 0) return het_error_set(HET_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int st = HET_OK;
    if (fstat(k, &sb) != 0)
        st = het_error_set(HET_EIO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        st = het_error_set(HET_EIO, "%s: is a directory, expected %s (a directory is not a "
                           "regular file)", path, what);
    else if (!S_ISREG(sb.st_mode))
        st = het_error_set(HET_EIO, "%s: not a regular file (%s), expected %s", path,
                           kind(sb.st_mode), what);
    else if (max_bytes && (uint64_t)sb.st_size > max_bytes)
        st = het_error_set(HET_EFORMAT, "%s: file of %llu bytes, expected %s of at most %llu "
                           "bytes", path, (ull)sb.st_size, what, (ull)max_bytes);
    else {
        /* regular: reads never block; clear O_NONBLOCK all the same (network filesystems) */
        int fl = fcntl(k, F_GETFL);
        if (fl < 0 || fcntl(k, F_SETFL, fl & ~O_NONBLOCK) != 0)
            st = het_error_set(HET_EIO, "%s: cannot set blocking reads: %s", path,
                               strerror(errno));
    }
    if (st) {
        close(k);
        return st;
    }
    *fd = k;
    if (size) *size = (uint64_t)sb.st_size;
    return HET_OK;
}

int het_infile_fopen(const char *path, const char *what, uint64_t max_bytes, FILE **f,
                     uint64_t *size) {
    *f = NULL;
    int fd;
    int st = het_infile_open(path, what, max_bytes, &fd, size);
    if (st) return st;
    *f = fdopen(fd, "rb");
    if (!*f) {
        st = het_error_set(HET_EIO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return st;
}

int het_infile_pread(const char *path, int fd, uint64_t off, void *dst, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        size_t ask = n - *got < ((size_t)1 << 30) ? n - *got : (size_t)1 << 30;
        ssize_t k = pread(fd, (char *)dst + *got, ask, (off_t)(off + *got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            return het_error_set(HET_EIO, "%s: offset %llu: read error: %s", path,
                                 (ull)(off + *got), strerror(errno));
        if (k == 0) break;
        *got += (size_t)k;
    }
    return HET_OK;
}

int het_infile_read_all(const char *path, int fd, uint64_t size, const char *what,
                        uint8_t **buf, size_t *n) {
    *buf = NULL;
    *n = 0;
    if (size >= (uint64_t)SIZE_MAX)
        return het_error_set(HET_EFORMAT, "%s: file of %llu bytes, too large for memory", path,
                             (ull)size);
    uint8_t *b = malloc((size_t)size + 1);
    if (!b)
        return het_error_set(HET_ENOMEM, "%s: out of memory for its %llu bytes", path,
                             (ull)size);
    size_t got, more = 0;
    uint8_t extra;
    int st = het_infile_pread(path, fd, 0, b, (size_t)size, &got);
    if (!st && got == size) st = het_infile_pread(path, fd, size, &extra, 1, &more);
    if (!st && (got != size || more))
        st = het_error_set(HET_EIO, "%s: offset %llu: the file changed size while it was read "
                           "(%llu bytes at open), expected %s that stays put", path,
                           (ull)(got < size ? got : size), (ull)size, what);
    if (st) {
        free(b);
        return st;
    }
    b[size] = 0;
    *buf = b;
    *n = (size_t)size;
    return HET_OK;
}

int het_infile_load(const char *path, const char *what, uint64_t max_bytes, uint8_t **buf,
                    size_t *n) {
    *buf = NULL;
    *n = 0;
    int fd;
    uint64_t size;
    int st = het_infile_open(path, what, max_bytes, &fd, &size);
    if (st) return st;
    st = het_infile_read_all(path, fd, size, what, buf, n);
    close(fd);
    return st;
}

double het_infile_memory(void) {
    const char *e = getenv("HET_MEMORY_LIMIT");
    if (e && *e) {
        char *end;
        double v = strtod(e, &end);
        if (!*end && v > 0) return v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 1e18;
}
