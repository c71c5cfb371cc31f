/* The commands of hetrain: train, eval, info, export. Output through het_log (rank 0);
 * failures through cli_fail (one line on stderr from rank 0, exit status 1). Under mpirun every
 * rank runs the command: train and eval are collective (the trainer agrees on failures);
 * export writes on rank 0 only; failures of per-rank steps are agreed with cli_agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "hetero/hetero.h"
#include "hetrain/netfile.h"

int cli_train(const het_train_config *c) {
    het_trainer *t;
    if (het_trainer_create(&t, c)) return cli_fail();
    int st = het_trainer_run(t);
    het_trainer_free(t);
    return st ? cli_fail() : CLI_OK;
}

int cli_eval(const het_train_config *c) {
    het_trainer *t;
    /* eval prints one line: not the training header that het_trainer_create prints */
    het_log_level level = het_log_get_level();
    het_log_set_level(HET_LOG_QUIET);
    int created = het_trainer_create(&t, c);
    het_log_set_level(level);
    if (created) return cli_fail();
    double loss, acc;
    /* the checkpoint's weights, or those the model was created with (--model-file's ONNX
     * initializers, --init-from) */
    int st = c->checkpoint[0] ? cli_agree(het_checkpoint_load_weights(het_trainer_model(t),
                                                                      c->model, c->checkpoint))
                              : HET_OK;
    if (!st) st = het_trainer_evaluate(t, &loss, &acc);
    if (!st) {
        int64_t n = het_trainer_test_set(t)->n;
        if (c->test_limit > 0 && c->test_limit < n) n = c->test_limit;
        het_log(HET_LOG_QUIET, "eval %s on %s (%lld test samples): test_loss %.4f test_acc "
                "%.4f\n", c->model, c->data, (long long)n, loss, acc);
    }
    het_trainer_free(t);
    return st ? cli_fail() : CLI_OK;
}

int cli_calibrate(const het_train_config *c) {
    if (cli_calibrate_wants_network()) return cli_calibrate_network(c); /* calibrate_net.c */
    het_trainer *t;
    if (het_trainer_create(&t, c)) return cli_fail();
    int P = het_trainer_size(t);
    double *rate = calloc((size_t)P, sizeof(double)), *s = calloc((size_t)P, sizeof(double));
    int st = rate && s ? HET_OK : het_error_set(HET_ENOMEM, "out of memory calibrating");
    if (!st && c->costs_out[0] && !(st = het_trainer_write_costs(t, c->costs_out)))
        het_log(HET_LOG_INFO, "compute costs: %s\n", c->costs_out);
    if (!st) st = het_trainer_calibrate(t, rate);
    if (!st) {
        memcpy(s, rate, (size_t)P * sizeof(double));
        het_speeds_normalize(s, P);
        for (int r = 0; r < P; r++)
            het_log(HET_LOG_INFO, "rank %d: %.0f samples/s, speed %.4f\n", r, rate[r], s[r]);
        if (c->out[0]) {
            char note[512];
            snprintf(note, sizeof note, "hetrain calibrate: %s on %s, batch %d, %d ranks, "
                     "slowdown %s", c->model, c->data, c->batch < 64 ? c->batch : 64, P,
                     c->slowdown[0] ? c->slowdown : "none");
            st = het_log_rank() == 0 ? het_speeds_write_file(c->out, s, P, note) : HET_OK;
            st = cli_agree(st);
            if (!st) het_log(HET_LOG_INFO, "speeds: %s\n", c->out);
        }
    }
    free(rate);
    free(s);
    het_trainer_free(t);
    return st ? cli_fail() : CLI_OK;
}

/* The run's network (the zoo's or --model-file's) and its model, without initial weights. */
int cli_own_option(int argc, char **argv, int *i, const char *const *own, int n,
                   const char **value) {
    const char *a = argv[*i], *eq = strchr(a, '=');
    *value = NULL;
    if (strncmp(a, "--", 2) != 0) return -1;
    size_t kn = eq ? (size_t)(eq - a - 2) : strlen(a) - 2;
    int k = -1;
    for (int j = 0; j < n && k < 0; j++)
        if (strlen(own[j]) == kn && strncmp(a + 2, own[j], kn) == 0) k = j;
    if (k < 0) return -1;
    if (eq)
        *value = eq + 1;
    else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0)
        *value = argv[++*i];
    return k;
}

int cli_build_model(const het_train_config *c, het_net *net, het_model **m) {
    het_shape in;
    int classes;
    *m = NULL;
    memset(net, 0, sizeof *net);
    if (het_train_data_shape(c, &in, &classes)) return HET_EINVAL;
    int st = c->model_file[0] ? het_net_read(net, c->model_file) : het_net_zoo(net, c->model);
    if (!st) st = het_net_build(m, net, in, classes, c->batch, c->threads);
    return st ? st : het_model_set_precision(*m, (het_precision)c->precision);
}

static void shape_str(char *buf, size_t n, het_shape s) {
    snprintf(buf, n, "%dx%dx%d", s.c, s.h, s.w);
}

int cli_info(const het_train_config *c) {
    if (c->platform[0] && cli_platform_describe(c) != CLI_OK) return CLI_FAIL;
    het_model *m;
    het_net net;
    if (cli_build_model(c, &net, &m)) {
        het_net_free(&net);
        return cli_fail();
    }
    het_shape in = het_model_in_shape(m);
    char a[32], b[32];
    shape_str(a, sizeof a, in);
    het_log(HET_LOG_QUIET, "model %s%s%s: input %s, %d classes%s\n", c->model,
            c->model_file[0] ? " from " : "", c->model_file, a, het_model_n_classes(m),
            net.params ? ", initial weights from the file" : "");
    het_log(HET_LOG_QUIET, "  %3s  %-10s %-12s %-12s %10s  %s\n", "#", "layer", "input", "output",
            "params", "as written");
    for (int i = 0; i < het_model_n_layers(m); i++) {
        const het_layer *l = het_model_layer(m, i);
        size_t off, n;
        het_model_layer_params(m, i, &off, &n);
        shape_str(a, sizeof a, l->in);
        shape_str(b, sizeof b, l->out);
        char text[256] = "";
        het_net one = {.n = 1};
        one.layer[0] = net.layer[i];
        het_net_format(&one, text, sizeof text);
        text[strcspn(text, "\n")] = 0;
        het_log(HET_LOG_QUIET, "  %3d  %-10s %-12s %-12s %10zu  %s\n", i, l->ops->name, a, b, n,
                text);
    }
    het_net_free(&net);
    size_t np = het_model_n_params(m);
    het_log(HET_LOG_QUIET, "parameters: %zu (%.1f KiB as float32), state: %zu\n", np,
            (double)np * 4 / 1024.0, het_model_n_state(m));
    het_log(HET_LOG_QUIET, "FLOPs per sample: %.4g M forward (a training step is about 3x)\n",
            het_model_flops_per_sample(m) / 1e6);
    het_log(HET_LOG_QUIET, "bytes: %.2f MiB of model buffers at batch %d with %d worker%s\n",
            (double)het_model_bytes(m) / 1048576.0, het_model_max_batch(m),
            het_model_workers(m), het_model_workers(m) == 1 ? "" : "s");
    het_model_free(m);

    het_dataset tr, te;
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
    if (het_train_data_load(c, &tr, &te)) {
        het_log(HET_LOG_QUIET, "dataset %s: not available: %s\n", c->data, het_error_msg());
        return CLI_OK;
    }
    shape_str(a, sizeof a, tr.shape);
    het_log(HET_LOG_QUIET, "dataset %s: %lld train / %lld test samples of %s, %d classes\n",
            c->data, (long long)tr.n, (long long)te.n, a, tr.n_classes);
    for (int ch = 0; ch < tr.shape.c && ch < 3; ch++)
        het_log(HET_LOG_QUIET, "  channel %d: mean %.4f std %.4f (of pixel/255)\n", ch,
                (double)tr.mean[ch], (double)tr.std[ch]);
    int64_t counts[256] = {0};
    for (int64_t i = 0; i < tr.n; i++) counts[tr.labels[i]]++;
    het_log(HET_LOG_QUIET, "  train labels:");
    for (int k = 0; k < tr.n_classes && k < 256; k++)
        het_log(HET_LOG_QUIET, " %d:%lld", k, (long long)counts[k]);
    het_log(HET_LOG_QUIET, "\n");
    het_dataset_free(&tr);
    het_dataset_free(&te);
    return CLI_OK;
}

int cli_export(const het_train_config *c) {
    het_model *m = NULL;
    het_net net;
    int st = cli_agree(cli_build_model(c, &net, &m));
    if (!st && c->checkpoint[0]) {
        st = het_checkpoint_load_weights(m, c->model, c->checkpoint);
    } else if (!st) { /* the weights the file gives (ONNX initializers, --init-from) */
        het_model_init_params(m, c->seed);
        st = het_net_load_weights(&net, m);
        if (!st && c->init_from[0]) st = het_safetensors_read(m, c->init_from);
    }
    if (!st && het_log_rank() == 0 && c->export_safetensors[0])
        st = het_safetensors_write(m, c->export_safetensors);
    if (!st && het_log_rank() == 0 && c->export_onnx[0])
        st = het_net_write_onnx(&net, m, c->export_onnx);
    st = cli_agree(st);
    const char *out[2] = {c->export_safetensors, c->export_onnx};
    for (int i = 0; i < 2 && !st; i++)
        if (out[i][0])
            het_log(HET_LOG_INFO, "wrote %s: %zu parameters of %s\n", out[i],
                    het_model_n_params(m), c->model);
    het_model_free(m);
    het_net_free(&net);
    return st ? cli_fail() : CLI_OK;
}
