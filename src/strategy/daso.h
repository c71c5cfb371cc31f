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
} het_daso_params;

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
 *   (bad = 0). On a plateau: gs > 1: gs /= 2, ls /= 2, S -= 1, ls and S clamped to >= 1 while
 *   gs > 0; gs == 1: gs = max_global_skips, ls = S = max_global_skips / 4.
 * HeAT zeroes the state in cool-down and stops the detector there; here the detector runs on
 * (cool-down is blocking to the end, so nothing observable changes), which keeps the state
 * independent of --epochs: a run resumed with more epochs continues as if started with them. */
het_daso_sched het_daso_sched_next(const het_daso_params *p, het_daso_sched s, int epochs_done,
                                   double loss);

/* The schedule epoch `epoch0` (0-based) runs under: s, with gs = ls = S = 0 (blocking every
 * batch) in the warm-up (epoch0 < warm-up) and the cool-down (epoch0 >= total - cool-down). */
het_daso_sched het_daso_sched_epoch(const het_daso_params *p, const het_daso_sched *s,
                                    int epoch0);

/* Batch b (0-based) of an epoch of last batch `last`, under schedule s: does it average the
 * gradients inside the node? Every batch when ls <= 1; else b % ls == 0, a global-sync batch
 * (b % gs == 0) and the last batch. */
int het_daso_local_sync(const het_daso_sched *s, int64_t b, int64_t last);

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


#endif
