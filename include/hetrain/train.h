/* hetrain train: the training configuration, the trainer (epoch loop, evaluation, metrics,
 * progress, checkpoint / resume), the step helpers a distribution strategy reuses, the
 * checkpoint section format and safetensors export.
 *
 * One process, or P MPI ranks under mpirun / srun (see het_trainer_create). The trainer owns
 * epochs, evaluation, metrics and checkpoints; a strategy (--strategy, src/strategy) runs each
 * epoch's steps with the shared step helpers (het_train_batch_grads_scaled,
 * het_train_optim_step, het_train_step, het_eval_dataset).
 *
 * Determinism: for a given configuration (including `threads`), training is bitwise
 * reproducible, and a run resumed from a checkpoint is bitwise identical to an uninterrupted
 * one: the epoch permutation is a function of (seed, epoch), dropout of (seed, global step),
 * and everything else that evolves (parameters, state, optimizer and schedule state, epoch,
 * step, metrics) is in the checkpoint. Timing fields are the only exception and are never
 * stored in a checkpoint, so two identical runs write identical checkpoint bytes. */
#ifndef HETRAIN_TRAIN_H
#define HETRAIN_TRAIN_H

#include "hetrain/core.h"
#include "hetrain/data.h"
#include "hetrain/nn.h"
#include "hetrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HET_PATH_LEN 1024

typedef enum { HET_PROGRESS_AUTO = 0, HET_PROGRESS_ON = 1, HET_PROGRESS_OFF = 2 } het_progress;

/* Everything a training run is made of. Plain data: copy it freely. Each field has a key of the
 * same name with '_' written '-' (het_train_config_set), used by command-line options and
 * config files alike. */
typedef struct het_train_config {
    char model[32];             /* zoo name: mlp | lenet5 | cifar-cnn | resnet20 */
    char data[32];              /* fashion-mnist | mnist | cifar10 | synthetic */
    char data_dir[HET_PATH_LEN];/* "" = the dataset's default directory */
    int epochs;                 /* total epochs of the run (a resumed run continues to it) */
    int batch;                  /* samples per step; the epoch's last batch may be smaller */
    het_schedule sched;         /* lr = sched.base_lr; total_epochs is set from epochs */
    het_optim_config optim;     /* SGD / Adam and their hyper-parameters */
    uint64_t seed;              /* model init, epoch permutations, dropout */
    int threads;                /* model workers splitting each batch; BLAS runs 1 thread */
    int64_t train_limit;        /* use only the first N training samples (0 = all) */
    int64_t test_limit;         /* use only the first N test samples (0 = all) */
    char checkpoint[HET_PATH_LEN]; /* "" = none; written every checkpoint_every epochs + end */
    int checkpoint_every;       /* epochs between checkpoints (>= 1) */
    int resume;                 /* 1: continue from `checkpoint` */
    char metrics[HET_PATH_LEN]; /* "" = none; JSON Lines: one object per epoch (and step) */
    int metrics_steps;          /* 1: also one object per step in the metrics file */
    char export_safetensors[HET_PATH_LEN]; /* "" = none; weights written after training */
    het_progress progress;      /* live progress bar: auto = only when stdout is a terminal */
    int quiet;                  /* 1: print nothing but errors (front ends honour it) */
    /* distributed runs (mpirun / srun); ignored by a single process without MPI */
    char strategy[32];          /* how ranks cooperate: allreduce (see het_strategy_names) */
    int ranks_per_node;         /* emulated node size; 0 = the real nodes */
    float bucket_mb;            /* gradient all-reduce bucket size in MiB; 0 = one flat buffer */
    char slowdown[256];         /* "" or one factor >= 1 per rank: "1,1,2,4" (emulation) */
    double net_bw;              /* emulated cross-node bandwidth, bytes/s; 0 = off */
    float net_lat;              /* emulated cross-node latency, seconds; 0 = off */
    char trace[HET_PATH_LEN];   /* "" = none; Chrome trace JSON of every rank's steps */
} het_train_config;

/* Defaults: mlp on fashion-mnist, 10 epochs, batch 64, SGD lr 0.05 momentum 0.9, constant
 * schedule, seed 1, 1 thread, strategy allreduce with 25 MiB buckets, everything else off.
 * `batch` is the GLOBAL batch: a step of P ranks processes `batch` samples in all. */
het_train_config het_train_config_defaults(void);

/* Sets one field from text, as a config file or an option would: `key` is the field name with
 * '-' or '_' ("weight-decay"), `value` the text (NULL for a flag means "true"; flags also take
 * true/false/yes/no/on/off/1/0). Numbers must parse completely and be in range.
 * HET_EINVAL with one line "key: ..." on an unknown key or a bad value. */
int het_train_config_set(het_train_config *c, const char *key, const char *value);

/* Applies a config file: lines "key = value" or "key value", '#' starts a comment, blank lines
 * are skipped. Errors: HET_EIO if unreadable, HET_EINVAL with "FILE:LINE: ..." on a bad line. */
int het_train_config_load(het_train_config *c, const char *path);

/* Cross-field checks (nesterov needs momentum, resume needs a checkpoint path, ...). */
int het_train_config_check(const het_train_config *c);

/* Writes the configuration as "key = value" lines (a valid config file) into buf (always
 * NUL-terminated); returns the length it needed. `run_keys` 0 leaves out what does not change
 * the trained result (paths of outputs, resume, progress, quiet); that form is what a
 * checkpoint stores. */
size_t het_train_config_format(const het_train_config *c, int run_keys, char *buf, size_t n);

/* A key's description, for --help and docs. NULL-terminated table. */
typedef struct het_config_key {
    const char *key;   /* "weight-decay" */
    const char *arg;   /* "X" for a value, NULL for a flag */
    const char *help;  /* one line */
} het_config_key;
const het_config_key *het_train_config_keys(void);

/* Per-sample shape and class count of a named dataset, without loading it. */
int het_train_data_shape(const char *data, het_shape *shape, int *n_classes);

/* ---- per-epoch record ---- */
typedef struct het_epoch_stats {
    int epoch;             /* 1-based */
    int64_t samples;       /* training samples seen in the epoch */
    double loss;           /* mean training loss over the epoch's samples (train mode) */
    double train_acc;      /* fraction of the epoch's training samples predicted right */
    double test_loss;      /* mean loss over the test set (eval mode) */
    double test_acc;
    double lr;             /* learning rate of the epoch's last step */
    double samples_per_s;  /* training throughput (evaluation not counted); not checkpointed */
    double elapsed_s;      /* seconds since this process started the run; not checkpointed */
    /* This rank's time split of the epoch's training steps (not checkpointed): compute
     * (forward, backward, optimizer, emulated slowdown included), communication, waiting for
     * slower ranks, emulated network delay. */
    double compute_s, comm_s, wait_s, delay_s;
} het_epoch_stats;

/* ---- step helpers (shared with strategies) ---- */

/* The dropout seed of global step `step` (0-based) of a run seeded with `seed`. */
uint64_t het_train_step_seed(uint64_t seed, int64_t step);

/* One optimizer update of the model's parameters from its gradients, split over the model's
 * worker threads. `t` is the 1-based step count. */
void het_train_optim_step(het_model *m, const het_optim_config *c, float lr, float *opt_state,
                          int64_t t);
/* One batch of gradient computation: gathers samples idx[0..count) of d into x (count x
 * sample floats) and y, zeroes the model's gradients, runs forward and backward with
 * grad_scale 1/count (the batch-mean loss). *res gets the batch's loss sum and correct count.
 * count must be in 1..max_batch of the model. */
int het_train_batch_grads(het_model *m, const het_dataset *d, const int64_t *idx, int count,
                          float *x, uint8_t *y, uint64_t step_seed, het_batch_result *res);
/* The same with an explicit grad_scale (1/B' of a global batch split over ranks); count 0 is
 * allowed and leaves zero gradients and an empty result (a rank without samples this step). */
int het_train_batch_grads_scaled(het_model *m, const het_dataset *d, const int64_t *idx,
                                 int count, float *x, uint8_t *y, float grad_scale,
                                 uint64_t step_seed, het_batch_result *res);
/* One whole training step of one process: gathers as het_train_batch_grads, then
 * het_model_train_step with grad_scale and the update u (the optimizer folded into the step for
 * dense stacks). count must be in 1..max_batch of the model. */
int het_train_step(het_model *m, const het_dataset *d, const int64_t *idx, int count, float *x,
                   uint8_t *y, float grad_scale, uint64_t step_seed, const het_update *u,
                   het_batch_result *res);

/* Evaluates the first n samples of d in eval mode, in order, in batches of at most `batch`
 * (<= the model's max_batch), using caller buffers x (batch x sample floats), y (batch) and
 * idx (batch). *res gets the totals. */
int het_eval_dataset(het_model *m, const het_dataset *d, int64_t n, int batch, float *x,
                     uint8_t *y, int64_t *idx, het_batch_result *res);

/* ---- the trainer ---- */
typedef struct het_trainer het_trainer;

/* Checks cfg, loads the datasets, builds and initializes the model (from cfg->seed), sets the
 * optimizer and schedule. Sets the BLAS thread count to 1 (parallelism is the model's
 * `threads` workers). Does not read the checkpoint (het_trainer_run does when cfg->resume).
 * On failure *out is NULL and the message names the cause (e.g. the missing data file).
 *
 * Distributed: when MPI is initialized, the trainer spans MPI_COMM_WORLD and every function
 * below that trains, evaluates, saves, loads or runs is COLLECTIVE (all ranks call it, in the
 * same order). Failures are agreed on (het_comm_agree): every rank returns the status and
 * message of the lowest failing rank, so no rank is left waiting in a collective. Rank 0
 * broadcasts the initial parameters and state; rank 0 alone writes checkpoints, metrics, the
 * trace and safetensors. Without MPI initialized it is one process, as before. */
int het_trainer_create(het_trainer **out, const het_train_config *cfg);
void het_trainer_free(het_trainer *t);

/* The whole run: resume (if asked), print the configuration, then for each remaining epoch:
 * train, evaluate, print one line, append metrics, checkpoint when due; finally export
 * safetensors if asked. Prints through het_log (rank 0). On resume the metrics file keeps its
 * lines up to the checkpoint's epoch and continues after them; elapsed_s restarts at 0. */
int het_trainer_run(het_trainer *t);

/* One epoch as the run does it: train, evaluate, print, record, append metrics, checkpoint
 * when due (the metrics file is opened by the first call). Does not read a checkpoint. */
int het_trainer_run_epoch(het_trainer *t);
/* One epoch of training steps (no evaluation, nothing recorded); fills st's training fields
 * and advances the epoch, step and schedule. */
int het_trainer_train_epoch(het_trainer *t, het_epoch_stats *st);
/* Mean loss and accuracy on the (limited) test set. */
int het_trainer_evaluate(het_trainer *t, double *loss, double *acc);

/* Checkpoints: see the format below. Save writes "<path>.tmp", fsyncs it and renames it over
 * path. Load checks everything and restores parameters, state, optimizer, schedule, epoch,
 * step and the metrics history; a model, parameter count or optimizer mismatch is
 * HET_EFORMAT. */
int het_trainer_save(het_trainer *t, const char *path);
int het_trainer_load(het_trainer *t, const char *path);

het_model *het_trainer_model(het_trainer *t);
int het_trainer_rank(const het_trainer *t);  /* 0 without MPI */
int het_trainer_size(const het_trainer *t);  /* ranks; 1 without MPI */
/* Rank 0: the time split of the last epoch of every rank, 4 doubles per rank (compute, comm,
 * wait, delay seconds); *n_ranks gets P. Other ranks: their own split only (*n_ranks = 1). */
const double *het_trainer_rank_times(const het_trainer *t, int *n_ranks);
const het_train_config *het_trainer_config(const het_trainer *t);
const het_dataset *het_trainer_train_set(const het_trainer *t);
const het_dataset *het_trainer_test_set(const het_trainer *t);
int     het_trainer_epoch(const het_trainer *t);  /* epochs completed */
int64_t het_trainer_step(const het_trainer *t);   /* optimizer steps completed */
/* Epoch records so far (valid until the next epoch or load); *n gets their count. */
const het_epoch_stats *het_trainer_history(const het_trainer *t, int *n);

/* ---- checkpoint files ----
 * Layout (integers little-endian):
 *   0   "HETCKPT1"                       8-byte magic
 *   8   u32 format version (1), u32 0
 *   16  sections: char tag[16] (NUL-padded), u64 length, `length` bytes
 *   ... last section: tag "end", length 4, u32 CRC-32 of every byte before it
 * Floats are stored as IEEE-754 little-endian. Every read is checked; a failure is one line
 * "<path>: offset N: <found>, expected <what>" and HET_EFORMAT (HET_EIO if unreadable). */
#define HET_CKPT_MAGIC "HETCKPT1"
#define HET_CKPT_VERSION 1u
#define HET_CKPT_TAG_LEN 16

typedef struct het_ckpt_writer het_ckpt_writer;
typedef struct het_ckpt_reader het_ckpt_reader;

/* Creates "<path>.tmp" and writes the header. */
int het_ckpt_writer_open(het_ckpt_writer **out, const char *path);
/* Appends section `tag` (1..15 characters of [a-z0-9_.-], not "end", unique). */
int het_ckpt_put(het_ckpt_writer *w, const char *tag, const void *data, size_t bytes);
/* Writes the CRC section, fsyncs, renames to the final path. Frees w in every case; on
 * failure the temporary file is removed and the old checkpoint (if any) is untouched. */
int het_ckpt_writer_commit(het_ckpt_writer *w);
/* Closes and removes the temporary file; frees w. NULL is fine. */
void het_ckpt_writer_abort(het_ckpt_writer *w);

/* Reads the whole file and verifies magic, version, end section, CRC and section framing. */
int het_ckpt_reader_open(het_ckpt_reader **out, const char *path);
void het_ckpt_reader_close(het_ckpt_reader *r);
/* Copies section `tag`, which must be exactly `bytes` long, into dst. */
int het_ckpt_get(het_ckpt_reader *r, const char *tag, void *dst, size_t bytes);
/* Section `tag` of any length: *data points into the reader (valid until close), *offset is
 * the file offset of its first byte (for messages). HET_EFORMAT if absent. */
int het_ckpt_find(het_ckpt_reader *r, const char *tag, const void **data, size_t *bytes,
                  uint64_t *offset);
/* 1 if section `tag` exists. */
int het_ckpt_has(const het_ckpt_reader *r, const char *tag);
const char *het_ckpt_reader_path(const het_ckpt_reader *r);

/* Applies the configuration stored in a checkpoint (its "config" section) to c. */
int het_train_config_from_checkpoint(het_train_config *c, const char *path);

/* Loads only the weights (parameters and state) of a checkpoint into m, checking that it was
 * written for model `model_name` with the same parameter and state counts. */
int het_checkpoint_load_weights(het_model *m, const char *model_name, const char *path);

/* ---- safetensors ----
 * Writes the model's trainable parameters as F32 tensors named "layers.<i>.weight" /
 * "layers.<i>.bias" (ResNet blocks: "layers.<i>.conv1.weight", "layers.<i>.bn1.weight", ...)
 * in PyTorch shapes, atomically (temporary file + rename). */
int het_safetensors_write(het_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif
