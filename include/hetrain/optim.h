/* hetrain optim: SGD (momentum, Nesterov, weight decay) and Adam over one flat parameter
 * buffer, and learning-rate schedules. Semantics follow torch.optim exactly (so that reference
 * tests against PyTorch hold). */
#ifndef HETRAIN_OPTIM_H
#define HETRAIN_OPTIM_H

#include "hetrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HET_OPT_SGD = 0, HET_OPT_ADAM = 1 } het_opt_kind;

typedef struct het_optim_config {
    het_opt_kind kind;
    float momentum;      /* SGD: 0 disables the buffer */
    int nesterov;        /* SGD: requires momentum > 0 */
    float dampening;     /* SGD: as torch (default 0) */
    float weight_decay;  /* L2 added to the gradient (torch semantics, also for Adam) */
    float beta1, beta2, eps; /* Adam: 0.9, 0.999, 1e-8 */
} het_optim_config;

/* Defaults: SGD, momentum 0.9, no Nesterov, no weight decay; Adam betas (0.9, 0.999), 1e-8. */
het_optim_config het_optim_defaults(void);
/* Validates ranges; HET_EINVAL with a message naming the field. */
int het_optim_check(const het_optim_config *c);
/* Floats of optimizer state for n parameters (SGD with momentum: n; Adam: 2n; else 0). */
size_t het_optim_state_floats(const het_optim_config *c, size_t n);

/* One update of params[0..n) from grads with learning rate lr. `state` holds
 * het_optim_state_floats() floats, zeroed before the first step; `t` is the 1-based step count
 * (Adam bias correction; SGD uses t == 1 to initialize the momentum buffer as torch does). */
void het_optim_step(const het_optim_config *c, float lr, float *params, const float *grads,
                    float *state, size_t n, int64_t t);

/* The same update restricted to elements [lo, hi) of the n parameters (state laid out for n):
 * disjoint ranges may run on different threads. Returns 1 when every updated parameter is
 * finite, 0 when one is NaN or +-inf (a non-finite gradient, or an update that overflowed):
 * checked in the update's own pass, at no measurable cost. */
int het_optim_step_range(const het_optim_config *c, float lr, float *params, const float *grads,
                         float *state, size_t n, int64_t t, size_t lo, size_t hi);

/* ---- learning-rate schedules ---- */
typedef enum {
    HET_SCHED_CONSTANT = 0,
    HET_SCHED_STEP,       /* lr * gamma^(epoch / step_epochs) */
    HET_SCHED_COSINE,     /* min_lr + (lr - min_lr) (1 + cos(pi e / epochs)) / 2, per step */
    HET_SCHED_PLATEAU     /* multiply by factor after `patience` epochs without improvement */
} het_sched_kind;

typedef struct het_schedule {
    het_sched_kind kind;
    float base_lr;
    float warmup_epochs; /* linear warm-up from base_lr/ (steps) to base_lr; 0 disables */
    int step_epochs;     /* STEP */
    float gamma;         /* STEP */
    int total_epochs;    /* COSINE */
    float min_lr;        /* COSINE */
    int patience;        /* PLATEAU */
    float factor;        /* PLATEAU */
    float threshold;     /* PLATEAU: relative improvement needed (torch 'rel' mode) */
    /* plateau state (part of checkpoints) */
    float scale;         /* current multiplier, starts 1 */
    float best;          /* best metric so far (lower is better) */
    int bad_epochs;
} het_schedule;

het_schedule het_schedule_defaults(float base_lr);
int het_schedule_check(const het_schedule *s);
/* Learning rate for global step `step` (0-based) inside `epoch` (0-based) with
 * steps_per_epoch steps per epoch. */
float het_schedule_lr(const het_schedule *s, int epoch, int64_t step, int64_t steps_per_epoch);
/* End-of-epoch hook (PLATEAU uses the metric, e.g. training loss; others ignore it). */
void het_schedule_epoch_end(het_schedule *s, float metric);
/* The schedule as HET_SCHEDULE_BYTES little-endian bytes (checkpoints): kind, the
 * hyper-parameters, then the plateau state (scale, best, bad_epochs) at byte 40. */
#define HET_SCHEDULE_BYTES 52u
void het_schedule_encode(const het_schedule *s, uint8_t *out);
/* Restores only the plateau state from encoded bytes; the hyper-parameters stay as they are
 * (a resumed run takes them from its configuration). */
void het_schedule_decode_state(het_schedule *s, const uint8_t *in);
/* Parses "constant" | "step" | "cosine" | "plateau". */
int het_schedule_parse_kind(const char *name, het_sched_kind *out);

#ifdef __cplusplus
}
#endif
#endif
