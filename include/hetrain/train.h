/* hetrain train: the training configuration (parser and checks; the types are in config.h)
 * and the trainer (epoch loop, evaluation, metrics, progress, checkpoint / resume). Model files
 * (text, ONNX, safetensors) are in netfile.h, included here.
 *
 * One process, or P MPI ranks under mpirun / srun (see het_trainer_create). The trainer owns
 * epochs, evaluation, metrics and checkpoints; a strategy (--strategy, src/strategy) runs each
 * epoch's steps with the step machinery of src/strategy and the batch helpers of batch.h.
 *
 * Determinism: for a given configuration (including `threads`), training is bitwise
 * reproducible, and a run resumed from a checkpoint is bitwise identical to an uninterrupted
 * one: the epoch permutation is a function of (seed, epoch), dropout of (seed, global step),
 * and everything else that evolves (parameters, state, optimizer and schedule state, epoch,
 * step, metrics) is in the checkpoint. Timing fields are the only exception and are never
 * stored in a checkpoint, so two identical runs write identical checkpoint bytes. */
#ifndef HETRAIN_TRAIN_H
#define HETRAIN_TRAIN_H

#include "hetrain/ckpt.h"
#include "hetrain/config.h"
#include "hetrain/core.h"
#include "hetrain/netfile.h"
#include "hetrain/data.h"
#include "hetrain/nn.h"
#include "hetrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults: mlp on fashion-mnist, 10 epochs, batch 64, SGD lr 0.05 momentum 0.9, constant
 * schedule, seed 1, 1 thread, strategy allreduce with 25 MiB buckets, everything else off.
 * `batch` is the GLOBAL batch: a step of P ranks processes `batch` samples in all. */
het_train_config het_train_config_defaults(void);

/* Sets one field from text, as a config file or an option would: `key` is the field name with
 * '-' or '_' ("weight-decay"), `value` the text (NULL for a flag means "true"; flags also take
 * true/false/yes/no/on/off/1/0). Numbers must parse completely and be in range. A key that
 * is no field's may be an option of a registered strategy's own table (--ps-rank ...): it is
 * checked against the table and kept in `strategy_opts` (a repeated setting replaces the
 * earlier one); whether the chosen strategy has it is het_train_config_check's question.
 * HET_EINVAL with one line "key: ..." on an unknown key or a bad value. */
int het_train_config_set(het_train_config *c, const char *key, const char *value);

/* Applies a config file: lines "key = value" or "key value", '#' starts a comment, blank lines
 * are skipped; a key may be set once per file (slowdown-at: repeats append). Errors: HET_EIO
 * if unreadable or a directory, HET_EINVAL with "FILE:LINE: ..." on a bad line, e.g.
 * "run.cfg:3: batch given twice (line 2)". */
int het_train_config_load(het_train_config *c, const char *path);

/* Cross-field checks (nesterov needs momentum, resume needs a checkpoint path, every
 * strategy option set is one of the chosen strategy's, ...), and
 * het_train_check_paths(c, NULL). */
int het_train_config_check(const het_train_config *c);

/* No output (checkpoint, metrics, trace, export-safetensors, out, and the "<path>.tmp" that
 * each of them but metrics is written to first) may be the same file as another output or an
 * input (speeds-file, the config file `config_file` (NULL: none), the dataset's files, a
 * resumed checkpoint), by file identity: device and inode after links, or where a missing
 * file would be created. Touches no file. HET_EINVAL with one line naming both options and
 * paths, e.g. "metrics: 'm.jsonl' is also the checkpoint file 'c.ckpt'; give each its own
 * path". */
int het_train_check_paths(const het_train_config *c, const char *config_file);
/* The same check for n more outputs of option `what` (hetrain compare's files in --out DIR)
 * against c's inputs (speeds-file, the dataset's files) and each other. */
int het_train_check_outputs(const het_train_config *c, const char *what,
                            const char *const *outputs, int n);

/* Writes the configuration as "key = value" lines (a valid config file) into buf (always
 * NUL-terminated); returns the length it needed. `run_keys` 0 leaves out what does not change
 * the trained result (paths of outputs, resume, progress, quiet); that form is what a
 * checkpoint stores. The strategy options set (strategy_opts) follow the keys, one
 * "name = value" line each. */
size_t het_train_config_format(const het_train_config *c, int run_keys, char *buf, size_t n);

/* Resets what only training uses to its default, for evaluating or exporting a checkpoint on
 * any number of processes: the strategy (allreduce) and its options (speeds, speeds-file,
 * rebalance, strategy_opts), slowdown, slowdown-at, ranks-per-node, placement, the emulated
 * network. */
void het_train_config_for_eval(het_train_config *c);

/* A resume under another strategy than the checkpoint's (c: the checkpoint's configuration
 * with what is given now applied over it): the checkpoint's options of strategies other than
 * c->strategy are dropped, those set in `given` (the options given now) kept, so that
 * het_train_config_check still refuses an option given now for another strategy. */
void het_train_config_for_resume(het_train_config *c, const het_train_config *given);

/* A key's description, for --help and docs. NULL-terminated table. */
typedef struct het_config_key {
    const char *key;   /* "weight-decay" */
    const char *arg;   /* "X" for a value, NULL for a flag */
    const char *help;  /* one line */
} het_config_key;
const het_config_key *het_train_config_keys(void);

/* The dataset c names (data, data-dir, synthetic-shape parsed, classes) as the catalog's
 * spec; spec->name and spec->dir point into c. HET_EINVAL on a synthetic-shape that is not
 * CxHxW. */
int het_train_data_spec(const het_train_config *c, het_dataset_spec *spec);
/* Per-sample shape and class count of c's dataset, without loading the images
 * (het_dataset_describe: for --data idx the files' headers and labels are read). */
int het_train_data_shape(const het_train_config *c, het_shape *shape, int *n_classes);
/* Loads the train and test splits of c's dataset (het_dataset_load), privately. */
int het_train_data_load(const het_train_config *c, het_dataset *train, het_dataset *test);


/* ---- the trainer ---- */
typedef struct het_trainer het_trainer;

/* Checks cfg, loads the datasets, builds and initializes the model (from cfg->seed), sets the
 * optimizer and schedule. Sets the BLAS thread count to 1 (parallelism is the model's
 * `threads` workers). Prints the run's header through het_log (rank 0: data, model, the
 * configuration, the ranks) before the first transfer between ranks, which an emulated slow
 * network may stretch. Does not read the checkpoint (het_trainer_run does when cfg->resume).
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

/* The whole run: resume (if asked), then for each remaining epoch:
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
/* Times this rank's forward + backward passes of the configured model (--calibrate-steps, at
 * least half a second; the emulated slowdown included) on every rank at once: speeds[r] gets
 * rank r's samples/s on every rank (size het_trainer_size). Collective. */
int het_trainer_calibrate(het_trainer *t, double *speeds);
/* The virtual clock's compute-cost table (--compute-cost calibrated): measured on rank 0 now
 * unless the run has one already, then written to path by rank 0 (temporary + rename), for
 * --compute-cost calibrated:FILE. Collective; a failure is agreed. */
int het_trainer_write_costs(het_trainer *t, const char *path);
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
/* The time split of the last epoch of every rank, 4 doubles per rank (compute, comm, wait,
 * delay seconds), on every rank; *n_ranks gets P. */
const double *het_trainer_rank_times(const het_trainer *t, int *n_ranks);
const het_train_config *het_trainer_config(const het_trainer *t);
const het_dataset *het_trainer_train_set(const het_trainer *t);
const het_dataset *het_trainer_test_set(const het_trainer *t);
int     het_trainer_epoch(const het_trainer *t);  /* epochs completed */
int64_t het_trainer_step(const het_trainer *t);   /* optimizer steps completed */
/* Epoch records so far (valid until the next epoch or load); *n gets their count. */
const het_epoch_stats *het_trainer_history(const het_trainer *t, int *n);

/* Applies the configuration stored in a checkpoint (its "config" section) to c. Of the
 * strategies' own options only those of the stored strategy are kept: a checkpoint written
 * while hgc's and daso's options were keys of het_train_config lists them for every strategy,
 * and they are no setting of another strategy's run. */
int het_train_config_from_checkpoint(het_train_config *c, const char *path);

/* Loads only the weights (parameters and state) of a checkpoint into m, checking that it was
 * written for model `model_name` with the same parameter and state counts. */
int het_checkpoint_load_weights(het_model *m, const char *model_name, const char *path);

#ifdef __cplusplus
}
#endif
#endif
