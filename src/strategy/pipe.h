/* The pipelines' shared machinery (pipe.c), for gpipe.c (GPipe and 1F1B) and qfb.c: the
 * ranks as R pipelines of K stages, the partition of the layers into stages, the micro-batches
 * of a step, a stage's tapes and message buffers, the forward and backward of one micro-batch
 * on a stage with its messages, the update of the stage's slice, and the gathering of the
 * stages at the epoch's end. Internal to strategy/. */
#ifndef HET_STRATEGY_PIPE_H
#define HET_STRATEGY_PIPE_H

#include "hetrain/codec.h"
#include "strategy/strategy.h"

/* Message kinds (p2p tags): activations forward, their gradients backward. */
enum { HET_TAG_ACTS = HET_TAG_USER, HET_TAG_DACTS = HET_TAG_USER + 1 };

#define HET_PIPE_MAX_STAGES 64
#define HET_PIPE_MAX_MICRO 1024
#define HET_PIPE_FIGS 8

typedef struct het_pipe {
    int K, R, M;              /* stages, pipelines, micro-batches per step */
    int stage, line;          /* this rank's stage and pipeline */
    int cut[HET_PIPE_MAX_STAGES + 1]; /* stage k runs layers [cut[k], cut[k + 1]) */
    size_t p_lo, p_hi;        /* this stage's parameters [p_lo, p_hi) of the flat buffer */
    size_t s_lo, s_hi;        /* its non-trainable state */
    het_comm_scope replicas;  /* this stage's ranks in every pipeline (R > 1), else NONE */
    int prev, next;           /* world ranks of the stages before and after, -1: none */
    int mb_max;               /* the largest micro-batch */
    size_t in_floats, out_floats; /* per sample: the stage's input and output */
    het_tape **tape;          /* n_tapes: micro-batch i's activations on tape i % n_tapes */
    int n_tapes;              /* M; with 1F1B min(M, K - stage), the most micro-batches the
                                 stage has in flight (PipeDream-Flush's bound on the stash) */
    int bounded;              /* 1F1B: tapes are reused, each holds one micro-batch at a time */
    int tape_mb[HET_PIPE_MAX_MICRO];   /* bounded: the micro-batch on each tape, -1: free */
    int tape_done[HET_PIPE_MAX_MICRO]; /* ... the one it last held this step, -1: none */
    float **in;               /* M: stage 0: the gathered inputs; else the activations received */
    float **dout;             /* M: last stage: the loss gradient; else the gradients received */
    uint8_t *y;               /* M x mb_max labels (last stage) */
    float *probs;             /* mb_max x classes (last stage) */
    het_msg *sends, *recvs;   /* 2 M each: activations [0, M), gradients [M, 2 M) */
    int64_t *idx;             /* M x mb_max sample indices */
    /* the current step */
    int n_micro;              /* micro-batches with samples (a ragged last step has fewer) */
    int mb_len[HET_PIPE_MAX_MICRO], mb_start[HET_PIPE_MAX_MICRO]; /* sizes, first sample in
                                                                     the global batch */
    int64_t step_pos;         /* the step's first position in the epoch's permutation */
    int step_len;             /* samples of the global step */
    float grad_scale;         /* 1 / the global step's samples */
    uint64_t seed;            /* the step's dropout seed */
    het_batch_result res;     /* last stage: the step's figures over this pipeline */
    /* codecs (qfb; off: fp32 both ways): activations as per-tensor int8 (het_q8_*), input
     * gradients through 2-Step GC with error feedback (het_gradc_*) */
    int act_q8, grad_codec;
    het_gradc_config gradc;   /* mode, threshold, quantize; k from gradc_ratio per micro-batch */
    double gradc_ratio;
    int gradc_feedback;       /* 1: error feedback; 0: the residual is dropped every time */
    uint8_t **rbuf_a, **rbuf_g; /* M each: encoded messages received (where a codec is on) */
    uint8_t **sbuf_a, **sbuf_g; /* M each: encoded messages sent */
    size_t cap_a, cap_g;      /* their capacity */
    float *residual, *gradc_work; /* the gradient codec's error feedback and scratch */
    /* figures of the epoch */
    double bytes_fwd, bytes_bwd; /* payload sent forward and backward */
    double raw_fwd, raw_bwd;  /* what the same messages take in fp32 */
    double busy_s;            /* time some thread of the stage computed (overlaps once) */
    double work_s;            /* the stage's pieces summed over its threads (qfb's forward and
                                 backward lanes: busy_s < work_s where they overlap) */
    double epoch_t0;          /* the epoch's start on the main lane's time */
    size_t stash_bytes;       /* the tapes' */
    double stage_cost[HET_PIPE_MAX_STAGES]; /* measured at init (rank 0's figures, every rank) */
    double stage_fig[HET_PIPE_FIGS * HET_PIPE_MAX_STAGES]; /* per stage of pipeline 0, at the
                                 epoch's end: stash bytes, bytes forward and backward, their
                                 fp32 sizes, busy seconds, the epoch's seconds, work seconds */
} het_pipe;

/* The options of gpipe and qfb (pipe_opts.c: the shared ones declared once). */
extern const het_strategy_opt het_gpipe_opts[], het_qfb_opts[];

/* Rank 0's plan (pipe_plan.c): the cuts of K stages of model m into cut[0..K], the given ones
 * (given[0..K-1), --stages; NULL: none) or those that balance the time of a micro-batch of mb
 * samples, measured here or, with a cost table (costs != NULL), the table's (the same plan on
 * every host); each stage's seconds into cost[0..K). HET_EINVAL with a message for more
 * stages than places to cut or a given cut the model cannot take. */
int het_pipe_plan(het_model *m, int K, int mb, const int *given, const het_costs *costs,
                  int *cut, double *cost);
/* Sets up p for ctx (collective over the world): R = --pipelines, K = ranks / R, M =
 * --micro-batches; measures the layers' costs on rank 0 and cuts the model into K stages of
 * balanced cost (cuts only where het_model_cut_ok allows), broadcasts the cuts, prints the
 * plan; makes the replica groups, the tapes and buffers (bounded: the 1F1B schedule,
 * min(M, K - stage) tapes reused in turn; else one per micro-batch). `name` names the strategy
 * in messages. With a cost table (--compute-cost calibrated) the plan is the table's and every
 * stage's forward and backward are charged its range lines. */
int  het_pipe_init(het_pipe *p, het_strategy_ctx *ctx, const char *name, int bounded);
/* Names the stage's optimizer update of its parameter slice as the piece the next mark ends
 * (the table's update line times the slice's share of the parameters; a stage without
 * parameters charges nothing). */
void het_pipe_pace_update(const het_pipe *p, het_strategy_ctx *ctx);
void het_pipe_free(het_pipe *p);

/* The step at position pos of the epoch: its micro-batches on this pipeline, its seed and
 * scale; zeroes the gradients; posts the receives of the step's messages. */
int het_pipe_step_begin(het_pipe *p, het_strategy_ctx *ctx, int64_t pos);
/* The codecs of p->act_q8, grad_codec, gradc and gradc_ratio (set them after init): their
 * buffers. */
int het_pipe_codecs(het_pipe *p, const char *name);
/* Resets the epoch's figures and notes its start. */
void het_pipe_epoch_begin(het_pipe *p, const het_lane *lane);
/* Message payloads (no MPI; any one thread per direction): the activations of micro-batch i
 * received in m into p->in[i]; its output `out` as the payload to send (*buf, *bytes); the
 * gradient received in m into p->dout[i]; the input gradient din as the payload to send.
 * Decoding validates the message (HET_EFORMAT with a message). */
int het_pipe_take_acts(het_pipe *p, int i, const het_msg *m);
int het_pipe_pack_acts(het_pipe *p, int i, const float *out, const void **buf, size_t *bytes);
int het_pipe_take_grads(het_pipe *p, int i, const het_msg *m);
int het_pipe_pack_grads(het_pipe *p, int i, const float *din, const void **buf, size_t *bytes);
/* The compute of micro-batch i's forward, for any thread (no MPI): its input gathered (stage
 * 0) or decoded from the message `got`, the layers, then the payload to send (*buf, *bytes)
 * or, on the last stage, the loss and its gradient. Backward likewise: the output gradient
 * decoded from `got` (not on the last stage), the layers into the gradient accumulator, the
 * input gradient's payload (not on stage 0). */
int het_pipe_forward_compute(het_pipe *p, het_strategy_ctx *ctx, int i, const het_msg *got,
                             const void **buf, size_t *bytes);
int het_pipe_backward_compute(het_pipe *p, het_strategy_ctx *ctx, int i, const het_msg *got,
                              const void **buf, size_t *bytes);
/* The stage cuts as a value every rank must hold alike (the strategies' agreed_state). */
het_agreed_value het_pipe_agreed(const het_pipe *p);
/* Forward of micro-batch i on this stage (its input gathered or received; its output sent,
 * or on the last stage the loss and its gradient): a paced, traced region. */
int het_pipe_forward(het_pipe *p, het_strategy_ctx *ctx, int i);
/* Backward of micro-batch i (its output gradient from the loss or received; the input
 * gradient sent to the stage before): a paced, traced region. */
int het_pipe_backward(het_pipe *p, het_strategy_ctx *ctx, int i);
/* Ends the step: waits for its sends, sums the stage's gradients over its replicas, updates
 * the stage's slice of the parameters with lr, advances ctx->step. */
int het_pipe_step_end(het_pipe *p, het_strategy_ctx *ctx, float lr);
/* One epoch of a pipeline strategy (collective): each step's micro-batches set up
 * (het_pipe_step_begin), run by run(user, ctx) in the strategy's order, the update
 * (het_pipe_step_end) and the step's figures; then the epoch's figures, the stages gathered
 * (het_pipe_gather) and the check of the weights. */
int het_pipe_epoch(het_pipe *p, het_strategy_ctx *ctx, int epoch, het_epoch_stats *st,
                   int (*run)(void *user, het_strategy_ctx *ctx), void *user);
/* The epoch's end: every stage's parameters, state and optimizer state to every rank
 * (batch-norm statistics averaged over the replicas first). Collective. */
int het_pipe_gather(het_pipe *p, het_strategy_ctx *ctx);
/* A resume on another number of ranks whose checkpoint held the cuts of `stages` stages:
 * this run's plan (made by init for its ranks) stays, and every stage takes its slice of the
 * whole model the checkpoint holds; says so (het_step_resized). Returns HET_OK. */
int het_pipe_replanned(het_pipe *p, het_strategy_ctx *ctx, const char *name, size_t stages);
/* Checkpoints: the stage cuts (section s.pipe.cuts; w is NULL off rank 0). A resume takes
 * the checkpoint's cuts where the run measured others (the tapes are made again); a
 * checkpoint without them keeps the plan; cuts that do not fit the model: HET_EFORMAT. */
int het_pipe_save(het_pipe *p, het_ckpt_writer *w);
int het_pipe_load(het_pipe *p, het_strategy_ctx *ctx, het_ckpt_reader *r, const char *name);
/* The epoch line's " | pipe ..." and the metrics' "pipe":{...} (pipe_opts.c). */
void het_pipe_report(het_pipe *p, het_strategy_ctx *ctx, const char *name, char *line, size_t nl,
                     char *json, size_t nj);

/* Vtable entries of both pipelines (pipe_opts.c), as the parameter servers share theirs:
 * ctx->priv must start with the strategy's het_pipe; names are ctx->cfg->strategy. */
het_model *het_pipe_model_for_eval(het_strategy_ctx *ctx);
int  het_pipe_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w);
int  het_pipe_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r);
void het_pipe_report_op(het_strategy_ctx *ctx, char *line, size_t nl, char *json, size_t nj);
int  het_pipe_agreed_state(het_strategy_ctx *ctx, het_agreed_value *out, int cap);

#endif
