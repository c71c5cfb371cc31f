/* hetrain compare: the strategies side by side on one (emulated or real) cluster.
 *
 * DESIGN. compare trains nothing itself. For each strategy S and seed K it launches
 *     LAUNCHER -np P <this hetrain> train <the common options> --strategy S --seed K
 *              --metrics OUT/S-seedK.jsonl --progress off        (output: OUT/S-seedK.log)
 * one run at a time (side by side they would slow each other down and distort the times they
 * measure) and waits for it; the first run that fails stops the comparison with one line naming
 * the strategy and the command. Only when every run succeeded are the metrics read back (a
 * strict reader of the JSON hetrain writes: one object per line, jsonl.c's grammar is JSON's)
 * and OUT/compare.md, OUT/compare.csv, OUT/accuracy.svg and OUT/split.svg written, each to a
 * temporary file renamed into place; those of an earlier comparison are removed first, so a
 * failed comparison leaves no table behind. The JSONL and the logs stay beside them.
 * Launcher: --launcher, else $HET_MPIEXEC, else "mpirun --oversubscribe", split at spaces; the
 * rank count goes where that launcher takes it (compare_launch.c: in place of "{n}", else
 * "-n P" after srun, "-np P" after others). Inside a Slurm allocation (salloc, sbatch) the runs are its job steps. Strategies: --strategies, else
 * every registered strategy whose needs (strategy_needs) the options meet: daso's emulated
 * nodes (--ranks-per-node) must divide the ranks into 2 or more; without them daso takes the
 * real nodes the launcher gives, so it runs when named, and by default only in an allocation
 * of 2 or more nodes (SLURM_JOB_NUM_NODES). Seeds: --seed, --seed + 1, ... (--seeds N of them).
 * compare runs without MPI (main.c) and refuses to run under a launcher. --out is made (as
 * mkdir -p) and checked to be a writable folder before anything runs.
 * Signals: SIGINT / SIGTERM reach the run in progress, which ends with all its processes
 * (job.c); compare then prints one line naming the run it stopped (strategy, seed, metrics
 * and output files), writes no table and exits 128 + the signal, as `hetrain train` does.
 * While the tables are written the signals wait; one that came meanwhile removes them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/outfile.h"
#include "hetero/hetero.h"
#include "strategy/strategy.h"

#define CMP_MAX_STRAT 16
#define CMP_KILL_AFTER_S 10.0 /* after a signal: the launcher's time to end before SIGKILL */

/* What a strategy needs of the common options beyond what `train` checks. A strategy that is
 * not listed needs nothing; a new one with needs is one line here. Unmet needs: a strategy
 * named in --strategies is a usage error; one chosen by default is skipped with a note. */
enum { NEEDS_EQUAL_NODES = 1 }; /* --ranks-per-node G > 0 that divides the ranks into >= 2,
                                    or (G = 0) real nodes */
static const struct { const char *name; int needs; } strategy_needs[] = {
    {"daso", NEEDS_EQUAL_NODES},
};

static struct {
    char strategies[256]; /* "" = every registered one */
    int ranks;            /* 0 = one per --slowdown factor, else 2 */
    int seeds;
    double target;
    char out[HET_PATH_LEN - 128];
    char launcher[512];   /* "" = $HET_MPIEXEC or CLI_COMPARE_DEFAULT_LAUNCHER */
    char **rest;          /* the options forwarded to train */
    int n_rest;
} g_opt = {"", 0, 1, 0.8, "compare", "", NULL, 0};


/* Records the usage error "hetrain compare: ..." and returns CLI_USAGE. */
static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    het_error_set(HET_EINVAL, "hetrain compare: %s", msg);
    return CLI_USAGE;
}

static int parse_int(const char *key, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno) return usage("--%s: '%s' is not an integer", key, v);
    if (x < lo || x > hi) return usage("--%s: %s is out of range", key, v);
    *out = (int)x;
    return CLI_OK;
}

static int set_text(const char *key, const char *v, char *dst, size_t n) {
    if (!*v) return usage("--%s: empty value", key);
    if (strlen(v) >= n) return usage("--%s: '%s' is too long", key, v);
    snprintf(dst, n, "%s", v);
    return CLI_OK;
}

int cli_compare_options(int argc, char **argv, int *n_rest) {
    static const char *const own[] = {"strategies", "ranks", "seeds", "target-acc", "out",
                                      "launcher", "simulator"};
    int kept = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        int k = cli_own_option(argc, argv, &i, own, (int)(sizeof own / sizeof own[0]), &v);
        if (k < 0) {
            argv[kept++] = argv[i];
            continue;
        }
        if (!v) return usage("--%s: missing value", own[k]);
        int st = CLI_OK;
        switch (k) {
        case 0: st = set_text(own[k], v, g_opt.strategies, sizeof g_opt.strategies); break;
        case 1: st = parse_int(own[k], v, 1, 4096, &g_opt.ranks); break;
        case 2: st = parse_int(own[k], v, 1, 1000, &g_opt.seeds); break;
        case 3: {
            char *end;
            g_opt.target = strtod(v, &end);
            if (end == v || *end || !(g_opt.target > 0 && g_opt.target <= 1))
                st = usage("--%s: '%s' is not a number in (0, 1]", own[k], v);
            break;
        }
        case 4: st = set_text(own[k], v, g_opt.out, sizeof g_opt.out); break;
        case 5: st = set_text(own[k], v, g_opt.launcher, sizeof g_opt.launcher); break;
        default: st = cli_compare_set_simulator(v); break;
        }
        if (st) return st;
    }
    g_opt.rest = argv;
    g_opt.n_rest = kept;
    *n_rest = kept;
    return CLI_OK;
}

/* ------------------------------------------------------------------ the plan and the runs */

typedef struct plan {
    const het_train_config *c;
    int ranks, n_strat;
    const char *strat[CMP_MAX_STRAT];
    cli_launcher launcher; /* its words, with the rank count (compare_launch.c) */
    char self[PATH_MAX];
    char skipped[512]; /* a note on the strategies left out by default, "" for none */
} plan;

static int needs_of(const char *name) {
    for (size_t i = 0; i < sizeof strategy_needs / sizeof strategy_needs[0]; i++)
        if (strcmp(strategy_needs[i].name, name) == 0) return strategy_needs[i].needs;
    return 0;
}

/* Why `name` cannot run with these options (a static string), or NULL; `named`: it was named
 * in --strategies (then daso takes the real nodes without --ranks-per-node). */
static const char *unmet(const plan *p, const char *name, int named) {
    int g = p->c->ranks_per_node;
    if (!(needs_of(name) & NEEDS_EQUAL_NODES)) return NULL;
    if (g > 0 && (p->ranks % g || p->ranks / g < 2))
        return "needs --ranks-per-node G dividing --ranks into 2 or more equal nodes";
    if (g == 0 && !named && cli_compare_alloc_nodes() < 2)
        return "needs 2 or more nodes: --ranks-per-node G to emulate them, or name it in "
               "--strategies to run it on the nodes the launcher gives";
    return NULL;
}

static int choose_strategies(plan *p) {
    char list[256];
    if (!g_opt.strategies[0]) {
        for (const char *const *n = het_strategy_names(); *n && p->n_strat < CMP_MAX_STRAT; n++) {
            const char *why = unmet(p, *n, 0);
            size_t len = strlen(p->skipped);
            if (why) snprintf(p->skipped + len, sizeof p->skipped - len, "compare: skipping "
                              "%s: it %s\n", *n, why);
            else p->strat[p->n_strat++] = *n;
        }
        return p->n_strat ? CLI_OK : usage("no strategy can run with these options");
    }
    snprintf(list, sizeof list, "%s", g_opt.strategies);
    for (char *save = NULL, *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        const het_strategy_ops *ops = het_strategy_find(s);
        if (!ops) {
            char known[256] = "";
            for (const char *const *n = het_strategy_names(); *n; n++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         known[0] ? ", " : "", *n);
            return usage("--strategies: unknown strategy '%s', expected some of: %s", s, known);
        }
        for (int i = 0; i < p->n_strat; i++)
            if (p->strat[i] == ops->name) return usage("--strategies: %s is named twice", s);
        if (p->n_strat == CMP_MAX_STRAT) return usage("--strategies: too many");
        const char *why = unmet(p, ops->name, 1);
        if (why) return usage("--strategies: %s %s", ops->name, why);
        p->strat[p->n_strat++] = ops->name;
    }
    return p->n_strat ? CLI_OK : usage("--strategies: no strategy named");
}

static int make_plan(plan *p, const het_train_config *c) {
    memset(p, 0, sizeof *p);
    p->c = c;
    if (cli_compare_under_launcher())
        return usage("run compare directly, not under mpirun or srun: it launches its own "
                     "runs (see --launcher)");
    int nf = c->slowdown[0] ? het_slowdown_parse(c->slowdown, NULL, 0) : 0;
    p->ranks = g_opt.ranks ? g_opt.ranks : nf > 0 ? nf : 2;
    if (nf > 0 && nf != p->ranks)
        return usage("--slowdown: %d factors for --ranks %d, expected one per rank", nf,
                     p->ranks);
    int st = choose_strategies(p);
    if (st) return st;
    const char *l = g_opt.launcher[0] ? g_opt.launcher : getenv("HET_MPIEXEC");
    if (cli_compare_launcher(&p->launcher, l && *l ? l : CLI_COMPARE_DEFAULT_LAUNCHER, p->ranks))
        return CLI_USAGE;
    ssize_t n = readlink("/proc/self/exe", p->self, sizeof p->self - 1);
    if (n <= 0) return het_error_set(HET_EIO, "hetrain compare: cannot find this program "
                                     "(/proc/self/exe): %s", strerror(errno));
    p->self[n] = '\0';
    if (cli_compare_smpi() && cli_compare_smpi_launcher(&p->launcher, c, p->ranks,
                                                        g_opt.launcher[0], p->self,
                                                        sizeof p->self))
        return CLI_USAGE;
    return CLI_OK;
}

/* dir/name; --out is short enough (HET_PATH_LEN - 128) that it always fits */
static void join(char *dst, size_t n, const char *dir, const char *name) {
    if ((size_t)snprintf(dst, n, "%s/%s", dir, name) >= n) dst[0] = '\0';
}

static const char *signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

/* One run: argv under the launcher (cli_job_run), stdout and stderr to `log`; HET_OK if it
 * exits 0, or when a signal came (cli_signals_caught; *killed: the launcher was killed after
 * CMP_KILL_AFTER_S). */
static int run_one(const plan *p, char *const *argv, const char *strat, uint64_t seed,
                   const char *log, int *killed) {
    *killed = 0;
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return het_error_set(HET_EIO, "hetrain compare: --out %s: cannot create %s: %s",
                             g_opt.out, log, strerror(errno));
    int status = 0, e = cli_job_run(argv, fd, CMP_KILL_AFTER_S, &status, killed);
    close(fd);
    if (cli_signals_caught()) return HET_OK; /* the caller says what it stopped */
    char cmd[4096], why[600] = "", tail[320];
    cli_job_shell_line(cmd, sizeof cmd, argv);
    if (e) snprintf(why, sizeof why, "cannot run %s: %s", p->launcher.words[0], strerror(e));
    else if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
    else if (WEXITSTATUS(status))
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
    if (!why[0]) return HET_OK;
    cli_job_last_line(log, tail, sizeof tail);
    return het_error_set(HET_EIO, "hetrain compare: strategy %s (seed %llu) failed, %s: %s "
                         "(output in %s%s%s%s)", strat, (unsigned long long)seed, why, cmd, log,
                         tail[0] ? ": \"" : "", tail, tail[0] ? "\"" : "");
}

/* ------------------------------------------------------------------ figures and tables */

typedef struct agg {
    double mean, spread; /* over the seeds with a value; spread = max - min */
    int n;               /* seeds with a value (not NaN) */
} agg;

enum { F_EPOCH, F_TARGET, F_ACC, F_SPS, F_NODE, F_CROSS, F_WAIT, N_FIG };

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
    double sps = 0, bytes[2] = {0, 0}, t[4] = {0, 0, 0, 0};
    fig[F_TARGET] = NAN;
    for (int e = 0; e < n; e++) {
        const cli_jsonl_epoch *ep = &r->epochs[e];
        sps += ep->samples_per_s;
        if (isnan(fig[F_TARGET]) && ep->test_acc >= target) fig[F_TARGET] = time_of(ep);
        split &= !isnan(ep->t[0]);
        for (int k = 0; k < 4; k++) t[k] += ep->t[k];
        for (int k = 0; k < 2; k++) bytes[k] += ep->bytes[k];
    }
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
    static const char *const fmt[N_FIG] = {"", "", "%.4f", "%.0f", "", "", "%.1f %%"};
    double scale = fig == F_WAIT ? 100 : 1;
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

/* A run that failed: why[i] holds its one-line reason ("" for a run that finished). */
typedef char run_why[1024];

/* Runs of strategy s that failed. */
static int failed_of(const run_why *why, int s) {
    int n = 0;
    for (int k = 0; k < g_opt.seeds; k++) n += why[s * g_opt.seeds + k][0] != 0;
    return n;
}

static void write_table(FILE *f, const plan *p, agg (*a)[N_FIG], const run_why *why) {
    const char *clk = p->c->clock == HET_CLOCK_VIRTUAL ? "virtual s" : "s";
    fprintf(f, "| strategy | ranks | time/epoch (%s) | time to %.4g acc (%s) | final test acc | "
            "samples/s | sent/rank/epoch node-local | sent/rank/epoch cross-node | waiting |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", clk, g_opt.target, clk);
    for (int s = 0; s < p->n_strat; s++) {
        int nf = failed_of(why, s);
        if (!nf) fprintf(f, "| %s | %d", p->strat[s], p->ranks);
        else if (nf == g_opt.seeds) fprintf(f, "| %s (failed) | %d", p->strat[s], p->ranks);
        else fprintf(f, "| %s (%d/%d seeds failed) | %d", p->strat[s], nf, g_opt.seeds, p->ranks);
        for (int k = 0; k < N_FIG; k++) {
            char c[96];
            cell(c, sizeof c, k, a[s][k], g_opt.seeds);
            fprintf(f, " | %s", c);
        }
        fprintf(f, " |\n");
    }
}

static void write_csv(FILE *f, const plan *p, agg (*a)[N_FIG], const run_why *why) {
    static const char *const col[N_FIG] = {"epoch_s", "time_to_target_s", "final_test_acc",
        "samples_per_s", "bytes_node_per_rank_epoch", "bytes_cross_per_rank_epoch",
        "wait_share"};
    fprintf(f, "strategy,ranks,seeds,target_acc,target_reached_seeds");
    for (int k = 0; k < N_FIG; k++) fprintf(f, ",%s,%s_spread", col[k], col[k]);
    fprintf(f, ",failed_seeds\n");
    for (int s = 0; s < p->n_strat; s++) {
        fprintf(f, "%s,%d,%d,%.9g,%d", p->strat[s], p->ranks, g_opt.seeds, g_opt.target,
                a[s][F_TARGET].n);
        for (int k = 0; k < N_FIG; k++) /* empty fields: no value */
            if (a[s][k].n) fprintf(f, ",%.9g,%.9g", a[s][k].mean, a[s][k].spread);
            else fprintf(f, ",,");
        fprintf(f, ",%d\n", failed_of(why, s));
    }
}

/* What compare writes besides the runs' own files; removed before the runs. */
static const char *const outputs[] = {"compare.md", "compare.csv", "accuracy.svg", "split.svg"};

typedef struct report {
    const plan *p;
    agg (*a)[N_FIG];
    cli_series *series;
    const run_why *why; /* per run: "" or why it failed */
    char title[512], runs[16384];
} report;

static void write_output(FILE *f, int which, const report *r) {
    const plan *p = r->p;
    int virt = p->c->clock == HET_CLOCK_VIRTUAL;
    switch (which) {
    case 0:
        fprintf(f, "# hetrain compare\n\n%s.\n\n", r->title);
        write_table(f, p, r->a, r->why);
        fprintf(f, "\n%stime/epoch: %s, mean over "
                "epochs; time to %.4g acc: %s of the first epoch whose test accuracy "
                "reaches it (-: never); samples/s: training throughput, mean over epochs; "
                "sent/rank/epoch: payload bytes each rank sent, mean over ranks and epochs; "
                "waiting: wait_s / (compute_s + comm_s + wait_s + delay_s), over ranks and "
                "epochs.%s\n\n![test accuracy against time](accuracy.svg)\n\n"
                "![time split](split.svg)\n\nRuns (metrics and output beside this file):\n\n%s",
                cli_compare_smpi() ? "Clock: SimGrid's (--simulator smpi: the runs under "
                "smpirun on the platform file, compute charged from the cost table). " : virt ?
                "Clock: virtual (--clock virtual: every rank's own clock, compute costed "
                "by CPU time or a cost table x slowdown, communication by the network model; "
                "nothing slept). " : "", virt ? "virtual time of an epoch's training" :
                "wall time of an epoch (training and evaluation)", g_opt.target, virt ?
                "vtime_s" : "elapsed_s", g_opt.seeds > 1 ? " a ± b: mean ± spread (max - min) over seeds."
                : "", r->runs);
        break;
    case 1: write_csv(f, p, r->a, r->why); break;
    case 2:
        cli_svg_accuracy(f, r->series, p->n_strat, g_opt.target,
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
    join(path, sizeof path, g_opt.out, name);
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
static int summarize(const plan *p, cli_jsonl_run *runs, const run_why *why) {
    int S = p->n_strat, K = g_opt.seeds, E = p->c->epochs, st = HET_OK;
    report r = {p, calloc((size_t)S, sizeof *r.a), calloc((size_t)S, sizeof *r.series), why, "",
                ""};
    /* x then y of every strategy's curve; the figures of every seed, figure by figure */
    double *xy = calloc((size_t)S * E * 2, sizeof(double)), *v = calloc((size_t)K * N_FIG,
                                                                          sizeof(double));
    if (!r.a || !r.series || !xy || !v) st = het_error_set(HET_ENOMEM, "out of memory");
    for (int s = 0; !st && s < S; s++) {
        double share[4], sum[4] = {0, 0, 0, 0}, fig[N_FIG];
        double *x = xy + (size_t)2 * s * E, *y = x + E;
        int split = 1, ok = 0;
        for (int k = 0; k < K; k++) ok += !why[s * K + k][0];
        for (int k = 0; k < K; k++) {
            const cli_jsonl_run *run = &runs[s * K + k];
            if (why[s * K + k][0]) {
                for (int f = 0; f < N_FIG; f++) v[(size_t)f * K + k] = NAN;
                continue;
            }
            run_figures(run, g_opt.target, fig, share);
            for (int f = 0; f < N_FIG; f++) v[(size_t)f * K + k] = fig[f];
            split &= share[0] >= 0;
            for (int j = 0; j < 4; j++) sum[j] += share[j] / ok;
            for (int e = 0; e < E; e++) {
                x[e] += time_of(&run->epochs[e]) / ok;
                y[e] += run->epochs[e].test_acc / ok;
            }
        }
        split &= ok > 0;
        r.series[s] = (cli_series){p->strat[s], ok ? E : 0, x, y, {-1, -1, -1, -1}};
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
    for (int i = 0; !st && i < 4; i++) st = write_file(outputs[i], i, &r);
    if (!st && cli_job_pending()) { /* signals wait meanwhile (cli_compare): no table, then */
        char path[HET_PATH_LEN];
        for (int i = 0; i < 4; i++) {
            join(path, sizeof path, g_opt.out, outputs[i]);
            remove(path);
        }
        st = HET_EIO; /* the caller reports the signal */
    }
    if (!st) {
        printf("\n%s\n\n", r.title);
        write_table(stdout, p, r.a, why);
        printf("\n%s: compare.md, compare.csv; plots accuracy.svg (test accuracy against "
               "time%s), split.svg (time split); the runs' metrics (*.jsonl) and output (*.log)\n",
               g_opt.out, K > 1 ? ", mean over seeds" : "");
    }
    free(r.a);
    free(r.series);
    free(xy);
    free(v);
    return st;
}

/* Nothing compare writes (tables, plots, their temporaries, each run's metrics and log) may be
 * an input of the runs (het_train_check_outputs). CLI_USAGE with the line. */
static int check_outputs(const plan *p, const het_train_config *c) {
    int n = 0, n_runs = p->n_strat * g_opt.seeds;
    char (*path)[HET_PATH_LEN] = calloc((size_t)(8 + 2 * n_runs), HET_PATH_LEN);
    const char **list = calloc((size_t)(8 + 2 * n_runs), sizeof *list);
    int st = path && list ? HET_OK : het_error_set(HET_ENOMEM, "out of memory");
    for (int i = 0; !st && i < 8 + 2 * n_runs; i++, n++) {
        char name[96];
        if (i < 8) snprintf(name, sizeof name, "%s%s", outputs[i / 2], i % 2 ? ".tmp" : "");
        else snprintf(name, sizeof name, "%s-seed%llu.%s", p->strat[(i - 8) / 2 / g_opt.seeds],
                      (unsigned long long)(c->seed + (uint64_t)((i - 8) / 2 % g_opt.seeds)),
                      i % 2 ? "log" : "jsonl");
        join(path[n], HET_PATH_LEN, g_opt.out, name);
        list[n] = path[n];
    }
    if (!st) st = het_train_check_outputs(c, "out", list, n);
    free(path);
    free(list);
    return st == HET_EINVAL ? usage("%s", het_error_msg()) : st;
}

int cli_compare(const het_train_config *c) {
    plan p;
    int st = make_plan(&p, c); /* CLI_USAGE or a het_status */
    if (!st && cli_compare_check_sopts(c, p.strat, p.n_strat)) st = CLI_USAGE;
    if (!st) st = check_outputs(&p, c);
    if (st || (st = cli_job_out_dir(g_opt.out)) || (st = cli_signals_forward())) {
        fprintf(stderr, "%s\n", het_error_msg());
        return st == CLI_USAGE ? CLI_USAGE : CLI_FAIL;
    }
    char path[HET_PATH_LEN];
    for (int i = 0; i < 4; i++) {
        join(path, sizeof path, g_opt.out, outputs[i]);
        remove(path);
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0); /* Open MPI refuses root without them */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    int K = g_opt.seeds, n_runs = p.n_strat * K;
    cli_jsonl_run *runs = calloc((size_t)n_runs, sizeof *runs);
    run_why *why = calloc((size_t)n_runs, sizeof *why);
    char **argv = calloc((size_t)(p.launcher.n_words + g_opt.n_rest + 16), sizeof *argv);
    if (!runs || !why || !argv) st = het_error_set(HET_ENOMEM, "out of memory");
    printf("%scompare: %d strateg%s x %d seed%s on %d ranks, output in %s/\n", p.skipped,
           p.n_strat, p.n_strat == 1 ? "y" : "ies", K, K == 1 ? "" : "s", p.ranks, g_opt.out);
    int done = 0, killed = 0, n_failed = 0;
    char stopped[2 * HET_PATH_LEN + 256] = ""; /* the run a signal stopped */
    for (int i = 0; !st && !cli_signals_caught() && i < n_runs; i++) {
        const char *s = p.strat[i / K];
        uint64_t seed = c->seed + (uint64_t)(i % K);
        char seedbuf[24], name[80], metrics[HET_PATH_LEN], log[HET_PATH_LEN];
        snprintf(seedbuf, sizeof seedbuf, "%llu", (unsigned long long)seed);
        snprintf(name, sizeof name, "%s-seed%s.jsonl", s, seedbuf);
        join(metrics, sizeof metrics, g_opt.out, name);
        snprintf(name, sizeof name, "%s-seed%s.log", s, seedbuf);
        join(log, sizeof log, g_opt.out, name);
        int n = 0;
        for (int w = 0; w < p.launcher.n_words; w++) argv[n++] = p.launcher.words[w];
        argv[n++] = p.self;
        argv[n++] = "train";
        n += cli_compare_run_words(g_opt.rest, g_opt.n_rest, s, argv + n);
        char *tail[] = {"--strategy", (char *)s, "--seed", seedbuf, "--metrics", metrics,
                        "--progress", "off", NULL};
        memcpy(argv + n, tail, sizeof tail);
        printf("compare: run %d/%d: %s, seed %s ... ", i + 1, n_runs, s, seedbuf);
        fflush(stdout);
        double t0 = het_now();
        remove(metrics);
        st = run_one(&p, argv, s, seed, log, &killed);
        if (!st && cli_signals_caught()) {
            char how[48] = "";
            if (killed) snprintf(how, sizeof how, "; killed after %g s", CMP_KILL_AFTER_S);
            printf("interrupted\n");
            snprintf(stopped, sizeof stopped, ": stopped run %d/%d (strategy %s, seed %s; "
                     "metrics %s, output %s%s)", i + 1, n_runs, s, seedbuf, metrics, log, how);
            break;
        }
        if (!st) st = cli_jsonl_read(&runs[i], metrics, p.ranks, c->epochs);
        cli_job_shell_line(runs[i].command, sizeof runs[i].command, argv);
        if (st == HET_ENOMEM) break;
        if (st) { /* the others still run: the table marks this one, the exit status says so */
            snprintf(why[i], sizeof *why, "%s", het_error_msg());
            cli_jsonl_free(&runs[i]);
            printf("failed\n");
            n_failed++;
            st = HET_OK;
            continue;
        }
        printf("%.1f s, test_acc %.4f\n", het_now() - t0,
               runs[i].epochs[c->epochs - 1].test_acc);
        done++;
    }
    const int all_failed = n_failed == n_runs; /* nothing to compare: no table */
    /* the tables with SIGINT / SIGTERM held back: one that comes meanwhile removes them */
    sigset_t old;
    cli_job_hold(1, &old);
    int complete = !st && !all_failed && !cli_signals_caught() &&
                   (st = summarize(&p, runs, (const run_why *)why)) == HET_OK;
    cli_job_hold(0, &old); /* a signal held back is handled here */
    int sig = complete ? 0 : cli_signals_caught(); /* one after the tables is too late */
    for (int i = 0; runs && i < n_runs; i++) cli_jsonl_free(&runs[i]);
    free(runs);
    free(argv);
    fflush(stdout);
    /* each failed run's one line; with some runs finished the tables were written first */
    for (int i = 0; why && !sig && i < n_runs; i++)
        if (why[i][0]) fprintf(stderr, "%s\n", why[i]);
    free(why);
    if (sig) {
        if (!stopped[0]) snprintf(stopped, sizeof stopped, " after %d of %d runs", done, n_runs);
        fprintf(stderr, "hetrain compare: interrupted by %s%s; no table written\n",
                signal_name(sig), stopped);
        return 128 + sig;
    }
    if (st) fprintf(stderr, "%s\n", het_error_msg());
    return st || n_failed ? CLI_FAIL : CLI_OK;
}
