/* daso's schedule: the phases (warm-up, cycling, cool-down) and the plateau detector that
 * moves (gs, ls, S) through the cycle (4,1,1) -> (2,1,1) -> (1,1,1) -> (8,2,2) -> (4,1,1)...
 * (with max_global_skips 8 and HeAT's factors 2 and 4, both options). Follows HeAT's
 * DASO.epoch_loss_logic and DetectMetricPlateau (mode min, relative threshold, no cool-down of
 * the detector, never reset) with two changes: the phase is applied per epoch
 * (het_daso_sched_epoch) rather than written into the state, so the detector also runs in
 * cool-down (unobservable) and the state does not depend on --epochs (resume with more
 * epochs); and HeAT enters its cycling state only at the epoch count equal to the warm-up, so a
 * warm-up of 0 epochs would stay blocking for ever, where here cycling starts at epoch 1.
 * Also the per-batch control (het_daso_ctl_step): HeAT's DASO.step and _global_sync as events
 * the strategy carries out; daso.h says what it does, tests/test_daso_trace.c checks it. */
#include <math.h>
#include <string.h>

#include "hetrain/comm.h"
#include "hetrain/core.h"
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
        s.gs /= p->skip_factor;
        s.ls /= p->skip_factor;
        s.S -= 1;
        if (s.gs > 0 && s.S < 1) s.S = 1;
        if (s.gs > 0 && s.ls < 1) s.ls = 1;
    } else if (s.gs == 1) {
        s.gs = p->max_global_skips;
        s.ls = s.S = p->max_global_skips / p->local_factor;
    }
    return s;
}

het_daso_ctl het_daso_ctl_epoch(int G) {
    het_daso_ctl c;
    memset(&c, 0, sizeof c);
    c.G = G > 0 ? G : 1;
    c.m1 = -1;
    c.flag = 1;
    return c;
}

static void put(het_daso_event *ev, int *n, int kind, int64_t b, int group, int btw, int wire,
                int64_t from) {
    het_daso_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.batch = b;
    e.group = group;
    e.btw = btw;
    e.wire = wire;
    e.from = from;
    ev[(*n)++] = e;
}

/* HeAT's receive: the previous sender's sync still in flight (sent before b) is merged, then
 * the node broadcasts from that group whether or not anything was merged. */
static void receive(het_daso_ctl *c, int64_t b, het_daso_event *ev, int *n) {
    if (c->m1 < 0) return;
    for (int k = 0; k < c->n; k++)
        if (c->q[k].group == c->m1 && c->q[k].from < b) {
            put(ev, n, HET_DASO_EV_MERGE, b, c->m1, c->q[k].btw, 0, c->q[k].from);
            memmove(&c->q[k], &c->q[k + 1], sizeof c->q[0] * (size_t)(c->n - k - 1));
            c->n--;
            break;
        }
    put(ev, n, HET_DASO_EV_BCAST, b, c->m1, 0, 0, 0);
}

int het_daso_ctl_step(het_daso_ctl *c, const het_daso_sched *s, int64_t b, int64_t last,
                      const het_daso_ctl_opts *o, het_daso_event *ev) {
    int n = 0;
    const int64_t gmod = s->gs > 0 ? b % s->gs : 0, lmod = s->ls > 0 ? b % s->ls : 0;
    const int64_t btw = s->S + b <= last ? s->S : last - b;
    const int next_mod = c->send_mod + 1 < c->G ? c->send_mod + 1 : 0;
    if (b == last || gmod == 0) { /* a global sync */
        const int blocking = b == last || s->S == 0, early = blocking && o->merge_last;
        const int wire = s->gs < 1 ? o->wire : HET_WIRE_FP32;
        if (early && s->S != 0) receive(c, b, ev, &n);
        put(ev, &n, HET_DASO_EV_SEND, b, c->send_mod, (int)btw, wire, 0);
        if (!blocking) {
            if (c->n == HET_DASO_CTL_MAX) return -1;
            c->q[c->n].group = c->send_mod, c->q[c->n].btw = (int)btw;
            c->q[c->n].wire = wire, c->q[c->n].from = b;
            c->n++;
        }
        if (!early && s->S != 0) receive(c, b, ev, &n);
        if (blocking) {
            put(ev, &n, HET_DASO_EV_AVG, b, c->send_mod, 0, wire, 0);
            put(ev, &n, HET_DASO_EV_BCAST, b, c->send_mod, 0, 0, 0);
            c->m1 = -1;
            c->send_mod = b == last ? 0 : next_mod;
        } else {
            c->m1 = c->send_mod;
            c->send_mod = next_mod;
        }
        return n;
    }
    if ((b + 1) % s->gs == 0) { /* nothing is received before a global sync */
        c->flag = 1;
        return n;
    }
    if (gmod < btw) {
        if (b + 1 == last) c->flag = 1;
        return n;
    }
    if (gmod == btw) {
        receive(c, b, ev, &n);
        if (s->ls > 1) c->flag = 0;
    }
    if (s->ls == 1 && b + 1 != last) {
        c->flag = 1;
        return n;
    }
    if (lmod == 0) c->flag = 0;
    else if ((b + 1) % s->ls == 0) c->flag = 1;
    if (b + 1 == last) c->flag = 1;
    return n;
}

int het_daso_sched_check(const het_daso_sched *q, const char *path, uint64_t off) {
    const struct { const char *name; long long v, lo, hi; } f[] = {
        {"gs", q->gs, 0, 65536}, {"ls", q->ls, 0, 65536}, {"S", q->S, -1, 65536},
        {"bad", q->bad, 0, 1000001}, {"plateaus", q->plateaus, 0, 1000000000}, {"pad", q->pad, 0, 0}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return het_error_set(HET_EFORMAT, "%s: offset %llu: daso schedule %s %lld, expected "
                                 "%lld..%lld", path, (unsigned long long)off, f[i].name, f[i].v,
                                 f[i].lo, f[i].hi);
    if (isnan(q->best) || q->best == -HUGE_VAL)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: daso schedule best loss %g, expected "
                             "a number (or none yet)", path, (unsigned long long)off, q->best);
    return HET_OK;
}
