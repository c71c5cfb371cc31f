/* DESIGN: injected failures (--fail-at, --fail-rate), so that what a strategy loses to a lost
 * node, and how long a relaunch takes, can be studied without a cluster.
 *
 * A failing rank ends itself with SIGKILL at a step's end, exactly as a node that is lost: no
 * message to the others, no cleanup, no checkpoint. The others then see a lost rank as on a
 * real cluster (the peer watch names it and ends the job; `hetrain run` relaunches). The
 * point is a step's end (het_step_record calls ctx->fail): on the virtual clock a rank's
 * time there is a pure function of the run, so a run with --fail-at fails at the same step
 * every time, bit for bit (the checkpoints it leaves too).
 *   --fail-at R:T    rank R, at the first step end whose clock (the run's: virtual seconds
 *                    on --clock virtual, else wall seconds) is T or more past this launch's
 *                    start
 *   --fail-at R:@S   rank R, at the first step end with the global step >= S
 *   --fail-rate X    every rank draws its time to failure from an exponential distribution
 *                    of rate X per second, from --seed, its rank and the step the launch
 *                    starts at (so a relaunch draws anew)
 * A launch that starts past a --fail-at step does not fail again at it. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emul/emul.h"
#include "train/trainer.h"

static void fail_now(het_strategy_ctx *ctx) {
    fprintf(stderr, "hetrain: rank %d: injected failure (--fail-at / --fail-rate) at step %lld, "
            "%.3f s into this launch%s; ending with SIGKILL\n", ctx->rank,
            (long long)ctx->step, het_lane_now(&ctx->lane) - ctx->fail_t0,
            het_clock_virtual() ? " (virtual)" : "");
    fflush(stderr);
    fflush(stdout);
    raise(SIGKILL);
    abort(); /* not reached */
}

int het_trainer_faults(het_trainer *t) {
    het_strategy_ctx *c = &t->ctx;
    const het_train_config *cfg = &t->cfg;
    c->fail_step = 0;
    c->fail_time = 0.0;
    c->fail = NULL;
    const char *s = cfg->fail_at;
    while (*s) {
        char *end;
        long r = strtol(s, &end, 10);
        int at_step = end[0] == ':' && end[1] == '@';
        if (end == s || *end != ':' || r < 0)
            return het_error_set(HET_EINVAL, "--fail-at '%s': offset %d: expected RANK:TIME or "
                                 "RANK:@STEP", cfg->fail_at, (int)(s - cfg->fail_at));
        const char *v = end + 1 + at_step;
        double x = strtod(v, &end);
        if (end == v || !(isfinite(x) && x >= 0) || (at_step && x != floor(x)) ||
            (*end && *end != ','))
            return het_error_set(HET_EINVAL, "--fail-at '%s': offset %d: expected %s",
                                 cfg->fail_at, (int)(v - cfg->fail_at),
                                 at_step ? "a step number" : "seconds >= 0");
        if (r >= t->size)
            return het_error_set(HET_EINVAL, "--fail-at '%s': rank %ld, expected below the %d "
                                 "ranks", cfg->fail_at, r, t->size);
        if (r == t->rank) {
            if (at_step && (int64_t)x > c->step &&
                (c->fail_step == 0 || (int64_t)x < c->fail_step))
                c->fail_step = (int64_t)x;
            if (!at_step && (c->fail_time == 0.0 || x < c->fail_time))
                c->fail_time = x > 0 ? x : 1e-300;
        }
        s = *end ? end + 1 : end;
    }
    if (cfg->fail_rate > 0) {
        het_rng g;
        het_rng_seed2(&g, cfg->seed ^ 0x6661696c72617465ULL, /* "failrate" */
                      (uint64_t)(t->rank + 1) * 0x9e3779b97f4a7c15ULL ^
                          (uint64_t)c->step * 0xc2b2ae3d27d4eb4fULL);
        for (int k = 0; k < 4; k++) (void)het_rng_u64(&g); /* nearby streams start alike */
        double u = 1.0 - (double)(het_rng_u64(&g) >> 11) * (1.0 / 9007199254740992.0);
        double x = -log(u) / (double)cfg->fail_rate;
        if (c->fail_time == 0.0 || x < c->fail_time) c->fail_time = x > 0 ? x : 1e-300;
    }
    if (c->fail_step || c->fail_time > 0) {
        c->fail = fail_now;
        c->fail_t0 = het_lane_now(&c->lane);
    }
    return HET_OK;
}
