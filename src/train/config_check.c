/* Checks of a whole training configuration, across keys: what one key's range cannot say
 * (resume needs a checkpoint, no output may be another output or an input: core/paths.c, the
 * dataset and model exist), and the input shape of each dataset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/paths.h"
#include "hetrain/emul.h"
#include "hetrain/train.h"
#include "train/internal.h"

int het_train_check_paths(const het_train_config *c, const char *config_file) {
    char data[HET_DATASET_MAX_FILES][HET_PATH_LEN], tmp[6][HET_PATH_LEN + 8];
    het_path_use u[20 + HET_DATASET_MAX_FILES];
    int n = 0;
    /* outputs; the checkpoint is read too when resumed (eval and export read it: an output
     * there has no other output to meet but --export-safetensors, so the same check holds) */
    u[n++] = (het_path_use){"checkpoint", c->checkpoint, HET_PATH_OUT | (c->resume ? HET_PATH_IN : 0)};
    u[n++] = (het_path_use){"metrics", c->metrics, HET_PATH_OUT};
    u[n++] = (het_path_use){"trace", c->trace, HET_PATH_OUT};
    u[n++] = (het_path_use){"export-safetensors", c->export_safetensors, HET_PATH_OUT};
    u[n++] = (het_path_use){"export-onnx", c->export_onnx, HET_PATH_OUT};
    u[n++] = (het_path_use){"out", c->out, HET_PATH_OUT};
    u[n++] = (het_path_use){"costs-out", c->costs_out, HET_PATH_OUT};
    /* what is written first and renamed into place: "<path>.tmp" */
    const char *tmp_of[6] = {c->checkpoint, c->trace, c->export_safetensors, c->out,
                             c->costs_out, c->export_onnx};
    static const char *const tmp_what[6] = {"checkpoint (its temporary file)",
                                            "trace (its temporary file)",
                                            "export-safetensors (its temporary file)",
                                            "out (its temporary file)",
                                            "costs-out (its temporary file)",
                                            "export-onnx (its temporary file)"};
    for (int i = 0; i < 6; i++)
        if (tmp_of[i][0]) {
            snprintf(tmp[i], sizeof tmp[i], "%s.tmp", tmp_of[i]);
            u[n++] = (het_path_use){tmp_what[i], tmp[i], HET_PATH_OUT};
        }
    /* inputs */
    u[n++] = (het_path_use){"speeds-file", c->speeds_file, HET_PATH_IN};
    u[n++] = (het_path_use){"config", config_file, HET_PATH_IN};
    u[n++] = (het_path_use){"model-file", c->model_file, HET_PATH_IN};
    u[n++] = (het_path_use){"init-from", c->init_from, HET_PATH_IN};
    u[n++] = (het_path_use){"platform", c->platform, HET_PATH_IN};
    u[n++] = (het_path_use){"hostfile", c->hostfile, HET_PATH_IN};
    const char *costs = het_train_costs_file(c);
    u[n++] = (het_path_use){"compute-cost", costs ? costs : "", HET_PATH_IN};
    int nd = het_dataset_files(c->data, c->data_dir[0] ? c->data_dir : NULL, data,
                               HET_DATASET_MAX_FILES);
    for (int i = 0; i < nd && i < HET_DATASET_MAX_FILES; i++)
        u[n++] = (het_path_use){"data-dir", data[i], HET_PATH_IN};
    return het_paths_check(u, n);
}

const char *het_train_costs_file(const het_train_config *c) {
    return strncmp(c->compute_cost, "calibrated:", 11) == 0 ? c->compute_cost + 11 : NULL;
}

int het_train_check_outputs(const het_train_config *c, const char *what,
                            const char *const *outputs, int n) {
    char data[HET_DATASET_MAX_FILES][HET_PATH_LEN];
    het_path_use *u = calloc((size_t)n + 1 + HET_DATASET_MAX_FILES, sizeof *u);
    if (!u) return het_error_set(HET_ENOMEM, "out of memory comparing paths");
    int k = 0;
    for (int i = 0; i < n; i++) u[k++] = (het_path_use){what, outputs[i], HET_PATH_OUT};
    u[k++] = (het_path_use){"speeds-file", c->speeds_file, HET_PATH_IN};
    int nd = het_dataset_files(c->data, c->data_dir[0] ? c->data_dir : NULL, data,
                               HET_DATASET_MAX_FILES);
    for (int i = 0; i < nd && i < HET_DATASET_MAX_FILES; i++)
        u[k++] = (het_path_use){"data-dir", data[i], HET_PATH_IN};
    int st = het_paths_check(u, k);
    free(u);
    return st;
}

#ifdef HET_SMPI
/* The SMPI build (docs/SMPI.md): SimGrid is the clock, the network and the cluster (smpirun's
 * -platform and -hostfile); hetrain only charges each compute piece from a cost table. What
 * would emulate them again, or what SMPI cannot run, is refused with its reason. Returns the
 * option refused (the message set), or NULL. */
static const char *smpi_refused(const het_train_config *c) {
    const het_train_config d = het_train_config_defaults();
    const char *why = "SimGrid simulates the cluster: give it to smpirun (-platform, -hostfile)";
    const char *o = c->clock != HET_CLOCK_WALL ? "clock"
                    : c->slowdown[0] ? "slowdown"
                    : c->slowdown_at[0] ? "slowdown-at"
                    : c->net_bw != d.net_bw ? "net-bw"
                    : c->net_lat != d.net_lat ? "net-lat"
                    : c->node_bw != d.node_bw ? "node-bw"
                    : c->node_lat != d.node_lat ? "node-lat"
                    : c->ranks_per_node ? "ranks-per-node"
                    : c->placement != d.placement ? "placement"
                    : c->platform[0] ? "platform"
                    : c->hostfile[0] ? "hostfile" : NULL;
    if (!o && c->threads > 1)
        o = "threads", why = "SMPI runs a rank as one thread (MPI_THREAD_SINGLE)";
    if (!o && !strcmp(c->strategy, "qfb"))
        o = "strategy", why = "qfb runs a forward and a backward thread per rank; SMPI gives a "
                              "rank one (MPI_THREAD_SINGLE)";
    if (!o && c->allreduce_algo == 2)
        o = "allreduce-algo", why = "the two-level all-reduce's in-place MPI_Ireduce is not "
                                    "safe under SMPI 3.32: the flat one runs";
    if (!o && strcmp(c->compute_cost, "shipped") != 0 &&
        strncmp(c->compute_cost, "calibrated:", 11) != 0)
        o = "compute-cost", why = "under SMPI compute is charged from a cost table: give "
                                  "--compute-cost shipped or calibrated:FILE";
    if (o) het_error_set(HET_EINVAL, "%s: not in the SMPI build: %s", o, why);
    return o;
}
#endif

int het_train_config_check(const het_train_config *c) {
    het_schedule s = c->sched;
    s.total_epochs = c->epochs;
    if (het_schedule_check(&s) || het_optim_check(&c->optim)) return HET_EINVAL;
    if (c->optim.kind != HET_OPT_SGD && c->optim.nesterov)
        return het_error_set(HET_EINVAL, "nesterov: applies to SGD only, not adam");
    if (c->resume && !c->checkpoint[0])
        return het_error_set(HET_EINVAL, "resume: needs --checkpoint FILE to resume from");
    if (strcmp(c->speeds, "auto") != 0 && c->speeds_file[0])
        return het_error_set(HET_EINVAL, "speeds: '%s' and speeds-file '%s' both give hgc's "
                             "speeds; give one", c->speeds, c->speeds_file);
    const char *cc = c->compute_cost;
    if (strcmp(cc, "measured") != 0 && strcmp(cc, "calibrated") != 0 &&
        strcmp(cc, "shipped") != 0 && !(strncmp(cc, "calibrated:", 11) == 0 && cc[11]))
        return het_error_set(HET_EINVAL, "compute-cost: '%s', expected measured, calibrated, "
                             "calibrated:FILE or shipped", cc);
#ifdef HET_SMPI
    if ((cc = smpi_refused(c))) return HET_EINVAL;
    cc = c->compute_cost;
#else
    if (strcmp(cc, "measured") != 0 && c->clock != HET_CLOCK_VIRTUAL)
        return het_error_set(HET_EINVAL, "compute-cost: '%s' costs the virtual clock's compute; "
                             "add --clock virtual", cc);
#endif
    if (c->p2p_model == 1 && c->clock != HET_CLOCK_VIRTUAL)
        return het_error_set(HET_EINVAL, "p2p-model: arbiter orders messages in virtual time; "
                             "add --clock virtual");
    if (c->p2p_model == 1 && !strcmp(c->strategy, "qfb"))
        return het_error_set(HET_EINVAL, "p2p-model: arbiter carries one lane per rank; qfb's "
                             "stage threads send at their own times (not yet)");
    if (c->hostfile[0] && !c->platform[0])
        return het_error_set(HET_EINVAL, "hostfile: places ranks on a platform's hosts; add "
                             "--platform FILE");
    if (c->platform[0]) { /* the file is the cluster: the shorthand options would contradict it */
        const het_train_config d = het_train_config_defaults();
        const char *clash = c->ranks_per_node ? "ranks-per-node"
                            : c->placement != d.placement ? "placement"
                            : c->slowdown[0] ? "slowdown"
                            : c->slowdown_at[0] ? "slowdown-at"
                            : c->net_bw != d.net_bw ? "net-bw"
                            : c->net_lat != d.net_lat ? "net-lat"
                            : c->node_bw != d.node_bw ? "node-bw"
                            : c->node_lat != d.node_lat ? "node-lat" : NULL;
        if (clash)
            return het_error_set(HET_EINVAL, "platform: %s describes the cluster; --%s would "
                                 "change it (give one or the other)", c->platform, clash);
    }
    if (c->metrics_steps && !c->metrics[0])
        return het_error_set(HET_EINVAL, "metrics-steps: needs --metrics FILE");
    if (het_sopt_check(c)) return HET_EINVAL;
    if (het_train_check_paths(c, NULL)) return HET_EINVAL;
    het_shape sh;
    int classes;
    if (het_train_data_shape(c, &sh, &classes)) return HET_EINVAL;
    if (c->model_file[0]) return HET_OK; /* read (and checked) when the model is built */
    int known = 0;
    for (const char *const *z = het_zoo_names(); *z; z++) known |= strcmp(*z, c->model) == 0;
    if (!known) return het_error_set(HET_EINVAL, "model: unknown model '%s'", c->model);
    return HET_OK;
}

/* "CxHxW" into s: three whole numbers >= 1 (at most 2^20 each; the catalog checks the rest). */
static int parse_shape(const char *text, het_shape *s) {
    int v[3] = {0, 0, 0}, k = 0;
    const char *p = text;
    for (; k < 3; k++, p++) {
        long x = 0;
        const char *start = p;
        for (; *p >= '0' && *p <= '9'; p++)
            if ((x = x * 10 + (*p - '0')) > (1L << 20)) break;
        if (p == start || x < 1 || x > (1L << 20) || *p != (k < 2 ? 'x' : '\0')) break;
        v[k] = (int)x;
    }
    if (k < 3)
        return het_error_set(HET_EINVAL, "synthetic-shape: '%s', expected CxHxW, three whole "
                             "numbers >= 1 such as 3x32x32 (channels x height x width)", text);
    *s = (het_shape){v[0], v[1], v[2]};
    return HET_OK;
}

int het_train_data_spec(const het_train_config *c, het_dataset_spec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->name = c->data;
    spec->dir = c->data_dir[0] ? c->data_dir : NULL;
    spec->n_classes = c->classes;
    spec->n_train = c->synthetic_samples;
    return c->synthetic_shape[0] ? parse_shape(c->synthetic_shape, &spec->shape) : HET_OK;
}

int het_train_data_shape(const het_train_config *c, het_shape *shape, int *n_classes) {
    het_dataset_spec spec;
    int st = het_train_data_spec(c, &spec);
    return st ? st : het_dataset_describe(&spec, shape, n_classes);
}

int het_train_data_load(const het_train_config *c, het_dataset *train, het_dataset *test) {
    het_dataset_spec spec;
    int st = het_train_data_spec(c, &spec);
    if (st) {
        memset(train, 0, sizeof *train);
        memset(test, 0, sizeof *test);
        return st;
    }
    return het_dataset_load(train, test, &spec);
}
