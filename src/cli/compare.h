/* hetrain compare's two parts: compare.c (its options, the plan of runs, the runs under the
 * launcher) and compare_report.c (the figures, tables and plots of the runs that finished). */
#ifndef HET_CLI_COMPARE_H
#define HET_CLI_COMPARE_H

#include <limits.h>

#include "cli/cli.h"

#define CMP_MAX_STRAT 16

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
} cmp_plan;

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
