/* daso's schedule: the phases (warm-up, cycling, cool-down) and the plateau detector that
 * moves (gs, ls, S) through the cycle (4,1,1) -> (2,1,1) -> (1,1,1) -> (8,2,2) -> (4,1,1)...
 * (with max_global_skips 8). Follows HeAT's DASO.epoch_loss_logic and DetectMetricPlateau
 * (mode min, relative threshold, no cool-down of the detector, never reset) with two changes:
 * the phase is applied per epoch (het_daso_sched_epoch) rather than written into the state,
 * so the detector also runs in cool-down (unobservable) and the state does not depend on
 * --epochs (resume with more epochs); and HeAT enters its cycling state only at the epoch
 * count equal to the warm-up, so a warm-up of 0 epochs would stay blocking for ever, where
 * here cycling starts at epoch 1. */
#include <math.h>

#include "strategy/daso.h"

het_daso_sched het_daso_sched_init(const het_daso_params *p) {
    (void)p;
    return (het_daso_sched){4, 1, 1, 0, HUGE_VAL, 0, 0};
}

het_daso_sched het_daso_sched_epoch(const het_daso_params *p, const het_daso_sched *s,
                                    int epoch0) {
    het_daso_sched e = *s;
    if (epoch0 < p->warmup_epochs || epoch0 >= p->total_epochs - p->cooldown_epochs)
        e.gs = e.ls = e.S = 0;
    return e;
}

/* DetectMetricPlateau.test_if_improving: 1 on a plateau. */
static int plateau(const het_daso_params *p, het_daso_sched *s, double loss) {
    double bar = s->best >= 0 ? s->best * (1.0 - p->threshold) : s->best * (1.0 + p->threshold);
    if (loss < bar) {
        s->best = loss;
        s->bad = 0;
    } else {
        s->bad++;
    }
    if (s->bad > p->patience) {
        s->bad = 0;
        return 1;
    }
    return 0;
}

het_daso_sched het_daso_sched_next(const het_daso_params *p, het_daso_sched s, int epochs_done,
                                   double loss) {
    if (epochs_done < p->warmup_epochs) return s;
    if (epochs_done == p->warmup_epochs) s.gs = 4, s.ls = 1, s.S = 1;
    if (!plateau(p, &s, loss)) return s;
    s.plateaus++;
    if (s.gs > 1) {
        s.gs /= 2;
        s.ls /= 2;
        s.S -= 1;
        if (s.gs > 0 && s.S < 1) s.S = 1;
        if (s.gs > 0 && s.ls < 1) s.ls = 1;
    } else if (s.gs == 1) {
        s.gs = p->max_global_skips;
        s.ls = s.S = p->max_global_skips / 4;
    }
    return s;
}

int het_daso_local_sync(const het_daso_sched *s, int64_t b, int64_t last) {
    if (s->ls <= 1 || b == last || b % s->ls == 0) return 1;
    return s->gs > 0 && b % s->gs == 0;
}
