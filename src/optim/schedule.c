/* Learning-rate schedules, each the closed form of its torch.optim.lr_scheduler twin:
 *   CONSTANT  base_lr
 *   STEP      base_lr * gamma^floor(epoch / step_epochs)                       (StepLR)
 *   COSINE    min_lr + (base_lr - min_lr) (1 + cos(pi s / S)) / 2 per global step s, with
 *             S = total_epochs * steps_per_epoch and s clamped to S       (CosineAnnealingLR)
 *   PLATEAU   max(base_lr * scale, min_lr); het_schedule_epoch_end() follows ReduceLROnPlateau
 *             (mode "min", threshold_mode "rel", no cooldown): a metric improves when
 *             metric < best * (1 - threshold); otherwise bad_epochs++, and once
 *             bad_epochs > patience (torch's test: the (patience+1)-th bad epoch in a row)
 *             scale *= factor and bad_epochs = 0.
 * Linear warm-up composes with all of them: during the first W = round(warmup_epochs *
 * steps_per_epoch) steps the lr is multiplied by (step + 1) / W (torch's LinearLR with
 * start_factor 1/W over W - 1 iterations). Arithmetic is in double, the result a float. */
#include <math.h>
#include <string.h>

#include "core/bytes.h"

#include "hetrain/optim.h"

static const double het_pi = 3.14159265358979323846;

het_schedule het_schedule_defaults(float base_lr) {
    het_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = HET_SCHED_CONSTANT;
    s.base_lr = base_lr;
    s.warmup_epochs = 0.0f;
    s.step_epochs = 30;    /* torch has no default; the classic ImageNet choice */
    s.gamma = 0.1f;        /* StepLR default */
    s.total_epochs = 1;
    s.min_lr = 0.0f;       /* CosineAnnealingLR eta_min / ReduceLROnPlateau min_lr default */
    s.patience = 10;       /* ReduceLROnPlateau defaults */
    s.factor = 0.1f;
    s.threshold = 1e-4f;
    s.scale = 1.0f;
    s.best = INFINITY;
    s.bad_epochs = 0;
    return s;
}

int het_schedule_check(const het_schedule *s) {
    if (!s) return het_error_set(HET_EINVAL, "schedule: NULL");
    if (!(s->base_lr > 0.0f) || !isfinite(s->base_lr))
        return het_error_set(HET_EINVAL, "schedule lr %g: must be finite and > 0",
                             (double)s->base_lr);
    if (!(s->warmup_epochs >= 0.0f) || !isfinite(s->warmup_epochs))
        return het_error_set(HET_EINVAL, "schedule warmup_epochs %g: must be finite and >= 0",
                             (double)s->warmup_epochs);
    switch (s->kind) {
    case HET_SCHED_CONSTANT:
        return HET_OK;
    case HET_SCHED_STEP:
        if (s->step_epochs < 1)
            return het_error_set(HET_EINVAL, "step schedule step_epochs %d: must be >= 1",
                                 s->step_epochs);
        if (!(s->gamma > 0.0f && s->gamma <= 1.0f))
            return het_error_set(HET_EINVAL, "step schedule gamma %g: must be in (0, 1]",
                                 (double)s->gamma);
        return HET_OK;
    case HET_SCHED_COSINE:
        if (s->total_epochs < 1)
            return het_error_set(HET_EINVAL, "cosine schedule total_epochs %d: must be >= 1",
                                 s->total_epochs);
        if (!(s->min_lr >= 0.0f && s->min_lr <= s->base_lr))
            return het_error_set(HET_EINVAL, "cosine schedule min_lr %g: must be in [0, lr %g]",
                                 (double)s->min_lr, (double)s->base_lr);
        return HET_OK;
    case HET_SCHED_PLATEAU:
        if (s->patience < 0)
            return het_error_set(HET_EINVAL, "plateau schedule patience %d: must be >= 0",
                                 s->patience);
        if (!(s->factor > 0.0f && s->factor < 1.0f))
            return het_error_set(HET_EINVAL, "plateau schedule factor %g: must be in (0, 1)",
                                 (double)s->factor);
        if (!(s->threshold >= 0.0f && s->threshold < 1.0f))
            return het_error_set(HET_EINVAL, "plateau schedule threshold %g: must be in [0, 1)",
                                 (double)s->threshold);
        if (!(s->min_lr >= 0.0f && s->min_lr <= s->base_lr))
            return het_error_set(HET_EINVAL, "plateau schedule min_lr %g: must be in [0, lr %g]",
                                 (double)s->min_lr, (double)s->base_lr);
        if (!(s->scale > 0.0f && s->scale <= 1.0f))
            return het_error_set(HET_EINVAL, "plateau schedule scale %g: must be in (0, 1]",
                                 (double)s->scale);
        if (s->bad_epochs < 0)
            return het_error_set(HET_EINVAL, "plateau schedule bad_epochs %d: must be >= 0",
                                 s->bad_epochs);
        if (isnan(s->best))
            return het_error_set(HET_EINVAL, "plateau schedule best: must not be NaN");
        return HET_OK;
    }
    return het_error_set(HET_EINVAL, "schedule kind %d: must be constant, step, cosine or plateau",
                         (int)s->kind);
}

float het_schedule_lr(const het_schedule *s, int epoch, int64_t step, int64_t steps_per_epoch) {
    double lr = s->base_lr;
    if (epoch < 0) epoch = 0;
    if (step < 0) step = 0;
    if (steps_per_epoch < 1) steps_per_epoch = 1;
    switch (s->kind) {
    case HET_SCHED_CONSTANT:
        break;
    case HET_SCHED_STEP:
        if (s->step_epochs > 0) lr *= pow((double)s->gamma, (double)(epoch / s->step_epochs));
        break;
    case HET_SCHED_COSINE: {
        double total = (double)(s->total_epochs > 0 ? s->total_epochs : 1) * (double)steps_per_epoch;
        double t = (double)step < total ? (double)step : total;
        double lo = s->min_lr;
        lr = lo + (lr - lo) * (1.0 + cos(het_pi * t / total)) * 0.5;
        break;
    }
    case HET_SCHED_PLATEAU:
        lr *= (double)s->scale;
        if (lr < (double)s->min_lr) lr = s->min_lr;
        break;
    }
    if (s->warmup_epochs > 0.0f) {
        double w = floor((double)s->warmup_epochs * (double)steps_per_epoch + 0.5);
        if (w < 1.0) w = 1.0;
        if ((double)step < w) lr *= ((double)step + 1.0) / w;
    }
    return (float)lr;
}

void het_schedule_epoch_end(het_schedule *s, float metric) {
    if (s->kind != HET_SCHED_PLATEAU) return;
    /* In double, as Python compares: best * (1 - threshold). NaN is never an improvement. */
    if ((double)metric < (double)s->best * (1.0 - (double)s->threshold)) {
        s->best = metric;
        s->bad_epochs = 0;
    } else {
        s->bad_epochs++;
    }
    if (s->bad_epochs > s->patience) {
        s->scale *= s->factor;
        s->bad_epochs = 0;
    }
}

int het_schedule_parse_kind(const char *name, het_sched_kind *out) {
    static const struct { const char *name; het_sched_kind kind; } kinds[] = {
        {"constant", HET_SCHED_CONSTANT}, {"step", HET_SCHED_STEP},
        {"cosine", HET_SCHED_COSINE},     {"plateau", HET_SCHED_PLATEAU},
    };
    for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(name, kinds[i].name) == 0) {
            *out = kinds[i].kind;
            return HET_OK;
        }
    }
    return het_error_set(HET_EINVAL, "unknown schedule '%s' (expected constant, step, cosine or "
                         "plateau)", name ? name : "(null)");
}

void het_schedule_encode(const het_schedule *s, uint8_t *out) {
    het_wbuf b = {out, HET_SCHEDULE_BYTES, 0};
    het_w_u32(&b, (uint32_t)s->kind);
    het_w_f32(&b, s->base_lr);
    het_w_f32(&b, s->warmup_epochs);
    het_w_u32(&b, (uint32_t)s->step_epochs);
    het_w_f32(&b, s->gamma);
    het_w_u32(&b, (uint32_t)s->total_epochs);
    het_w_f32(&b, s->min_lr);
    het_w_u32(&b, (uint32_t)s->patience);
    het_w_f32(&b, s->factor);
    het_w_f32(&b, s->threshold);
    het_w_f32(&b, s->scale);
    het_w_f32(&b, s->best);
    het_w_u32(&b, (uint32_t)s->bad_epochs);
}

void het_schedule_decode_state(het_schedule *s, const uint8_t *in) {
    het_rbuf b = {in, 40};
    s->scale = het_r_f32(&b);
    s->best = het_r_f32(&b);
    s->bad_epochs = (int)het_r_u32(&b);
}
