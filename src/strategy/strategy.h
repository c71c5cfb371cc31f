/* strategy: how the ranks of a run cooperate. A strategy is a table of functions (DESIGN.md):
 * the trainer owns epochs, evaluation, metrics and checkpoints and asks the strategy to run
 * one epoch's steps, because step loops differ deeply between methods. Each strategy file
 * reads as its method's algorithm; the shared step machinery (step.c: paced and traced compute
 * regions, local gradients, reducers that sum gradients over one communicator scope with
 * buckets started from the model's gradient hook, the optimizer step, the time split) and the
 * batch helpers (hetrain/batch.h) live outside the strategies.
 *
 * THE STRATEGY CONTRACT (every strategy keeps it; the trainer relies on it):
 * - Epochs. train_epoch is collective over the world; its return is a drain point: no message
 *   is in flight and no request is pending on any rank, so a checkpoint between epochs is
 *   consistent. A failure (divergence included) is returned on every rank alike.
 * - Authority. When train_epoch returns, rank 0 holds the authoritative parameters, model state
 *   (batch-norm statistics), optimizer state (ctx->opt_state) and step count (ctx->step), and
 *   every rank holds the same parameters and state (a parameter server broadcasts them, a
 *   pipeline gathers its slices). The trainer checkpoints rank 0's buffers and evaluates
 *   model_for_eval on every rank.
 * - Per-rank state that differs between ranks (e.g. momentum that differs between nodes) is
 *   the strategy's: its collective save_state gathers it into its own sections
 *   (het_step_save_per_rank) and load_state gives each rank its part back.
 * - Epoch figures (samples, loss, train_acc, lr) are global, equal on every rank. Per-step
 *   figures passed to on_step may be local to the rank, and het_step_info.local says so.
 * - Shared state. What every rank must hold alike beyond the weights (hgc's speeds, daso's
 *   schedule) is listed by agreed_state and compared by the trainer at start and on resume;
 *   load_state checks every value it reads as an option's value is checked (ranges, counts).
 * - --batch means the global batch for the data-parallel strategies (allreduce, hgc, daso) and
 *   the pipelines; a strategy where it means something else says so in its opening comment
 *   and in ops.worker_batch (the parameter servers: each worker's batch).
 * - Roles. Where ranks play different parts (ps.h: servers and workers; the aggregators of a
 *   hierarchical server), inside an epoch each role keeps its own meaning of ctx->step (a
 *   server: its updates; a worker: the version of the weights it holds) and the figures are
 *   their owners'; the drain point at the epoch's end restores the contract above on every
 *   rank (one ctx->step, rank 0 holding the server's parameters and optimizer state), so
 *   evaluation, checkpoints and resume are the trainer's as for any strategy.
 * Internal to the library. */
#ifndef HET_STRATEGY_H
#define HET_STRATEGY_H

#include <mpi.h>

#include "core/trace.h"
#include "hetero/hetero.h"
#include "hetrain/ckpt.h"
#include "hetrain/comm.h"
#include "hetrain/config.h"
#include "hetrain/data.h"
#include "hetrain/nn.h"

/* What one step did, for the trainer's per-step metrics and progress. */
typedef struct het_step_info {
    int epoch;          /* 1-based */
    int64_t step;       /* optimizer steps completed, after this one */
    double loss_sum;    /* over the global batch, or this rank's samples when `local` */
    int correct;        /* likewise */
    int count;          /* samples the figures cover */
    int local;          /* 1: the figures are this rank's alone (no global reduction) */
    float lr;
    double secs;        /* wall time of the step on this rank */
} het_step_info;

/* Per-rank time split, seconds (see het_epoch_stats). */
typedef struct het_times {
    double compute_s, comm_s, wait_s, delay_s;
} het_times;

/* A step whose loss, gradients or weights were not finite (finite.c). */
enum { HET_NF_NONE = 0, HET_NF_LOSS, HET_NF_GRADIENT, HET_NF_WEIGHTS };
typedef struct het_nonfinite {
    int64_t step;     /* the global step (1-based) that saw it */
    int32_t epoch;    /* 1-based */
    int32_t kind;     /* HET_NF_* */
    int32_t layer;    /* the layer of the gradient or weight (HET_NF_GRADIENT, _WEIGHTS) */
    int32_t rank;     /* the world rank that recorded it */
    double loss;      /* the step's loss sum (nan, inf or finite) */
    int32_t dnnl;     /* 1: the recording rank had a oneDNN fault (tensor/internal.h): a
                         convolution that failed while running left its outputs NaN */
} het_nonfinite;

typedef struct het_strategy_ctx het_strategy_ctx;
typedef struct het_eval_rec het_eval_rec; /* below */
typedef struct het_reducer het_reducer;

/* This rank's running figures of an epoch, for the epoch's global means. */
typedef struct het_epoch_sums {
    double loss, correct, samples;
    double skipped; /* steps skipped (--on-nan skip-step): one per step, counted once */
} het_epoch_sums;

/* The trainer's callback after every step (metrics line, progress bar); non-zero stops. */
typedef int (*het_step_cb)(het_strategy_ctx *ctx, const het_step_info *info);

#define HET_MAX_REDUCERS 8

struct het_strategy_ctx {
    /* ---- set by the trainer ---- */
    const het_train_config *cfg;
    het_model *model;
    const het_dataset *train;
    int64_t n_train;            /* training samples used (after --train-limit) */
    het_sampler *sampler;       /* the epoch permutation, same on every rank */
    het_schedule *sched;        /* lr of a step: het_schedule_lr(sched, epoch, step, spe) */
    float *opt_state;
    int64_t step;               /* optimizer steps completed; the strategy advances it */
    int epoch;                  /* the epoch being trained, 0-based */
    float *x;                   /* cfg->batch samples */
    uint8_t *y;
    het_comm *comm;             /* NULL: one process without MPI */
    MPI_Comm world;             /* MPI_COMM_NULL without MPI */
    int rank, size;
    het_lane lane;              /* the rank's main lane: its time (hetrain/emul.h), which its
                                   comm, pace and trace events read and advance */
    het_pace pace;              /* this rank's emulated slowdown (pace.lane = &lane) */
    het_trace *trace;           /* NULL: off */
    het_step_cb on_step;
    /* ---- the step machinery's (step.c) ---- */
    het_reducer *reducers[HET_MAX_REDUCERS]; /* created with het_reducer_create, in order */
    int n_reducers;
    double compute_mark;        /* pace.compute_s at the last reduction */
    het_comm_stats comm_mark;   /* at the start of the current step's gradients */
    double epoch_compute0;      /* pace.compute_s at the epoch's start */
    het_comm_stats epoch_comm0; /* comm statistics at the epoch's start */
    het_times times;            /* this epoch's split (complete after het_step_epoch_end) */
    int skip_record;            /* the last step was skipped (--on-nan skip-step): its figures
                                   are not recorded */
    het_nonfinite nonfinite;    /* this rank's first non-finite step (daso: the ranks decide
                                   alone and stop together at the next global average) */
    /* Every rank's split of the last epoch, 4 doubles per rank (compute, comm, wait, delay),
     * on every rank after het_step_epoch_end: what a strategy re-balances from. */
    double *rank_times;
    /* Every rank's payload bytes of the last epoch, 2 per rank (node-local, cross-node), on
     * every rank after het_step_epoch_end (NULL: not gathered). */
    double *rank_bytes;
    het_comm_links links;       /* node link occupancy of the last epoch (het_step_epoch_end) */
    /* ---- an epoch in pieces (--checkpoint-steps), for strategies with ops.pieces ---- */
    int64_t epoch_pos;          /* the position in the epoch's permutation (a sample index)
                                   where train_epoch starts: 0, or where the previous piece
                                   of the epoch (or the resumed checkpoint) stopped */
    int64_t pause_step;         /* > 0: return at the first step boundary with ctx->step >=
                                   pause_step that leaves steps in the epoch (het_step_pause):
                                   ctx->paused = 1, epoch_pos = the next step's position, a
                                   drain point with rank 0 holding the authoritative buffers
                                   as at an epoch's end; the epoch's end-of-epoch work (its
                                   figures, averages) is not done then */
    int paused;                 /* set by het_step_pause; the trainer clears it */
    int pause_ckpt;             /* the pause at pause_step is a checkpoint's; 0: an evaluation's
                                   only (--eval-every), whose drain work is charged to no clock
                                   (het_step_aside) */
    /* --eval-every in a strategy that runs whole epochs but evaluates inside them (ops.evals):
     * het_step_eval_due calls this (the trainer's evaluation, charged to no clock) with
     * eval_user; NULL: none. */
    int (*eval_fn)(het_strategy_ctx *ctx, void *user);
    /* --eval-every on a parameter server (ops.evals 2): eval_here evaluates model_for_eval on
     * this rank alone, on the whole test set, charged to no clock, into *r (r->step =
     * ctx->step, r->samples = ctx->epoch_pos); eval_put, on every rank, logs and writes the
     * record of an evaluation made on rank r->rank (het_ps_drain hands them round). */
    int (*eval_here)(het_strategy_ctx *ctx, void *user, het_eval_rec *r);
    int (*eval_put)(het_strategy_ctx *ctx, void *user, const het_eval_rec *r);
    void *eval_user;
    het_epoch_sums esums;       /* this rank's running figures of the epoch, over its pieces
                                   (zeroed by the trainer when an epoch starts at 0) */
    /* ---- a resume on another number of ranks (load_state reads these) ---- */
    int ckpt_size;              /* the world size that wrote the checkpoint (0: the same) */
    char resized[768];          /* what load_state changed for the new world size, appended
                                   with het_step_resized ("; hgc speeds re-scaled ...") */
    /* ---- injected failures (--fail-at, --fail-rate; the trainer's faults.c) ---- */
    int64_t fail_step;          /* > 0: this rank ends itself at the first step end with
                                   ctx->step >= fail_step */
    double fail_time;           /* > 0: ... or with the run's clock past fail_t0 + fail_time */
    double fail_t0;
    void (*fail)(het_strategy_ctx *ctx); /* what ends it (het_step_record calls it) */
    /* ---- the strategy's own ---- */
    void *priv;
};

/* A value of a strategy's state that ranks must hold alike (the start-up consistency check,
 * train/consistency.c): a number, or a CRC-32 of bytes (het_agreed_bytes). */
typedef struct het_agreed_value {
    const char *field;     /* named in the message: "daso schedule gs", "hgc speeds" */
    uint64_t value;
    int shown;             /* 1: a number, shown in the message (that rank's vs the reference) */
    het_comm_scope scope;  /* HET_COMM_WORLD: equal on every rank; HET_COMM_NODE: inside each
                              node (the reference is the node's first rank) */
} het_agreed_value;
#define HET_AGREED_MAX 32

/* A CRC-32 of n bytes at p as a value of scope s. */
het_agreed_value het_agreed_bytes(const char *field, const void *p, size_t n,
                                  het_comm_scope s);

/* A strategy's own option (--ps-rank, --max-staleness ...): declared in the strategy's table,
 * not a field of het_train_config. The parser (train/config.c) accepts `--NAME VALUE` (and
 * NAME = VALUE in a config file) for an option of any strategy's table, checks the value
 * against the entry (numbers in [lo, hi], words among `words`) and keeps it, normalized, in
 * het_train_config.strategy_opts; het_train_config_check refuses an option that the chosen
 * strategy does not declare. Options of one name in several tables (asp and inhad share
 * theirs) must have the same kind, bounds and words; defaults may differ. */
/* HET_SOPT_LIST: integers in [lo, hi], comma-separated, strictly ascending ("3,7"); def is
 * unused (unset: the strategy chooses), read with het_strategy_opt_list.
 * HET_SOPT_BOOL: a flag. Given without a value (`--daso-merge-last`, a bare key in a config
 * file) it is on; a value may be 1 | true | yes | on or 0 | false | no | off, as for the
 * built-in flags; kept as "true" / "false", read as 1 / 0; metavar is NULL. */
typedef enum {
    HET_SOPT_INT = 0,
    HET_SOPT_FLOAT,
    HET_SOPT_WORD,
    HET_SOPT_LIST,
    HET_SOPT_BOOL
} het_sopt_kind;
/* het_strategy_opt.open: an end of a HET_SOPT_FLOAT range that is excluded. An open end is
 * checked on the value rounded to float, the type the strategies keep it in, so that what a
 * strategy reads is never the excluded end (0.9999999999 is 1 as a float: refused by [0, 1)). */
enum { HET_SOPT_LO_OPEN = 1, HET_SOPT_HI_OPEN = 2 };
typedef struct het_strategy_opt {
    const char *name;               /* without "--"; NULL ends a table */
    const char *metavar;            /* "N", "X", "on|off"; NULL for HET_SOPT_BOOL */
    const char *help;
    het_sopt_kind kind;
    double lo, hi;                  /* HET_SOPT_INT / _FLOAT: the range, closed unless `open` */
    double def;                     /* the default: a number, or the index into words */
    const char *const *words;       /* HET_SOPT_WORD: NULL-terminated values */
    int open;                       /* HET_SOPT_FLOAT: HET_SOPT_LO_OPEN | HET_SOPT_HI_OPEN */
} het_strategy_opt;

/* The value of option `name` of the configured strategy: what was set, else the table's
 * default (HET_SOPT_WORD: the index of the word; HET_SOPT_BOOL: 1 or 0). The name must be in the strategy's table
 * (a programming error otherwise: aborts with a message). It scans the registry and the text
 * of c->strategy_opts: read the values once, at init, not per step. */
double het_strategy_opt_value(const het_train_config *c, const char *name);
/* The integers of HET_SOPT_LIST option `name` of the configured strategy: up to cap into out;
 * returns how many were set (0: unset). Aborts as het_strategy_opt_value for a name not in
 * the table or not a list. */
int het_strategy_opt_list(const het_train_config *c, const char *name, int *out, int cap);
/* The entry called `name` (exactly) of a table (NULL: none), or NULL. */
const het_strategy_opt *het_strategy_opt_find(const het_strategy_opt *table, const char *name);
/* The value text of option `name` in the text of het_train_config.strategy_opts into val (n
 * bytes, NUL-terminated): 1 when it is set there, 0 otherwise (val untouched). */
int het_strategy_opts_lookup(const char *opts, const char *name, char *val, size_t n);

typedef struct het_strategy_ops {
    const char *name;
    const char *summary;   /* one line, for --help and docs */
    /* After the trainer built the model and broadcast rank 0's parameters. Collective. */
    int (*init)(het_strategy_ctx *ctx);
    /* All steps of epoch `epoch` (0-based, = ctx->epoch): fills st->samples, loss, train_acc,
     * lr (the GLOBAL figures, equal on every rank) and advances ctx->step. Collective; see the
     * contract above. */
    int (*train_epoch)(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st);
    /* The model to evaluate, with the same weights on every rank (each rank evaluates a shard
     * of the test set and the trainer sums the results). */
    het_model *(*model_for_eval)(het_strategy_ctx *ctx);
    /* Called on every rank (collective); w is non-NULL on rank 0 only, which writes the
     * strategy's sections (tags "s.<name>..."). */
    int (*save_state)(het_strategy_ctx *ctx, het_ckpt_writer *w);
    /* Called on every rank with the same checkpoint open. */
    int (*load_state)(het_strategy_ctx *ctx, het_ckpt_reader *r);
    void (*free)(het_strategy_ctx *ctx);
    /* Optional (NULL: none). After an epoch, once ctx->rank_times holds every rank's split:
     * text appended to the epoch line (" | ...") and a JSON member for the epoch's metrics
     * object ("\"name\":{...}"), both NUL-terminated, "" for nothing. Not collective. */
    void (*report)(het_strategy_ctx *ctx, char *line, size_t n_line, char *json, size_t n_json);
    /* 1: sums the world's gradients with a world reducer, so --allreduce-algo applies (the
     * trainer's 'ranks:' line names the algorithm); 0: a scheme of its own. */
    int world_grads;
    /* Optional (NULL: none). The state that ranks must hold alike for their collectives to
     * pair (speeds and partitions, schedules): up to cap values into out, the same count on
     * every rank for a given configuration; returns the count. The trainer compares them
     * after init and after load_state (a resume, where each rank may read its own copy), so a
     * difference stops every rank with one line naming the rank and the field. Not
     * collective. */
    int (*agreed_state)(het_strategy_ctx *ctx, het_agreed_value *out, int cap);
    /* Optional (NULL: none): the strategy's own options, ended by an entry with name NULL. */
    const het_strategy_opt *opts;
    /* 1: --batch is each worker's batch (the parameter servers), not the global batch. */
    int worker_batch;
    /* Compute threads per --threads thread (qfb: 2, a forward and a backward thread); 0: 1.
     * The trainer counts them to tell whether every compute thread has a core. */
    int lanes;
    /* 1: train_epoch honours ctx->epoch_pos and ctx->pause_step (an epoch in pieces, for
     * --checkpoint-steps); 0: it runs whole epochs only, and --checkpoint-steps is refused. */
    int pieces;
    /* 1 (with pieces 0): train_epoch calls het_step_eval_due after each step, so --eval-every
     * evaluates inside its epochs although it cannot stop there (daso: syncs in flight);
     * 2: a parameter server, whose primary evaluates its own model after the updates that
     * are due (het_ps_eval_due) and hands the records round at the epoch's drain point. */
    int evals;
    /* Optional (NULL: model_for_eval as it is). An evaluation inside an epoch (--eval-every)
     * calls it with begin 1 before and begin 0 after, on every rank, charged to no clock:
     * the strategy makes model_for_eval the same on every rank (daso: the ranks' sample-
     * weighted mean) and then gives each rank its own model back. Collective. */
    int (*eval_model)(het_strategy_ctx *ctx, int begin);
} het_strategy_ops;

/* ---- registry (strategy.c) ---- */
/* NULL-terminated names of the known strategies. */
const char *const *het_strategy_names(void);
/* The strategy called `name`; NULL (message listing the known ones) if unknown. */
const het_strategy_ops *het_strategy_find(const char *name);

extern const het_strategy_ops het_strategy_allreduce;
extern const het_strategy_ops het_strategy_hgc;
extern const het_strategy_ops het_strategy_daso;
extern const het_strategy_ops het_strategy_asp;
extern const het_strategy_ops het_strategy_inhad;
extern const het_strategy_ops het_strategy_gpipe;
extern const het_strategy_ops het_strategy_qfb;
/* The parameter-server strategies' option tables (ps_opts.c). */
extern const het_strategy_opt het_asp_opts[], het_inhad_opts[];
/* hgc's and daso's option tables (hgc.c, daso.c; tests read their defaults). */
extern const het_strategy_opt het_hgc_opts[], het_daso_opts[];

/* ---- the step machinery (step.c) ---- */

/* Reducers. A reducer sums the model's gradient buffer over the ranks of one communicator
 * scope (world, node, cross or a group of het_comm_split): buckets of bucket_mb MiB (0: one
 * bucket), cut by the rule of het_buckets, each started from the model's gradient hook as
 * backward completes it, so that communication overlaps backward. With HET_REDUCE_FIGURES the
 * batch's loss sum and correct count travel in the first bucket (the gradient buffer's
 * spare tail, HET_MODEL_GRAD_TAIL), so that after
 * het_step_reduce every rank of the scope has the scope's figures without another call. Over
 * HET_COMM_WORLD the buckets run the algorithm of --allreduce-algo (het_buckets_set_algo:
 * flat, or two levels when there are several nodes); other scopes are flat. A
 * reducer over one rank (or without MPI) reduces nothing. The reducer belongs to ctx (freed by
 * het_step_free, or earlier by het_reducer_free). Collective over the scope. */
enum { HET_REDUCE_FIGURES = 1 };
int  het_reducer_create(het_reducer **out, het_strategy_ctx *ctx, het_comm_scope s,
                        float bucket_mb, int flags);
void het_reducer_free(het_strategy_ctx *ctx, het_reducer *r);
/* Ranks the reducer sums over (1: nothing to reduce). */
int  het_reducer_ranks(const het_reducer *r);

/* The dropout seed of a rank's local batch at global step `step`: rank 0 uses the
 * single-process seed, other ranks independent streams. */
uint64_t het_step_seed(const het_strategy_ctx *ctx, int64_t step);

/* A paced, traced region of compute: begin() starts pacing and returns the start time; end()
 * stretches the region by the rank's slowdown (sleeping) and records trace event `event`
 * (arg: step, layer...) plus the emulated sleep. */
double het_step_region_begin(het_strategy_ctx *ctx);
void   het_step_region_end(het_strategy_ctx *ctx, const char *event, int arg, double t0);

/* Local gradients: gathers idx[0..count), zeroes the gradients, runs forward and backward with
 * grad_scale (count may be 0: zero gradients). With a reducer `red` over several ranks, its
 * buckets start from the gradient hook as backward completes them; complete the sum with
 * het_step_reduce. red may be NULL. A paced, traced region. */
int het_step_grads(het_strategy_ctx *ctx, het_reducer *red, const int64_t *idx, int count,
                   float grad_scale, uint64_t seed, het_batch_result *res);

/* Completes red's sum of the gradients over its scope. *global gets local's figures, with
 * HET_REDUCE_FIGURES the scope's loss sum and correct count. Logs the step's compute and
 * communication time for the time split (waiting is settled at het_step_epoch_end). Nothing
 * to reduce for one rank or red == NULL. */
int het_step_reduce(het_strategy_ctx *ctx, het_reducer *red, const het_batch_result *local,
                    het_batch_result *global);

/* The optimizer update of all parameters with lr (paced, traced); advances ctx->step. Returns
 * 1 when every updated parameter is finite, 0 otherwise. */
int het_step_update(het_strategy_ctx *ctx, float lr);

/* One synchronous data-parallel step: the gradients of idx[0..count) with grad_scale (figures:
 * *local this rank's, *global the scope's, as het_step_reduce), summed
 * over red's scope, then the update with lr. A non-finite loss or gradient (or weights) stops
 * with a clear message (het_step_stop), on every rank of the scope alike (red must carry
 * HET_REDUCE_FIGURES when it spans several ranks); with --on-nan skip-step the update of such
 * a step is dropped instead (ctx->skip_record; non-finite weights still stop). When red spans
 * one rank and --on-nan is stop, nothing has to happen between gradients and update, so the
 * update is folded into the step (het_batch_step: the dense-stack executor where the model has
 * one). Advances ctx->step, skipped steps included. */
int het_step_sync(het_strategy_ctx *ctx, het_reducer *red, const int64_t *idx, int count,
                  float grad_scale, uint64_t seed, float lr, het_batch_result *local,
                  het_batch_result *global);

/* The trainer brackets every train_epoch with these. begin() resets the epoch's time split
 * and the reducers' step logs. end() (collective over the world) settles waiting per
 * reducer from the per-step compute times of its ranks (two all-reduces per reducer and epoch,
 * the step counts and the log; none per step), completes ctx->times, and all-gathers every rank's split into
 * ctx->rank_times (and the epoch's node-local / cross-node bytes into ctx->rank_bytes). */
void het_step_epoch_begin(het_strategy_ctx *ctx);
int  het_step_epoch_end(het_strategy_ctx *ctx);


/* An epoch in pieces: after a step, with `next` the position of the epoch's next step and n
 * the epoch's samples. Returns 1 (ctx->paused = 1, ctx->epoch_pos = next) when the trainer
 * asked for a pause at this step (ctx->pause_step) and steps remain; the strategy then
 * returns from train_epoch at a drain point. The same on every rank (a pure function of the
 * global step). */
int het_step_pause(het_strategy_ctx *ctx, int64_t next, int64_t n);

/* --eval-every for a strategy with ops.evals: after a step, with `next` the position of the
 * epoch's next step and n the epoch's samples. When the trainer asked for an evaluation at
 * this step (ctx->pause_step) and steps remain, calls ctx->eval_fn with ctx->epoch_pos = next
 * (0 again after it) and moves pause_step to the next multiple of --eval-every. The same on
 * every rank (a pure function of the global step); HET_OK when nothing is due. */
int het_step_eval_due(het_strategy_ctx *ctx, int64_t next, int64_t n);
/* Its test alone: 1 when an evaluation is due after this step (then pause_step moves on to the
 * next multiple of --eval-every), else 0. het_ps_eval_due uses it too. */
int het_step_eval_take(het_strategy_ctx *ctx, int64_t next, int64_t n);

/* An evaluation inside an epoch (--eval-every): what its "eval" record says. */
struct het_eval_rec {
    int64_t step, samples;  /* the step (a server's: its update) and the epoch's samples */
    double loss, acc;       /* test loss and accuracy */
    double when;            /* on the run's clock since the run's start */
    double spent;           /* the evaluation's wall time */
    int32_t rank, pad;      /* the rank that evaluated (-1: all, sharded) */
};

/* Whether strategy s evaluates inside its epochs with --eval-every (pieces or evals). */
static inline int het_strategy_evals_inside(const het_strategy_ops *s) {
    return s->pieces || s->evals;
}

/* An injected failure (--fail-at, --fail-rate) that is due ends this rank here (ctx->fail,
 * SIGKILL); otherwise nothing. At every step's end (het_step_record) and after each update of
 * a parameter server (whose ctx->step counts its updates). */
void het_step_check_fail(het_strategy_ctx *ctx);

/* A resume on another number of ranks: appends "; <what>" to ctx->resized (what load_state
 * changed), printed by the trainer in its one line. */
void het_step_resized(het_strategy_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A step's figures for het_step_record: this rank's, added to the epoch's sums, and those the
 * trainer's per-step callback shows. */
typedef struct het_step_rec {
    const het_batch_result *mine;  /* this rank's figures ... */
    int64_t count;                 /* ... over this many samples */
    const het_batch_result *shown; /* the step's global figures, or NULL: mine are shown */
    int64_t shown_n;               /* their samples (with shown) */
    int local;                     /* 1: what is shown is this rank's alone (a rank without
                                      samples then reports nothing) */
} het_step_rec;

/* After a step that began at t0: adds rec->mine to s, then reports the step to the trainer
 * (ctx->on_step) with the figures shown. A step that was skipped (ctx->skip_record) only
 * counts in s->skipped. Returns on_step's status. */
int het_step_record(het_strategy_ctx *ctx, het_epoch_sums *s, const het_step_rec *rec, float lr,
                    double t0);
/* At the epoch's end: sums s over all ranks and fills st->samples, loss, train_acc, lr and
 * skipped; an epoch whose every step was skipped is divergence (HET_EINVAL). Collective. */
int het_step_epoch_figures(het_strategy_ctx *ctx, het_epoch_sums *s, float lr,
                           het_epoch_stats *st);

/* Sums doubles over all ranks (deterministic for a fixed number of ranks); nothing without
 * MPI or on one rank. */
int het_step_sum_f64(het_strategy_ctx *ctx, double *v, size_t n);

/* Work charged to no clock (an evaluation inside an epoch, --eval-every): begin notes this
 * rank's clock and comm statistics; end puts the virtual clock back and leaves what the work
 * sent, waited and spent in MPI out of the epoch's figures (ctx->epoch_comm0 moves by it). */
typedef struct het_step_aside {
    double v;
    het_comm_stats comm;
    size_t link_mark; /* the link spans noted before it (forgotten after) */
    het_comm_queue queue; /* the collectives' queue on the link before it (put back after) */
} het_step_aside;
void het_step_aside_begin(het_strategy_ctx *ctx, het_step_aside *a);
void het_step_aside_end(het_strategy_ctx *ctx, const het_step_aside *a);

/* Averages the model's non-trainable state (batch-norm running statistics) over ranks, so
 * that every rank evaluates and checkpoints the same model: sum over ranks of weight_r times
 * rank r's state (weights summing to 1; 1/P for the plain mean). Nothing on one rank. */
int het_step_average_state(het_strategy_ctx *ctx, double weight);
/* The same for any n floats v: v <- sum over ranks of weight_r v_r (in place; collective). */
int het_step_average(het_strategy_ctx *ctx, float *v, size_t n, double weight);
/* An evaluation inside an epoch (ops.eval_model) of a strategy whose ranks' models differ
 * there: begin 1 keeps this rank's parameters and batch-norm state in *keep (allocated on first
 * use; the strategy frees it) and puts their mean in every rank's model, rank r weighted by its
 * share of a full step's samples (--batch split evenly: what the epoch's last average makes of
 * equal nodes); begin 0 puts this rank's own back. Collective. */
int het_step_eval_mean(het_strategy_ctx *ctx, int begin, float **keep);

/* Per-rank state in checkpoints. save: collective; gathers `bytes` from every rank to rank 0,
 * which writes section `tag` of size*bytes (w non-NULL on rank 0 only). load: every rank
 * copies its own part of section `tag` into data; HET_EFORMAT when the section was written by
 * another number of ranks or with another size. */
int het_step_save_per_rank(het_strategy_ctx *ctx, het_ckpt_writer *w, const char *tag,
                           const void *data, size_t bytes);
int het_step_load_per_rank(het_strategy_ctx *ctx, het_ckpt_reader *r, const char *tag,
                           void *data, size_t bytes);

/* --compute-cost calibrated[:FILE] | shipped on the virtual clock: rank 0 measures the model's
 * compute pieces (costs.c), reads FILE (`hetrain calibrate --costs-out`; its network must be
 * this one) or takes the shipped table of this network (shipped = 1), every rank gets its table
 * into *k (het_costs_free frees it) and charges its pieces from it (ctx->pace.costs = k).
 * Collective over the world; failures agreed. */
int het_step_costs_setup(het_strategy_ctx *ctx, het_costs *k, const char *file, int shipped);
/* The fingerprint a cost table keeps of the network it was measured on: FNV-1a over the
 * input shape, the classes and every layer's kind, output shape and parameter count. */
unsigned long long het_step_costs_net(const het_model *m);

/* Calibration (hetero/speeds.c): speeds[r] = rank r's training rate in samples/s (not
 * normalized), on every rank. Ranks of one machine (MPI_COMM_TYPE_SHARED) take turns while the
 * others sleep, so that ranks sharing cores do not disturb each other's measurement; machines
 * measure at the same time. Collective; a failure is agreed. */
int het_step_calibrate(het_strategy_ctx *ctx, double *speeds);

/* ---- non-finite values (finite.c) ----
 * A step checks its loss (free: it travels with the gradients) and the weights its update
 * wrote (free: in the optimizer's pass); with --on-nan skip-step also its summed gradients,
 * before the update (one scan). Values summed over ranks are the same on every rank (NaN and
 * inf survive the all-reduce), so every rank decides alike without another call; only the
 * report of a stop makes one. */

/* 1 when loss (and with --on-nan skip-step the model's gradients) are finite. */
int het_step_finite(const het_strategy_ctx *ctx, double loss);
/* What is not finite at global step `step`: the gradients (the highest such layer: where
 * backward first produced one), else the loss, else the weights (the first such layer). */
het_nonfinite het_step_diagnose(const het_strategy_ctx *ctx, double loss, int64_t step);
/* When this process has a oneDNN fault (a convolution that failed while running left its
 * outputs NaN: tensor/internal.h), writes "a oneDNN convolution failed first: <its message>"
 * into buf (n bytes) and returns 1: the cause of a non-finite stop, not the learning rate.
 * Else returns 0 and leaves buf alone. */
int het_step_dnnl_cause(char *buf, size_t n);
/* The stop: collective over comm (MPI_COMM_NULL: this rank alone). The lowest rank passing
 * mine != NULL is named with its event, else every rank's fallback (the same on all) is
 * reported without a rank. Sets the message ("rank 1: epoch 2 step 37: non-finite gradient in
 * layer 3 (conv2d); ...") and returns HET_EINVAL (HET_EMPI if a call fails). */
int het_step_stop(het_strategy_ctx *ctx, het_comm_scope s, const het_nonfinite *mine,
                  const het_nonfinite *fallback);
/* Daso's checks, where the ranks decide alone. note: a non-finite step `step`: returns 1 to
 * drop its update (skip-step), else records the rank's first event in ctx->nonfinite and
 * returns 0. check_params: where every rank holds the same weights (the epoch's end):
 * non-finite weights stop every rank (collective over the world), naming the first event any
 * rank recorded. */
int het_step_note(het_strategy_ctx *ctx, double loss, int64_t step);
int het_step_check_params(het_strategy_ctx *ctx);

/* Frees every reducer (the trainer calls it after the strategy's free). */
void het_step_free(het_strategy_ctx *ctx);

#endif
