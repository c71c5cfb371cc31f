/* hetrain compare: the strategies side by side on one (emulated or real) cluster.
 *
 * DESIGN. compare trains nothing itself. For each strategy S and seed K it launches
 *     LAUNCHER -np P <this hetrain> train <the common options> --strategy S --seed K
 *              --metrics OUT/S-seedK.jsonl --progress off        (output: OUT/S-seedK.log)
 * one run at a time (side by side they would slow each other down and distort the times they
 * measure) and waits for it, then reads its metrics back (a strict reader of the JSON hetrain
 * writes: one object per line, jsonl.c's grammar is JSON's). A run that fails (its exit status,
 * or metrics that do not read) does not stop the others: its one line, naming the strategy and
 * the command, is kept; compare_report.c then writes OUT/compare.md, OUT/compare.csv,
 * OUT/accuracy.svg and OUT/split.svg (each durably, core/outfile.c) with the failed runs marked,
 * compare prints the kept lines on stderr and exits 1. Those of an earlier comparison are
 * removed first, so a comparison whose every run failed leaves no table behind. The JSONL and
 * the logs stay beside them.
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

#include "cli/compare.h"
#include "core/outfile.h"
#include "hetero/hetero.h"
#include "strategy/strategy.h"

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
    char baseline[32];    /* "" = none */
    cmp_tune tune;        /* the tuning grid's options */
    char set[CMP_MAX_SET][160]; /* --set S:KEY=VALUE, as given */
    int n_set;
    char **rest;          /* the options forwarded to train */
    int n_rest;
} g_opt = {.ranks = 0, .seeds = 1, .target = 0.8, .out = "compare"};


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
                                      "launcher", "simulator", "baseline", "tune-lr",
                                      "tune-momentum", "tune-epochs", "tune-holdout", "set"};
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
        case 6: st = cli_compare_set_simulator(v); break;
        case 7: st = set_text(own[k], v, g_opt.baseline, sizeof g_opt.baseline); break;
        case 8: st = cli_compare_tune_list(&g_opt.tune, 0, v); break;
        case 9: st = cli_compare_tune_list(&g_opt.tune, 1, v); break;
        case 10: st = parse_int(own[k], v, 1, 100000, &g_opt.tune.epochs); break;
        case 12:
            if (g_opt.n_set == CMP_MAX_SET) st = usage("--set: at most %d", CMP_MAX_SET);
            else st = set_text(own[k], v, g_opt.set[g_opt.n_set++], sizeof g_opt.set[0]);
            break;
        default: {
            int h = 0;
            st = parse_int(own[k], v, 1, 1 << 30, &h);
            g_opt.tune.holdout = h;
            break;
        }
        }
        if (st) return st;
    }
    g_opt.rest = argv;
    g_opt.n_rest = kept;
    *n_rest = kept;
    return CLI_OK;
}

/* ------------------------------------------------------------------ the plan and the runs */

static int needs_of(const char *name) {
    for (size_t i = 0; i < sizeof strategy_needs / sizeof strategy_needs[0]; i++)
        if (strcmp(strategy_needs[i].name, name) == 0) return strategy_needs[i].needs;
    return 0;
}

/* Why `name` cannot run with these options (a static string), or NULL; `named`: it was named
 * in --strategies (then daso takes the real nodes without --ranks-per-node). */
static const char *unmet(const cmp_plan *p, const char *name, int named) {
    int g = p->c->ranks_per_node;
    if (!(needs_of(name) & NEEDS_EQUAL_NODES)) return NULL;
    if (g > 0 && (p->ranks % g || p->ranks / g < 2))
        return "needs --ranks-per-node G dividing --ranks into 2 or more equal nodes";
    if (g == 0 && !named && cli_compare_alloc_nodes() < 2)
        return "needs 2 or more nodes: --ranks-per-node G to emulate them, or name it in "
               "--strategies to run it on the nodes the launcher gives";
    return NULL;
}

static int choose_strategies(cmp_plan *p) {
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

/* --set S:KEY=VALUE: S compared, KEY=VALUE a train option that takes VALUE (checked on a copy
 * of the configuration); its words go to S's runs after everything else. */
static int plan_sets(cmp_plan *p) {
    static char words[CMP_MAX_SET][2][160];
    for (int i = 0; i < g_opt.n_set; i++) {
        const char *v = g_opt.set[i], *colon = strchr(v, ':'), *eq = colon ? strchr(colon, '=') : NULL;
        if (!colon || !eq || colon == v || eq == colon + 1)
            return usage("--set: '%s', expected STRATEGY:KEY=VALUE (gpipe:threads=2)", v);
        int s = -1;
        for (int k = 0; k < p->n_strat; k++)
            if (strlen(p->strat[k]) == (size_t)(colon - v) &&
                !strncmp(p->strat[k], v, (size_t)(colon - v)))
                s = k;
        if (s < 0) return usage("--set: '%.*s' is not among the strategies compared", (int)(colon - v), v);
        snprintf(words[i][0], sizeof words[i][0], "--%.*s", (int)(eq - colon - 1), colon + 1);
        snprintf(words[i][1], sizeof words[i][1], "%s", eq + 1);
        het_train_config *copy = malloc(sizeof *copy);
        if (!copy) return het_error_set(HET_ENOMEM, "out of memory");
        *copy = *p->c;
        int bad = het_train_config_set(copy, words[i][0] + 2, words[i][1]);
        free(copy);
        if (bad) return usage("--set %s: %s", v, het_error_msg());
        p->set_words[s][2 * p->n_set[s]] = words[i][0];
        p->set_words[s][2 * p->n_set[s]++ + 1] = words[i][1];
    }
    return CLI_OK;
}

void cli_compare_extra_words(const cmp_plan *p, int s, int tuned, char **w) {
    int n = 0;
    if (p->tune.n_lr || p->tune.n_m) n = cli_compare_tune_words(&p->tune, tuned, w);
    for (int k = 0; k < 2 * p->n_set[s]; k++) w[n++] = p->set_words[s][k];
    w[n] = NULL;
}

static int make_plan(cmp_plan *p, const het_train_config *c) {
    memset(p, 0, sizeof *p);
    p->c = c;
    if (cli_compare_under_launcher())
        return usage("run compare directly, not under mpirun or srun: it launches its own "
                     "runs (see --launcher)");
    int nf = c->slowdown[0] ? het_slowdown_parse(c->slowdown, NULL, 0) : 0;
    p->ranks = g_opt.ranks ? g_opt.ranks : nf > 0 ? nf : 2;
    p->seeds = g_opt.seeds, p->target = g_opt.target, p->out = g_opt.out;
    if (nf > 0 && nf != p->ranks)
        return usage("--slowdown: %d factors for --ranks %d, expected one per rank", nf,
                     p->ranks);
    int st = choose_strategies(p);
    if (st) return st;
    p->tune = g_opt.tune;
    if ((p->tune.epochs || p->tune.holdout) && !p->tune.n_lr && !p->tune.n_m)
        return usage("--tune-epochs and --tune-holdout need a grid: --tune-lr LIST and / or "
                     "--tune-momentum LIST");
    if ((st = plan_sets(p))) return st;
    p->baseline = -1;
    for (int s = 0; g_opt.baseline[0] && s < p->n_strat; s++)
        if (strcmp(p->strat[s], g_opt.baseline) == 0) p->baseline = s;
    if (g_opt.baseline[0] && p->baseline < 0)
        return usage("--baseline: %s is not among the strategies compared", g_opt.baseline);
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
void cli_compare_join(char *dst, size_t n, const char *dir, const char *name) {
    if ((size_t)snprintf(dst, n, "%s/%s", dir, name) >= n) dst[0] = '\0';
}

static const char *signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

/* One run: argv under the launcher (cli_job_run), stdout and stderr to `log`; HET_OK if it
 * exits 0, or when a signal came (cli_signals_caught; *killed: the launcher was killed after
 * CMP_KILL_AFTER_S). */
static int run_one(const cmp_plan *p, char *const *argv, const char *strat, uint64_t seed,
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

/* Nothing compare writes (tables, plots, their temporaries, each run's metrics and log) may be
 * an input of the runs (het_train_check_outputs). CLI_USAGE with the line. */
static int check_outputs(const cmp_plan *p, const het_train_config *c) {
    int n = 0, n_runs = p->n_strat * g_opt.seeds;
    char (*path)[HET_PATH_LEN] = calloc((size_t)(8 + 2 * n_runs), HET_PATH_LEN);
    const char **list = calloc((size_t)(8 + 2 * n_runs), sizeof *list);
    int st = path && list ? HET_OK : het_error_set(HET_ENOMEM, "out of memory");
    for (int i = 0; !st && i < 8 + 2 * n_runs; i++, n++) {
        char name[96];
        if (i < 8) snprintf(name, sizeof name, "%s%s", cli_compare_outputs[i / 2], i % 2 ? ".tmp" : "");
        else snprintf(name, sizeof name, "%s-seed%llu.%s", p->strat[(i - 8) / 2 / g_opt.seeds],
                      (unsigned long long)(c->seed + (uint64_t)((i - 8) / 2 % g_opt.seeds)),
                      i % 2 ? "log" : "jsonl");
        cli_compare_join(path[n], HET_PATH_LEN, g_opt.out, name);
        list[n] = path[n];
    }
    if (!st) st = het_train_check_outputs(c, "out", list, n);
    free(path);
    free(list);
    return st == HET_EINVAL ? usage("%s", het_error_msg()) : st;
}

int cli_compare_run(const cmp_plan *p, const char *s, unsigned long long seed,
                    const char *metrics, const char *log, char *const *extra, char *cmd,
                    size_t n_cmd, int *killed) {
    int n_extra = 0;
    while (extra && extra[n_extra]) n_extra++;
    char **argv = calloc((size_t)(p->launcher.n_words + g_opt.n_rest + n_extra + 16),
                         sizeof *argv);
    if (!argv) return het_error_set(HET_ENOMEM, "out of memory");
    char seedbuf[24];
    snprintf(seedbuf, sizeof seedbuf, "%llu", seed);
    int n = 0;
    for (int w = 0; w < p->launcher.n_words; w++) argv[n++] = p->launcher.words[w];
    argv[n++] = (char *)p->self;
    argv[n++] = "train";
    n += cli_compare_run_words(g_opt.rest, g_opt.n_rest, s, argv + n);
    for (int k = 0; k < n_extra; k++) argv[n++] = extra[k];
    char *tail[] = {"--strategy", (char *)s, "--seed", seedbuf, "--metrics", (char *)metrics,
                    "--progress", "off", NULL};
    memcpy(argv + n, tail, sizeof tail);
    remove(metrics);
    int st = run_one(p, argv, s, seed, log, killed);
    if (cmd) cli_job_shell_line(cmd, n_cmd, argv);
    free(argv);
    return st;
}

int cli_compare(const het_train_config *c) {
    cmp_plan p;
    int st = make_plan(&p, c); /* CLI_USAGE or a het_status */
    if (!st && cli_compare_check_sopts(c, p.strat, p.n_strat)) st = CLI_USAGE;
    if (!st) st = check_outputs(&p, c);
    if (st || (st = cli_job_out_dir(g_opt.out)) || (st = cli_signals_forward())) {
        fprintf(stderr, "%s\n", het_error_msg());
        return st == CLI_USAGE ? CLI_USAGE : CLI_FAIL;
    }
    char path[HET_PATH_LEN];
    for (int i = 0; i < 4; i++) {
        cli_compare_join(path, sizeof path, g_opt.out, cli_compare_outputs[i]);
        remove(path);
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0); /* Open MPI refuses root without them */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    int K = g_opt.seeds, n_runs = p.n_strat * K;
    cli_jsonl_run *runs = calloc((size_t)n_runs, sizeof *runs);
    run_why *why = calloc((size_t)n_runs, sizeof *why);
    if (!runs || !why) st = het_error_set(HET_ENOMEM, "out of memory");
    printf("%scompare: %d strateg%s x %d seed%s on %d ranks, output in %s/\n", p.skipped,
           p.n_strat, p.n_strat == 1 ? "y" : "ies", K, K == 1 ? "" : "s", p.ranks, g_opt.out);
    if (!st && (p.tune.n_lr || p.tune.n_m)) st = cli_compare_tune(&p);
    int done = 0, killed = 0, n_failed = 0;
    char stopped[2 * HET_PATH_LEN + 256] = ""; /* the run a signal stopped */
    for (int i = 0; !st && !cli_signals_caught() && i < n_runs; i++) {
        const char *s = p.strat[i / K];
        uint64_t seed = c->seed + (uint64_t)(i % K);
        char seedbuf[24], name[80], metrics[HET_PATH_LEN], log[HET_PATH_LEN];
        snprintf(seedbuf, sizeof seedbuf, "%llu", (unsigned long long)seed);
        snprintf(name, sizeof name, "%s-seed%s.jsonl", s, seedbuf);
        cli_compare_join(metrics, sizeof metrics, g_opt.out, name);
        snprintf(name, sizeof name, "%s-seed%s.log", s, seedbuf);
        cli_compare_join(log, sizeof log, g_opt.out, name);
        char *tuned[5 + 2 * CMP_MAX_SET];
        cli_compare_extra_words(&p, i / K, p.tune.chosen[i / K], tuned);
        printf("compare: run %d/%d: %s, seed %s ... ", i + 1, n_runs, s, seedbuf);
        fflush(stdout);
        double t0 = het_now();
        char cmd[sizeof runs[i].command] = ""; /* cli_jsonl_read clears runs[i] */
        st = cli_compare_run(&p, s, seed, metrics, log, tuned, cmd, sizeof cmd, &killed);
        if (!st && cli_signals_caught()) {
            char how[48] = "";
            if (killed) snprintf(how, sizeof how, "; killed after %g s", CMP_KILL_AFTER_S);
            printf("interrupted\n");
            snprintf(stopped, sizeof stopped, ": stopped run %d/%d (strategy %s, seed %s; "
                     "metrics %s, output %s%s)", i + 1, n_runs, s, seedbuf, metrics, log, how);
            break;
        }
        if (!st) st = cli_jsonl_read(&runs[i], metrics, p.ranks, c->epochs);
        memcpy(runs[i].command, cmd, sizeof cmd);
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
                   (st = cli_compare_summarize(&p, runs, (const run_why *)why)) == HET_OK;
    cli_job_hold(0, &old); /* a signal held back is handled here */
    int sig = complete ? 0 : cli_signals_caught(); /* one after the tables is too late */
    for (int i = 0; runs && i < n_runs; i++) cli_jsonl_free(&runs[i]);
    free(runs);
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
