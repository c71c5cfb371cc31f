/* Checks of a whole training configuration, across keys: what one key's range cannot say
 * (resume needs a checkpoint, no output path may be another output or an input, the dataset
 * and model exist), and the input shape of each dataset. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/train.h"
#include "train/internal.h"

/* a and b name the same file: the same text, or the same name in the same (resolved) folder. */
static int same_file(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    char da[HET_PATH_LEN], db[HET_PATH_LEN], ra[PATH_MAX], rb[PATH_MAX];
    if (strcmp(het_path_dir(a, da, sizeof da), het_path_dir(b, db, sizeof db)) != 0) return 0;
    return realpath(da, ra) && realpath(db, rb) && strcmp(ra, rb) == 0;
}

/* No output may overwrite another output or an input: --checkpoint, --metrics, --trace,
 * --export-safetensors and --out against each other and against --speeds-file. */
static int check_paths(const het_train_config *c) {
    const char *key[] = {"checkpoint", "metrics", "trace", "export-safetensors", "out",
                         "speeds-file"};
    const char *path[] = {c->checkpoint, c->metrics, c->trace, c->export_safetensors, c->out,
                          c->speeds_file};
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 6; j++)
            if (path[i][0] && path[j][0] && same_file(path[i], path[j]))
                return het_error_set(HET_EINVAL, "%s: '%s' is also the %s file; give each its "
                                     "own path", key[i], path[i], key[j]);
    return HET_OK;
}

int het_train_config_check(const het_train_config *c) {
    het_schedule s = c->sched;
    s.total_epochs = c->epochs;
    if (het_schedule_check(&s) || het_optim_check(&c->optim)) return HET_EINVAL;
    if (c->optim.kind != HET_OPT_SGD && c->optim.nesterov)
        return het_error_set(HET_EINVAL, "nesterov: applies to SGD only, not adam");
    if (c->resume && !c->checkpoint[0])
        return het_error_set(HET_EINVAL, "resume: needs --checkpoint FILE to resume from");
    if (c->metrics_steps && !c->metrics[0])
        return het_error_set(HET_EINVAL, "metrics-steps: needs --metrics FILE");
    if (check_paths(c)) return HET_EINVAL;
    het_shape sh;
    int classes;
    if (het_train_data_shape(c->data, &sh, &classes)) return HET_EINVAL;
    int known = 0;
    for (const char *const *z = het_zoo_names(); *z; z++) known |= strcmp(*z, c->model) == 0;
    if (!known) return het_error_set(HET_EINVAL, "model: unknown model '%s'", c->model);
    return HET_OK;
}

int het_train_data_shape(const char *data, het_shape *shape, int *n_classes) {
    static const struct { const char *name; het_shape s; } sets[] = {
        {"fashion-mnist", {1, 28, 28}}, {"mnist", {1, 28, 28}},
        {"synthetic", {1, 28, 28}},     {"cifar10", {3, 32, 32}},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (strcmp(sets[i].name, data) == 0) {
            *shape = sets[i].s;
            *n_classes = 10;
            return HET_OK;
        }
    return het_error_set(HET_EINVAL, "data: unknown dataset '%s', expected one of: "
                         "fashion-mnist, mnist, cifar10, synthetic", data);
}
