/* compare's launcher and the allocation it runs in. The launcher line: the words every run
 * starts with, the rank count placed where the launcher takes it. A word holding "{n}" gets
 * the count in its place ("srun --ntasks={n}", "mpirun -np {n}"); without one, "-n N"
 * follows a launcher with an srun among its words (Slurm's srun reads "-np 4" as "-n p"),
 * "-np N" any other (mpirun, mpiexec of Open MPI and MPICH, tools/vcluster run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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
