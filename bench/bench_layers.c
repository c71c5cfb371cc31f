/* Per-layer micro-benchmark: forward and backward time of every layer of LeNet-5 and of the
 * MLP (the zoo's layer lists, het_zoo_layers) at Fashion-MNIST shapes, at batch 16 (LeNet's
 * chunk in the model), 32 and 64 (the MLP's share per worker with 2 and 1 workers). Best of N
 * repetitions (the machine is shared), microseconds per call and per sample. Run with
 * OPENBLAS_CORETYPE=SkylakeX (the program re-executes itself with it when needed).
 *
 *   bench_layers [--reps N] [--model lenet5|mlp|cifar-cnn|resnet20|all]  (all: lenet5, mlp)
 *
 * Prints one line per layer and batch: model, index, layer, batch, fwd_us, bwd_us (input and
 * parameter gradients), its split din_us / dparam_us (dparam_us: backward with din NULL, which
 * skips the input gradient; for a residual block the inner input gradients stay in it), and
 * us/sample. Layers run in the layouts and fusions a model picks for them (nn.h:
 * het_layers_choose_layouts; a ReLU fused into the convolution before it shows 0 forward);
 * HET_LAYOUT=plain runs them all on NCHW, unfused. --precision bf16 runs them as a bf16 model
 * does (nn.h: het_model_set_precision): the weights rounded once beforehand (as the model does
 * once per batch), each call rounding its input and output gradient into het_exec.lp, which
 * the times include; the lines then start precision=bf16. --bf16-kernels: which bf16 kernels
 * (tensor.h: het_bf16_kernels; default auto, as hetrain train). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"

typedef struct lrig {
    het_layer *l;
    het_layer_plan p;
    float *params, *grads, *state, *cache, *work, *in, *out, *dout, *din;
    het_exec ex;
} lrig;

static float *rnd(size_t n, het_rng *r) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * het_rng_uniform(r) - 1.0f;
    return p;
}

static int bf16; /* --precision bf16 */

static int bench_model(const char *name, het_layer **L, int n, het_shape in, int batch, int reps,
                       int first_din_null) {
    het_rng r;
    het_rng_seed(&r, 7);
    het_shape s = in;
    double tot_f = 0, tot_b = 0;
    /* plan every layer, then the layouts and fusions a model would choose (nn.h) */
    het_layer_plan *plans = calloc((size_t)n, sizeof *plans);
    if (!plans) return 1;
    for (int i = 0; i < n; i++) {
        if (L[i]->ops->plan(L[i], s, &plans[i]) != HET_OK) {
            fprintf(stderr, "plan %s: %s\n", L[i]->ops->name, het_error_msg());
            free(plans);
            return 1;
        }
        L[i]->in = s;
        L[i]->out = s = plans[i].out;
    }
    if (het_layers_choose_layouts(L, plans, n) != HET_OK) {
        free(plans);
        return 1;
    }
    s = in;
    for (int i = 0; i < n; i++) {
        lrig g;
        memset(&g, 0, sizeof g);
        g.l = L[i];
        g.p = plans[i];
        size_t ni = het_shape_size(s) * (size_t)batch, no = het_shape_size(g.p.out) * (size_t)batch;
        g.params = rnd(g.p.n_params, &r);
        g.grads = rnd(g.p.n_params, &r);
        g.state = rnd(g.p.n_state, &r);
        g.cache = rnd(g.p.cache_per_sample * (size_t)batch, &r);
        g.work = rnd(g.p.work_per_sample * (size_t)batch + g.p.work_fixed, &r);
        g.in = rnd(ni, &r);
        g.out = rnd(no, &r);
        g.dout = rnd(no, &r);
        g.din = rnd(ni, &r);
        if (g.l->ops->init) g.l->ops->init(g.l, g.params, g.state, &r);
        g.ex = (het_exec){g.params, g.grads, g.state, g.cache, g.work, &r, 1, NULL, 0, 0, NULL, NULL};
        float *lp = NULL;
        uint16_t *bits = NULL;
        if (bf16) { /* the model's bf16 weights and scratch (nn.h: HET_LP_PER_SAMPLE) */
            size_t io = ni > no ? ni : no;
            lp = rnd(HET_LP_PER_SAMPLE(io), &r); /* io is for the whole batch already */
            for (int q = 0; q < 2; q++)
                het_vround_bf16(g.params + g.p.lp_off[q], g.params + g.p.lp_off[q], g.p.lp_len[q]);
            g.ex.bf16 = 1;
            g.ex.lp = lp;
            if (g.p.lp_bits) { /* and as bf16 bits, as the model keeps them */
                bits = het_alloc(sizeof(uint16_t) * (g.p.n_params + 1));
                het_bf16_bits(bits, g.params, g.p.n_params);
                g.ex.wbits = bits;
            }
        }
        double bf = 1e30, bb = 1e30, bw = 1e30;
        float *din = (first_din_null && i == 0) ? NULL : g.din;
        for (int k = 0; k < reps; k++) {
            double t0 = het_now();
            g.l->ops->forward(g.l, &g.ex, g.in, g.out, batch);
            double t1 = het_now();
            g.l->ops->backward(g.l, &g.ex, g.in, g.out, g.dout, din, batch);
            double t2 = het_now();
            if (g.p.n_params > 0) /* parameter gradients alone: backward with din NULL */
                g.l->ops->backward(g.l, &g.ex, g.in, g.out, g.dout, NULL, batch);
            double t3 = het_now();
            if (t1 - t0 < bf) bf = t1 - t0;
            if (t2 - t1 < bb) bb = t2 - t1;
            if (t3 - t2 < bw) bw = t3 - t2;
        }
        if (g.p.n_params == 0 || !din) bw = din ? 0 : bb;
        printf("%s", bf16 ? "precision=bf16 " : "");
        printf("model=%s layer=%d name=%s batch=%d fwd_us=%.2f bwd_us=%.2f din_us=%.2f "
               "dparam_us=%.2f us_per_sample=%.3f\n",
               name, i, g.l->ops->name, batch, bf * 1e6, bb * 1e6, (bb - bw) * 1e6, bw * 1e6,
               (bf + bb) * 1e6 / batch);
        tot_f += bf;
        tot_b += bb;
        s = g.p.out;
        het_free(g.params); het_free(g.grads); het_free(g.state); het_free(g.cache); het_free(g.work); het_free(g.in);
        het_free(g.out); het_free(g.dout); het_free(g.din); het_free(lp);
        het_free(bits);
    }
    free(plans);
    printf("%s", bf16 ? "precision=bf16 " : "");
    printf("model=%s total batch=%d fwd_us=%.2f bwd_us=%.2f us_per_sample=%.3f img_per_s=%.0f\n",
           name, batch, tot_f * 1e6, tot_b * 1e6, (tot_f + tot_b) * 1e6 / batch,
           batch / (tot_f + tot_b));
    return 0;
}

/* The zoo's own layer list (het_zoo_layers), so that this measures the network that trains. */
static int run(const char *model, int batch, int reps) {
    het_layer **L = NULL;
    int n = 0;
    het_shape in = {1, 28, 28};
    if (het_zoo_layers(model, in, 10, &L, &n) != HET_OK) {
        fprintf(stderr, "bench_layers: %s\n", het_error_msg());
        return 1;
    }
    int st = bench_model(model, L, n, in, batch, reps, 1);
    for (int i = 0; i < n; i++) L[i]->ops->destroy(L[i]);
    free(L);
    return st;
}

int main(int argc, char **argv) {
    het_blas_select_kernels(argv);
    het_blas_set_threads(1);
    int reps = 200;
    const char *model = "all";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) model = argv[++i];
        else if (strcmp(argv[i], "--bf16-kernels") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "onednn") == 0 || strcmp(argv[i + 1], "portable") == 0 ||
                  strcmp(argv[i + 1], "auto") == 0)) {
            const char *k = argv[++i];
            het_dnnl_bf16_choose(strcmp(k, "onednn") == 0     ? HET_BF16_KERNELS_ONEDNN
                                 : strcmp(k, "portable") == 0 ? HET_BF16_KERNELS_PORTABLE
                                                              : HET_BF16_KERNELS_AUTO);
        } else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "fp32") == 0 || strcmp(argv[i + 1], "bf16") == 0))
            bf16 = strcmp(argv[++i], "bf16") == 0;
        else {
            fprintf(stderr, "usage: bench_layers [--reps N] [--model lenet5|mlp|cifar-cnn|resnet20|all] [--precision fp32|bf16] [--bf16-kernels auto|onednn|portable]\n");
            return 2;
        }
    }
    int st = 0;
    const int batches[3] = {16, 32, 64};
    const char *const *names = het_zoo_names();
    for (int b = 0; b < 3; b++)
        for (int k = 0; names[k]; k++)
            if (strcmp(model, names[k]) == 0 || (strcmp(model, "all") == 0 && k < 2))
                st |= run(names[k], batches[b], reps);
    return st;
}
