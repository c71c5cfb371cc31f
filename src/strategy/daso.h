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

#endif
