/* bench_train: throughput and memory of hetrain's single-process training engine.
 *
 * DESIGN. Runs full training epochs on Fashion-MNIST exactly as `hetrain train` does on one
 * process (sampler permutation per epoch, then per batch het_batch_step: gather, forward,
 * loss, backward with grad_scale 1/B and the SGD momentum 0.9 update, folded into one pass for
 * dense stacks, nn/dense_stack.c), after an untimed warm-up of a few steps whose effect is then
 * undone (parameters re-initialized from the seed, momentum zeroed), so that the timed epochs are
 * those of a fresh run and the test accuracy printed at the end is comparable to a real run.
 * It prints ONE line of key=value pairs (bench/run.sh parses it); it never passes or fails on
 * time.
 *
 * Figures:
 *   img_per_s       images trained / wall seconds of the timed epochs (gather + step + update)
 *   train_flop      training FLOPs per sample = 3 F - F1, where F = het_model_flops_per_sample
 *                   (forward multiply-adds x 2 of the weight layers) and F1 = the forward FLOPs
 *                   of the first weight layer, whose input gradient is never computed:
 *                   forward F + weight gradient F + input gradient (F - F1)
 *   gflops          train_flop * img_per_s / 1e9
 *   sgemm_gflops    OpenBLAS sgemm, n = 1024, with as many BLAS threads as the run uses cores
 *                   (workers x BLAS threads), measured in this process just before training
 *                   (best of 5 timed groups of 8 calls)
 *   peak_frac       gflops / sgemm_gflops
 *   fma_gflops      the fp32 peak of the same cores: independent 16-lane fused multiply-adds
 *                   (AVX-512; AVX2 8-lane where there is no AVX-512), one thread a core, best of
 *                   5 groups; fma_frac = gflops / fma_gflops
 *   rss_mb          peak resident set size of the process (getrusage ru_maxrss), MiB
 *   test_acc        test-set accuracy after the timed epochs
 *   exec            stack: the dense-stack executor (features split over workers, update folded
 *                   in); batch: the generic one (batch split, worker reduction, then update)
 *   finite          1 when every step's loss, weights and gradients stayed finite (`hetrain
 *                   train` checks the loss and the optimizer's report on the weights it wrote,
 *                   het_update.nonfinite, every step: both free)
 *   scan_us         mean microseconds per step of a scan of the gradients (het_all_finite),
 *                   what --on-nan skip-step adds to every step (run after each timed step, its
 *                   time taken out of seconds and img_per_s)
 *   scan_frac       scan time / the timed epochs' training time
 *
 * Usage: bench_train [--model mlp|lenet5|cifar-cnn|resnet20] [--threads N] [--batch 64]
 *                    [--epochs 1] [--data-dir DIR] [--data NAME] [--lr 0.05] [--seed 1]
 *                    [--warmup 20] [--blas-threads N] [--no-peak] [--blas-info] [--limit N]
 * --limit N trains on the first N samples of the training set and tests on the first N test
 * images (the CNNs: an epoch of 60 000 takes minutes).
 * --blas-info prints blas_core=NAME (the OpenBLAS kernel set chosen at start-up) and exits.
 * --precision bf16 trains with convolutions and dense layers on bf16 operands
 * (het_model_set_precision); the line then starts precision=bf16 kernels=onednn where oneDNN's
 * bf16 kernels run (a CPU with AMX or AVX512-BF16: het_dnnl_bf16_enabled; the convolutions of
 * fewer than 16 channels stay portable) and kernels=portable elsewhere (rounded operands into
 * the fp32 kernels). --bf16-kernels auto|onednn|portable: hetrain train's choice of them
 * (tensor.h: het_bf16_kernels; default auto).
 * --threads N runs N model workers; the BLAS runs 1 thread when N > 1 (so N cores in all) unless
 * --blas-threads overrides it (e.g. --threads 1 --blas-threads 2: one worker, threaded BLAS). */
#include <cblas.h> /* openblas_get_corename: which kernels OpenBLAS picked for this CPU */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "hetrain/batch.h"
#include "hetrain/core.h"
#include "hetrain/data.h"
#include "hetrain/nn.h"
#include "hetrain/optim.h"
#include "hetrain/train.h"
#include "hetrain/tensor.h"

typedef struct bench_opts {
    const char *model, *data, *data_dir;
    int threads, blas_threads, batch, epochs, warmup, peak, limit;
    het_precision precision;
    float lr;
    uint64_t seed;
} bench_opts;

static void usage(FILE *f) {
    fprintf(f, "usage: bench_train [--model mlp|lenet5|cifar-cnn|resnet20] [--threads N] [--batch 64] [--epochs 1]\n"
               "                   [--data-dir DIR] [--data fashion-mnist] [--lr 0.05] [--seed 1]\n"
               "                   [--warmup 20] [--blas-threads N] [--no-peak] [--blas-info]\n"
               "                   [--limit N]  (train and test on the first N samples)\n"
               "                   [--precision fp32|bf16] [--bf16-kernels auto|onednn|portable]\n");
}

static int parse_int(const char *s, int lo, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > 1000000) return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--blas-info") == 0) {
            printf("blas_core=%s\n", openblas_get_corename());
            exit(0);
        } else if (strcmp(a, "--no-peak") == 0) {
            o->peak = 0;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_train: %s needs a value\n", a);
            return -1;
        }
        if (strcmp(a, "--model") == 0) o->model = v;
        else if (strcmp(a, "--data") == 0) o->data = v;
        else if (strcmp(a, "--data-dir") == 0) o->data_dir = v;
        else if (strcmp(a, "--threads") == 0) bad = parse_int(v, 1, &o->threads);
        else if (strcmp(a, "--blas-threads") == 0) bad = parse_int(v, 1, &o->blas_threads);
        else if (strcmp(a, "--batch") == 0) bad = parse_int(v, 1, &o->batch);
        else if (strcmp(a, "--epochs") == 0) bad = parse_int(v, 1, &o->epochs);
        else if (strcmp(a, "--limit") == 0) bad = parse_int(v, 1, &o->limit);
        else if (strcmp(a, "--warmup") == 0) bad = parse_int(v, 0, &o->warmup);
        else if (strcmp(a, "--bf16-kernels") == 0) {
            bad = strcmp(v, "auto") != 0 && strcmp(v, "onednn") != 0 && strcmp(v, "portable") != 0;
            het_dnnl_bf16_choose(strcmp(v, "onednn") == 0     ? HET_BF16_KERNELS_ONEDNN
                                 : strcmp(v, "portable") == 0 ? HET_BF16_KERNELS_PORTABLE
                                                              : HET_BF16_KERNELS_AUTO);
        } else if (strcmp(a, "--precision") == 0) {
            bad = strcmp(v, "fp32") != 0 && strcmp(v, "bf16") != 0;
            o->precision = strcmp(v, "bf16") == 0 ? HET_PREC_BF16 : HET_PREC_FP32;
        }
        else if (strcmp(a, "--seed") == 0) {
            int s;
            bad = parse_int(v, 0, &s);
            o->seed = (uint64_t)s;
        } else if (strcmp(a, "--lr") == 0) {
            char *end;
            o->lr = strtof(v, &end);
            bad = *end != '\0' || !(o->lr > 0);
        } else {
            fprintf(stderr, "bench_train: unknown option %s\n", a);
            usage(stderr);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "bench_train: bad value '%s' for %s\n", v, a);
            return -1;
        }
        i++;
    }
    return 0;
}

/* Best GFLOP/s of OpenBLAS sgemm C = A B at n x n x n over 5 groups of calls. */
static double sgemm_peak(int n) {
    size_t nn = (size_t)n * (size_t)n;
    float *a = het_alloc(nn * sizeof(float)), *b = het_alloc(nn * sizeof(float));
    float *c = het_alloc(nn * sizeof(float));
    if (!a || !b || !c) {
        het_free(a);
        het_free(b);
        het_free(c);
        return 0;
    }
    het_rng r;
    het_rng_seed(&r, 3);
    for (size_t i = 0; i < nn; i++) {
        a[i] = het_rng_uniform(&r);
        b[i] = het_rng_uniform(&r);
    }
    het_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up: thread pool, caches */
    double flop = 2.0 * n * (double)n * n, best = 0;
    for (int g = 0; g < 5; g++) {
        int reps = 8;
        double t0 = het_now();
        for (int k = 0; k < reps; k++) het_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = het_now() - t0, rate = reps * flop / dt / 1e9;
        if (rate > best) best = rate;
    }
    het_free(a);
    het_free(b);
    het_free(c);
    return best;
}

/* fp32 peak: 12 independent chains of fused multiply-adds per thread (enough to cover the FMA
 * latency on two ports), `iters` rounds; the sum is returned so nothing is optimized away. */
#define FMA_ITERS 20000000L
__attribute__((target("avx512f"))) static float fma_chains512(long iters) {
    __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
    return s;
}
__attribute__((target("avx2,fma"))) static float fma_chains256(long iters) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    float s = 0, v[8];
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(v, a[i]);
        for (int j = 0; j < 8; j++) s += v[j];
    }
    return s;
}
static volatile float fma_sink;
static void *fma_thread(void *arg) {
    long iters = *(const long *)arg;
    fma_sink = __builtin_cpu_supports("avx512f") ? fma_chains512(iters) : fma_chains256(iters);
    return NULL;
}
/* Best GFLOP/s of `threads` threads running the chains at once. */
static double fma_peak(int threads) {
    int lanes = __builtin_cpu_supports("avx512f") ? 16 : 8;
    long iters = FMA_ITERS / 8;
    double best = 0;
    for (int g = 0; g < 5; g++) {
        pthread_t t[64];
        int n = threads < 64 ? threads : 64;
        double t0 = het_now();
        for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, fma_thread, &iters);
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
        double rate = (double)n * (double)iters * 12.0 * lanes * 2.0 / (het_now() - t0) / 1e9;
        if (rate > best) best = rate;
    }
    return best;
}

/* Forward FLOPs per sample of the first layer with parameters, counted as
 * het_model_flops_per_sample counts them (2 x parameters x output positions). */
static double first_weight_layer_flops(const het_model *m) {
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, count;
        het_model_layer_params(m, i, &off, &count);
        if (count == 0) continue;
        const het_layer *l = het_model_layer(m, i);
        return 2.0 * (double)count * (double)l->out.h * (double)l->out.w;
    }
    return 0;
}

static double test_accuracy(het_model *m, const het_dataset *test, float *x, uint8_t *y,
                            int64_t *idx, int batch) {
    int64_t correct = 0;
    for (int64_t s = 0; s < test->n; s += batch) {
        int n = (int)(test->n - s < batch ? test->n - s : batch);
        for (int i = 0; i < n; i++) idx[i] = s + i;
        het_dataset_gather(test, idx, n, x, y);
        het_batch_result r;
        if (het_model_eval_batch(m, x, y, n, &r) != HET_OK) return -1;
        correct += r.correct;
    }
    return (double)correct / (double)test->n;
}

int main(int argc, char **argv) {
    het_blas_select_kernels(argv); /* may re-exec once with OPENBLAS_CORETYPE set */
    bench_opts o = {"mlp", "fashion-mnist", NULL, 1, 0, 64, 1, 20, 1, 0, HET_PREC_FP32, 0.05f, 1};
    if (parse_args(argc, argv, &o) != 0) return 2;

    het_dataset train, test;
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    het_model *m = NULL;
    het_sampler smp;
    memset(&smp, 0, sizeof smp);
    float *x = NULL, *opt_state = NULL;
    uint8_t *y = NULL;
    int rc = 1;

    int st = het_dataset_load_named(&train, &test, o.data, o.data_dir);
    if (st != HET_OK) goto fail;
    st = het_zoo_build(&m, o.model, train.shape, train.n_classes, o.batch, o.threads);
    if (st == HET_OK) st = het_model_set_precision(m, o.precision);
    if (st != HET_OK) goto fail;
    int workers = het_model_workers(m);
    int blas_threads = o.blas_threads > 0 ? o.blas_threads : (workers > 1 ? 1 : o.threads);

    /* sgemm ceiling with as many BLAS threads as cores this run uses */
    int cores = workers * blas_threads;
    double peak = 0, fpeak = 0;
    if (o.peak) {
        het_blas_set_threads(cores);
        peak = sgemm_peak(1024);
        fpeak = fma_peak(cores);
    }
    het_blas_set_threads(blas_threads);

    size_t in_sz = het_shape_size(train.shape), n_params = het_model_n_params(m);
    het_optim_config oc = het_optim_defaults();
    oc.kind = HET_OPT_SGD;
    oc.momentum = 0.9f;
    size_t n_state = het_optim_state_floats(&oc, n_params);
    x = het_alloc((size_t)o.batch * in_sz * sizeof(float));
    y = het_alloc((size_t)o.batch);
    opt_state = het_alloc((n_state ? n_state : 1) * sizeof(float));
    if (!x || !y || !opt_state) {
        st = HET_ENOMEM;
        goto fail;
    }
    if (o.limit > 0 && o.limit < train.n) train.n = o.limit; /* the first N samples */
    if (o.limit > 0 && o.limit < test.n) test.n = o.limit;
    st = het_sampler_init(&smp, train.n, o.seed, 1);
    if (st != HET_OK) goto fail;

    /* untimed warm-up on the last epoch's permutation, then undone */
    het_model_init_params(m, o.seed);
    het_sampler_set_epoch(&smp, 1000);
    for (int s = 0; s < o.warmup && (int64_t)(s + 1) * o.batch <= train.n; s++) {
        het_update u = {&oc, o.lr, opt_state, s + 1, NULL};
        het_batch_result r;
        st = het_batch_step(m, &(het_batch){&train, smp.perm + (size_t)s * (size_t)o.batch, o.batch,
                                           x, y},
                            1.0f / (float)o.batch, (uint64_t)s, &u, &r);
        if (st != HET_OK) goto fail;
    }
    het_model_init_params(m, o.seed);
    memset(opt_state, 0, (n_state ? n_state : 1) * sizeof(float));

    /* timed epochs */
    int64_t t = 0, images = 0;
    double loss_sum = 0, scan_s = 0;
    int finite = 1, bad = 0;
    double t0 = het_now();
    for (int e = 0; e < o.epochs; e++) {
        het_sampler_set_epoch(&smp, e);
        for (int64_t s = 0; s < train.n; s += o.batch) {
            int n = (int)(train.n - s < o.batch ? train.n - s : o.batch);
            het_update u = {&oc, o.lr, opt_state, t + 1, &bad}; /* as `hetrain train`, one rank */
            het_batch_result r;
            st = het_batch_step(m, &(het_batch){&train, smp.perm + s, n, x, y}, 1.0f / (float)n,
                                (uint64_t)t, &u, &r);
            if (st != HET_OK) goto fail;
            finite &= !bad && isfinite(r.loss_sum); /* hetrain train's per-step check */
            double c0 = het_now(); /* what --on-nan skip-step adds: a scan of the gradients */
            finite &= het_all_finite(het_model_grads(m), het_model_n_params(m));
            scan_s += het_now() - c0;
            t++;
            loss_sum += r.loss_sum;
            images += n;
        }
    }
    double secs = het_now() - t0 - scan_s; /* the scan is measured apart (scan_us) */

    int64_t *idx = het_alloc((size_t)o.batch * sizeof(int64_t));
    if (!idx) {
        st = HET_ENOMEM;
        goto fail;
    }
    double acc = test_accuracy(m, &test, x, y, idx, o.batch);
    het_free(idx);
    if (acc < 0) {
        st = HET_EINVAL;
        goto fail;
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double F = het_model_flops_per_sample(m), F1 = first_weight_layer_flops(m);
    double train_flop = 3.0 * F - F1, ips = (double)images / secs;
    double gflops = train_flop * ips / 1e9;
    printf("precision=%s kernels=%s ", het_precision_name(o.precision),
           o.precision != HET_PREC_BF16 ? "fp32"
           : het_dnnl_bf16_enabled()     ? "onednn"
                                         : "portable");
    printf("impl=hetrain model=%s threads=%d workers=%d blas_threads=%d batch=%d epochs=%d "
           "images=%lld seconds=%.3f img_per_s=%.0f train_flop=%.0f gflops=%.2f "
           "sgemm_gflops=%.1f peak_frac=%.4f fma_gflops=%.1f fma_frac=%.4f rss_mb=%.1f model_mb=%.2f test_acc=%.4f "
           "train_loss=%.4f exec=%s blas_core=%s finite=%d scan_us=%.2f scan_frac=%.5f\n",
           o.model, o.threads, workers, blas_threads, o.batch, o.epochs, (long long)images, secs,
           ips, train_flop, gflops, peak, peak > 0 ? gflops / peak : 0.0, fpeak,
           fpeak > 0 ? gflops / fpeak : 0.0,
           (double)ru.ru_maxrss / 1024.0, (double)het_model_bytes(m) / (1024.0 * 1024.0), acc,
           loss_sum / (double)images, strncmp(het_model_executor(m), "dense", 5) ? "batch" : "stack",
           openblas_get_corename(), finite, 1e6 * scan_s / (double)(t > 0 ? t : 1),
           scan_s / secs);
    rc = 0;
fail:
    if (rc != 0) fprintf(stderr, "bench_train: %s\n", het_error_msg());
    het_sampler_free(&smp);
    het_free(x);
    het_free(y);
    het_free(opt_state);
    het_model_free(m);
    het_dataset_free(&train);
    het_dataset_free(&test);
    return rc;
}
