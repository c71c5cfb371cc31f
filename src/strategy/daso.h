/* daso's schedule (daso_schedule.c): pure functions of the epoch count and the epoch losses,
 * apart from MPI, so that tests/test_daso_schedule.c checks them against a table derived by
 * hand from HeAT's DASO.epoch_loss_logic and DetectMetricPlateau. The strategy (daso.c) keeps
 * one het_daso_sched, feeds it the all-reduced training loss after every epoch and
 * checkpoints it. Internal to the library. */
#ifndef HET_DASO_H
#define HET_DASO_H

#include <stdint.h>

/* The knobs (--daso-*; total_epochs is --epochs). */
typedef struct het_daso_params {
    int warmup_epochs;     /* blocking average every batch for the first N epochs */
    int cooldown_epochs;   /* ... and the last N epochs */
    int total_epochs;
    int max_global_skips;  /* gs after a reset; ls = S = max_global_skips / 4 */
    double threshold;      /* plateau: relative improvement that counts (0.05) */
    int patience;          /* plateau: bad epochs tolerated; the next one is a plateau (2) */
    int skip_factor;       /* on a plateau gs and ls are divided by it (HeAT's
                              skip_reduction_factor, 2) */
    int local_factor;      /* after a reset ls = S = max_global_skips / it (HeAT's
                              local_skip_factor, 4) */
} het_daso_params;

/* The knobs of a run: its daso options (daso_opts.c; defaults where unset) and --epochs. c's
 * strategy must be daso (het_strategy_opt_value aborts otherwise). */
struct het_train_config;
het_daso_params het_daso_params_read(const struct het_train_config *c);

/* The cycling state and the plateau detector. gs = global skip (a global sync starts on
 * batches b with b % gs == 0), ls = local skip (gradients are averaged in the node on batches
 * b with b % ls == 0; 0 and 1 mean every batch), S = batches to wait between the start and
 * the merge of a global sync. gs = 0: a blocking parameter average every batch (what warm-up
 * and cool-down epochs use: het_daso_sched_epoch). Plain data: copied into checkpoints. */
typedef struct het_daso_sched {
    int32_t gs, ls, S;
    int32_t bad;           /* epochs since `best` without an improvement past the threshold */
    double best;           /* lowest loss that counted as an improvement (HUGE_VAL: none yet) */
    int32_t plateaus;      /* plateaus detected so far (for the report) */
    int32_t pad;           /* zero: the struct has no uninitialized bytes */
} het_daso_sched;

/* The state before epoch 1: cycling at (4, 1, 1), no loss seen. */
het_daso_sched het_daso_sched_init(const het_daso_params *p);

/* The state after `epochs_done` (>= 1) epochs, the last with mean training loss `loss` (the
 * same on every rank), from the state s before that epoch:
 * - epochs_done < warm-up: unchanged (the detector starts with the last warm-up epoch);
 * - epochs_done == warm-up: (4, 1, 1), then the detector below;
 * - otherwise the detector: loss < best (1 - threshold) (best (1 + threshold) for a negative
 *   best) is an improvement (best = loss, bad = 0), else bad++; bad > patience is a plateau
 *   (bad = 0). On a plateau: gs > 1: gs /= f, ls /= f, S -= 1 (f = skip_factor), ls and S
 *   clamped to >= 1 while gs > 0 (a factor above gs leaves gs = 0: a sync every batch, cast,
 *   and S may be 0 or -1, as in HeAT); gs == 1: gs = max_global_skips,
 *   ls = S = max_global_skips / local_factor.
 * HeAT zeroes the state in cool-down and stops the detector there; here the detector runs on
 * (cool-down is blocking to the end, so nothing observable changes), which keeps the state
 * independent of --epochs: a run resumed with more epochs continues as if started with them. */
het_daso_sched het_daso_sched_next(const het_daso_params *p, het_daso_sched s, int epochs_done,
                                   double loss);

/* The schedule epoch `epoch0` (0-based) runs under: s, with gs = ls = S = 0 (blocking every
 * batch) in the warm-up (epoch0 < warm-up) and the cool-down (epoch0 >= total - cool-down). */
het_daso_sched het_daso_sched_epoch(const het_daso_params *p, const het_daso_sched *s,
                                    int epoch0);


/* ---- the per-batch control flow (HeAT's DASO.step / _global_sync), and its event trace ---- */

/* One event of a batch, as every rank sees it (the same list on every rank). */
typedef enum {
    HET_DASO_EV_EPOCH,  /* an epoch starts: gs, ls, S of its schedule, last = its last batch */
    HET_DASO_EV_LOCAL,  /* the batch's gradients: group = 1 averaged in the node, 0 the rank's own */
    HET_DASO_EV_SEND,   /* cross group `group` sends its parameters, clamped wait btw, wire type */
    HET_DASO_EV_MERGE,  /* group merges the sync it sent at batch `from` (its btw: weight 2 btw,
                           or 1 when btw <= 0) */
    HET_DASO_EV_BCAST,  /* node broadcast of the parameters from local rank `group` */
    HET_DASO_EV_AVG,    /* blocking: group's parameters = the mean of what it sent this batch */
} het_daso_ev_kind;

typedef struct het_daso_event {
    int kind;          /* het_daso_ev_kind */
    int group;         /* see the kinds */
    int btw;           /* SEND, MERGE */
    int wire;          /* SEND, AVG: het_wire (0 fp32, 1 fp16, 2 bf16) */
    int64_t batch;     /* 0-based batch of the epoch (EPOCH: 0) */
    int64_t from;      /* MERGE: the batch that sent it */
    int gs, ls, S;     /* EPOCH */
    int64_t last;      /* EPOCH */
} het_daso_event;

/* A test hook: fn sees every event the daso strategy carries out, on every rank, in order
 * (NULL: none). Process-wide; set it before het_trainer_create. */
typedef void (*het_daso_trace_fn)(void *user, int rank, const het_daso_event *e);
void het_daso_set_trace(het_daso_trace_fn fn, void *user);


/* What HeAT carries from batch to batch of an epoch (reset at each epoch's start, where HeAT's
 * are too: send_mod 0, no previous sender, nothing in flight, node averaging on). */
#define HET_DASO_CTL_MAX 4
typedef struct het_daso_ctl {
    int G;             /* groups taking turns (local ranks 0 .. G-1) */
    int send_mod;      /* the group that sends at the next global sync */
    int m1;            /* the previous sender while its sync may be pending, else -1 */
    int flag;          /* the next batch averages its gradients in the node (DDP's flag) */
    int n;             /* non-blocking syncs in flight, oldest first */
    struct { int group, btw, wire; int64_t from; } q[HET_DASO_CTL_MAX];
} het_daso_ctl;

het_daso_ctl het_daso_ctl_epoch(int G);

/* Options that depart from HeAT (both 0 by default). */
typedef struct het_daso_ctl_opts {
    int wire;          /* het_wire of the syncs of gs = 0 (warm-up, cool-down) */
    int merge_last;    /* the last batch merges the pending sync before its blocking average
                          (HeAT: after the send, so the average discards that merge) */
} het_daso_ctl_opts;

/* The events of batch b (of an epoch whose last batch is `last`) after its optimizer step,
 * into ev (room for HET_DASO_CTL_EVENTS); updates c (c->flag: the next batch's node
 * averaging). Returns the number of events, or -1 when more than HET_DASO_CTL_MAX syncs would
 * be in flight (cannot happen: each is merged by the next global sync). HeAT's
 * control flow, per batch, with btw = S' = min(S, last - b) recomputed every batch:
 * - b == last or b % gs == 0 (every batch when gs = 0): a global sync. Group send_mod sends
 *   (wire: opts->wire when gs = 0, else fp32) with btw. If S != 0 the previous sender's
 *   pending sync is merged and the node broadcasts from it (even when it was merged before).
 *   If b == last or S == 0 the send is blocking: the group's parameters become the mean of
 *   what it sent and the node broadcasts from it; the previous sender is forgotten. send_mod
 *   rotates (0 after the last batch).
 * - else (b + 1) % gs == 0: nothing but node averaging on.
 * - else b % gs < btw: nothing (node averaging on before the last batch).
 * - else b % gs == btw: the pending sync is merged, the node broadcasts from its group; with
 *   ls > 1 node averaging off. Then DDP's flag: ls == 1 (and not before the last): on; else
 *   off on b % ls == 0, on when (b + 1) % ls == 0, on before the last batch. */
#define HET_DASO_CTL_EVENTS 8
int het_daso_ctl_step(het_daso_ctl *c, const het_daso_sched *s, int64_t b, int64_t last,
                      const het_daso_ctl_opts *opts, het_daso_event *ev);

/* A schedule read back from checkpoint `path` (section at offset off): HET_OK when each value
 * is in the range its options allow (--daso-max-global-skips 1..65536, --daso-patience up to
 * 1e6) and the best loss is a number or none yet; else HET_EFORMAT with a one-line message. */
int het_daso_sched_check(const het_daso_sched *q, const char *path, uint64_t off);

#endif
