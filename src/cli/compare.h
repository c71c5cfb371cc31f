/* hetrain compare's two parts: compare.c (its options, the plan of runs, the runs under the
 * launcher) and compare_report.c (the figures, tables and plots of the runs that finished). */
#ifndef HET_CLI_COMPARE_H
#define HET_CLI_COMPARE_H

#include <limits.h>

#include "cli/cli.h"

#define CMP_MAX_STRAT 16

#define CMP_TUNE_MAX 8
#define CMP_MAX_SET 16 /* --set options */ /* values per hyper-parameter of the tuning grid */

/* The tuning grid (--tune-lr, --tune-momentum): every strategy runs every point once on a
 * held-out split, and its best point by the same rule (the highest held-out accuracy at the
 * end; the first of equals) sets its --lr and --momentum in the comparison (compare_tune.c). */
typedef struct cmp_tune {
    int n_lr, n_m;                   /* 0: that hyper-parameter is not tuned */
    char lr[CMP_TUNE_MAX][24], m[CMP_TUNE_MAX][24]; /* the values as given */
    int epochs;                      /* --tune-epochs (0: --epochs) */
    long long holdout;               /* --tune-holdout N (0: a sixth of the training samples
                                        of --train-limit, else 10000) */
    double acc[CMP_MAX_STRAT][CMP_TUNE_MAX * CMP_TUNE_MAX]; /* held-out accuracy; NaN: failed */
    int chosen[CMP_MAX_STRAT];       /* the point each strategy runs with */
} cmp_tune;

/* What compare runs: every strategy of strat[] with seeds seeds on ranks ranks. */
typedef struct cmp_plan {
    const het_train_config *c;
    int ranks, n_strat;
    const char *strat[CMP_MAX_STRAT];
    int seeds;             /* runs per strategy: seeds c->seed, c->seed + 1, ... */
    double target;         /* --target-acc */
    int baseline;          /* --baseline: the index in strat[] the others are paired with; -1 */
    const char *out;       /* --out: where the runs' files, tables and plots go */
    cli_launcher launcher; /* its words, with the rank count (compare_launch.c) */
    char self[PATH_MAX];
    char skipped[512]; /* a note on the strategies left out by default, "" for none */
    cmp_tune tune;     /* n_lr = n_m = 0: no tuning */
    /* --set S:KEY=VALUE: per strategy, the words "--KEY" "VALUE" its runs get last */
    int n_set[CMP_MAX_STRAT];
    char *set_words[CMP_MAX_STRAT][2 * CMP_MAX_SET];
} cmp_plan;

/* The grid's points: n_lr x n_m (a hyper-parameter not tuned counts as one point). */
int cli_compare_tune_points(const cmp_tune *t);
/* Point g's words into w (up to 4: "--lr", X, "--momentum", Y, those tuned); returns their
 * number. */
int cli_compare_tune_words(const cmp_tune *t, int g, char **w);
/* Parses --tune-lr / --tune-momentum's LIST ("0.01,0.02"); CLI_USAGE with the message. */
int cli_compare_tune_list(cmp_tune *t, int momentum, const char *list);
/* Runs the grid for every strategy and chooses its point (the runs' metrics and logs in OUT as
 * tune-STRATEGY-G.jsonl / .log); HET_OK also when runs failed (their points lose); a signal
 * stops it (cli_signals_caught). */
int cli_compare_tune(cmp_plan *p);
/* One train run of strategy s under the launcher, its output to log: the options given to
 * compare (compare_sopt.c), then extra (NULL-terminated), then --strategy, --seed, --metrics,
 * --progress off; HET_OK if it exits 0 or a signal came (*killed: the launcher was killed
 * after it; compare.c). The command line into cmd. */
/* The extra words of strategy s's runs: the tuned point's (when tuned), then its --set words;
 * NULL-terminated into w (room for 4 + 2 CMP_MAX_SET + 1). */
void cli_compare_extra_words(const cmp_plan *p, int s, int tuned, char **w);
int cli_compare_run(const cmp_plan *p, const char *s, unsigned long long seed,
                    const char *metrics, const char *log, char *const *extra, char *cmd,
                    size_t n_cmd, int *killed);

/* A run that failed: its one-line reason ("" for a run that finished). */
typedef char run_why[1024];

/* What compare writes besides the runs' own files: compare.md, compare.csv, accuracy.svg,
 * split.svg (removed before the runs). */
extern const char *const cli_compare_outputs[4];

/* dir/name into dst (n bytes); "" if it does not fit (--out is short enough that it does). */
void cli_compare_join(char *dst, size_t n, const char *dir, const char *name);

/* Reads the figures of runs[0 .. n_strat x seeds) (strategy-major; why[i] not empty: run i
 * failed and has none), writes OUT's tables and plots durably and prints the table; HET_EIO
 * when a write fails or a signal came meanwhile (cli_job_pending: the tables are removed). */
int cli_compare_summarize(const cmp_plan *p, cli_jsonl_run *runs, const run_why *why);

#endif
