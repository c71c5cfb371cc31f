/* Internal: a byte reader for dataset files, gzip-compressed or raw (detected by the gzip magic
 * 1f 8b in the first two bytes), that knows its offset in the uncompressed stream.
 *
 * DESIGN. We drive zlib's inflate() ourselves instead of gzread(): gzread silently skips
 * garbage after the last gzip member and cannot say where the compressed data went bad. Here
 * every failure (open, read, corrupt deflate data, bad CRC, .gz truncated mid-stream, garbage
 * after the last member) is reported as one line naming the path and the uncompressed offset.
 * Concatenated gzip members are read as one stream, as gzip(1) does. */
#ifndef HET_DATA_READER_H
#define HET_DATA_READER_H

#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "hetrain/data.h"

typedef struct het_reader {
    const char *path;     /* borrowed; used in messages */
    FILE *f;
    uint64_t size;        /* of the file (fstat at open): compressed bytes when gz */
    int gz;               /* 1: gzip stream, 0: raw bytes */
    int zinit;            /* inflateInit2 done */
    int member_done;      /* gzip: the current member ended (Z_STREAM_END) */
    int eof;              /* no more uncompressed bytes */
    uint64_t off;         /* bytes delivered so far (offset in the uncompressed stream) */
    uint64_t raw_read;    /* bytes read from the file so far */
    unsigned char *in;    /* input buffer (HET_READER_CHUNK bytes) */
    size_t in_pos, in_len;
    z_stream zs;
} het_reader;

#define HET_READER_CHUNK ((size_t)1 << 16)
/* Bytes past the expected end that a reader looks at before it reports trailing data. */
#define HET_READER_TAIL ((uint64_t)1 << 16)

/* Opens `path` (borrowed for the reader's life; core/infile.h: a regular file, opened without
 * blocking) and sniffs gzip or raw. HET_EIO with "<path>: ..." if it cannot be opened or read
 * or is not a regular file, HET_ENOMEM. Always leaves `r` safe to
 * pass to het_reader_close. */
int het_reader_open(het_reader *r, const char *path);
/* Reads up to n bytes; *got < n only at the clean end of the stream. HET_EIO on a read error,
 * HET_EFORMAT on a corrupt or truncated gzip stream, with the message set. */
int het_reader_read(het_reader *r, void *buf, size_t n, size_t *got);
/* Reads and discards what is left of the stream, at most `limit` bytes, their count into *n
 * (*n == limit: perhaps more). The limit bounds the work whatever the file inflates to: a small
 * .gz can hold gigabytes of zeros after the expected end. Errors as het_reader_read. */
int het_reader_drain(het_reader *r, uint64_t limit, uint64_t *n);
void het_reader_close(het_reader *r);

/* The catalog's questions to the IDX reader (idx.c), without loading the images: an image
 * file's sample count and shape (1 x rows x cols) from its header alone (the payload is not
 * read), and a label file's count and largest label, every label checked below n_classes (the
 * labels are read: one byte a sample), its count checked against `want` (the images' count,
 * from the file `images`; -1: none) from its header, before the labels are read. Errors as
 * het_dataset_load_idx. */
int het_idx_image_shape(const char *path, int64_t *n, het_shape *shape);
int het_idx_labels(const char *path, int n_classes, int64_t want, const char *images,
                   int64_t *n, int *max);

/* Shared by the loaders (in dataset.c): per-channel mean and std of d's bytes scaled to [0, 1],
 * accumulated in a fixed order (deterministic). */
void het_dataset_compute_stats(het_dataset *d);

#endif
