/* Internal to nn/: the feature-parallel executor of dense stacks (dense_stack.c), which
 * model.c runs for het_model_train_step when the model's layers qualify. */
#ifndef HET_NN_DENSE_STACK_H
#define HET_NN_DENSE_STACK_H

#include "hetrain/nn.h"

typedef struct het_stack het_stack;

/* Plans the executor for these (already planned) layers. Returns HET_OK with *out == NULL
 * when the layers are not a dense stack of nn/'s own dense, ReLU and flatten layers (not an
 * error), HET_ENOMEM on allocation failure.
 * Adds the bytes it allocates to *bytes. */
int het_stack_create(het_stack **out, het_layer *const *layers, const size_t *param_off,
                     int n_layers, int max_batch, int workers, size_t *bytes);
void het_stack_free(het_stack *s);

/* One fused step: what every worker reads. */
typedef struct het_stack_job {
    const float *x;
    const uint8_t *y;
    int batch;
    float grad_scale;
    float *params, *grads;
    size_t n_params;
    const het_update *u;
    /* NULL, or called by worker 0 after each stage's forward and backward (the stage's dense
     * layer index), for the model's progress hooks */
    void (*progress)(void *user, int layer);
    void *progress_user;
} het_stack_job;

/* Worker widx's part of one step. All workers of the stack must run it concurrently (it
 * synchronizes them with barriers); each adds its samples' loss figures to *res. */
void het_stack_run(het_stack *s, const het_stack_job *j, int widx, het_batch_result *res);

#endif
