/* The parameter-server strategies' shared machinery (ps.c): rank roles, the messages between
 * workers and servers, and the epoch's drain point. Used by asp.c (and inhad.c).
 *
 * ROLES. K = --ps-shards servers on ranks ps-rank, ps-rank - 1, ..., ps-rank - K + 1
 * (ps-rank -1: the last rank); shard k owns parameters [lo_k, lo_k + len_k) of the flat buffer
 * (an even split) and the same slice of every block of the optimizer state. Shard 0 is the
 * primary: it also hands out the epoch's batches and keeps the figures. Every other rank is a
 * worker, numbered 0..W-1 in rank order. Servers run no batches.
 * - ctx->step on every rank at an epoch's end: the primary's updates so far (its version);
 *   inside an epoch, a worker's ctx->step is the version of the weights it holds.
 * - Evaluation and checkpoints: at the drain point every shard broadcasts its slice of the
 *   parameters and of the optimizer state, and the workers' batch-norm statistics are
 *   averaged, so that every rank (rank 0 included) holds the server's model, as the strategy
 *   contract requires; the trainer then evaluates and checkpoints as for any strategy, and a
 *   resume hands each shard its slice back from the checkpoint's full buffers. Inside an
 *   epoch (--eval-every) the primary evaluates its own model alone (het_ps_eval_due) and the
 *   drain point hands the records round. */
#ifndef HET_STRATEGY_PS_H
#define HET_STRATEGY_PS_H

#include "strategy/strategy.h"

/* A worker's gradient to shard k: this header, then len_k floats. */
typedef struct het_ps_grad_hdr {
    int64_t version;  /* the shard's version of the weights the gradient was computed on */
    int64_t pos;      /* the batch: its first position in the epoch's permutation */
    double loss_sum;  /* the batch's figures (the primary counts them) */
    int32_t count, correct;
} het_ps_grad_hdr;

/* A shard's weights to a worker: this header, then len_k floats. */
typedef struct het_ps_reply_hdr {
    int64_t version;  /* the shard's version of these weights */
    int64_t pos;      /* the primary: the worker's next batch (-1: none left this epoch) */
    int32_t len;      /* its samples */
    float lr;         /* the learning rate of the update that made them */
    int64_t reserved;
} het_ps_reply_hdr;

/* The figures of an epoch, summed from their owners at the drain point (on every rank). */
typedef struct het_ps_figures {
    double updates;         /* the primary's updates this epoch */
    double stale_sum;       /* sum over updates of the staleness of their gradients */
    double stale_max;
    double bytes_in;        /* payload bytes into the servers (all shards) */
    double bytes_out;       /* and out of them */
    double server_s;        /* the primary's epoch, on the run's clock */
    double lr;              /* of the last update */
    double nonfinite;       /* 1: a server saw a non-finite gradient or weight */
    double skipped;         /* updates dropped (--on-nan skip-step) */
    double grads;           /* gradients in the updates (asp: one each; inhad: the workers'
                               gradients in the aggregates it pulled) */
    double lr_scale_sum;    /* sum over updates of the learning rate applied / the schedule's
                               (--staleness-lr: 1 / staleness, else 1) */
} het_ps_figures;
#define HET_PS_NFIG 11

typedef struct het_ps {
    const char *name;     /* the strategy's, for messages */
    int n_shards, shard;  /* K; this rank's shard (-1: a worker) */
    int *shard_rank;      /* K world ranks */
    int n_workers, worker;/* W; this rank's worker index (-1: a server) */
    int *worker_rank;     /* W world ranks, ascending */
    int *index_of;        /* by world rank: its worker index, or -1 */
    size_t n;             /* parameters */
    size_t *lo, *len;     /* per shard */
    size_t opt_blocks;    /* optimizer state floats / n */
    int max_staleness;    /* -1: no bound */
    int staleness_lr;     /* 1: lr / mean staleness */
    het_ps_figures fig;   /* the last epoch's (every rank, after het_ps_drain) */
    double *steps;        /* W: each worker's batches the last epoch (every rank) */
    /* the epoch being trained (the owner's) */
    het_ps_figures run;
    double *run_steps;
    het_eval_rec *evals;  /* the primary's evaluations this epoch (--eval-every) */
    int n_evals, cap_evals;
} het_ps;

/* Roles from the options and the world; prints the plan (rank 0). Collective. */
int  het_ps_init(het_ps *ps, het_strategy_ctx *ctx, const char *name);
void het_ps_free(het_ps *ps);
/* This rank's message buffers: a shard k's message (header + its slice) in bytes. */
size_t het_ps_msg_bytes(const het_ps *ps, int k, size_t hdr);
/* The drain point at an epoch's end (collective): checks no message is left, sums the
 * figures into ps->fig / ps->steps, broadcasts every shard's slices of the parameters and the
 * optimizer state, averages the workers' model state, sets ctx->step, and fills st's global
 * figures from sums. A non-finite update on a server stops every rank. */
int  het_ps_drain(het_ps *ps, het_strategy_ctx *ctx, het_epoch_sums *sums,
                  het_epoch_stats *st);
/* --eval-every on the primary, after an update: when the trainer asked for an evaluation at
 * this update (ctx->pause_step) and samples remain (next < n handed out), evaluates the
 * server's model (ctx->eval_here: this rank alone, charged to no clock) and keeps the record
 * for the drain point, which hands every rank the epoch's records (ctx->eval_put). Refused at
 * init with --ps-shards above 1 (the primary holds its slice only) and for models with batch-
 * norm statistics (the workers hold those). HET_OK when nothing is due. */
int  het_ps_eval_due(het_ps *ps, het_strategy_ctx *ctx, int64_t next, int64_t n);
/* The table entries the parameter servers share (their priv starts with an het_ps): the
 * model to evaluate (every rank's, after the drain), checkpoints (nothing beyond the
 * trainer's sections: the server's state is rank 0's after the drain; each shard takes its
 * slice of the full buffers every rank read back) and the report. */
het_model *het_ps_model_for_eval(het_strategy_ctx *ctx);
int  het_ps_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w);
int  het_ps_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r);
void het_ps_report_op(het_strategy_ctx *ctx, char *line, size_t n_line, char *json,
                      size_t n_json);
/* The report of the last epoch (ops->report). */
void het_ps_report(const het_ps *ps, char *line, size_t n_line, char *json, size_t n_json);
/* The outbox: sends whose buffers are copies, kept until MPI is done with them, so that a
 * rank never waits for a receiver to take a message (a large message waits for its receive:
 * inhad's aggregator takes gradients only when the server pulls them, a worker takes weights
 * only when it needs them), and no send can close a cycle of waits. */
typedef struct het_ps_out {
    het_msg m;
    struct het_ps_out *next;
    unsigned char buf[];
} het_ps_out;
/* Sends hdr (h bytes) + body (b bytes) to world rank dest with tag, at stamp (< 0: now; see
 * het_comm_isend_at), after reaping the sends that are done. */
int het_ps_out_send(het_strategy_ctx *ctx, het_ps_out **box, int dest, int tag,
                    const void *hdr, size_t h, const void *body, size_t b, double stamp);
/* Frees the sends MPI is done with (wait: after waiting for every one). */
int het_ps_out_reap(het_strategy_ctx *ctx, het_ps_out **box, int wait);
/* Receives a message of tag from world rank src (HET_ANY_SOURCE: any of the senders set) into
 * buf for a lane with a clock of its own (het_comm_msg_wait_untimed: m->deliver says when it
 * came), the receive posted at the lane's time `posted` (< 0: its payload moves when sent). */
int het_ps_recv(het_strategy_ctx *ctx, int src, int tag, void *buf, size_t cap, het_msg *m,
                double posted);
/* The same, giving up at `limit` where the comm can say that nothing ends by then
 * (het_comm_msg_wait_untimed_by: *arrived 0, m still posted). */
int het_ps_recv_by(het_strategy_ctx *ctx, int src, int tag, void *buf, size_t cap, het_msg *m,
                   double posted, double limit, int *arrived);

/* A rank of an asynchronous strategy that fails inside an epoch (out of memory, an MPI error)
 * cannot make the others agree on it: they wait for its messages. It prints its error with
 * its rank and ends the job (MPI_Abort), so that every rank exits; status HET_OK returns. */
void het_ps_fail(het_strategy_ctx *ctx, int status);
/* The primary's next batch of the epoch from *next (pos, len; pos -1 when none is left). */
void het_ps_next_batch(const het_strategy_ctx *ctx, int64_t *next, int64_t *pos, int32_t *len);
/* The update of shard k's slice from the gradient slice g with lr at version v (a paced,
 * traced region costing the slice's share of the optimizer); 1 when the weights are
 * finite. */
int  het_ps_update(het_ps *ps, het_strategy_ctx *ctx, const float *g, float lr, int64_t v);

#endif
