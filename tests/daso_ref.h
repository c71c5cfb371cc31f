/* A reference for daso's per-batch control flow, written for the tests from a reading of
 * HeAT's heat/optim/dp_optimizer.py (class DASO: step, _global_sync, _gs_rcv_update_params,
 * _gs_rcv_update_params_last_batch, _local_update, _start/_stop_local_sync), not from
 * hetrain's code. It keeps what HeAT keeps, for all ranks at once (the ranks of one cross group
 * act alike): current_batch, _send_mod, _send_mod_m1, each group's _prev_params list (every
 * rank of group g holds the same list) and DDP's require_backward_grad_sync flag, all carried
 * across epochs as HeAT carries them (HeAT never resets the flag; the pending lists are empty
 * after an epoch's last batch). The schedule (global_skip, local_skip, batches_to_wait) is set
 * by the caller per epoch. Events: het_daso_event (strategy/daso.h), in HeAT's order.
 * Header-only: tests/test_daso_trace.c (against het_daso_ctl_step) and tests/test_daso.c
 * (against the strategy's trace under mpirun) include it. */
#ifndef HET_DASO_REF_H
#define HET_DASO_REF_H

#include <string.h>

#include "hetrain.h"
#include "strategy/daso.h"

#define REF_GROUPS 16
#define REF_PEND 8
#define REF_EVENTS 16

typedef struct ref_sent { int64_t from; int btw, wire; } ref_sent;

typedef struct ref_daso {
    int loc_gpus;                 /* HeAT's loc_gpus: ranks per node = cross groups */
    int64_t current_batch, last_batch;
    int send_mod, send_mod_m1;    /* send_mod_m1: -1 is None */
    int global_skip, local_skip, batches_to_wait;
    int cast_wire;                /* het_wire of casted syncs (global_skip < 1) */
    int grad_sync;                /* DDP's require_backward_grad_sync (True at construction) */
    int n_prev[REF_GROUPS];       /* _prev_params of each group: (sent at, btw, wire) */
    ref_sent prev[REF_GROUPS][REF_PEND];
    int broken;                   /* HeAT would have raised (a ValueError) */
    het_daso_event ev[REF_EVENTS];
    int n_ev;
} ref_daso;

static void ref_init(ref_daso *r, int loc_gpus, int cast_wire) {
    memset(r, 0, sizeof *r);
    r->loc_gpus = loc_gpus;
    r->send_mod_m1 = -1;
    r->cast_wire = cast_wire;
    r->grad_sync = 1;
}

static void ref_event(ref_daso *r, int kind, int group, int btw, int wire, int64_t from) {
    if (r->n_ev == REF_EVENTS) {
        r->broken = 1;
        return;
    }
    het_daso_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.group = group;
    e.btw = btw;
    e.wire = wire;
    e.batch = r->current_batch;
    e.from = from;
    r->ev[r->n_ev++] = e;
}

/* _local_update(sending_process): a node broadcast unless sending_process is None. */
static void ref_local_update(ref_daso *r, int sending) {
    if (sending >= 0) ref_event(r, HET_DASO_EV_BCAST, sending, 0, 0, 0);
}

/* _gs_rcv_update_params: the ranks of group _send_mod_m1 pop their oldest sent sync, if any. */
static void ref_rcv_update(ref_daso *r) {
    int g = r->send_mod_m1;
    if (g < 0 || r->n_prev[g] == 0) return;
    ref_event(r, HET_DASO_EV_MERGE, g, r->prev[g][0].btw, 0, r->prev[g][0].from);
    memmove(&r->prev[g][0], &r->prev[g][1], sizeof r->prev[g][0] * (size_t)(REF_PEND - 1));
    r->n_prev[g]--;
}

static int ref_next_mod(const ref_daso *r) {
    return r->send_mod <= r->loc_gpus - 2 ? r->send_mod + 1 : 0;
}

/* _global_sync(batches_to_wait) */
static void ref_global_sync(ref_daso *r, int btw) {
    int cur = r->send_mod;
    /* _gs_send_params: cast only when global_skip < 1 */
    int wire = r->global_skip < 1 ? r->cast_wire : HET_WIRE_FP32;
    ref_event(r, HET_DASO_EV_SEND, cur, btw, wire, 0);
    if (r->n_prev[cur] == REF_PEND) r->broken = 1;
    else r->prev[cur][r->n_prev[cur]++] = (ref_sent){r->current_batch, btw, wire};
    if (r->batches_to_wait != 0) {
        ref_rcv_update(r);
        ref_local_update(r, r->send_mod_m1);
    }
    if (r->current_batch == r->last_batch || r->batches_to_wait == 0) {
        /* _gs_rcv_update_params_last_batch: raises with more than one pending */
        if (r->n_prev[cur] > 1) r->broken = 1;
        ref_event(r, HET_DASO_EV_AVG, cur, 0, r->prev[cur][0].wire, 0);
        memmove(&r->prev[cur][0], &r->prev[cur][1], sizeof r->prev[cur][0] * (REF_PEND - 1));
        r->n_prev[cur]--;
        ref_local_update(r, r->send_mod);
        r->send_mod_m1 = -1;
        if (r->current_batch == r->last_batch) {
            r->send_mod = 0;
            r->current_batch = 0;
        } else {
            r->current_batch++;
            r->send_mod = ref_next_mod(r);
        }
    } else {
        r->current_batch++;
        r->send_mod_m1 = r->send_mod;
        r->send_mod = ref_next_mod(r);
    }
}

/* DASO.step after the local optimizer's step. */
static void ref_step(ref_daso *r) {
    const int64_t batch = r->current_batch, next_batch = batch + 1;
    const int gs = r->global_skip, ls = r->local_skip;
    const int64_t gmod = gs > 0 ? batch % gs : 0, lmod = ls > 0 ? batch % ls : 0;
    const int64_t btw = r->batches_to_wait + batch <= r->last_batch ? r->batches_to_wait
                                                                     : r->last_batch - batch;
    if (batch == r->last_batch || gmod == 0) {
        ref_global_sync(r, (int)btw);
        return;
    }
    if (next_batch % gs == 0) {
        r->grad_sync = 1;
        r->current_batch++;
        return;
    }
    if (gmod < btw) {
        r->current_batch++;
        if (next_batch == r->last_batch) r->grad_sync = 1;
        return;
    } else if (gmod == btw) {
        ref_rcv_update(r);
        ref_local_update(r, r->send_mod_m1);
        if (ls > 1) r->grad_sync = 0;
    }
    if (ls == 1 && next_batch != r->last_batch) {
        r->current_batch++;
        r->grad_sync = 1;
        return;
    }
    if (lmod == 0) r->grad_sync = 0;
    else if (next_batch % ls == 0) r->grad_sync = 1;
    if (next_batch == r->last_batch) r->grad_sync = 1;
    r->current_batch++;
}

/* One batch: its gradient averaging (the flag as the batch's backward finds it), then the
 * step. The events land in r->ev[0 .. n_ev). */
static void ref_batch(ref_daso *r) {
    r->n_ev = 0;
    ref_event(r, HET_DASO_EV_LOCAL, r->grad_sync, 0, 0, 0);
    ref_step(r);
}

/* An epoch's schedule (what epoch_loss_logic left) and its last batch. */
static void ref_epoch(ref_daso *r, int gs, int ls, int S, int64_t last) {
    r->global_skip = gs;
    r->local_skip = ls;
    r->batches_to_wait = S;
    r->last_batch = last;
}

/* "b 5 send(g1,S'0,fp32)" and the like, for failure messages. */
static const char *ref_wire_name(int w) { return w == 0 ? "fp32" : w == 1 ? "fp16" : "bf16"; }

static int ref_format(char *out, size_t n, const het_daso_event *e) {
    switch (e->kind) {
    case HET_DASO_EV_EPOCH:
        return snprintf(out, n, "epoch(%d,%d,%d last %lld)", e->gs, e->ls, e->S,
                        (long long)e->last);
    case HET_DASO_EV_LOCAL: return snprintf(out, n, "local=%s", e->group ? "Y" : "n");
    case HET_DASO_EV_SEND:
        return snprintf(out, n, "send(g%d,S'%d,%s)", e->group, e->btw, ref_wire_name(e->wire));
    case HET_DASO_EV_MERGE:
        if (e->btw > 0)
            return snprintf(out, n, "merge(g%d,from b%lld,w2*%d)", e->group, (long long)e->from,
                            e->btw);
        return snprintf(out, n, "merge(g%d,from b%lld,w1)", e->group, (long long)e->from);
    case HET_DASO_EV_BCAST: return snprintf(out, n, "bcast(g%d)", e->group);
    case HET_DASO_EV_AVG: return snprintf(out, n, "AVG(g%d,%s)", e->group, ref_wire_name(e->wire));
    default: return snprintf(out, n, "?%d", e->kind);
    }
}

/* Events equal in what their kind defines. */
static int ref_same(const het_daso_event *a, const het_daso_event *b) {
    if (a->kind != b->kind || a->batch != b->batch) return 0;
    switch (a->kind) {
    case HET_DASO_EV_EPOCH:
        return a->gs == b->gs && a->ls == b->ls && a->S == b->S && a->last == b->last;
    case HET_DASO_EV_LOCAL:
    case HET_DASO_EV_BCAST: return a->group == b->group;
    case HET_DASO_EV_SEND: return a->group == b->group && a->btw == b->btw && a->wire == b->wire;
    case HET_DASO_EV_MERGE: return a->group == b->group && a->btw == b->btw && a->from == b->from;
    case HET_DASO_EV_AVG: return a->group == b->group && a->wire == b->wire;
    default: return 0;
    }
}

/* One line of a batch's events: "b  5 local=Y send(g1,S'0,fp32) ..." */
static void ref_line(char *out, size_t n, int64_t b, const het_daso_event *ev, int k) {
    size_t u = (size_t)snprintf(out, n, "b %2lld", (long long)b);
    for (int i = 0; i < k && u < n; i++) {
        out[u++] = ' ';
        if (u < n) u += (size_t)ref_format(out + u, n - u, &ev[i]);
    }
    if (u >= n && n > 0) out[n - 1] = '\0';
}

#endif
