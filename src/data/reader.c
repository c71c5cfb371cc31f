/* Byte reader for dataset files: raw or gzip through zlib's inflate (see reader.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "data/reader.h"

typedef unsigned long long ull;

static int reader_fill(het_reader *r) {
    r->in_pos = 0;
    r->in_len = fread(r->in, 1, HET_READER_CHUNK, r->f);
    r->raw_read += r->in_len;
    if (r->in_len == 0 && ferror(r->f))
        return het_error_set(HET_EIO, "%s: offset %llu: read error: %s", r->path, (ull)r->off,
                             strerror(errno));
    return HET_OK;
}

int het_reader_open(het_reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->path = path;
    /* not blocking on a FIFO; no size bound here: each format bounds what it reads */
    int st = het_infile_fopen(path, "a data file (IDX or CIFAR-10, raw or .gz)", 0, &r->f,
                              &r->size);
    if (st) return st;
    r->in = malloc(HET_READER_CHUNK);
    if (!r->in) return het_error_set(HET_ENOMEM, "%s: out of memory for the read buffer", path);
    if ((st = reader_fill(r))) return st;
    if (r->in_len >= 2 && r->in[0] == 0x1f && r->in[1] == 0x8b) {
        r->gz = 1;
        if (inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK)
            return het_error_set(HET_ENOMEM, "%s: cannot initialize zlib", path);
        r->zinit = 1;
    }
    return HET_OK;
}

static int read_raw(het_reader *r, unsigned char *buf, size_t n, size_t *got) {
    size_t have = 0;
    while (have < n) {
        if (r->in_pos < r->in_len) {
            size_t k = r->in_len - r->in_pos;
            if (k > n - have) k = n - have;
            memcpy(buf + have, r->in + r->in_pos, k);
            r->in_pos += k;
            have += k;
        } else if (n - have >= HET_READER_CHUNK) {
            /* large request: straight into the caller's buffer */
            size_t want = n - have, k = fread(buf + have, 1, want, r->f);
            r->raw_read += k;
            have += k;
            if (k < want) {
                if (ferror(r->f)) {
                    r->off += have;
                    return het_error_set(HET_EIO, "%s: offset %llu: read error: %s", r->path,
                                         (ull)r->off, strerror(errno));
                }
                r->eof = 1;
                break;
            }
        } else {
            int st = reader_fill(r);
            if (st) return st;
            if (r->in_len == 0) {
                r->eof = 1;
                break;
            }
        }
    }
    r->off += have;
    *got = have;
    return HET_OK;
}

static int read_gz(het_reader *r, unsigned char *buf, size_t n, size_t *got) {
    size_t have = 0;
    while (have < n && !r->eof) {
        if (r->in_pos == r->in_len) {
            int st = reader_fill(r);
            if (st) return st;
            if (r->in_len == 0) {
                if (r->member_done) {
                    r->eof = 1;
                    break;
                }
                return het_error_set(HET_EFORMAT,
                                     "%s: offset %llu: gzip stream ends early at compressed "
                                     "byte %llu (truncated .gz file), expected the rest of the "
                                     "stream and its CRC",
                                     r->path, (ull)r->off, (ull)r->raw_read);
            }
        }
        if (r->member_done) {
            /* Another gzip member may follow (as gzip -c a b > ab makes); anything else is
             * garbage, which gzread would silently ignore. inflate checks the second magic
             * byte and the rest of the header. */
            if (r->in[r->in_pos] != 0x1f)
                return het_error_set(
                    HET_EFORMAT,
                    "%s: offset %llu: garbage byte 0x%02x after the gzip stream at compressed "
                    "byte %llu, expected end of file",
                    r->path, (ull)r->off, r->in[r->in_pos],
                    (ull)(r->raw_read - (r->in_len - r->in_pos)));
            inflateReset(&r->zs);
            r->member_done = 0;
        }
        size_t want = n - have;
        if (want > (size_t)1 << 30) want = (size_t)1 << 30;
        r->zs.next_in = r->in + r->in_pos;
        r->zs.avail_in = (uInt)(r->in_len - r->in_pos);
        r->zs.next_out = buf + have;
        r->zs.avail_out = (uInt)want;
        int ret = inflate(&r->zs, Z_NO_FLUSH);
        size_t produced = want - r->zs.avail_out;
        have += produced;
        r->off += produced;
        r->in_pos = r->in_len - r->zs.avail_in;
        if (ret == Z_STREAM_END) {
            r->member_done = 1;
        } else if (ret == Z_MEM_ERROR) {
            return het_error_set(HET_ENOMEM, "%s: out of memory in zlib", r->path);
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            return het_error_set(HET_EFORMAT,
                                 "%s: offset %llu: corrupt gzip data (%s) at compressed byte "
                                 "%llu, expected a valid gzip stream",
                                 r->path, (ull)r->off, r->zs.msg ? r->zs.msg : "zlib error",
                                 (ull)(r->raw_read - (r->in_len - r->in_pos)));
        }
    }
    *got = have;
    return HET_OK;
}

int het_reader_read(het_reader *r, void *buf, size_t n, size_t *got) {
    *got = 0;
    if (r->eof) return HET_OK;
    return r->gz ? read_gz(r, buf, n, got) : read_raw(r, buf, n, got);
}

int het_reader_drain(het_reader *r, uint64_t limit, uint64_t *n) {
    unsigned char tmp[4096];
    *n = 0;
    while (*n < limit) {
        size_t got, ask = limit - *n < sizeof tmp ? (size_t)(limit - *n) : sizeof tmp;
        int st = het_reader_read(r, tmp, ask, &got);
        if (st) return st;
        *n += got;
        if (got < ask) break;
    }
    return HET_OK;
}

void het_reader_close(het_reader *r) {
    if (r->zinit) inflateEnd(&r->zs);
    if (r->f) fclose(r->f);
    free(r->in);
    memset(r, 0, sizeof *r);
}
