/* hetrain batch: one batch through one model from one dataset, with no MPI. The helpers every
 * strategy, the calibration and the trainer share: gather samples by index into the caller's
 * buffers, then compute gradients (het_batch_grads), take a whole optimizer step
 * (het_batch_step) or evaluate (het_batch_eval), on the model's worker threads.
 * Layer order: batch sits above nn, data and optim, below hetero, strategy and train. */
#ifndef HETRAIN_BATCH_H
#define HETRAIN_BATCH_H

#include "hetrain/core.h"
#include "hetrain/data.h"
#include "hetrain/nn.h"
#include "hetrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dropout seed of global step `step` (0-based) of a run seeded with `seed`. */
uint64_t het_batch_seed(uint64_t seed, int64_t step);

/* A batch to train on: samples idx[0..count) of d, gathered into the caller's buffers x
 * (count x sample floats) and y (count labels). */
typedef struct het_batch {
    const het_dataset *d;
    const int64_t *idx;
    int count;
    float *x;
    uint8_t *y;
} het_batch;

/* Gradients of one batch: gathers b's samples, zeroes the model's gradients, runs forward and
 * backward with grad_scale (1/count for the batch mean; 1/B' for a share of a global batch
 * B'). count 0 leaves zero gradients and an empty result (a rank without samples this step).
 * HET_EINVAL if count is outside 0..max_batch of the model or a label is out of range. */
int het_batch_grads(het_model *m, const het_batch *b, float grad_scale, uint64_t step_seed,
                    het_batch_result *res);

/* One whole training step of one process: gathers as het_batch_grads, then
 * het_model_train_step with grad_scale and the update u (the optimizer folded into the step
 * for dense stacks). count must be in 1..max_batch of the model. */
int het_batch_step(het_model *m, const het_batch *b, float grad_scale, uint64_t step_seed,
                   const het_update *u, het_batch_result *res);

/* Evaluates samples [from, to) of d in eval mode, in order, in batches of at most `batch`
 * (1..the model's max_batch), using caller buffers x (batch x sample floats), y (batch) and idx
 * (batch). *res gets the totals. */
int het_batch_eval(het_model *m, const het_dataset *d, int64_t from, int64_t to, int batch,
                   float *x, uint8_t *y, int64_t *idx, het_batch_result *res);

#ifdef __cplusplus
}
#endif
#endif
