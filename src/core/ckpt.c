/* DESIGN: checkpoint files as tagged sections.
 *
 * A checkpoint is "HETCKPT1", a u32 format version and a reserved u32, then sections (a
 * NUL-padded 16-byte tag, a u64 byte length, the bytes), closed by the section "end" whose 4
 * bytes are the CRC-32 of everything before them. Integers are little-endian; floats are raw
 * IEEE-754 (little-endian hosts only, checked at compile time).
 *
 * Sections are found by tag, so a strategy adds its own without a format change, and a reader
 * ignores tags it does not know. The writer streams to "<path>.tmp" (core/outfile.c),
 * keeping a running CRC, then fsyncs, renames over <path> and fsyncs the directory: a crash
 * leaves either the old checkpoint or the new one, never half of one.
 *
 * The reader refuses what is not a regular file (a folder, /dev/zero, a FIFO), then checks the
 * magic, version, size (fstat, at most HET_CKPT_MAX_BYTES) and the end section from the first
 * 16 and the last 28 bytes, so a file that is no checkpoint is refused without reading it; only
 * then it loads the whole file (checkpoints are a few MB) and checks the CRC and the framing of
 * every section. A section is copied out only when its length is exactly what the caller
 * expects. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hetrain/ckpt.h"
#include "core/bytes.h"
#include "core/infile.h"
#include "core/outfile.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hetrain checkpoints store raw little-endian floats; big-endian hosts are not supported"
#endif

#define HDR_BYTES 16u
#define SEC_HDR_BYTES (HET_CKPT_TAG_LEN + 8u)
#define END_BYTES (SEC_HDR_BYTES + 4u)
#define MAX_SECTIONS 64

struct het_ckpt_writer {
    het_outfile out; /* the temp file, renamed into place by het_outfile_commit */
    uint32_t crc;
    int failed;
    char tags[MAX_SECTIONS][HET_CKPT_TAG_LEN];
    int n_tags;
};

typedef struct ckpt_section {
    char tag[HET_CKPT_TAG_LEN];
    uint64_t offset; /* of the data */
    uint64_t bytes;
} ckpt_section;

struct het_ckpt_reader {
    uint8_t *buf;
    size_t size;
    ckpt_section sec[MAX_SECTIONS];
    int n_sec;
    char path[HET_PATH_LEN];
};

/* ------------------------------------------------------------------------------ writer */

static int valid_tag(const char *tag) {
    size_t n = strlen(tag);
    if (n == 0 || n >= HET_CKPT_TAG_LEN || strcmp(tag, "end") == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = tag[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
              ch == '-'))
            return 0;
    }
    return 1;
}

static int w_write(het_ckpt_writer *w, const void *p, size_t n) {
    if (w->failed) return HET_EIO;
    if (n && fwrite(p, 1, n, w->out.f) != n) {
        w->failed = 1;
        return het_error_set(HET_EIO, "%s: write failed: %s", w->out.tmp, strerror(errno));
    }
    w->crc = het_crc32(w->crc, p, n);
    return HET_OK;
}

int het_ckpt_writer_open(het_ckpt_writer **out, const char *path) {
    *out = NULL;
    size_t len = strlen(path);
    if (len == 0 || len >= HET_PATH_LEN)
        return het_error_set(HET_EINVAL, "checkpoint path '%s': empty or longer than %d bytes",
                             path, HET_PATH_LEN - 1);
    het_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w) return het_error_set(HET_ENOMEM, "out of memory opening checkpoint writer");
    int st = het_outfile_open_checkpoint(&w->out, path);
    if (st) {
        free(w);
        return st;
    }
    uint8_t hdr[HDR_BYTES];
    memcpy(hdr, HET_CKPT_MAGIC, 8);
    het_put_u32(hdr + 8, HET_CKPT_VERSION);
    het_put_u32(hdr + 12, 0);
    st = w_write(w, hdr, sizeof hdr);
    if (st) {
        het_ckpt_writer_abort(w);
        return st;
    }
    *out = w;
    return HET_OK;
}

int het_ckpt_put(het_ckpt_writer *w, const char *tag, const void *data, size_t bytes) {
    if (!valid_tag(tag))
        return het_error_set(HET_EINVAL, "checkpoint section tag '%s': expected 1..%d characters "
                             "of [a-z0-9_.-], not 'end'", tag, HET_CKPT_TAG_LEN - 1);
    for (int i = 0; i < w->n_tags; i++)
        if (strcmp(w->tags[i], tag) == 0)
            return het_error_set(HET_EINVAL, "checkpoint section '%s' written twice", tag);
    if (w->n_tags == MAX_SECTIONS)
        return het_error_set(HET_EINVAL, "checkpoint: more than %d sections", MAX_SECTIONS);
    uint8_t hdr[SEC_HDR_BYTES] = {0};
    memcpy(hdr, tag, strlen(tag));
    het_put_u64(hdr + HET_CKPT_TAG_LEN, (uint64_t)bytes);
    int st = w_write(w, hdr, sizeof hdr);
    if (!st) st = w_write(w, data, bytes);
    if (st) return st;
    memcpy(w->tags[w->n_tags++], hdr, HET_CKPT_TAG_LEN);
    return HET_OK;
}

void het_ckpt_writer_abort(het_ckpt_writer *w) {
    if (!w) return;
    het_outfile_abort(&w->out);
    free(w);
}

int het_ckpt_writer_commit(het_ckpt_writer *w) {
    uint8_t hdr[SEC_HDR_BYTES] = {0}, crc[4];
    memcpy(hdr, "end", 3);
    het_put_u64(hdr + HET_CKPT_TAG_LEN, 4);
    int st = w_write(w, hdr, sizeof hdr);
    het_put_u32(crc, w->crc);
    if (!st) st = w_write(w, crc, 4);
    if (st) {
        het_ckpt_writer_abort(w);
        return st;
    }
    st = het_outfile_commit(&w->out); /* fsync, rename, fsync of the directory */
    free(w);
    return st;
}

/* ------------------------------------------------------------------------------ reader */

/* Printable form of up to 16 bytes, for messages: "HETCKPT1" or "\x00\x01...". */
static void show_bytes(char *out, size_t cap, const uint8_t *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
            out[k++] = (char)p[i];
        else
            k += (size_t)snprintf(out + k, cap - k, "\\x%02x", p[i]);
    }
    out[k] = '\0';
}

/* Records "<path>: offset N: <found>, expected <what>"; returns HET_EFORMAT. */
static int bad(const het_ckpt_reader *r, uint64_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int bad(const het_ckpt_reader *r, uint64_t off, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return het_error_set(HET_EFORMAT, "%s: offset %llu: %s", r->path, (unsigned long long)off,
                         msg);
}

static const uint8_t end_hdr[SEC_HDR_BYTES] = {'e', 'n', 'd', 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                               0,   0,   0,   0, 4, 0, 0, 0, 0, 0, 0, 0};

/* Reads n bytes at file offset off into dst (pread, retried); *got < n at end of file. */
static int read_at(const het_ckpt_reader *r, int fd, uint64_t off, uint8_t *dst, size_t n,
                   size_t *got) {
    return het_infile_pread(r->path, fd, off, dst, n, got);
}

/* The checks that need only the header (the first min(size, 16) bytes in b), the size and the
 * last END_BYTES bytes (tail, or NULL when the file is shorter): magic, version, size limit,
 * the end section. */
static int check_frame(const het_ckpt_reader *r, const uint8_t *b, uint64_t size,
                       const uint8_t *tail) {
    char shown[80];
    if (size < 8) {
        show_bytes(shown, sizeof shown, b, (size_t)size);
        return bad(r, 0, "file of %llu bytes \"%s\", expected the magic \"%s\"",
                   (unsigned long long)size, shown, HET_CKPT_MAGIC);
    }
    if (memcmp(b, HET_CKPT_MAGIC, 8) != 0) {
        show_bytes(shown, sizeof shown, b, 8);
        return bad(r, 0, "bad magic \"%s\", expected \"%s\"", shown, HET_CKPT_MAGIC);
    }
    if (size < HDR_BYTES)
        return bad(r, size, "end of file, expected a %u-byte header (file truncated)",
                   HDR_BYTES);
    uint32_t version = het_get_u32(b + 8);
    if (version != HET_CKPT_VERSION)
        return bad(r, 8, "format version %u, expected %u", version, HET_CKPT_VERSION);
    if (size > HET_CKPT_MAX_BYTES)
        return bad(r, HET_CKPT_MAX_BYTES, "file of %llu bytes, expected at most %llu",
                   (unsigned long long)size, (unsigned long long)HET_CKPT_MAX_BYTES);
    if (!tail || memcmp(tail, end_hdr, SEC_HDR_BYTES) != 0)
        return bad(r, size, "end of file without the 'end' section, expected it there (file "
                   "truncated?)");
    return HET_OK;
}

/* Opens the file (without blocking on a FIFO), refuses what is not a regular file, checks the
 * header, size and end section from their own bytes, and only then reads the whole file, of
 * the size fstat gave. */
static int read_file(het_ckpt_reader *r) {
    int fd;
    uint64_t size;
    int st = het_infile_open(r->path, "a checkpoint file", 0, &fd, &size);
    if (st) return st;
    uint8_t hdr[HDR_BYTES], tail[END_BYTES];
    size_t got = 0, want = size < HDR_BYTES ? (size_t)size : HDR_BYTES;
    st = read_at(r, fd, 0, hdr, want, &got);
    if (!st && got < want) size = got; /* shrank under us: judge what is there */
    int have_tail = size >= HDR_BYTES + END_BYTES;
    if (!st && have_tail) st = read_at(r, fd, size - END_BYTES, tail, END_BYTES, &got);
    if (!st && have_tail && got < END_BYTES) have_tail = 0;
    if (!st) st = check_frame(r, hdr, size, have_tail ? tail : NULL);
    if (!st && !(r->buf = malloc((size_t)size)))
        st = het_error_set(HET_ENOMEM, "%s: out of memory for the checkpoint's %llu bytes",
                           r->path, (unsigned long long)size);
    if (!st) st = read_at(r, fd, 0, r->buf, (size_t)size, &got);
    if (!st && got < size)
        st = het_error_set(HET_EIO, "%s: offset %llu: end of file, expected %llu bytes (the "
                           "file shrank while being read)", r->path, (unsigned long long)got,
                           (unsigned long long)size);
    close(fd);
    r->size = (size_t)size;
    return st;
}

/* The CRC, then the framing of every section (read_file checked header, size and end). */
static int parse(het_ckpt_reader *r) {
    const uint8_t *b = r->buf;
    size_t size = r->size;
    char shown[80];
    uint32_t stored = het_get_u32(b + size - 4);
    uint32_t crc = het_crc32(0, b, size - 4);
    if (stored != crc)
        return bad(r, size - 4, "CRC-32 0x%08x, expected 0x%08x (file corrupted)", stored, crc);
    /* framing */
    size_t off = HDR_BYTES, end = size - END_BYTES;
    while (off < end) {
        if (end - off < SEC_HDR_BYTES)
            return bad(r, off, "%zu bytes, expected a %u-byte section header", end - off,
                       SEC_HDR_BYTES);
        const uint8_t *h = b + off;
        if (h[HET_CKPT_TAG_LEN - 1] != 0 || !valid_tag((const char *)h)) {
            show_bytes(shown, sizeof shown, h, HET_CKPT_TAG_LEN);
            return bad(r, off, "section tag \"%s\", expected a NUL-padded tag", shown);
        }
        uint64_t len = het_get_u64(h + HET_CKPT_TAG_LEN);
        size_t data = off + SEC_HDR_BYTES;
        if (len > end - data)
            return bad(r, off + HET_CKPT_TAG_LEN, "section '%s' of %llu bytes, expected at most "
                       "%zu (what remains before the end section)", (const char *)h,
                       (unsigned long long)len, end - data);
        for (int i = 0; i < r->n_sec; i++)
            if (strcmp(r->sec[i].tag, (const char *)h) == 0)
                return bad(r, off, "second section '%s', expected each tag once",
                           (const char *)h);
        if (r->n_sec == MAX_SECTIONS)
            return bad(r, off, "section %d, expected at most %d", r->n_sec + 1, MAX_SECTIONS);
        ckpt_section *s = &r->sec[r->n_sec++];
        memcpy(s->tag, h, HET_CKPT_TAG_LEN);
        s->offset = data;
        s->bytes = len;
        off = data + (size_t)len;
    }
    return HET_OK;
}

int het_ckpt_reader_open(het_ckpt_reader **out, const char *path) {
    *out = NULL;
    het_ckpt_reader *r = calloc(1, sizeof *r);
    if (!r) return het_error_set(HET_ENOMEM, "out of memory opening %s", path);
    snprintf(r->path, sizeof r->path, "%s", path);
    int st = read_file(r);
    if (!st) st = parse(r);
    if (st) {
        het_ckpt_reader_close(r);
        return st;
    }
    *out = r;
    return HET_OK;
}

void het_ckpt_reader_close(het_ckpt_reader *r) {
    if (!r) return;
    free(r->buf);
    free(r);
}

const char *het_ckpt_reader_path(const het_ckpt_reader *r) { return r->path; }

static const ckpt_section *lookup(const het_ckpt_reader *r, const char *tag) {
    for (int i = 0; i < r->n_sec; i++)
        if (strncmp(r->sec[i].tag, tag, HET_CKPT_TAG_LEN) == 0) return &r->sec[i];
    return NULL;
}

int het_ckpt_has(const het_ckpt_reader *r, const char *tag) { return lookup(r, tag) != NULL; }

int het_ckpt_find(het_ckpt_reader *r, const char *tag, const void **data, size_t *bytes,
                  uint64_t *offset) {
    const ckpt_section *s = lookup(r, tag);
    if (!s)
        return bad(r, r->size - END_BYTES, "the end section, expected section '%s' before it",
                   tag);
    *data = r->buf + s->offset;
    *bytes = (size_t)s->bytes;
    if (offset) *offset = s->offset;
    return HET_OK;
}

int het_ckpt_get(het_ckpt_reader *r, const char *tag, void *dst, size_t bytes) {
    const void *p = NULL;
    size_t n = 0;
    uint64_t off = 0;
    int st = het_ckpt_find(r, tag, &p, &n, &off);
    if (st) return st;
    if (n != bytes)
        return bad(r, off - 8, "section '%s' of %zu bytes, expected %zu", tag, n, bytes);
    if (bytes) memcpy(dst, p, bytes);
    return HET_OK;
}
