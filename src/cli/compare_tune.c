/* hetrain compare's tuning grid (--tune-lr LIST, --tune-momentum LIST): so that a comparison
 * does not set one strategy's tuned learning rate against another's untuned one, every
 * strategy, baselines included, runs every point of one grid once, on the first seed, trained
 * on the training samples less a held-out part and scored on that part (train --holdout N: the
 * test set is never looked at), for --tune-epochs epochs; its point is chosen by one rule for
 * all: the highest held-out accuracy at the end (the first of equal ones, in the grid's order;
 * a run that failed or diverged has none). The comparison then runs each strategy with its
 * point's --lr and --momentum (after the user's, so they win). compare.md shows the grid's
 * accuracies and the points chosen (compare_report.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/compare.h"

int cli_compare_tune_points(const cmp_tune *t) {
    return (t->n_lr ? t->n_lr : 1) * (t->n_m ? t->n_m : 1);
}

int cli_compare_tune_words(const cmp_tune *t, int g, char **w) {
    int n = 0, nm = t->n_m ? t->n_m : 1;
    if (t->n_lr) w[n++] = "--lr", w[n++] = (char *)t->lr[g / nm];
    if (t->n_m) w[n++] = "--momentum", w[n++] = (char *)t->m[g % nm];
    return n;
}

int cli_compare_tune_list(cmp_tune *t, int momentum, const char *list) {
    const char *key = momentum ? "--tune-momentum" : "--tune-lr";
    char (*dst)[24] = momentum ? t->m : t->lr;
    int *n = momentum ? &t->n_m : &t->n_lr;
    *n = 0;
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        char v[24], *end;
        if (len == 0 || len >= sizeof v) {
            het_error_set(HET_EINVAL, "hetrain compare: %s: '%s' is not a list of numbers "
                          "(0.01,0.02)", key, list);
            return CLI_USAGE;
        }
        memcpy(v, p, len);
        v[len] = '\0';
        errno = 0;
        double x = strtod(v, &end);
        int ok = end != v && !*end && !errno && isfinite(x) &&
                 (momentum ? x >= 0 && x < 1 : x > 0);
        if (!ok) {
            het_error_set(HET_EINVAL, "hetrain compare: %s: each value %s, not '%s'", key,
                          momentum ? "in [0, 1)" : "> 0", v);
            return CLI_USAGE;
        }
        if (*n == CMP_TUNE_MAX) {
            het_error_set(HET_EINVAL, "hetrain compare: %s: at most %d values", key,
                          CMP_TUNE_MAX);
            return CLI_USAGE;
        }
        snprintf(dst[(*n)++], sizeof dst[0], "%s", v);
        p += len;
        if (!*p) break;
        p++;
    }
    return CLI_OK;
}

/* The samples held out: --tune-holdout, else a sixth of --train-limit, else 10000 (a sixth of
 * Fashion-MNIST's training set, the size of its test set). */
static long long holdout_of(const cmp_plan *p) {
    if (p->tune.holdout > 0) return p->tune.holdout;
    return p->c->train_limit > 0 ? (p->c->train_limit + 5) / 6 : 10000;
}

int cli_compare_tune(cmp_plan *p) {
    cmp_tune *t = &p->tune;
    const int G = cli_compare_tune_points(t), E = t->epochs ? t->epochs : p->c->epochs;
    char ebuf[16], hbuf[24];
    snprintf(ebuf, sizeof ebuf, "%d", E);
    snprintf(hbuf, sizeof hbuf, "%lld", holdout_of(p));
    printf("compare: tuning: %d point%s x %d strateg%s, %d epoch%s each, the last %s training "
           "samples held out\n", G, G == 1 ? "" : "s", p->n_strat, p->n_strat == 1 ? "y" : "ies",
           E, E == 1 ? "" : "s", hbuf);
    for (int s = 0; s < p->n_strat; s++) {
        t->chosen[s] = 0;
        for (int g = 0; g < G; g++) t->acc[s][g] = NAN;
        for (int g = 0; g < G && !cli_signals_caught(); g++) {
            char *extra[10 + 2 * CMP_MAX_SET], name[96], metrics[HET_PATH_LEN], log[HET_PATH_LEN];
            int n = 0, killed = 0;
            extra[n++] = "--epochs", extra[n++] = ebuf; /* before --set's: a --set epochs wins */
            cli_compare_extra_words(p, s, g, extra + n);
            while (extra[n]) n++;
            extra[n++] = "--holdout", extra[n++] = hbuf;
            extra[n] = NULL;
            snprintf(name, sizeof name, "tune-%s-%d.jsonl", p->strat[s], g + 1);
            cli_compare_join(metrics, sizeof metrics, p->out, name);
            snprintf(name, sizeof name, "tune-%s-%d.log", p->strat[s], g + 1);
            cli_compare_join(log, sizeof log, p->out, name);
            printf("compare: tuning %s, %s%s%s%s%s ... ", p->strat[s], t->n_lr ? "lr " : "",
                   t->n_lr ? t->lr[g / (t->n_m ? t->n_m : 1)] : "", t->n_lr && t->n_m ? ", " : "",
                   t->n_m ? "momentum " : "", t->n_m ? t->m[g % t->n_m] : "");
            fflush(stdout);
            int st = cli_compare_run(p, p->strat[s], (unsigned long long)p->c->seed, metrics, log,
                                     extra, NULL, 0, &killed);
            if (cli_signals_caught()) {
                printf("interrupted\n");
                return HET_OK; /* the caller says what stopped */
            }
            cli_jsonl_run r;
            if (!st) st = cli_jsonl_read(&r, metrics, p->ranks, E);
            if (st == HET_ENOMEM) return st;
            if (st) { /* this point loses; the others still run */
                printf("failed (%s)\n", log);
                continue;
            }
            t->acc[s][g] = r.epochs[E - 1].test_acc;
            cli_jsonl_free(&r);
            printf("held-out acc %.4f\n", t->acc[s][g]);
            if (isfinite(t->acc[s][g]) && !(t->acc[s][g] <= t->acc[s][t->chosen[s]]))
                t->chosen[s] = g; /* NaN at the chosen one: any finite accuracy wins */
        }
    }
    return HET_OK;
}
