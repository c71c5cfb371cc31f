/* hetrain data: IDX (MNIST / Fashion-MNIST, gzip or raw) and CIFAR-10 binary readers with full
 * validation of outside bytes, a synthetic generator for tests, the catalog that loads a
 * dataset by name (docs/DATA.md), and the epoch sampler.
 *
 * Every reader failure returns HET_EFORMAT or HET_EIO with one line naming the file, the byte
 * offset and what was expected, e.g.
 *   "train-images-idx3-ubyte.gz: offset 0: bad magic 0x00000801, expected 0x00000803". */
#ifndef HETRAIN_DATA_H
#define HETRAIN_DATA_H

#include "hetrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A labelled image set held as bytes; normalized to float when a batch is gathered. */
typedef struct het_dataset {
    char name[32];     /* "fashion-mnist", "mnist", "cifar10", "idx", "synthetic" */
    int64_t n;         /* samples */
    het_shape shape;   /* per-sample C x H x W */
    int n_classes;
    uint8_t *images;   /* n * het_shape_size(shape) bytes, CHW per sample */
    uint8_t *labels;   /* n labels, each < n_classes */
    float mean[3];     /* per-channel normalization: x = (byte/255 - mean) / std */
    float std[3];
    int borrowed;      /* 1: images and labels lie in memory the dataset does not own (a host's
                        * shared copy, src/train/shared_data.c), read-only: het_dataset_free
                        * leaves it to its owner */
} het_dataset;

/* Reads an IDX image file (magic 0x00000803, 3 dims) and label file (0x00000801, 1 dim), each
 * gzip-compressed or raw (detected by content). */
int het_dataset_load_idx(het_dataset *d, const char *images_path, const char *labels_path,
                         int n_classes);
/* Reads CIFAR-10 binary batch files (records of 1 label byte + 3072 pixel bytes). */
int het_dataset_load_cifar(het_dataset *d, const char *const *paths, int n_paths);
/* Class-dependent random images: learnable, deterministic in seed. */
int het_dataset_synthetic(het_dataset *d, int64_t n, het_shape shape, int n_classes,
                          uint64_t seed);
/* ---- the catalog (src/data/catalog.c): datasets by name, above the format readers ---- */

/* Which dataset to load and how. */
typedef struct het_dataset_spec {
    const char *name;  /* fashion-mnist, mnist, cifar10, idx, synthetic */
    const char *dir;   /* NULL: the dataset's default directory (fashion-mnist only has one) */
    het_shape shape;   /* synthetic: per-sample C x H x W (C 1..3); all 0: 1 x 28 x 28 */
    int n_classes;     /* synthetic: 2..256 (0: 10); idx: 2..256, every label below it (0: the
                        * largest label of both splits + 1); others: 0 */
    int64_t n_train;   /* synthetic: training samples (0: 2048); others: 0 */
} het_dataset_spec;

/* Loads the train and test splits of spec->name:
 *   fashion-mnist, mnist  the four IDX files in dir (fashion-mnist's default directory:
 *                         /usr/share/datasets/fashion-mnist), 1 x 28 x 28, 10 classes
 *   cifar10               the CIFAR-10 binary batches in dir or dir/cifar-10-batches-bin
 *   idx                   the four IDX files in dir, any rows x cols (the test images the
 *                         training images' size), classes as spec->n_classes says
 *   synthetic             train 2048 (or spec->n_train) / test 512 of spec->shape in
 *                         spec->n_classes classes
 * Each IDX file is read from NAME.gz, or else NAME. The named sets are normalized with their
 * published per-channel mean and std; idx and synthetic with the training split's. On failure
 * both are zeroed, with one line naming the file (and a hint where to get it). */
int het_dataset_load(het_dataset *train, het_dataset *test, const het_dataset_spec *spec);
/* het_dataset_load of {name, dir} (synthetic: 1 x 28 x 28, 10 classes). */
int het_dataset_load_named(het_dataset *train, het_dataset *test, const char *name,
                           const char *dir);
/* The per-sample shape and class count het_dataset_load(spec) gives, without loading the
 * images: for idx, the image files' headers and the label files (one byte a sample) are read
 * and checked; the other datasets need no file. Fails as het_dataset_load would, or with
 * HET_EINVAL on a spec out of range (shape, classes, an unknown name). */
int het_dataset_describe(const het_dataset_spec *spec, het_shape *shape, int *n_classes);
/* Frees images and labels (unless borrowed) and zeroes d; NULL is a no-op. */
void het_dataset_free(het_dataset *d);
/* The files het_dataset_load_named(name, dir) may read, whether they exist or not (IDX: each
 * file and its .gz; CIFAR-10: dir and dir/cifar-10-batches-bin), up to cap of them into
 * paths; returns how many there are (0 for synthetic or an unknown name, or mnist, idx and
 * cifar10 without a dir). For checks that no output is one of them. */
#define HET_DATASET_MAX_FILES 12
int het_dataset_files(const char *name, const char *dir, char (*paths)[HET_PATH_LEN], int cap);

/* Gathers samples idx[0..count) into x (count x C*H*W floats, normalized) and y. */
void het_dataset_gather(const het_dataset *d, const int64_t *idx, int count, float *x,
                        uint8_t *y);

/* ---- sampler: one permutation per epoch from (seed, epoch), the same on every rank ---- */
typedef struct het_sampler {
    int64_t n;
    uint64_t seed;
    int shuffle;     /* 0: identity order */
    int epoch;       /* epoch of the current permutation, -1 before the first */
    int64_t *perm;   /* n indices */
} het_sampler;

int  het_sampler_init(het_sampler *s, int64_t n, uint64_t seed, int shuffle);
void het_sampler_free(het_sampler *s);
/* Makes perm the permutation of `epoch` (Fisher-Yates with het_rng_seed2(seed, epoch)). */
void het_sampler_set_epoch(het_sampler *s, int epoch);
/* Contiguous shard r of the permutation for shard sizes[0..n_shards): it starts at
 * sum(sizes[0..r)). Fails with HET_EINVAL if the sizes exceed n. */
int  het_sampler_shard(const het_sampler *s, const int64_t *sizes, int n_shards, int r,
                       const int64_t **begin, int64_t *len);

#ifdef __cplusplus
}
#endif
#endif
