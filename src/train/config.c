/* The training configuration: one table of keys drives parsing (options and config files),
 * range checks, the echo printed at start and stored in checkpoints, and --help. The checks
 * across keys (paths, dataset and model names) are in config_check.c. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hetero/hetero.h"
#include "hetrain/train.h"
#include "strategy/strategy.h"
#include "train/internal.h"

typedef enum {
    K_INT,      /* int in [lo, hi] */
    K_I64,      /* int64_t in [lo, hi] */
    K_U64,      /* uint64_t, any */
    K_FLOAT,    /* float in lo..hi, ends open or closed per flags */
    K_BOOL,     /* int 0/1 */
    K_STR,      /* char[HET_PATH_LEN], may be empty */
    K_NAME,     /* char[32] */
    K_MODEL,    /* char[32], a zoo name */
    K_DATA,     /* char[32], a dataset name */
    K_SCHED,    /* het_sched_kind */
    K_OPT,      /* het_opt_kind */
    K_PROGRESS, /* het_progress */
    K_STRATEGY, /* char[32], a strategy name */
    K_SLOWDOWN, /* char[256], "f0,f1,..." factors >= 1 */
    K_RATE,     /* double bytes/s, 0 (off) or in [lo, hi], suffixes k M G T (powers of 1000) */
    K_WORD,     /* int: index of the value in key_def.words */
    K_SPEEDS,   /* char[256], "auto" or "s0,s1,..." speeds > 0 */
    K_SLOWAT,   /* char[256], "E:R:F,..." slowdown changes; repeated settings append */
} key_type;

enum { F_LO_OPEN = 1, F_HI_OPEN = 2, F_RUN = 4 /* not part of the result: not echoed */ };

typedef struct key_def {
    het_config_key pub;
    key_type type;
    size_t off;
    double lo, hi; /* K_WORD: lo is the index of its list in word_lists */
    int flags;
} key_def;

/* The values of K_WORD keys (NULL-terminated; the stored int is the index). */
static const char *const nan_words[] = {"stop", "skip-step", NULL};
static const char *const algo_words[] = {"auto", "flat", "hier", NULL}; /* het_allreduce_algo */
static const char *const placement_words[] = {"block", "cyclic", NULL};
static const char *const clock_words[] = {"wall", "virtual", NULL}; /* het_clock_kind */
static const char *const resize_words[] = {"keep", "linear", NULL}; /* HET_RESIZE_LR_* */
static const char *const precision_words[] = {"fp32", "bf16", NULL}; /* het_precision */
static const char *const bf16k_words[] = {"auto", "onednn", "portable", NULL}; /* het_bf16_kernels */
static const char *const factor_words[] = {"none", "smpi", NULL};
static const char *const nbc_words[] = {"mpi", "smpi", NULL};
static const char *const bcast_words[] = {"mpi", "linear", "binomial", NULL};
static const char *const p2p_words[] = {"local", "arbiter", NULL};
/* The lists by name (key_def.lo of a K_WORD key), so that a list removed or added moves no
 * key onto another's words. */
enum { W_NAN, W_ALGO, W_PLACEMENT, W_CLOCK, W_RESIZE, W_PRECISION, W_FACTORS, W_NBC, W_BCAST,
       W_BF16K, W_P2P };
static const char *const *const word_lists[] = {
    [W_NAN] = nan_words,       [W_ALGO] = algo_words,     [W_PLACEMENT] = placement_words,
    [W_CLOCK] = clock_words,   [W_RESIZE] = resize_words, [W_PRECISION] = precision_words,
    [W_FACTORS] = factor_words, [W_NBC] = nbc_words,
    [W_BCAST] = bcast_words,   [W_BF16K] = bf16k_words,   [W_P2P] = p2p_words,
};
#define WORDS(k) word_lists[(int)(k)->lo]

#define OFF(field) offsetof(het_train_config, field)
#define BIG 1e300

static const key_def keys[] = {
    {{"model", "NAME", "mlp | lenet5 | cifar-cnn | resnet20"}, K_MODEL, OFF(model), 0, 0, 0},
    {{"model-file", "FILE", "the network from a file instead of --model: ONNX (network and "
      "initial weights) or hetrain's text format (docs/MODELS.md)"}, K_STR, OFF(model_file), 0,
     0, 0},
    {{"init-from", "FILE", "initial parameters and batch-norm statistics from safetensors, by "
      "name and shape"}, K_STR, OFF(init_from), 0, 0, 0},
    {{"data", "NAME", "fashion-mnist | mnist | cifar10 | idx (any IDX files in --data-dir) | "
      "synthetic"}, K_DATA, OFF(data), 0, 0, 0},
    {{"data-dir", "DIR", "dataset directory (default: the dataset's standard place)"}, K_STR,
     OFF(data_dir), 0, 0, 0},
    {{"epochs", "N", "epochs to train (a resumed run continues up to N)"}, K_INT, OFF(epochs), 1,
     1e6, 0},
    {{"batch", "N", "samples per step"}, K_INT, OFF(batch), 1, 65536, 0},
    {{"lr", "X", "base learning rate"}, K_FLOAT, OFF(sched.base_lr), 0, BIG, F_LO_OPEN},
    {{"schedule", "NAME", "constant | step | cosine | plateau"}, K_SCHED, OFF(sched.kind), 0, 0,
     0},
    {{"warmup-epochs", "X", "linear warm-up over X epochs (0: none)"}, K_FLOAT,
     OFF(sched.warmup_epochs), 0, 1e6, 0},
    {{"step-epochs", "N", "step schedule: multiply lr by gamma every N epochs"}, K_INT,
     OFF(sched.step_epochs), 1, 1e6, 0},
    {{"gamma", "X", "step schedule factor, in (0, 1]"}, K_FLOAT, OFF(sched.gamma), 0, 1,
     F_LO_OPEN},
    {{"min-lr", "X", "cosine / plateau: lowest learning rate"}, K_FLOAT, OFF(sched.min_lr), 0,
     BIG, 0},
    {{"patience", "N", "plateau: bad epochs tolerated before reducing lr"}, K_INT,
     OFF(sched.patience), 0, 1e6, 0},
    {{"factor", "X", "plateau: lr multiplier, in (0, 1)"}, K_FLOAT, OFF(sched.factor), 0, 1,
     F_LO_OPEN | F_HI_OPEN},
    {{"threshold", "X", "plateau: relative improvement that counts, in [0, 1)"}, K_FLOAT,
     OFF(sched.threshold), 0, 1, F_HI_OPEN},
    {{"optimizer", "NAME", "sgd | adam"}, K_OPT, OFF(optim.kind), 0, 0, 0},
    {{"momentum", "X", "SGD momentum, in [0, 1) (0: plain SGD)"}, K_FLOAT, OFF(optim.momentum),
     0, 1, F_HI_OPEN},
    {{"nesterov", NULL, "SGD: Nesterov momentum"}, K_BOOL, OFF(optim.nesterov), 0, 0, 0},
    {{"weight-decay", "X", "L2 penalty added to the gradient"}, K_FLOAT,
     OFF(optim.weight_decay), 0, BIG, 0},
    {{"beta1", "X", "Adam beta1, in [0, 1)"}, K_FLOAT, OFF(optim.beta1), 0, 1, F_HI_OPEN},
    {{"beta2", "X", "Adam beta2, in [0, 1)"}, K_FLOAT, OFF(optim.beta2), 0, 1, F_HI_OPEN},
    {{"eps", "X", "Adam epsilon"}, K_FLOAT, OFF(optim.eps), 0, BIG, F_LO_OPEN},
    {{"seed", "N", "seed of initialization, shuffling and dropout"}, K_U64, OFF(seed), 0, 0, 0},
    {{"threads", "N", "model worker threads (BLAS runs 1 thread)"}, K_INT,
     OFF(threads), 1, 256, 0},
    {{"precision", "P", "fp32 | bf16: convolutions and dense layers on bf16 operands with fp32 "
      "sums, gradients all-reduced as bf16; fp32 master weights, optimizer state and "
      "checkpoints"}, K_WORD, OFF(precision), W_PRECISION, 0, 0},
    {{"bf16-kernels", "K", "bf16: auto (oneDNN's bf16 kernels where the CPU has AMX, or "
      "AVX512-BF16 at least 0.75x the fp32 multiply rate; else the portable path, the same "
      "numerics on the fp32 kernels) | onednn | portable"}, K_WORD, OFF(bf16_kernels), W_BF16K,
     0, 0},
    {{"train-limit", "N", "use the first N training samples (0: all)"}, K_I64, OFF(train_limit),
     0, 4e18, 0},
    {{"test-limit", "N", "use the first N test samples (0: all)"}, K_I64, OFF(test_limit), 0,
     4e18, 0},
    {{"holdout", "N", "hold out the last N training samples (after --train-limit): evaluate on "
      "them instead of the test set and train on the rest (tuning: compare --tune-lr)"}, K_I64,
     OFF(holdout), 0, 4e18, 0},
    {{"synthetic-shape", "CxHxW", "data synthetic: image shape (default 1x28x28)"}, K_NAME,
     OFF(synthetic_shape), 0, 0, 0},
    {{"classes", "K", "data synthetic: number of classes (default 10); data idx: overrides "
      "the largest label + 1"}, K_INT, OFF(classes), 0, 256, 0},
    {{"synthetic-samples", "N", "data synthetic: training samples (default 2048; the test "
      "split keeps 512)"}, K_I64, OFF(synthetic_samples), 0, 1 << 24, 0},
    {{"checkpoint", "FILE", "checkpoint file (written every --checkpoint-every epochs and at "
      "the end)"}, K_STR, OFF(checkpoint), 0, 0, F_RUN},
    {{"checkpoint-every", "N", "epochs between checkpoints"}, K_INT, OFF(checkpoint_every), 1,
     1e6, F_RUN},
    {{"checkpoint-steps", "N", "also a checkpoint every N steps inside an epoch (0: off; "
      "allreduce, hgc, gpipe, qfb)"}, K_INT, OFF(checkpoint_steps), 0, 1e9, F_RUN},
    {{"eval-every", "N", "also the test accuracy every N steps inside an epoch, so that the time "
      "to a target accuracy is not rounded to epochs (0: off; asp, inhad: every N server updates); the "
      "evaluation is charged to no clock and its time reported (eval_s)"}, K_INT,
     OFF(eval_every), 0, 1e9, F_RUN},
    {{"resume", NULL, "continue from the checkpoint (on any number of ranks: the run says "
      "what it changed)"}, K_BOOL, OFF(resume), 0, 0, F_RUN},
    {{"fail-at", "R:T", "rank R ends itself (SIGKILL) at the first step end past T s of the "
      "run's clock, or at step S with R:@S (',' for several): a lost node to recover from"},
     K_STR, OFF(fail_at), 0, 0, F_RUN},
    {{"fail-rate", "X", "failures per rank per second of the run's clock (seeded: --seed, the "
      "rank, the starting step; 0: none)"}, K_FLOAT, OFF(fail_rate), 0, 1e6, F_RUN},
    {{"resize-lr", "RULE", "lr of a run resumed on Q ranks that started on P0: keep | linear "
      "(lr x Q/P0)"}, K_WORD, OFF(resize_lr), W_RESIZE, 0, F_RUN},
    {{"metrics", "FILE", "JSON Lines metrics, one object per epoch"}, K_STR, OFF(metrics), 0, 0,
     F_RUN},
    {{"metrics-steps", NULL, "also one metrics object per step"}, K_BOOL, OFF(metrics_steps), 0,
     0, F_RUN},
    {{"export-safetensors", "FILE", "write the weights as safetensors"}, K_STR,
     OFF(export_safetensors), 0, 0, F_RUN},
    {{"export-onnx", "FILE", "write the trained model as ONNX (inference graph)"}, K_STR,
     OFF(export_onnx), 0, 0, F_RUN},
    {{"progress", "MODE", "live progress bar: auto | on | off"}, K_PROGRESS, OFF(progress), 0, 0,
     F_RUN},
    {{"quiet", NULL, "print nothing but errors"}, K_BOOL, OFF(quiet), 0, 0, F_RUN},
    {{"on-nan", "MODE", "non-finite loss or gradient: stop | skip-step (drop the step's update)"},
     K_WORD, OFF(on_nan), W_NAN, 0, 0},
    {{"strategy", "NAME", "how MPI ranks cooperate: allreduce | hgc | asp | inhad | daso | gpipe | qfb"}, K_STRATEGY,
     OFF(strategy), 0, 0, 0},
    {{"ranks-per-node", "N", "emulate nodes of N consecutive ranks (0: the real nodes)"}, K_INT,
     OFF(ranks_per_node), 0, 1e6, 0},
    {{"placement", "MODE", "emulated nodes: block (ranks 0..N-1 on node 0, ...) | cyclic (rank "
      "r on node r mod nodes, as mpirun --map-by node)"}, K_WORD, OFF(placement), W_PLACEMENT,
     0, 0},
    {{"bucket-mb", "X", "gradient all-reduce bucket size in MiB (0: one flat all-reduce)"},
     K_FLOAT, OFF(bucket_mb), 0, 1e6, 0},
    {{"allreduce-algo", "ALGO", "gradient all-reduce: flat | hier (two-level) | auto (hier on "
      ">1 node)"}, K_WORD, OFF(allreduce_algo), W_ALGO, 0, 0},
    {{"slowdown", "LIST", "emulated slowdown factor >= 1 per rank, e.g. 1,1,2,4"}, K_SLOWDOWN,
     OFF(slowdown), 0, 0, 0},
    /* bounds: one transfer of the zoo's largest model (cifar-cnn, 4.5 MB) takes at most 7.5
     * minutes, plus at most 10 s of latency per message */
    {{"net-bw", "BYTES/S", "emulated cross-node bandwidth, 10k..1000T, e.g. 1e9 or 10G (0: "
      "off)"}, K_RATE, OFF(net_bw), 1e4, 1e15, 0},
    {{"net-lat", "SECONDS", "emulated cross-node latency per message, 0..10, e.g. 50e-6 (0: "
      "off)"}, K_FLOAT, OFF(net_lat), 0, 10, 0},
    {{"node-bw", "BYTES/S", "virtual clock: bandwidth between ranks of one node, 10k..1000T "
      "(default 10G; 0: free)"}, K_RATE, OFF(node_bw), 1e4, 1e15, 0},
    {{"node-lat", "SECONDS", "virtual clock: latency between ranks of one node, 0..10 (default "
      "1e-6)"}, K_FLOAT, OFF(node_lat), 0, 10, 0},
    {{"net-factors", "none|smpi", "every message's latency and bandwidth x SimGrid SMPI's "
      "default factors of its size (MPI over TCP: eager / rendezvous, per-message costs); a "
      "platform file's smpi/lat-factor and smpi/bw-factor take their place"}, K_WORD,
     OFF(net_factors), W_FACTORS, 0, 0},
    {{"coll-model", "mpi|smpi", "virtual clock: collectives charged as the MPI library runs "
      "them (mpi, default: Open MPI's) or, where SimGrid SMPI 3.32 runs another algorithm, as "
      "it does (smpi: a non-blocking all-reduce as every rank's buffer to every other at once, "
      "the k-nomial broadcast level by level), to compare with SMPI; the calls are the same"},
     K_WORD, OFF(coll_model), W_NBC, 0, 0},
    {{"bcast-model", "mpi|linear|binomial", "virtual clock: the broadcast charged as the MPI "
      "library's rules pick its algorithm by size (mpi) or as the linear one (the root sends to "
      "every rank) / the binomial tree for every size, as SimGrid SMPI runs under "
      "smpi/bcast:flattree / binomial_tree, to compare with it; the calls are the same"},
     K_WORD, OFF(bcast_model), W_BCAST, 0, 0},
    {{"p2p-model", "local|arbiter", "virtual clock: point-to-point messages between nodes "
      "charged by local rules (local, default: a sender's messages leave one after another, "
      "senders into one receiver share its way in) or as flows that share every node link with "
      "every rank's (arbiter: world rank 0 completes them in virtual-time order; eager messages, "
      "not with qfb nor inhad's aggregator thread)"},
     K_WORD, OFF(p2p_model), W_P2P, 0, 0},
    {{"platform", "FILE", "the emulated cluster as a SimGrid platform file (hosts with speeds, "
      "links, routes; docs/PLATFORM.md) instead of --ranks-per-node, --slowdown, --net-bw ..."},
     K_STR, OFF(platform), 0, 0, 0},
    {{"hostfile", "FILE", "with --platform: rank r on the host named on line r (smpirun's "
      "-hostfile; default: each host's cores in turn)"}, K_STR, OFF(hostfile), 0, 0, 0},
    {{"compute-cost", "COST", "virtual clock: what a compute piece costs: measured (its CPU "
      "time) | calibrated (rank 0 measures each piece once) | calibrated:FILE (hetrain "
      "calibrate --costs-out) | shipped (the table built into hetrain for this network, "
      "costs/: the same virtual times on every host)"}, K_STR, OFF(compute_cost), 0, 0, 0},
    {{"clock", "CLOCK", "time of the emulation: wall (slowdown and network sleep) | virtual "
      "(each rank's own clock: compute costs its CPU time x slowdown, no sleeps)"}, K_WORD,
     OFF(clock), W_CLOCK, 0, 0},
    {{"trace", "FILE", "Chrome trace (JSON) of every rank's steps, for Perfetto"}, K_STR,
     OFF(trace), 0, 0, F_RUN},
    {{"stall-warn", "S", "name the ranks missing from a collective waited on S s (0: off)"},
     K_FLOAT, OFF(stall_warn), 0, 1e6, F_RUN},
    {{"stall-abort", "S", "end the job after a wait of S s in a collective (0: off)"}, K_FLOAT,
     OFF(stall_abort), 0, 1e6, F_RUN},
    {{"slowdown-at", "E:R:F", "from epoch E on, rank R's slowdown is F (repeat or list with ',')"},
     K_SLOWAT, OFF(slowdown_at), 0, 0, 0},
    {{"speeds", "LIST", "hgc: relative speed per rank, e.g. 0.4,0.4,0.2, or auto (calibrate)"},
     K_SPEEDS, OFF(speeds), 0, 0, 0},
    {{"speeds-file", "FILE", "hgc: speeds, one per line (hetrain calibrate --out FILE)"}, K_STR,
     OFF(speeds_file), 0, 0, 0},
    {{"calibrate-steps", "N", "timed forward+backward passes of the speed calibration"}, K_INT,
     OFF(calibrate_steps), 1, 10000, 0},
    {{"out", "FILE", "calibrate: the speeds file to write"}, K_STR, OFF(out), 0, 0, F_RUN},
    {{"costs-out", "FILE", "calibrate: measure the compute costs (rank 0) and write them, for "
      "--compute-cost calibrated:FILE"}, K_STR, OFF(costs_out), 0, 0, F_RUN},
};
#define N_KEYS (sizeof keys / sizeof keys[0])
_Static_assert(N_KEYS <= HET_CONFIG_MAX_KEYS, "raise HET_CONFIG_MAX_KEYS (train/internal.h)");

het_train_config het_train_config_defaults(void) {
    het_train_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.model, sizeof c.model, "mlp");
    snprintf(c.data, sizeof c.data, "fashion-mnist");
    c.epochs = 10;
    c.batch = 64;
    c.sched = het_schedule_defaults(0.05f);
    c.optim = het_optim_defaults();
    c.seed = 1;
    c.threads = 1;
    c.checkpoint_every = 1;
    c.progress = HET_PROGRESS_AUTO;
    snprintf(c.strategy, sizeof c.strategy, "allreduce");
    c.bucket_mb = 25.0f;
    c.stall_warn = 60.0f;
    c.node_bw = 10e9;
    snprintf(c.compute_cost, sizeof c.compute_cost, "measured");
    c.node_lat = 1e-6f;
    snprintf(c.speeds, sizeof c.speeds, "auto");
    c.calibrate_steps = 5;
    return c;
}

void het_train_config_for_eval(het_train_config *c) {
    const het_train_config d = het_train_config_defaults();
    memcpy(c->strategy, d.strategy, sizeof c->strategy);
    memcpy(c->speeds, d.speeds, sizeof c->speeds);
    memcpy(c->speeds_file, d.speeds_file, sizeof c->speeds_file);
    memcpy(c->slowdown, d.slowdown, sizeof c->slowdown);
    memcpy(c->slowdown_at, d.slowdown_at, sizeof c->slowdown_at);
    c->ranks_per_node = d.ranks_per_node;
    c->placement = d.placement;
    c->allreduce_algo = d.allreduce_algo;
    c->net_bw = d.net_bw;
    c->net_lat = d.net_lat;
    c->node_bw = d.node_bw;
    c->node_lat = d.node_lat;
    c->net_factors = d.net_factors;
    c->coll_model = d.coll_model;
    c->bcast_model = d.bcast_model;
    c->p2p_model = d.p2p_model;
    memcpy(c->platform, d.platform, sizeof c->platform);
    memcpy(c->hostfile, d.hostfile, sizeof c->hostfile);
    c->clock = d.clock;
    memcpy(c->compute_cost, d.compute_cost, sizeof c->compute_cost);
    memcpy(c->strategy_opts, d.strategy_opts, sizeof c->strategy_opts);
}

const het_config_key *het_train_config_keys(void) {
    static het_config_key pub[N_KEYS + 1];
    if (!pub[0].key)
        for (size_t i = 0; i < N_KEYS; i++) pub[i] = keys[i].pub;
    return pub;
}

/* Keys compare with '-' and '_' equal. */
static int key_eq(const char *a, const char *b) {
    for (;; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y) return 0;
        if (!x) return 1;
    }
}

static const key_def *find_key(const char *key) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (key_eq(keys[i].pub.key, key)) return &keys[i];
    return NULL;
}

int het_config_key_index(const char *key) {
    const key_def *k = find_key(key);
    if (k) return (int)(k - keys);
    int i; /* a strategy's own option: after the built-in keys */
    return het_sopt_entry(key, &i) ? (int)N_KEYS + i : -1;
}

const char *het_config_key_name(int index) {
    return index < (int)N_KEYS ? keys[index].pub.key : het_sopt_name(index - (int)N_KEYS);
}

int het_config_key_appends(int index) {
    return index < (int)N_KEYS && keys[index].type == K_SLOWAT;
}

int het_config_parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false",
                                                                                 "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0) return *out = 1, 1;
        if (strcmp(v, no[i]) == 0) return *out = 0, 1;
    }
    return 0;
}

int het_config_range_error(const char *name, const char *v, double lo, double hi, int lo_open,
                           int hi_open) {
    char l[32], h[32];
    snprintf(l, sizeof l, "%.10g", lo);
    snprintf(h, sizeof h, "%.10g", hi);
    if (hi >= BIG)
        return het_error_set(HET_EINVAL, "%s: %s is out of range, expected %s %s", name, v,
                             lo_open ? ">" : ">=", l);
    return het_error_set(HET_EINVAL, "%s: %s is out of range, expected %s%s, %s%s", name, v,
                         lo_open ? "(" : "[", l, h, hi_open ? ")" : "]");
}

static int range_error(const key_def *k, const char *v) {
    return het_config_range_error(k->pub.key, v, k->lo, k->hi, k->flags & F_LO_OPEN,
                                  k->flags & F_HI_OPEN);
}

static int set_name(const key_def *k, char *dst, const char *v, const char *const *allowed,
                    const char *what) {
    if (allowed) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(allowed[i], v) == 0;
        if (!ok) {
            char list[256] = "";
            for (int i = 0; allowed[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         allowed[i]);
            return het_error_set(HET_EINVAL, "%s: unknown %s '%s', expected one of: %s",
                                 k->pub.key, what, v, list);
        }
    }
    if (strlen(v) >= 32)
        return het_error_set(HET_EINVAL, "%s: '%s' is longer than 31 bytes", k->pub.key, v);
    snprintf(dst, 32, "%s", v);
    return HET_OK;
}

/* K_INT, K_I64, K_U64 and K_FLOAT: the whole text must parse and be in range. */
static int set_number(const key_def *k, char *field, const char *v) {
    char *end = NULL;
    errno = 0;
    if (!*v || isspace((unsigned char)*v) || (k->type == K_U64 && !isdigit((unsigned char)*v)))
        goto not_number;
    if (k->type == K_U64) {
        unsigned long long x = strtoull(v, &end, 10);
        if (*end) goto not_number;
        if (errno == ERANGE)
            return het_error_set(HET_EINVAL, "%s: %s is out of range, expected 0..%llu",
                                 k->pub.key, v, (unsigned long long)UINT64_MAX);
        *(uint64_t *)field = (uint64_t)x;
        return HET_OK;
    }
    if (k->type == K_FLOAT) {
        double x = strtod(v, &end);
        if (*end || isnan(x)) goto not_number;
        if (!isfinite(x) || fabs(x) > 3.0e38) return range_error(k, v);
        /* the range holds for the float stored (1e-50 becomes 0, 0.9999999999 becomes 1) */
        double f = (double)(float)x;
        int lo_ok = (k->flags & F_LO_OPEN) ? f > k->lo : f >= k->lo;
        int hi_ok = (k->flags & F_HI_OPEN) ? f < k->hi : f <= k->hi;
        if (!lo_ok || !hi_ok) return range_error(k, v);
        *(float *)field = (float)x;
        return HET_OK;
    }
    long long x = strtoll(v, &end, 10);
    if (*end) goto not_number;
    if (errno == ERANGE || (double)x < k->lo || (double)x > k->hi) return range_error(k, v);
    if (k->type == K_INT) *(int *)field = (int)x;
    else *(int64_t *)field = (int64_t)x;
    return HET_OK;
not_number:
    return het_error_set(HET_EINVAL, "%s: '%s' is not %s", k->pub.key, v,
                         k->type == K_FLOAT ? "a number" : "an integer");
}

/* K_RATE: bytes/s with an optional k, M, G or T suffix (powers of 1000): 0 or in [lo, hi]. */
static int set_rate(const key_def *k, char *field, const char *v) {
    char *end = NULL;
    double x = isspace((unsigned char)*v) ? NAN : strtod(v, &end);
    double mul = 1.0;
    if (isnan(x) || end == v) end = (char *)"?";
    if (*end == 'k' || *end == 'K') mul = 1e3, end++;
    else if (*end == 'M') mul = 1e6, end++;
    else if (*end == 'G') mul = 1e9, end++;
    else if (*end == 'T') mul = 1e12, end++;
    if (*end)
        return het_error_set(HET_EINVAL, "%s: '%s' is not a rate, expected bytes/s such as "
                             "1e9, 100M or 10G", k->pub.key, v);
    x *= mul;
    if (!isfinite(x) || (x != 0 && (x < k->lo || x > k->hi)))
        return het_error_set(HET_EINVAL, "%s: %s is out of range, expected 0 (off) or %g..%g "
                             "bytes/s", k->pub.key, v, k->lo, k->hi);
    *(double *)field = x;
    return HET_OK;
}

/* K_SLOWDOWN: "" (off) or a list het_slowdown_parse accepts. */
static int set_slowdown(const key_def *k, char *field, const char *v) {
    if (strlen(v) >= 256)
        return het_error_set(HET_EINVAL, "%s: list longer than 255 bytes", k->pub.key);
    if (*v && het_slowdown_parse(v, NULL, 0) < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", het_error_msg());
        return het_error_set(HET_EINVAL, "%s: %s", k->pub.key, msg);
    }
    snprintf(field, 256, "%s", v);
    return HET_OK;
}

/* K_SPEEDS ("auto" or speeds > 0) and K_SLOWAT ("E:R:F" items; a repeated setting appends,
 * so that --slowdown-at may be given several times). */
static int set_list(const key_def *k, char *field, const char *v, int append) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", append && *field && *v ? field : "",
             append && *field && *v ? "," : "", v);
    if (strlen(buf) >= 256)
        return het_error_set(HET_EINVAL, "%s: list longer than 255 bytes", k->pub.key);
    int st = HET_OK;
    if (!append && strcmp(buf, "auto") != 0) st = het_speeds_parse(buf, NULL, 0);
    if (append && *buf) st = het_slowdown_at_parse(buf, NULL, 0);
    if (st < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", het_error_msg());
        return het_error_set(HET_EINVAL, "%s: %s", k->pub.key, msg);
    }
    memcpy(field, buf, strlen(buf) + 1); /* < 256 bytes: checked above */
    return HET_OK;
}

/* One of a fixed list of words: sets *field to the index of v in words, or fails naming them. */
static int set_word(const key_def *k, int *field, const char *v, const char *const *words,
                    const char *what) {
    for (int i = 0; words[i]; i++)
        if (strcmp(v, words[i]) == 0) {
            *field = i;
            return HET_OK;
        }
    char list[128] = "";
    for (int i = 0; words[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 i == 0 ? "" : words[i + 1] ? ", " : " or ", words[i]);
    return het_error_set(HET_EINVAL, "%s: unknown %s '%s', expected %s", k->pub.key, what, v,
                         list);
}

int het_train_config_set(het_train_config *c, const char *key, const char *value) {
    static const char *const datasets[] = {"fashion-mnist", "mnist", "cifar10", "idx",
                                           "synthetic", NULL};
    static const char *const scheds[] = {"constant", "step", "cosine", "plateau", NULL};
    static const char *const opts[] = {"sgd", "adam", NULL};
    static const char *const modes[] = {"auto", "on", "off", NULL};
    const key_def *k = find_key(key);
    if (!k) {
        const het_strategy_opt *o = het_sopt_entry(key, NULL);
        if (o) return het_sopt_set(c, o, value);
        return het_error_set(HET_EINVAL, "%s: unknown key", key);
    }
    if (!value) {
        if (k->type != K_BOOL) return het_error_set(HET_EINVAL, "%s: missing value", k->pub.key);
        value = "1";
    }
    char *field = (char *)c + k->off;
    const char *v = value;
    switch (k->type) {
    case K_INT:
    case K_I64:
    case K_U64:
    case K_FLOAT: return set_number(k, field, v);
    case K_BOOL:
        if (!het_config_parse_bool(v, (int *)field))
            return het_error_set(HET_EINVAL, "%s: '%s' is not a boolean, expected true or false",
                                 k->pub.key, v);
        return HET_OK;
    case K_STR:
        if (strlen(v) >= HET_PATH_LEN)
            return het_error_set(HET_EINVAL, "%s: path longer than %d bytes", k->pub.key,
                                 HET_PATH_LEN - 1);
        snprintf(field, HET_PATH_LEN, "%s", v);
        if (k->off == OFF(model_file) && v[0]) { /* the model's name: the file's stem */
            const char *b = strrchr(v, '/'), *dot;
            b = b ? b + 1 : v;
            dot = strrchr(b, '.');
            int len = dot && dot > b ? (int)(dot - b) : (int)strlen(b);
            snprintf(c->model, sizeof c->model, "%.*s", len < 31 ? len : 31, b);
        }
        return HET_OK;
    case K_NAME: return set_name(k, field, v, NULL, "name");
    case K_MODEL: return set_name(k, field, v, het_zoo_names(), "model");
    case K_DATA: return set_name(k, field, v, datasets, "dataset");
    case K_SCHED: return set_word(k, (int *)field, v, scheds, "schedule");
    case K_OPT: return set_word(k, (int *)field, v, opts, "optimizer");
    case K_PROGRESS: return set_word(k, (int *)field, v, modes, "mode");
    case K_STRATEGY: return set_name(k, field, v, het_strategy_names(), "strategy");
    case K_SLOWDOWN: return set_slowdown(k, field, v);
    case K_RATE: return set_rate(k, field, v);
    case K_WORD: return set_word(k, (int *)field, v, WORDS(k), "mode");
    case K_SPEEDS: return set_list(k, field, v, 0);
    case K_SLOWAT: return set_list(k, field, v, 1);
    }
    return het_error_set(HET_EINVAL, "%s: unsupported key type", k->pub.key);
}

size_t het_train_config_format(const het_train_config *c, int run_keys, char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = '\0';
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &keys[i];
        if ((k->flags & F_RUN) && !run_keys) continue;
        if (k->type == K_MODEL && c->model_file[0]) continue; /* the file's name: not a zoo name */
        const char *field = (const char *)c + k->off;
        char val[HET_PATH_LEN + 32];
        switch (k->type) {
        case K_INT: snprintf(val, sizeof val, "%d", *(const int *)field); break;
        case K_I64: snprintf(val, sizeof val, "%lld", (long long)*(const int64_t *)field); break;
        case K_U64:
            snprintf(val, sizeof val, "%llu", (unsigned long long)*(const uint64_t *)field);
            break;
        case K_FLOAT: het_fmt_float(val, sizeof val, *(const float *)field); break;
        case K_BOOL: snprintf(val, sizeof val, "%s", *(const int *)field ? "true" : "false"); break;
        case K_STR:
        case K_NAME:
        case K_MODEL:
        case K_STRATEGY:
        case K_SLOWDOWN:
        case K_SPEEDS:
        case K_SLOWAT:
        case K_DATA: snprintf(val, sizeof val, "%s", field); break;
        case K_RATE: snprintf(val, sizeof val, "%.17g", *(const double *)field); break;
        case K_WORD: snprintf(val, sizeof val, "%s", WORDS(k)[*(const int *)field]); break;
        case K_SCHED: {
            static const char *const s[] = {"constant", "step", "cosine", "plateau"};
            unsigned kind = (unsigned)*(const het_sched_kind *)field;
            snprintf(val, sizeof val, "%s", kind < 4 ? s[kind] : "?");
            break;
        }
        case K_OPT:
            snprintf(val, sizeof val, "%s",
                     *(const het_opt_kind *)field == HET_OPT_ADAM ? "adam" : "sgd");
            break;
        case K_PROGRESS: {
            static const char *const s[] = {"auto", "on", "off"};
            unsigned m = (unsigned)*(const het_progress *)field;
            snprintf(val, sizeof val, "%s", m < 3 ? s[m] : "?");
            break;
        }
        }
        int k_n = snprintf(used < n ? buf + used : NULL, used < n ? n - used : 0, "%s = %s\n",
                           k->pub.key, val);
        if (k_n > 0) used += (size_t)k_n;
    }
    used = het_sopt_format(c, buf, n, used); /* the strategy's own options, after the keys */
    if (n && used >= n) buf[n - 1] = '\0';
    return used;
}
