/* Corrupt input: every malformed IDX / CIFAR file (raw and gzip) fails with the right status
 * and one line naming the file, the offset and what was expected. Files are generated into a
 * temporary directory; each case starts from a valid file and breaks one thing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/reader.h"
#include "hetrain/data.h"
#include "test.h"

static char tmpdir[] = "/tmp/het_test_corrupt_XXXXXX";

enum { N = 5, ROWS = 4, COLS = 3, PIX = ROWS * COLS };

typedef struct buf { unsigned char b[64 * 1024]; size_t n; } buf;

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static void make_images(buf *b, uint32_t n) {
    put32(b->b, 0x00000803);
    put32(b->b + 4, n);
    put32(b->b + 8, ROWS);
    put32(b->b + 12, COLS);
    for (uint32_t i = 0; i < n * PIX; i++) b->b[16 + i] = (unsigned char)(i * 37 + 11);
    b->n = 16 + n * PIX;
}

static void make_labels(buf *b, uint32_t n) {
    put32(b->b, 0x00000801);
    put32(b->b + 4, n);
    for (uint32_t i = 0; i < n; i++) b->b[8 + i] = (unsigned char)(i % 10);
    b->n = 8 + n;
}

/* Writes b to tmpdir/name (gzip-compressed if gz), the full path into path. */
static void write_file(char *path, const char *name, const buf *b, int gz) {
    snprintf(path, 512, "%s/%s%s", tmpdir, name, gz ? ".gz" : "");
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g || (b->n && gzwrite(g, b->b, (unsigned)b->n) != (int)b->n)) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(1);
        }
        gzclose(g);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b->b, 1, b->n, f) != b->n) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(1);
        }
        fclose(f);
    }
}

static size_t read_raw(const char *path, unsigned char *p, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(p, 1, cap, f) : 0;
    if (f) fclose(f);
    return n;
}

static void overwrite_raw(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) exit(1);
    fclose(f);
}

/* Checks status, that the dataset was left empty, and the message parts. `what` is a part of
 * the message specific to the case; `offset` says whether the offset part is required. */
static void expect(const char *tag, int gz, int st, int want, const het_dataset *d,
                   const char *path, int offset, const char *what) {
    const char *m = het_error_msg();
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    CHECK(st == want, "%s (%s): status %d, expected %d; message: %s", tag, gz ? "gz" : "raw",
          st, want, m);
    CHECK(d->images == NULL && d->labels == NULL && d->n == 0, "%s: dataset not cleared", tag);
    CHECK(strstr(m, base) != NULL, "%s (%s): no file name %s in: %s", tag, gz ? "gz" : "raw",
          base, m);
    if (offset)
        CHECK(strstr(m, "offset") != NULL && strstr(m, "expected") != NULL,
              "%s (%s): no offset/expected in: %s", tag, gz ? "gz" : "raw", m);
    CHECK(strstr(m, what) != NULL, "%s (%s): no '%s' in: %s", tag, gz ? "gz" : "raw", what, m);
    CHECK(strchr(m, '\n') == NULL, "%s: message is more than one line", tag);
    if (het_test_failures == 0 && (gz == 0 || strstr(tag, "gzip"))) printf("  %-22s %s\n", tag, m);
}

static void idx_cases(int gz) {
    buf img, lab;
    char pi[512], pl[512];
    het_dataset d;
    int st;

    /* control: the valid pair loads */
    make_images(&img, N);
    make_labels(&lab, N);
    write_file(pi, "ok-images", &img, gz);
    write_file(pl, "ok-labels", &lab, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    CHECK(st == HET_OK && d.n == N && d.shape.h == ROWS && d.shape.w == COLS &&
              d.images[PIX] == (unsigned char)(PIX * 37 + 11) && d.labels[4] == 4,
          "valid pair (%s): %s", gz ? "gz" : "raw", het_error_msg());
    het_dataset_free(&d);

    /* bad magic */
    make_images(&img, N);
    put32(img.b, 0x12345678);
    write_file(pi, "badmagic-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("bad magic", gz, st, HET_EFORMAT, &d, pi, 1,
           "offset 0: bad magic 0x12345678, expected 0x00000803");
    /* a label file where images are expected */
    st = het_dataset_load_idx(&d, pl, pl, 10);
    expect("labels as images", gz, st, HET_EFORMAT, &d, pl, 1,
           "bad magic 0x00000801, expected 0x00000803");
    /* element type other than unsigned byte (0x0D = float) */
    make_images(&img, N);
    img.b[2] = 0x0d;
    write_file(pi, "type-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("data type", gz, st, HET_EFORMAT, &d, pi, 1, "offset 2: data type 0x0d");

    /* wrong number of dimensions */
    make_images(&img, N);
    img.b[3] = 4;
    write_file(pi, "dims-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("wrong dims", gz, st, HET_EFORMAT, &d, pi, 1, "offset 3: 4 dimensions");

    /* a zero dimension */
    make_images(&img, N);
    put32(img.b + 8, 0);
    write_file(pi, "zero-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("zero dimension", gz, st, HET_EFORMAT, &d, pi, 1,
           "offset 8: dimension 1 is 0, expected > 0");

    /* dimension product overflow */
    make_images(&img, N);
    put32(img.b + 4, 0xffffffffu);
    put32(img.b + 8, 0xffffffffu);
    put32(img.b + 12, 0xffffffffu);
    write_file(pi, "overflow-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("dims overflow", gz, st, HET_EFORMAT, &d, pi, 1, "overflow");

    /* huge but not overflowing dims on a short file: truncation, not an allocation failure */
    make_images(&img, N);
    put32(img.b + 8, 30000);
    put32(img.b + 12, 30000);
    write_file(pi, "huge-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("huge dims", gz, st, HET_EFORMAT, &d, pi, 1,
           "file ends after 60 of 4500000000 payload bytes");
    /* a million images announced in a .gz, 5 labels: refused from the two headers, before
     * either payload is read (shared FINDINGS-v4 #8); a raw file is refused from its size */
    make_images(&img, N);
    put32(img.b + 4, 1000000);
    put32(img.b + 8, 30000);
    put32(img.b + 12, 30000);
    write_file(pi, "huge-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("huge count", gz, st, HET_EFORMAT, &d, gz ? pl : pi, 1,
           gz ? "offset 4: 5 labels, expected 1000000 to match the images in"
              : "offset 16: file ends after 60 of 900000000000000 payload bytes");

    /* truncated header */
    make_images(&img, N);
    img.n = 10;
    write_file(pi, "shorthdr-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("truncated header", gz, st, HET_EFORMAT, &d, pi, 1,
           "offset 10: file ends after 10 of 16 header bytes");

    /* truncated payload */
    make_images(&img, N);
    img.n -= 7;
    write_file(pi, "short-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("truncated payload", gz, st, HET_EFORMAT, &d, pi, 1,
           "offset 16: file ends after 53 of 60 payload bytes, expected 76 bytes in all");

    /* trailing bytes */
    make_images(&img, N);
    img.n += 3;
    write_file(pi, "long-images", &img, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("trailing bytes", gz, st, HET_EFORMAT, &d, pi, 1,
           "offset 76: trailing data after the payload, expected end of file");

    /* image / label count mismatch */
    make_images(&img, N);
    write_file(pi, "ok-images", &img, gz);
    make_labels(&lab, N - 1);
    write_file(pl, "four-labels", &lab, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("count mismatch", gz, st, HET_EFORMAT, &d, pl, 1, "4 labels, expected 5");

    /* label out of range */
    make_labels(&lab, N);
    lab.b[8 + 3] = 11;
    write_file(pl, "range-labels", &lab, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("label out of range", gz, st, HET_EFORMAT, &d, pl, 1,
           "offset 11: label 11 out of range, expected < 10");

    /* empty file */
    img.n = 0;
    write_file(pi, "empty-images", &img, gz);
    make_labels(&lab, N);
    write_file(pl, "ok-labels", &lab, gz);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("empty file", gz, st, HET_EFORMAT, &d, pi, 1, "offset 0: empty file");
}

/* Appends to `path` one gzip member that inflates to `mib` MiB of zeros (about 1/1000 of that
 * compressed), then `copies - 1` more copies of it: a small file that inflates to a lot. */
static void append_zero_members(const char *path, int mib, int copies) {
    static unsigned char zeros[1 << 16], out[1 << 16];
    unsigned char *member = NULL;
    size_t n = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
    for (long left = (long)mib << 20; left >= 0; left -= (long)sizeof zeros) {
        zs.next_in = zeros;
        zs.avail_in = left > 0 ? (uInt)sizeof zeros : 0;
        int flush = left > 0 ? Z_NO_FLUSH : Z_FINISH;
        do {
            zs.next_out = out;
            zs.avail_out = sizeof out;
            if (deflate(&zs, flush) == Z_STREAM_ERROR) exit(1);
            size_t k = sizeof out - zs.avail_out;
            if (k) {
                member = realloc(member, n + k);
                if (!member) exit(1);
                memcpy(member + n, out, k);
                n += k;
            }
        } while (zs.avail_out == 0);
    }
    deflateEnd(&zs);
    FILE *f = fopen(path, "ab");
    for (int i = 0; f && i < copies; i++)
        if (fwrite(member, 1, n, f) != n) exit(1);
    if (!f || fclose(f) != 0) exit(1);
    free(member);
}

static void gzip_cases(void) {
    buf img, lab;
    char pi[512], pl[512];
    het_dataset d;
    int st;
    make_labels(&lab, 200);
    write_file(pl, "many-labels", &lab, 1);
    /* a payload big enough that the middle of the .gz is deflate data */
    make_images(&img, 200);
    for (size_t i = 16; i < img.n; i++) img.b[i] = (unsigned char)((i * i) >> 5);
    static unsigned char z[64 * 1024];
    char pz[512];

    /* corrupt gzip stream: flipped bytes in the middle of Huffman-coded data */
    buf txt = img;
    for (size_t i = 16; i < txt.n; i++) txt.b[i] = (unsigned char)("hetrain"[i % 7] + i / 300);
    write_file(pz, "flip-images", &txt, 1);
    size_t zn = read_raw(pz, z, sizeof z);
    CHECK(zn > 60 && zn < 600, "compressed size %zu", zn);
    for (size_t i = zn / 2; i < zn / 2 + 8; i++) z[i] ^= 0xa5;
    overwrite_raw(pz, z, zn);
    st = het_dataset_load_idx(&d, pz, pl, 10);
    expect("corrupt gzip", 1, st, HET_EFORMAT, &d, pz, 1, "corrupt gzip data");

    /* a reserved deflate block type (BTYPE 11) in the first block header, byte 10 */
    write_file(pz, "btype-images", &img, 1);
    zn = read_raw(pz, z, sizeof z);
    z[10] |= 0x07;
    overwrite_raw(pz, z, zn);
    st = het_dataset_load_idx(&d, pz, pl, 10);
    expect("gzip block type", 1, st, HET_EFORMAT, &d, pz, 1, "invalid block type");

    /* a flipped CRC in the trailer: data decodes, the check fails */
    write_file(pz, "crc-images", &img, 1);
    zn = read_raw(pz, z, sizeof z);
    z[zn - 6] ^= 0x01;
    overwrite_raw(pz, z, zn);
    st = het_dataset_load_idx(&d, pz, pl, 10);
    expect("gzip bad crc", 1, st, HET_EFORMAT, &d, pz, 1, "incorrect data check");

    /* a .gz cut in the middle */
    write_file(pz, "cut-images", &img, 1);
    zn = read_raw(pz, z, sizeof z);
    overwrite_raw(pz, z, zn / 2);
    st = het_dataset_load_idx(&d, pz, pl, 10);
    expect("truncated gzip", 1, st, HET_EFORMAT, &d, pz, 1, "gzip stream ends early");

    /* garbage after the gzip stream (gzread would ignore it) */
    write_file(pz, "junk-images", &img, 1);
    zn = read_raw(pz, z, sizeof z);
    memcpy(z + zn, "junk", 4);
    overwrite_raw(pz, z, zn + 4);
    st = het_dataset_load_idx(&d, pz, pl, 10);
    expect("garbage after gzip", 1, st, HET_EFORMAT, &d, pz, 1, "garbage byte 0x6a");

    /* a valid payload, then gzip members of 64 x 64 MiB of zeros (4 GiB; 4 MiB compressed):
     * refused at the first trailing byte, not after inflating everything to count it */
    static buf small_img, small_lab;
    make_images(&small_img, N);
    write_file(pz, "bomb-images", &small_img, 1);
    append_zero_members(pz, 64, 64);
    char pl5[512];
    make_labels(&small_lab, N);
    write_file(pl5, "ok-labels", &small_lab, 1);
    st = het_dataset_load_idx(&d, pz, pl5, 10);
    expect("gzip trailing bomb", 1, st, HET_EFORMAT, &d, pz, 1,
           "offset 76: trailing data after the payload, expected end of file");
    /* the reader inflated at most HET_READER_TAIL bytes past the payload to find out */
    het_reader r;
    unsigned char head[76];
    size_t got = 0;
    uint64_t extra = 0;
    CHECK(het_reader_open(&r, pz) == HET_OK && het_reader_read(&r, head, 76, &got) == HET_OK &&
              got == 76 && het_reader_drain(&r, HET_READER_TAIL, &extra) == HET_OK,
          "bomb read: %s", het_error_msg());
    CHECK(extra == HET_READER_TAIL && r.off == 76 + HET_READER_TAIL &&
              r.raw_read < ((uint64_t)1 << 20),
          "bomb: %llu bytes inflated, %llu read, expected %llu and under 1 MiB",
          (unsigned long long)r.off, (unsigned long long)r.raw_read,
          (unsigned long long)(76 + HET_READER_TAIL));
    het_reader_close(&r);

    /* control: the unmodified compressed pair loads */
    write_file(pi, "many-images", &img, 1);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    CHECK(st == HET_OK && d.n == 200, "valid large pair: %s", het_error_msg());
    het_dataset_free(&d);
}

static void missing_cases(void) {
    het_dataset d, te;
    char pi[512], pl[512];
    snprintf(pi, sizeof pi, "%s/no-such-images", tmpdir);
    snprintf(pl, sizeof pl, "%s/no-such-labels", tmpdir);
    int st = het_dataset_load_idx(&d, pi, pl, 10);
    expect("missing file", 0, st, HET_EIO, &d, pi, 0, "No such file or directory");

    st = het_dataset_load_named(&d, &te, "fashion-mnist", tmpdir);
    expect("missing (named)", 0, st, HET_EIO, &d, "train-images-idx3-ubyte.gz", 0,
           "(install dataset-fashion-mnist or pass --data-dir)");
    CHECK(te.images == NULL, "test split cleared");

    st = het_dataset_load_named(&d, &te, "cifar10", tmpdir);
    expect("missing cifar", 0, st, HET_EIO, &d, "data_batch_1.bin", 0, "--data-dir");
}

static void cifar_cases(int gz) {
    static buf b;
    char p[512];
    het_dataset d;
    const char *paths[1] = {p};
    for (int r = 0; r < 3; r++) {
        b.b[r * 3073] = (unsigned char)(r + 5);
        for (int k = 0; k < 3072; k++) b.b[r * 3073 + 1 + k] = (unsigned char)(k + r);
    }

    b.n = 3 * 3073;
    write_file(p, "ok.bin", &b, gz);
    int st = het_dataset_load_cifar(&d, paths, 1);
    CHECK(st == HET_OK && d.n == 3 && d.labels[2] == 7 && d.images[3072 + 5] == 6,
          "valid cifar (%s): %s", gz ? "gz" : "raw", het_error_msg());
    het_dataset_free(&d);

    /* size not a multiple of 3073 */
    b.n = 2 * 3073 + 100;
    write_file(p, "ragged.bin", &b, gz);
    st = het_dataset_load_cifar(&d, paths, 1);
    expect("cifar ragged size", gz, st, HET_EFORMAT, &d, p, 1,
           "offset 6146: file ends after 100 of 3073 bytes of record 2");

    /* bad label in the second record */
    b.n = 3 * 3073;
    b.b[3073] = 10;
    write_file(p, "label.bin", &b, gz);
    st = het_dataset_load_cifar(&d, paths, 1);
    expect("cifar bad label", gz, st, HET_EFORMAT, &d, p, 1,
           "offset 3073: label 10 out of range, expected < 10");
    b.b[3073] = 6;

    /* empty file */
    b.n = 0;
    write_file(p, "empty.bin", &b, gz);
    st = het_dataset_load_cifar(&d, paths, 1);
    expect("cifar empty", gz, st, HET_EFORMAT, &d, p, 1, "offset 0: empty file");

    /* a failure in the second of two files frees what the first loaded */
    char p2[512];
    b.n = 3 * 3073;
    write_file(p, "ok.bin", &b, gz);
    b.n = 100;
    write_file(p2, "short.bin", &b, gz);
    const char *two[2] = {p, p2};
    st = het_dataset_load_cifar(&d, two, 2);
    expect("cifar second file", gz, st, HET_EFORMAT, &d, p2, 1, "record 0");
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int gz = 0; gz < 2; gz++) {
        idx_cases(gz);
        cifar_cases(gz);
    }
    gzip_cases();
    missing_cases();
    /* remove what was written */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return het_test_finish("test_corrupt");
}
