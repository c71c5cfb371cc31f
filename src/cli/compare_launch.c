/* compare's launcher and the allocation it runs in. The launcher line: the words every run
 * starts with, the rank count placed where the launcher takes it. A word holding "{n}" gets
 * the count in its place ("srun --ntasks={n}", "mpirun -np {n}"); without one, "-n N"
 * follows a launcher with an srun among its words (Slurm's srun reads "-np 4" as "-n p"),
 * "-np N" any other (mpirun, mpiexec of Open MPI and MPICH, tools/vcluster run). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_compare_help(void) {
    static const char *const h[][2] = {
        {"--strategies LIST", "strategies to run, e.g. allreduce,hgc (default: all)"},
        {"--ranks N", "MPI ranks of every run (default: one per --slowdown factor, else 2)"},
        {"--seeds N", "runs per strategy, seeds --seed.. --seed+N-1 (default 1)"},
        {"--target-acc X", "the test accuracy whose time is reported (default 0.8)"},
        {"--out DIR", "where the runs' metrics, logs, tables and plots go (default compare)"},
        {"--baseline S", "also each strategy against S, paired by seed: time ratios and the "
                         "accuracy difference, mean and 95 % interval over the seeds"},
        {"--set S:KEY=VALUE", "S's runs also get --KEY VALUE, last (repeatable; e.g. "
                              "gpipe:threads=2 to give gpipe qfb's two threads per stage)"},
        {"--tune-lr LIST", "tune every strategy on a grid of learning rates (0.01,0.02,0.05) "
                           "before comparing: held-out accuracy, the same rule for all"},
        {"--tune-momentum LIST", "the grid's momentums (0.5,0.9)"},
        {"--tune-epochs E", "epochs of a tuning run (default --epochs)"},
        {"--tune-holdout N", "training samples held out to score the grid (default a sixth)"},
        {"--launcher CMD", "MPI launcher (default $HET_MPIEXEC or " CLI_COMPARE_DEFAULT_LAUNCHER
                           "); the rank count follows as '-np N', '-n N' after srun, or "
                           "replaces {n} in CMD"},
        {"--simulator hetrain|smpi", "smpi: every run under SimGrid's smpirun on --platform's "
                                     "file (and --hostfile), the hetrain-smpi of make smpi "
                                     "(or $HETRAIN_SMPI; docs/SMPI.md)"},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) printf("  %-26s %s\n", h[i][0], h[i][1]);
    printf("  the options of train below are passed to every run\n");
}

/* --simulator smpi: the runs go to SimGrid's smpirun (docs/SMPI.md) */
static int g_smpi;

int cli_compare_set_simulator(const char *v) {
    if (strcmp(v, "hetrain") && strcmp(v, "smpi")) {
        het_error_set(HET_EINVAL, "hetrain compare: --simulator: '%s', expected hetrain or "
                      "smpi", v);
        return CLI_USAGE;
    }
    g_smpi = !strcmp(v, "smpi");
    return CLI_OK;
}

int cli_compare_smpi(void) { return g_smpi; }

/* SimGrid's settings of every SMPI run (docs/SMPI.md): compute from the cost table only, Open
 * MPI's choice of collectives, a poll of 1e-6 s that does not grow with the polls before it,
 * SimGrid's own log lines off. */
static char *const smpi_cfg[] = {"--cfg=smpi/simulate-computation:no",
                                 "--cfg=smpi/coll-selector:ompi", "--cfg=smpi/test:1e-6",
                                 "--cfg=smpi/iprobe:1e-6", "--cfg=smpi/grow-injected-times:no",
                                 "--log=root.thresh:error"};

int cli_compare_smpi_launcher(cli_launcher *l, const het_train_config *c, int ranks,
                              int launcher_given, char *self, size_t n) {
    if (launcher_given) {
        het_error_set(HET_EINVAL, "hetrain compare: --simulator smpi runs smpirun: give no "
                      "--launcher");
        return CLI_USAGE;
    }
    if (!c->platform[0]) {
        het_error_set(HET_EINVAL, "hetrain compare: --simulator smpi needs --platform FILE "
                      "(the cluster smpirun simulates)");
        return CLI_USAGE;
    }
    /* the SMPI build: $HETRAIN_SMPI, BUILD-smpi/hetrain-smpi beside BUILD/hetrain, or beside */
    char dir[PATH_MAX], path[PATH_MAX + 32] = "";
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    const char *env = getenv("HETRAIN_SMPI");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s-smpi/hetrain-smpi", dir);
    if (access(path, X_OK) != 0 && !(env && *env))
        snprintf(path, sizeof path, "%s/hetrain-smpi", dir);
    if (access(path, X_OK) != 0 || strlen(path) >= n) {
        het_error_set(HET_EINVAL, "hetrain compare: --simulator smpi: no hetrain-smpi (%s): "
                      "make smpi builds it, or set HETRAIN_SMPI", path);
        return CLI_USAGE;
    }
    snprintf(self, n, "%s", path);
    memset(l, 0, sizeof *l);
    snprintf(l->np, sizeof l->np, "%d", ranks);
    snprintf(l->buf, sizeof l->buf, "smpirun");
    char **w = l->words;
    w[l->n_words++] = l->buf;
    w[l->n_words++] = "-platform";
    w[l->n_words++] = (char *)c->platform;
    if (c->hostfile[0]) {
        w[l->n_words++] = "-hostfile";
        w[l->n_words++] = (char *)c->hostfile;
    }
    for (size_t i = 0; i < sizeof smpi_cfg / sizeof smpi_cfg[0]; i++)
        w[l->n_words++] = smpi_cfg[i];
    w[l->n_words++] = "-np";
    w[l->n_words++] = l->np;
    return CLI_OK;
}

int cli_compare_launcher(cli_launcher *l, const char *spec, int ranks) {
    memset(l, 0, sizeof *l);
    if (strlen(spec) >= sizeof l->buf)
        return het_error_set(HET_EINVAL, "hetrain compare: --launcher: too long");
    snprintf(l->buf, sizeof l->buf, "%s", spec);
    snprintf(l->np, sizeof l->np, "%d", ranks);
    const char *flag = "-np";
    int placed = 0;
    for (char *save = NULL, *w = strtok_r(l->buf, " \t", &save); w;
         w = strtok_r(NULL, " \t", &save)) {
        if (l->n_words == CLI_LAUNCHER_WORDS - 2)
            return het_error_set(HET_EINVAL, "hetrain compare: --launcher: too many words");
        const char *base = strrchr(w, '/');
        if (strcmp(base ? base + 1 : w, "srun") == 0) flag = "-n";
        const char *at = strstr(w, "{n}");
        if (at && (placed || strstr(at + 3, "{n}")))
            return het_error_set(HET_EINVAL, "hetrain compare: --launcher: '{n}' (the rank "
                                 "count) given twice");
        if (at) {
            snprintf(l->sub, sizeof l->sub, "%.*s%s%s", (int)(at - w), w, l->np, at + 3);
            w = l->sub;
            placed = 1;
        }
        l->words[l->n_words++] = w;
    }
    if (!l->n_words) return het_error_set(HET_EINVAL, "hetrain compare: --launcher: empty");
    if (!placed) {
        l->words[l->n_words++] = (char *)flag;
        l->words[l->n_words++] = l->np;
    }
    return HET_OK;
}

int cli_compare_under_launcher(void) {
    /* a launcher's ranks; an srun step of several tasks (without --mpi: no PMI variable) */
    const char *env[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (int i = 0; i < 3; i++)
        if (getenv(env[i])) return 1;
    const char *tasks = getenv("SLURM_STEP_NUM_TASKS");
    return getenv("SLURM_STEP_ID") && tasks && strtol(tasks, NULL, 10) > 1;
}

int cli_compare_alloc_nodes(void) {
    const char *v = getenv("SLURM_JOB_NUM_NODES");
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 && n < 1000000 ? (int)n : 0;
}
