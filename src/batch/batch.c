/* One batch through one model (see hetrain/batch.h). Gathering a batch runs on the model's
 * worker threads, each over a slice of the samples; the model then splits the batch itself. */
#include <string.h>

#include "hetrain/batch.h"

uint64_t het_batch_seed(uint64_t seed, int64_t step) {
    het_rng r;
    het_rng_seed2(&r, seed ^ 0x6a09e667f3bcc909ULL, (uint64_t)step);
    return het_rng_u64(&r);
}

static void gather_range(void *user, size_t lo, size_t hi) {
    const het_batch *j = user;
    het_dataset_gather(j->d, j->idx + lo, (int)(hi - lo), j->x + lo * het_shape_size(j->d->shape),
                       j->y + lo);
}

static int check_count(const het_model *m, int count, int min) {
    if (count < min || count > het_model_max_batch(m))
        return het_error_set(HET_EINVAL, "batch of %d samples, expected %d..%d", count, min,
                             het_model_max_batch(m));
    return HET_OK;
}

int het_batch_grads(het_model *m, const het_batch *b, float grad_scale, uint64_t step_seed,
                    het_batch_result *res) {
    int st = check_count(m, b->count, 0);
    if (st) return st;
    het_model_zero_grads(m);
    if (b->count == 0) {
        memset(res, 0, sizeof *res);
        return HET_OK;
    }
    het_model_parallel_for(m, (size_t)b->count, gather_range, (void *)b);
    return het_model_train_batch(m, b->x, b->y, b->count, grad_scale, step_seed, res);
}

int het_batch_step(het_model *m, const het_batch *b, float grad_scale, uint64_t step_seed,
                   const het_update *u, het_batch_result *res) {
    int st = check_count(m, b->count, 1);
    if (st) return st;
    het_model_parallel_for(m, (size_t)b->count, gather_range, (void *)b);
    return het_model_train_step(m, b->x, b->y, b->count, grad_scale, step_seed, u, res);
}

int het_batch_eval(het_model *m, const het_dataset *d, int64_t from, int64_t to, int batch,
                   float *x, uint8_t *y, int64_t *idx, het_batch_result *res) {
    memset(res, 0, sizeof *res);
    int st = check_count(m, batch, 1);
    if (st) return st;
    for (int64_t pos = from; pos < to; pos += batch) {
        int count = (int)(to - pos < batch ? to - pos : batch);
        for (int i = 0; i < count; i++) idx[i] = pos + i;
        het_dataset_gather(d, idx, count, x, y);
        het_batch_result r;
        if ((st = het_model_eval_batch(m, x, y, count, &r))) return st;
        res->loss_sum += r.loss_sum;
        res->correct += r.correct;
        res->count += r.count;
    }
    return HET_OK;
}
