/* What the trainer prints besides the epoch line: the resolved configuration at the start and
 * the per-rank time split of an epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/tensor.h"
#include "train/trainer.h"

/* Bytes as "85 MB" / "1.3 GB" (decimal units, three digits). */
static const char *mb(char *buf, size_t n, double bytes) {
    if (bytes >= 1e9) snprintf(buf, n, "%.3g GB", bytes / 1e9);
    else snprintf(buf, n, "%.3g MB", bytes / 1e6);
    return buf;
}

/* Whether the datasets are held once per host (some host of several ranks shares its copy). */
static int data_per_host(const het_trainer *t) {
    return t->data_copies == t->data_hosts && t->data_copies < t->size;
}

/* The datasets' memory: one copy's bytes, and how many copies the ranks hold (shared_data.c). */
static void print_data(const het_trainer *t) {
    char one[32], rank[32], all[32];
    double b = (double)t->data_bytes;
    if (t->size == 1) {
        het_log(HET_LOG_INFO, "memory: dataset %s decoded (train + test), one copy\n",
                mb(one, sizeof one, b));
    } else if (data_per_host(t)) {
        het_log(HET_LOG_INFO, "memory: dataset %s decoded (train + test), held once per host "
                "in shared memory: %d cop%s for %d ranks on %d host%s, %s per rank\n",
                mb(one, sizeof one, b), t->data_copies, t->data_copies == 1 ? "y" : "ies",
                t->size, t->data_hosts, t->data_hosts == 1 ? "" : "s",
                mb(rank, sizeof rank, b * t->data_copies / t->size));
    } else {
        het_log(HET_LOG_INFO, "memory: dataset %s decoded (train + test), %d copies for %d ranks "
                "on %d host%s (%s), %s in all\n", mb(one, sizeof one, b), t->data_copies,
                t->size, t->data_hosts, t->data_hosts == 1 ? "" : "s",
                t->data_why ? t->data_why : "some hosts share theirs",
                mb(all, sizeof all, b * t->data_copies));
    }
}

void het_trainer_print_config(const het_trainer *t) {
    const het_train_config *c = &t->cfg;
    het_model *m = t->model;
    het_shape s = t->train.shape;
    het_log(HET_LOG_INFO, "hetrain: %s on %s: %lld train / %lld test samples of %dx%dx%d, "
            "%d classes\n", c->model, c->data, (long long)t->n_train, (long long)t->n_test, s.c,
            s.h, s.w, t->train.n_classes);
    /* one rank folds the update into the step (het_step_sync); several reduce in between */
    const char *ex = t->size <= 1 ? het_model_executor(m)
                                  : "generic: samples split over workers, then summed";
    het_log(HET_LOG_INFO, "model: %zu parameters, %.4g MFLOP/sample forward, %d worker "
            "thread%s (%s), %.1f MiB; OpenBLAS kernels %s; convolutions: %s\n",
            het_model_n_params(m), het_model_flops_per_sample(m) / 1e6, het_model_workers(m),
            het_model_workers(m) == 1 ? "" : "s", ex, (double)het_model_bytes(m) / 1048576.0,
            het_blas_corename(), het_dnnl_describe());
    if (c->precision == HET_PREC_BF16) {
        het_bf16_isa isa = het_bf16_cpu();
        char dn[160];
        het_dnnl_bf16_probe(dn, sizeof dn);
        const char *cpu = isa == HET_BF16_ISA_NONE ? "this CPU has neither AMX nor AVX512-BF16"
                          : isa == HET_BF16_ISA_AMX ? "this CPU has AMX"
                                                    : "this CPU has AVX512-BF16";
        char why[200];
        const int on = het_dnnl_bf16_why(why, sizeof why), lp = het_model_lp_edges(m);
        if (on)
            het_log(HET_LOG_INFO, "precision: bf16 (convolutions and dense layers on bf16 "
                    "operands with fp32 sums, gradients all-reduced as bf16; fp32 master weights, "
                    "batch norm and loss); kernels: oneDNN's bf16 convolutions where oneDNN runs "
                    "a layer (%s: %s; %s) and its bf16 matmul for dense layers, the other layers "
                    "portable (rounded operands into the fp32 kernels); activations stay bf16 "
                    "on %d edge%s between convolutions\n", cpu, dn, why, lp, lp == 1 ? "" : "s");
        else if (why[0]) /* the CPU has bf16 kernels; the choice passed them over */
            het_log(HET_LOG_INFO, "precision: bf16 (convolutions and dense layers on bf16 "
                    "operands with fp32 sums, gradients all-reduced as bf16; fp32 master weights, "
                    "batch norm and loss); kernels: portable (rounded operands into the fp32 "
                    "kernels; %s: %s; %s)\n", cpu, dn, why);
        else
            het_log(HET_LOG_INFO, "precision: bf16 (convolutions and dense layers on bf16 "
                    "operands with fp32 sums, gradients all-reduced as bf16; fp32 master weights, "
                    "batch norm and loss); kernels: portable (for correctness, not speed): %s; "
                    "%s\n", cpu, dn);
    }
    size_t len = het_train_config_format(c, 1, NULL, 0);
    char *text = malloc(len + 1);
    if (!text) return;
    het_train_config_format(c, 1, text, len + 1);
    /* "key = value\n" lines -> "key=value key=value", empty paths left out */
    char *line = malloc(len + 16), *o = line;
    if (line) {
        o += sprintf(o, "config:");
        for (char *p = strtok(text, "\n"); p; p = strtok(NULL, "\n")) {
            char *eq = strstr(p, " = ");
            if (!eq || !eq[3]) continue;
            *eq = '\0';
            o += sprintf(o, " %s=%s", p, eq + 3);
        }
        het_log(HET_LOG_INFO, "%s\n", line);
    }
    free(line);
    free(text);
    if (t->mpi) {
        char topo[256];
        het_topo_describe(&t->topo, topo, sizeof topo);
        het_log(HET_LOG_INFO, "ranks: %s%s; strategy %s, %s batch %d", topo,
                c->ranks_per_node > 0 && c->placement == 1 ? ", placed cyclically" : "",
                c->strategy, t->strat->worker_batch ? "each worker's" : "global", c->batch);
        if (t->strat->world_grads && t->size > 1 && c->precision == HET_PREC_BF16)
            het_log(HET_LOG_INFO, ", all-reduce flat, gradients as bf16 summed in fp32");
        else if (t->strat->world_grads && t->size > 1)
            het_log(HET_LOG_INFO, ", all-reduce %s", het_allreduce_algo_name(
                        het_comm_allreduce_algo(t->comm, (het_allreduce_algo)c->allreduce_algo)));
        if (c->slowdown[0]) het_log(HET_LOG_INFO, ", slowdown %s", c->slowdown);
        if (c->net_bw > 0 || c->net_lat > 0)
            het_log(HET_LOG_INFO, ", emulated network %.3g B/s %.3g s", c->net_bw,
                    (double)c->net_lat);
        if (c->clock == HET_CLOCK_WALL && (c->slowdown[0] || c->slowdown_at[0] ||
                                           c->net_bw > 0 || c->net_lat > 0))
            het_log(HET_LOG_INFO, ", its waits %s", t->wait_spin ? "spin" : "sleep");
        het_log(HET_LOG_INFO, "\n");
    }
    print_data(t);
}

/* " | compute 81% comm 6% wait 11% delay 2% (rank 0), slowest rank 3 compute 97%" */
void het_trainer_format_split(const het_trainer *t, char *buf, size_t n) {
    buf[0] = '\0';
    if (t->size < 2 || t->rank != 0) return;
    const double *rt = t->ctx.rank_times;
    double tot = rt[0] + rt[1] + rt[2] + rt[3];
    int slow = 0;
    for (int q = 1; q < t->size; q++)
        if (rt[4 * q] > rt[4 * slow]) slow = q;
    const double *s = rt + 4 * slow;
    double tots = s[0] + s[1] + s[2] + s[3];
    if (tot <= 0 || tots <= 0) return;
    double node = 0, cross = 0; /* mean bytes per rank */
    for (int q = 0; q < t->size; q++) {
        node += t->ctx.rank_bytes[2 * q] / t->size;
        cross += t->ctx.rank_bytes[2 * q + 1] / t->size;
    }
    snprintf(buf, n, " | compute %.0f%% comm %.0f%% wait %.0f%% delay %.0f%% (rank 0), slowest "
             "rank %d compute %.0f%% | sent/rank node %.3g MB cross %.3g MB", 100 * rt[0] / tot,
             100 * rt[1] / tot, 100 * rt[2] / tot, 100 * rt[3] / tot, slow, 100 * s[0] / tots,
             node / 1e6, cross / 1e6);
}

int het_trainer_report_memory(het_trainer *t) {
    int64_t max, sum, pss;
    int st = het_trainer_memory(t, &max, &sum, &pss);
    if (st) return st;
    char a[32], b[32], c[32], d[32], ps[64] = ""; /* pss: what the host holds (shared_data.c) */
    if (pss >= 0)
        snprintf(ps, sizeof ps, ", proportional set%s %s", t->size > 1 ? " sum" : "",
                 mb(c, sizeof c, (double)pss));
    mb(d, sizeof d, (double)t->data_bytes);
#ifdef HET_SMPI
    /* SMPI runs every rank in one process: its peak is the simulation's, not a rank's */
    het_log(HET_LOG_INFO, "memory: peak RSS of the simulation (SMPI: all %d ranks in one "
            "process) %s; dataset %s\n", t->size, mb(a, sizeof a, (double)max), d);
    (void)sum, (void)b, (void)ps;
    return HET_OK;
#endif
    if (t->size == 1)
        het_log(HET_LOG_INFO, "memory: peak RSS %s%s; dataset %s\n",
                mb(a, sizeof a, (double)max), ps, d);
    else
        het_log(HET_LOG_INFO, "memory: peak RSS per rank max %s, sum %s over %d ranks%s; "
                "dataset %s %s (%d cop%s)\n", mb(a, sizeof a, (double)max),
                mb(b, sizeof b, (double)sum), t->size, ps, d,
                data_per_host(t) ? "shared per host" : "per rank", t->data_copies,
                t->data_copies == 1 ? "y" : "ies");
    return HET_OK;
}
