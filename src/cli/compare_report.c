/* hetrain compare's figures, tables and plots (compare.c runs the strategies): per strategy
 * the mean and spread over seeds of the time per epoch, the time to the target accuracy (on the
 * runs' clock: vtime_s under the virtual clock, elapsed_s else), the final test accuracy,
 * samples/s, bytes sent per rank and epoch and the share of time waiting, from each run's
 * metrics (jsonl.c); compare.md, compare.csv, accuracy.svg and split.svg written durably
 * (core/outfile.c), the table printed. A failed run has no figures: its strategy's cells count
 * the seeds that have them, the table marks the strategy, and compare.md gives the reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/compare.h"
#include "core/outfile.h"
#include "strategy/strategy.h"

typedef struct agg {
    double mean, spread; /* over the seeds with a value; spread = max - min */
    int n;               /* seeds with a value (not NaN) */
} agg;

enum { F_EPOCH, F_TARGET, F_ACC, F_SPS, F_NODE, F_CROSS, F_WAIT, F_OVER, N_FIG };

static agg aggregate(const double *v, int n) {
    agg a = {NAN, NAN, 0};
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) {
            sum += v[i];
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
            a.n++;
        }
    if (a.n) {
        a.mean = sum / a.n;
        a.spread = hi - lo;
    }
    return a;
}

/* An epoch's time since the start on the runs' clock: virtual (vtime_s) or wall (elapsed_s). */
static double time_of(const cli_jsonl_epoch *ep) {
    return isnan(ep->vtime_s) ? ep->elapsed_s : ep->vtime_s;
}

/* The figures of one run (NaN: none) and its time split shares (share[0] < 0: none). */
static void run_figures(const cli_jsonl_run *r, double target, double *fig, double share[4]) {
    int n = r->n_epochs, split = 1;
    double over = NAN, sps = 0, bytes[2] = {0, 0}, t[4] = {0, 0, 0, 0};
    fig[F_TARGET] = NAN;
    for (int e = 0; e < n; e++) {
        const cli_jsonl_epoch *ep = &r->epochs[e];
        sps += ep->samples_per_s;
        split &= !isnan(ep->t[0]);
        for (int k = 0; k < 4; k++) t[k] += ep->t[k];
        for (int k = 0; k < 2; k++) bytes[k] += ep->bytes[k];
        if (!isnan(ep->link_over)) over = isnan(over) ? ep->link_over : fmax(over, ep->link_over);
    }
    fig[F_OVER] = over; /* the worst epoch's worst link */
    for (int i = 0; i < r->n_points && isnan(fig[F_TARGET]); i++) /* epoch ends, evaluations */
        if (r->points[i].acc >= target) fig[F_TARGET] = r->points[i].t;
    fig[F_EPOCH] = time_of(&r->epochs[n - 1]) / n; /* the mean of epochs: times count from 0 */
    fig[F_ACC] = r->epochs[n - 1].test_acc;
    fig[F_SPS] = sps / n;
    fig[F_NODE] = bytes[0] / n / r->ranks; /* NaN without the arrays */
    fig[F_CROSS] = bytes[1] / n / r->ranks;
    double total = t[0] + t[1] + t[2] + t[3];
    fig[F_WAIT] = split && total > 0 ? t[2] / total : NAN;
    for (int k = 0; k < 4; k++) share[k] = split && total > 0 ? t[k] / total : -1;
}

static void fmt_bytes(char *dst, size_t n, double b) {
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (fabs(b) >= 1000 && u < 4) b /= 1000, u++;
    snprintf(dst, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

/* Seconds v with the decimals that give `ref` (the mean) 3 significant digits; no e-notation. */
static void fmt_secs(char *dst, size_t n, double v, double ref) {
    ref = fabs(ref);
    snprintf(dst, n, "%.*f", ref >= 100 ? 0 : ref >= 10 ? 1 : ref >= 1 || ref == 0 ? 2 : 3, v);
}

/* One table cell: the mean (± the spread with values of several seeds), "-" without a value;
 * "(k/N seeds)" when only k of N seeds have one. */
static void cell(char *dst, size_t n, int fig, agg a, int seeds) {
    char m[32], s[32];
    if (!a.n) {
        snprintf(dst, n, "-");
        return;
    }
    static const char *const fmt[N_FIG] = {"", "", "%.4f", "%.0f", "", "", "%.1f %%",
                                           "%.1f %%"};
    double scale = fig == F_WAIT || fig == F_OVER ? 100 : 1;
    if (fig == F_NODE || fig == F_CROSS) {
        fmt_bytes(m, sizeof m, a.mean);
        fmt_bytes(s, sizeof s, a.spread);
    } else if (fig == F_EPOCH || fig == F_TARGET) {
        fmt_secs(m, sizeof m, a.mean, a.mean);
        fmt_secs(s, sizeof s, a.spread, a.mean);
    } else {
        snprintf(m, sizeof m, fmt[fig], a.mean * scale);
        snprintf(s, sizeof s, fmt[fig], a.spread * scale);
    }
    int len = snprintf(dst, n, a.n > 1 ? "%s ± %s" : "%s", m, s);
    if (a.n < seeds && len > 0 && (size_t)len < n)
        snprintf(dst + len, n - (size_t)len, " (%d/%d seeds)", a.n, seeds);
}

/* Runs of strategy s that failed. */
static int failed_of(const cmp_plan *p, const run_why *why, int s) {
    int n = 0;
    for (int k = 0; k < p->seeds; k++) n += why[s * p->seeds + k][0] != 0;
    return n;
}

static void write_table(FILE *f, const cmp_plan *p, agg (*a)[N_FIG], const run_why *why) {
    const char *clk = p->c->clock == HET_CLOCK_VIRTUAL ? "virtual s" : "s";
    fprintf(f, "| strategy | ranks | time/epoch (%s) | time to %.4g acc (%s) | final test acc | "
            "samples/s | sent/rank/epoch node-local | sent/rank/epoch cross-node | waiting | "
            "link over capacity |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", clk, p->target, clk);
    for (int s = 0; s < p->n_strat; s++) {
        int nf = failed_of(p, why, s);
        if (!nf) fprintf(f, "| %s | %d", p->strat[s], p->ranks);
        else if (nf == p->seeds) fprintf(f, "| %s (failed) | %d", p->strat[s], p->ranks);
        else fprintf(f, "| %s (%d/%d seeds failed) | %d", p->strat[s], nf, p->seeds, p->ranks);
        for (int k = 0; k < N_FIG; k++) {
            char c[96];
            cell(c, sizeof c, k, a[s][k], p->seeds);
            fprintf(f, " | %s", c);
        }
        fprintf(f, " |\n");
    }
}

static void write_csv(FILE *f, const cmp_plan *p, agg (*a)[N_FIG], const run_why *why) {
    static const char *const col[N_FIG] = {"epoch_s", "time_to_target_s", "final_test_acc",
        "samples_per_s", "bytes_node_per_rank_epoch", "bytes_cross_per_rank_epoch",
        "wait_share", "link_over_share"};
    fprintf(f, "strategy,ranks,seeds,target_acc,target_reached_seeds");
    for (int k = 0; k < N_FIG; k++) fprintf(f, ",%s,%s_spread", col[k], col[k]);
    fprintf(f, ",failed_seeds\n");
    for (int s = 0; s < p->n_strat; s++) {
        fprintf(f, "%s,%d,%d,%.9g,%d", p->strat[s], p->ranks, p->seeds, p->target,
                a[s][F_TARGET].n);
        for (int k = 0; k < N_FIG; k++) /* empty fields: no value */
            if (a[s][k].n) fprintf(f, ",%.9g,%.9g", a[s][k].mean, a[s][k].spread);
            else fprintf(f, ",,");
        fprintf(f, ",%d\n", failed_of(p, why, s));
    }
}

/* What compare writes besides the runs' own files; removed before the runs. */
const char *const cli_compare_outputs[4] = {"compare.md", "compare.csv", "accuracy.svg",
                                           "split.svg"};

typedef struct report {
    const cmp_plan *p;
    agg (*a)[N_FIG];
    cli_series *series;
    const run_why *why; /* per run: "" or why it failed */
    char title[512], runs[16384];
    char every[256]; /* "" or where --eval-every read it inside epochs, and where not */
    char paired[8192]; /* "" or the table against --baseline, with its note */
    char tuned[8192];  /* "" or the tuning grid's table (--tune-lr, --tune-momentum) */
} report;

/* Student's t, the 97.5 % quantile for df degrees of freedom (1.96 beyond 30). */
static double t975(int df) {
    static const double t[31] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                 2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                 2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                 2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    return df >= 1 && df <= 30 ? t[df] : 1.96;
}

/* One cell of the paired table: over the seeds where both have figure x (a[k], b[k]), the mean
 * of a/b (ratio) or of 100 (a - b) (points), with its 95 % interval from 2 seeds on. */
static void paired_cell(char *dst, size_t n, const double *a, const double *b, int K,
                        int ratio) {
    double d[1000], mean = 0, var = 0;
    int m = 0;
    for (int k = 0; k < K && m < 1000; k++)
        if (isfinite(a[k]) && isfinite(b[k]) && (!ratio || b[k] > 0))
            d[m++] = ratio ? a[k] / b[k] : 100 * (a[k] - b[k]);
    if (!m) {
        snprintf(dst, n, "-");
        return;
    }
    for (int k = 0; k < m; k++) mean += d[k] / m;
    for (int k = 0; k < m && m > 1; k++) var += (d[k] - mean) * (d[k] - mean) / (m - 1);
    const char *fmt = ratio ? "%.3f" : "%+.2f";
    char v[32], lo[32], hi[32];
    snprintf(v, sizeof v, fmt, mean);
    if (m == 1) {
        snprintf(dst, n, "%s (1 seed)", v);
        return;
    }
    double h = t975(m - 1) * sqrt(var / m);
    snprintf(lo, sizeof lo, fmt, mean - h);
    snprintf(hi, sizeof hi, fmt, mean + h);
    snprintf(dst, n, m < K ? "%s [%s, %s] (%d seeds)" : "%s [%s, %s]", v, lo, hi, m);
}

/* The table of every strategy against the baseline, paired by seed (fig: the runs' figures,
 * (strategy x seed) x N_FIG, NaN where a run has none). */
static void paired_table(char *dst, size_t n, const cmp_plan *p, const double *fig) {
    const int K = p->seeds, B = p->baseline;
    const char *clk = p->c->clock == HET_CLOCK_VIRTUAL ? "virtual " : "";
    size_t len = (size_t)snprintf(dst, n, "Paired with %s by seed (each seed's figure against "
                                  "%s's on the same seed; mean [95 %% interval, Student's t] "
                                  "over %d seeds):\n\n| strategy | %stime/epoch / %s's | %stime "
                                  "to %.4g acc / %s's | final test acc - %s's (points) |\n"
                                  "|---|---:|---:|---:|\n", p->strat[B], p->strat[B], K, clk,
                                  p->strat[B], clk, p->target, p->strat[B], p->strat[B]);
    double a[1000], b[1000];
    static const int col[3] = {F_EPOCH, F_TARGET, F_ACC};
    for (int s = 0; s < p->n_strat && len < n; s++) {
        if (s == B) continue;
        len += (size_t)snprintf(dst + len, n - len, "| %s", p->strat[s]);
        for (int c = 0; c < 3 && len < n; c++) {
            for (int k = 0; k < K && k < 1000; k++) {
                a[k] = fig[((size_t)s * K + k) * N_FIG + col[c]];
                b[k] = fig[((size_t)B * K + k) * N_FIG + col[c]];
            }
            char cellv[96];
            paired_cell(cellv, sizeof cellv, a, b, K < 1000 ? K : 1000, c < 2);
            len += (size_t)snprintf(dst + len, n - len, " | %s", cellv);
        }
        if (len < n) len += (size_t)snprintf(dst + len, n - len, " |\n");
    }
}

/* The tuning grid: a row per strategy, its held-out accuracy at every point, the chosen one in
 * bold. */
static void tune_table(char *dst, size_t n, const cmp_plan *p) {
    const cmp_tune *t = &p->tune;
    const int G = cli_compare_tune_points(t), nm = t->n_m ? t->n_m : 1;
    size_t len = (size_t)snprintf(dst, n, "Tuning: every strategy ran every point of the grid "
                                  "once (seed %llu), trained without its held-out samples and "
                                  "scored on them (--holdout); the table's runs use each "
                                  "strategy's best point (bold), the highest held-out accuracy "
                                  "(-: failed or diverged; the tuning runs' files are "
                                  "tune-STRATEGY-POINT.*).\n\n| strategy |",
                                  (unsigned long long)p->c->seed);
    for (int g = 0; g < G && len < n; g++)
        len += (size_t)snprintf(dst + len, n - len, "%s%s%s%s%s |", t->n_lr ? " lr " : "",
                                t->n_lr ? t->lr[g / nm] : "", t->n_lr && t->n_m ? "," : "",
                                t->n_m ? " momentum " : "", t->n_m ? t->m[g % nm] : "");
    if (len < n) len += (size_t)snprintf(dst + len, n - len, "\n|---|");
    for (int g = 0; g < G && len < n; g++) len += (size_t)snprintf(dst + len, n - len, "---:|");
    for (int s = 0; s < p->n_strat && len < n; s++) {
        len += (size_t)snprintf(dst + len, n - len, "\n| %s |", p->strat[s]);
        for (int g = 0; g < G && len < n; g++) {
            const double a = t->acc[s][g];
            const char *b = g == t->chosen[s] && isfinite(a) ? "**" : "";
            if (isfinite(a)) len += (size_t)snprintf(dst + len, n - len, " %s%.4f%s |", b, a, b);
            else len += (size_t)snprintf(dst + len, n - len, " - |");
        }
    }
    if (len < n) snprintf(dst + len, n - len, "\n");
}

static void write_output(FILE *f, int which, const report *r) {
    const cmp_plan *p = r->p;
    int virt = p->c->clock == HET_CLOCK_VIRTUAL;
    switch (which) {
    case 0:
        fprintf(f, "# hetrain compare\n\n%s.\n\n", r->title);
        write_table(f, p, r->a, r->why);
        if (r->paired[0]) fprintf(f, "\n%s", r->paired);
        if (r->tuned[0]) fprintf(f, "\n%s", r->tuned);
        fprintf(f, "\n%stime/epoch: %s, mean over "
                "epochs; time to %.4g acc: %s of the first test accuracy that reaches it "
                "(-: never), read at each epoch's end%s; samples/s: training throughput, mean over epochs; "
                "sent/rank/epoch: payload bytes each rank sent, mean over ranks and epochs; "
                "waiting: wait_s / (compute_s + comm_s + wait_s + delay_s), over ranks and "
                "epochs; link over capacity (virtual clock): the load the network model put on "
                "the worst node link beyond its bandwidth, as a share of the epoch (worst "
                "epoch; 0 on a link the model treats physically: a figure above 0 flatters "
                "that run's time).%s\n\n![test accuracy against time](accuracy.svg)\n\n"
                "![time split](split.svg)\n\nRuns (metrics and output beside this file):\n\n%s",
                cli_compare_smpi() ? "Clock: SimGrid's (--simulator smpi: the runs under "
                "smpirun on the platform file, compute charged from the cost table). " : virt ?
                "Clock: virtual (--clock virtual: every rank's own clock, compute costed "
                "by CPU time or a cost table x slowdown, communication by the network model; "
                "nothing slept). " : "", virt ? "virtual time of an epoch's training" :
                "wall time of an epoch (training and evaluation)", p->target, virt ?
                "vtime_s" : "elapsed_s", r->every, p->seeds > 1 ? " a ± b: mean ± spread (max - min) over seeds."
                : "", r->runs);
        break;
    case 1: write_csv(f, p, r->a, r->why); break;
    case 2:
        cli_svg_accuracy(f, r->series, p->n_strat, p->target,
                         cli_compare_smpi() ? "SimGrid's simulated time"
                         : virt             ? "virtual time (training)"
                                            : "wall time",
                         r->title);
        break;
    default: cli_svg_split(f, r->series, p->n_strat, r->title);
    }
}

/* Writes OUT/name durably (core/outfile.c: a temporary file, fsync, rename). */
static int write_file(const char *name, int which, const report *r) {
    char path[HET_PATH_LEN];
    cli_compare_join(path, sizeof path, r->p->out, name);
    het_outfile o;
    if (het_outfile_open(&o, path, "compare output") != HET_OK) {
        char msg[HET_PATH_LEN + 128];
        snprintf(msg, sizeof msg, "%s", het_error_msg()); /* "PATH.tmp: cannot create: ..." */
        return het_error_set(HET_EIO, "hetrain compare: %s", msg);
    }
    write_output(o.f, which, r);
    if (het_outfile_commit(&o) != HET_OK)
        return het_error_set(HET_EIO, "hetrain compare: cannot write %s", path);
    return HET_OK;
}

/* Writes the tables and plots of the runs that finished (a failed run, why[i] not empty, has no
 * figures: its strategy's cells count the seeds that have them, and the reasons follow the
 * table), prints the table. */
int cli_compare_summarize(const cmp_plan *p, cli_jsonl_run *runs, const run_why *why) {
    int S = p->n_strat, K = p->seeds, E = p->c->epochs, st = HET_OK;
    report r = {p, calloc((size_t)S, sizeof *r.a), calloc((size_t)S, sizeof *r.series), why, "",
                "", "", "", ""};
    /* x then y of every strategy's curve (its test accuracies: epoch ends and --eval-every
     * points, as many as every seed has); the figures of every seed, figure by figure */
    int P = E;
    for (int i = 0; i < S * K; i++) P = !why[i][0] && runs[i].n_points > P ? runs[i].n_points : P;
    double *xy = calloc((size_t)S * P * 2, sizeof(double)), *v = calloc((size_t)K * N_FIG,
                                                                          sizeof(double));
    double *all = malloc((size_t)S * K * N_FIG * sizeof(double)); /* every run's figures */
    if (!r.a || !r.series || !xy || !v || !all) st = het_error_set(HET_ENOMEM, "out of memory");
    for (size_t i = 0; all && i < (size_t)S * K * N_FIG; i++) all[i] = NAN;
    for (int s = 0; !st && s < S; s++) {
        double share[4], sum[4] = {0, 0, 0, 0}, fig[N_FIG];
        double *x = xy + (size_t)2 * s * P, *y = x + P;
        int split = 1, ok = 0, np = P;
        for (int k = 0; k < K; k++) ok += !why[s * K + k][0];
        for (int k = 0; k < K; k++)
            if (!why[s * K + k][0] && runs[s * K + k].n_points < np) np = runs[s * K + k].n_points;
        for (int k = 0; k < K; k++) {
            const cli_jsonl_run *run = &runs[s * K + k];
            if (why[s * K + k][0]) {
                for (int f = 0; f < N_FIG; f++) v[(size_t)f * K + k] = NAN;
                continue;
            }
            run_figures(run, p->target, fig, share);
            for (int f = 0; f < N_FIG; f++) v[(size_t)f * K + k] = fig[f];
            memcpy(all + ((size_t)s * K + k) * N_FIG, fig, sizeof fig);
            split &= share[0] >= 0;
            for (int j = 0; j < 4; j++) sum[j] += share[j] / ok;
            for (int i = 0; i < np; i++) {
                x[i] += run->points[i].t / ok;
                y[i] += run->points[i].acc / ok;
            }
        }
        split &= ok > 0;
        r.series[s] = (cli_series){p->strat[s], ok ? np : 0, x, y, {-1, -1, -1, -1}};
        for (int j = 0; split && j < 4; j++) r.series[s].share[j] = sum[j];
        for (int f = 0; f < N_FIG; f++) r.a[s][f] = aggregate(v + (size_t)f * K, K);
    }
    const het_train_config *c = p->c;
    if (K > 1)
        snprintf(r.title, sizeof r.title, "%s on %s, %d ranks, %d epochs, mean over seeds "
                 "%llu-%llu", c->model, c->data, p->ranks, c->epochs,
                 (unsigned long long)c->seed, (unsigned long long)(c->seed + (uint64_t)K - 1));
    else
        snprintf(r.title, sizeof r.title, "%s on %s, %d ranks, %d epochs, seed %llu", c->model,
                 c->data, p->ranks, c->epochs, (unsigned long long)c->seed);
    for (int i = 0; !st && i < S * K; i++) {
        size_t len = strlen(r.runs);
        snprintf(r.runs + len, sizeof r.runs - len, "- `%s`%s%s\n", runs[i].command,
                 why[i][0] ? ": **failed**, " : "", why[i]);
    }
    r.why = why;
    if (!st && p->baseline >= 0) paired_table(r.paired, sizeof r.paired, p, all);
    if (!st && (p->tune.n_lr || p->tune.n_m)) tune_table(r.tuned, sizeof r.tuned, p);
    if (p->c->eval_every > 0) { /* the strategies that stop at a step take it (compare_sopt.c) */
        char no[128] = "";
        for (int s = 0; s < S; s++) {
            const het_strategy_ops *o = het_strategy_find(p->strat[s]);
            if (o && !het_strategy_evals_inside(o))
                snprintf(no + strlen(no), sizeof no - strlen(no), "%s%s", no[0] ? ", " : "",
                         p->strat[s]);
        }
        snprintf(r.every, sizeof r.every, " and every %d steps (--eval-every%s%s)",
                 p->c->eval_every, no[0] ? "; at epoch ends only: " : "", no);
    }
    for (int i = 0; !st && i < 4; i++) st = write_file(cli_compare_outputs[i], i, &r);
    if (!st && cli_job_pending()) { /* signals wait meanwhile (cli_compare): no table, then */
        char path[HET_PATH_LEN];
        for (int i = 0; i < 4; i++) {
            cli_compare_join(path, sizeof path, p->out, cli_compare_outputs[i]);
            remove(path);
        }
        st = HET_EIO; /* the caller reports the signal */
    }
    if (!st) {
        printf("\n%s\n\n", r.title);
        write_table(stdout, p, r.a, why);
        if (r.paired[0]) printf("\n%s", r.paired);
        if (r.tuned[0]) printf("\n%s", r.tuned);
        printf("\n%s: compare.md, compare.csv; plots accuracy.svg (test accuracy against "
               "time%s), split.svg (time split); the runs' metrics (*.jsonl) and output (*.log)\n",
               p->out, K > 1 ? ", mean over seeds" : "");
    }
    free(r.a);
    free(r.series);
    free(xy);
    free(v);
    free(all);
    return st;
}
