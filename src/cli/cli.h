/* The hetrain command: shared declarations of main.c (parsing), commands.c, compare.c (runs of
 * several strategies and their tables) and svg.c (its plots). */
#ifndef HET_CLI_H
#define HET_CLI_H

#include <signal.h>
#include <stdio.h>

#include <hetrain.h>

#include "strategy/strategy.h" /* het_strategy_opt */

/* Exit statuses: 0 success, 1 runtime failure (data, files, training), 2 usage error. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cli_train(const het_train_config *c);
int cli_eval(const het_train_config *c);
int cli_info(const het_train_config *c);
int cli_export(const het_train_config *c);
int cli_calibrate(const het_train_config *c);
/* calibrate's own options: --network (a ping-pong between rank 0 and a rank of another node,
 * then MPI's message-size factors fitted and written to --out for hetrain platform --factors)
 * and --reps N (timed round trips per size, default 20). */
int cli_calibrate_options(int argc, char **argv, int *n_rest);
void cli_calibrate_help(void);
int cli_calibrate_wants_network(void);
int cli_calibrate_network(const het_train_config *c);
/* commands.c: the run's network (the zoo's or --model-file's) and its model built for the
 * data's shape, without initial weights; net_free and model_free by the caller. */
int cli_build_model(const het_train_config *c, het_net *net, het_model **m);
/* A command's own option at argv[*i] (--KEY VALUE or --KEY=VALUE, KEY one of own[0..n)), for
 * the commands that take theirs out of argv before the training options are parsed (compare,
 * platform): its index in own, with *value its value (NULL when none follows) and *i on the last
 * word it took; -1 when argv[*i] is not one of them. */
int cli_own_option(int argc, char **argv, int *i, const char *const *own, int n,
                   const char **value);

/* hetrain platform (platform.c): writes the cluster that the emulation options describe
 * (--ranks-per-node, --placement, --slowdown, --net-bw, --net-lat, --node-bw, --node-lat) as a
 * SimGrid platform file and a hostfile, so that the same cluster runs under --platform and
 * under smpirun. cli_platform_options takes its own options (--ranks, --out, --hostfile,
 * --host-speed) out of argv as compare's do. cli_platform_describe prints a platform file
 * (info --platform). */
int cli_platform_options(int argc, char **argv, int *n_rest);
void cli_platform_help(void);
int cli_platform(const het_train_config *c);
int cli_platform_describe(const het_train_config *c);

/* The peer watch (watch.c): a thread that ends the job, naming the rank, when a rank of this
 * host is gone. cli_watch_start(rank, size, pids, local, start, left): every world rank's pid,
 * whether it runs on this host, its start time (cli_watch_stat), and the host's shared bytes
 * where ranks ending on their own are marked (or NULL); copies what it needs; nothing happens
 * when this host has no other rank or the thread cannot start. cli_watch_stop ends the thread
 * (before MPI_Finalize); safe to repeat. cli_watch_stat reads process pid's state letter
 * (state may be NULL) and start time (clock ticks since boot) from /proc; -1 if it cannot. */
void cli_watch_start(int rank, int size, const int *pids, const unsigned char *local,
                     const unsigned long long *start, volatile unsigned char *left);
void cli_watch_stop(void);
int cli_watch_stat(int pid, char *state, unsigned long long *start);

/* hetrain compare (compare.c): runs `train` once per strategy and seed under an MPI launcher,
 * reads the metrics back and writes tables and plots. It runs without MPI itself.
 * cli_compare_options takes compare's own options (--strategies, --ranks, --seeds,
 * --target-acc, --out, --launcher) out of argv[0..argc), keeps the rest in order at the front
 * (*n_rest of them: train's options, forwarded to every run) and remembers both for
 * cli_compare; CLI_USAGE with the message recorded on a bad value. */
int cli_compare_options(int argc, char **argv, int *n_rest);
void cli_compare_help(void);
int cli_compare(const het_train_config *c);
/* compare_sopt.c: a strategy's own options on compare's command line go only to the runs of
 * the strategies that have them. cli_compare_run_words copies rest[0..n_rest) into out
 * without the words of options that `strategy` lacks, and returns how many it copied;
 * cli_compare_check_sopts fails (HET_EINVAL, one line) on an option set in c that none of
 * strat[0..n) has. */
int cli_compare_run_words(char *const *rest, int n_rest, const char *strategy, char **out);
/* main.c: the entry of a registered strategy's own option called `key` (strategy.h), or NULL:
 * such an option is a key of `train` beside the built-in ones, with a value always. */
const het_strategy_opt *cli_strategy_opt(const char *key);
int cli_compare_check_sopts(const het_train_config *c, const char *const *strat, int n_strat);

/* compare_launch.c: the words every run of compare starts with. cli_compare_launcher splits
 * the launcher `spec` at spaces into l->words (pointing into l), with the rank count `ranks`
 * in place of a "{n}" in one word, else appended: "-n N" when a word is srun, "-np N"
 * otherwise. HET_EINVAL with the usage line recorded for an empty or too long spec, too many
 * words, or "{n}" twice. */
#define CLI_LAUNCHER_WORDS 34
typedef struct cli_launcher {
    char buf[512], sub[512], np[16];
    char *words[CLI_LAUNCHER_WORDS];
    int n_words;
} cli_launcher;
int cli_compare_launcher(cli_launcher *l, const char *spec, int ranks);
#define CLI_COMPARE_DEFAULT_LAUNCHER "mpirun --oversubscribe"
/* --simulator hetrain|smpi (compare_launch.c): with smpi every run goes to SimGrid's smpirun on
 * the --platform file (and --hostfile) with SMPI's settings of docs/SMPI.md, the binary the
 * SMPI build's hetrain-smpi ($HETRAIN_SMPI, BUILD-smpi/ beside BUILD/hetrain, or beside it);
 * --platform, --hostfile and --clock are then not passed to the runs (cli_compare_run_words).
 * cli_compare_smpi_launcher sets l's words and self; CLI_USAGE with the line recorded. */
int cli_compare_set_simulator(const char *v);
int cli_compare_smpi(void);
int cli_compare_smpi_launcher(cli_launcher *l, const het_train_config *c, int ranks,
                              int launcher_given, char *self, size_t n);
/* Whether this process is a rank of a launcher (mpirun's, srun's with PMI, or one of an srun
 * step of several tasks), where compare refuses to run; the nodes of the Slurm allocation it
 * runs in (SLURM_JOB_NUM_NODES: salloc, sbatch), 0 outside one. */
int cli_compare_under_launcher(void);
int cli_compare_alloc_nodes(void);

/* The metrics of one run as compare reads them back (jsonl.c). */
typedef struct cli_jsonl_epoch {
    double test_acc;      /* NaN where the file has null */
    double samples_per_s, elapsed_s;
    double vtime_s;       /* --clock virtual: the virtual time since the start; NaN: wall */
    double t[4];          /* compute_s, comm_s, wait_s, delay_s summed over ranks; NaN: absent
                             (a run of one rank) */
    double bytes[2];      /* bytes_node, bytes_cross summed over ranks; NaN: absent */
    double link_over;     /* the worst node link's oversubscribed share (link_over_max); NaN:
                             absent (wall clock, one rank) */
} cli_jsonl_epoch;
typedef struct cli_jsonl_point {
    double t;   /* the run's clock: an epoch's vtime_s or elapsed_s, an evaluation's time_s */
    double acc; /* test accuracy (NaN: null) */
} cli_jsonl_point;
typedef struct cli_jsonl_run {
    int ranks, n_epochs;
    cli_jsonl_epoch *epochs; /* epochs 1..n_epochs in order; owned (cli_jsonl_free) */
    int n_points;
    cli_jsonl_point *points; /* every test accuracy in the file's order: "eval" objects
                                (--eval-every) and each epoch's; owned */
    char command[4096];      /* not read: the caller's record of how the run was launched */
} cli_jsonl_run;

/* Reads the --metrics file of a finished run of `ranks` ranks that trained `epochs` epochs:
 * strict JSON, one object per line; "epoch" objects must number 1..epochs in order and their
 * per-rank arrays hold `ranks` numbers; "eval" objects (--eval-every) must have test_acc and
 * time_s; other types (step) are skipped. Any other content is an
 * error: HET_EIO with the one line "hetrain compare: FILE:LINE: column C: what" recorded. */
int cli_jsonl_read(cli_jsonl_run *r, const char *path, int ranks, int epochs);
void cli_jsonl_free(cli_jsonl_run *r);

/* One strategy's curve and time split, mean over seeds, for the plots of svg.c. */
typedef struct cli_series {
    const char *name;  /* the strategy */
    int n;             /* points: one per epoch */
    const double *x;   /* wall time since the start of training (elapsed_s), seconds */
    const double *y;   /* test accuracy, in [0, 1] */
    double share[4];   /* shares of rank time: compute, comm, wait, delay; share[0] < 0: none
                          (a run of one rank has no split) */
} cli_series;

/* Writes to f an SVG document of test accuracy against the runs' clock: one polyline per
 * series (markers at its points), a dashed line at `target` if it is in (0, 1], axes with
 * ticks, the x axis named by `clock` ("wall time", "virtual time", ...), a legend, a title and
 * the subtitle (what was run; text is escaped). The caller checks f for write errors. */
void cli_svg_accuracy(FILE *f, const cli_series *s, int n, double target, const char *clock,
                      const char *subtitle);
/* Writes to f an SVG document of stacked bars, one per series: its compute / comm / wait /
 * delay shares of rank time (a series without shares gets a note instead of a bar). */
void cli_svg_split(FILE *f, const cli_series *s, int n, const char *subtitle);

/* Prints "hetrain: <het_error_msg()>" on stderr (rank 0) and returns CLI_FAIL. */
int cli_fail(void);
/* Agreement of all ranks on a status (het_comm_agree); the status itself on one rank. */
int cli_agree(int status);
/* signals.c: SIGINT / SIGTERM handling and the data it needs to name a lost rank (collective
 * over MPI_COMM_WORLD, after MPI_Init); cli_signals_finish before MPI_Finalize marks this rank
 * as ending on its own with exit status `status` (a signal from then on exits quietly). */
void cli_signals_setup(int rank, int size);
void cli_signals_finish(int status);
/* compare's side (no MPI): cli_signals_forward installs SIGINT / SIGTERM handlers that record
 * the first signal (cli_signals_caught: its number, 0 for none) and pass every one on to the
 * process group of the run in progress, set by cli_signals_job (0: none). HET_EIO when the
 * handlers cannot be installed. */
int cli_signals_forward(void);
void cli_signals_job(int pgid);
int cli_signals_caught(void);
/* job.c: compare's runs. cli_job_run runs argv (PATH searched) in a session of its own, stdin
 * /dev/null, stdout and stderr to the open fd `out`, and waits for it: a signal caught meanwhile
 * reaches it (cli_signals_forward), SIGKILL follows kill_after_s later (*killed = 1); then
 * whatever is left of its session is ended. Returns 0 with waitpid's *status, or the errno
 * value of a run that could not be started or waited for. cli_job_hold(1, &old) holds SIGINT /
 * SIGTERM back, cli_job_hold(0, &old) lets them through again; cli_job_pending says whether
 * one is held back. */
int cli_job_run(char *const *argv, int out, double kill_after_s, int *status, int *killed);
void cli_job_hold(int hold, sigset_t *old);
int cli_job_pending(void);
/* mkdir -p of compare's --out `path`, then a check that it is a folder this process can write
 * in: HET_OK, or HET_EIO with the line "hetrain compare: --out PATH: ..." recorded. */
int cli_job_out_dir(const char *path);
/* For compare's failure lines: argv as one shell line (arguments with odd characters in single
 * quotes), cut to n; and the last line of the file `log` that starts "hetrain" (not the
 * start's banner), else its last non-empty line ("" when none or unreadable). */
void cli_job_shell_line(char *dst, size_t n, char *const *argv);
/* supervise.c: hetrain run [--restarts K] [--min-ranks Q] [--hosts FILE] [--metrics FILE] --
 * LAUNCHER ... hetrain train ...: runs the job, relaunches it on the ranks left after a lost
 * rank (argv: the words after "run"). Before MPI_Init; returns the exit status. */
int cli_supervise(int argc, char **argv);
void cli_job_last_line(const char *log, char *dst, size_t n);

#endif
