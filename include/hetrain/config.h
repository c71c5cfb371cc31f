/* hetrain config: the types of a training run, plain data shared by the trainer (train/), the
 * strategies (strategy/) and front ends: the configuration (het_train_config) and the record of
 * one epoch (het_epoch_stats). The parser and checks are in train.h (het_train_config_*). */
#ifndef HETRAIN_CONFIG_H
#define HETRAIN_CONFIG_H

#include "hetrain/core.h"
#include "hetrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HET_PROGRESS_AUTO = 0, HET_PROGRESS_ON = 1, HET_PROGRESS_OFF = 2 } het_progress;

/* --on-nan: a step with a non-finite loss or gradient stops the run, or its update is dropped
 * (non-finite weights stop the run either way). */
enum { HET_ON_NAN_STOP = 0, HET_ON_NAN_SKIP_STEP = 1 };
/* keep: the configured lr (the global batch is --batch whatever the ranks: the same step);
 * linear: lr x Q / P0 for Q ranks of a run started on P0 (Goyal et al.'s linear scaling, for
 * runs whose per-rank batch is what stays: give --batch B x Q / P0 with it). */
enum { HET_RESIZE_LR_KEEP = 0, HET_RESIZE_LR_LINEAR = 1 };

/* Everything a training run is made of. Plain data: copy it freely. Each field has a key of the
 * same name with '_' written '-' (het_train_config_set), used by command-line options and
 * config files alike. */
typedef struct het_train_config {
    char model[32];             /* zoo name: mlp | lenet5 | cifar-cnn | resnet20; with
                                   model_file, the file's name without directory and suffix */
    char model_file[HET_PATH_LEN]; /* "" = the zoo model `model`; else a model file: ONNX
                                   (network and initial weights) or hetrain's text format */
    char data[32];              /* fashion-mnist | mnist | cifar10 | idx | synthetic */
    char data_dir[HET_PATH_LEN];/* "" = the dataset's default directory */
    char synthetic_shape[32];   /* data synthetic: "CxHxW" of its images ("" = 1x28x28) */
    int classes;                /* data synthetic: its class count (0 = 10) */
    int64_t synthetic_samples;  /* data synthetic: training samples (0 = 2048) */
    int epochs;                 /* total epochs of the run (a resumed run continues to it) */
    int batch;                  /* samples per step; the epoch's last batch may be smaller */
    het_schedule sched;         /* lr = sched.base_lr; total_epochs is set from epochs */
    het_optim_config optim;     /* SGD / Adam and their hyper-parameters */
    uint64_t seed;              /* model init, epoch permutations, dropout */
    int threads;                /* model workers splitting each batch; BLAS runs 1 thread */
    int precision;              /* het_precision (nn.h): 0 fp32, 1 bf16 (convolutions and dense
                                   layers on bf16 operands, gradients on a bf16 wire) */
    int bf16_kernels;           /* het_bf16_kernels (tensor.h): auto, onednn, portable */
    int64_t train_limit;        /* use only the first N training samples (0 = all) */
    int64_t test_limit;         /* use only the first N test samples (0 = all) */
    int64_t holdout;            /* > 0: the last N of the training samples (after train_limit)
                                   are evaluated instead of the test set and not trained on */
    char checkpoint[HET_PATH_LEN]; /* "" = none; written every checkpoint_every epochs + end */
    int checkpoint_every;       /* epochs between checkpoints (>= 1) */
    int checkpoint_steps;       /* 0: off; N: also a checkpoint every N optimizer steps inside
                                   an epoch (the strategies whose step ends are drain points) */
    int eval_every;             /* 0: off; N: also the test accuracy every N optimizer steps
                                   inside an epoch (the same strategies), charged to no clock */
    int resize_lr;              /* HET_RESIZE_LR_*: the learning rate of a run resumed on
                                   another number of ranks than it started on */
    char fail_at[256];          /* "" or "RANK:TIME" / "RANK:@STEP", ',' separated: that rank
                                   ends itself (SIGKILL, a lost node) at the first step end past
                                   TIME seconds of the run's clock (virtual on --clock virtual)
                                   or at STEP; the launcher then sees a lost rank */
    float fail_rate;            /* failures per rank and second of the run's clock, drawn
                                   from --seed, the rank and the starting step (0: none) */
    int resume;                 /* 1: continue from `checkpoint` */
    char metrics[HET_PATH_LEN]; /* "" = none; JSON Lines: one object per epoch (and step) */
    int metrics_steps;          /* 1: also one object per step in the metrics file */
    char export_safetensors[HET_PATH_LEN]; /* "" = none; weights written after training */
    char export_onnx[HET_PATH_LEN]; /* "" = none; the trained model as ONNX (inference graph) */
    char init_from[HET_PATH_LEN]; /* "" = none; initial parameters and batch-norm statistics
                                   from a safetensors file, by name and shape */
    het_progress progress;      /* live progress bar: auto = only when stdout is a terminal */
    int quiet;                  /* 1: print nothing but errors (front ends honour it) */
    int on_nan;                 /* HET_ON_NAN_*: what a non-finite loss or gradient does */
    /* distributed runs (mpirun / srun); ignored by a single process without MPI */
    char strategy[32];          /* how ranks cooperate: allreduce (see het_strategy_names) */
    int ranks_per_node;         /* emulated node size; 0 = the real nodes */
    int placement;              /* emulated nodes: 0 block (consecutive ranks), 1 cyclic */
    float bucket_mb;            /* gradient all-reduce bucket size in MiB; 0 = one flat buffer */
    int allreduce_algo;         /* het_allreduce_algo: 0 auto (hier on > 1 node), 1 flat, 2 hier */
    char slowdown[256];         /* "" or one factor >= 1 per rank: "1,1,2,4" (emulation) */
    double net_bw;              /* emulated cross-node bandwidth, bytes/s; 0 = off */
    float net_lat;              /* emulated cross-node latency, seconds; 0 = off */
    double node_bw;             /* virtual clock: bandwidth between ranks of a node (10e9) */
    float node_lat;             /* virtual clock: latency between ranks of a node (1e-6) */
    int net_factors;            /* 0 none, 1 smpi: every message's latency and bandwidth x
                                   SMPI's default factors of its size (het_netem_pw) */
    int coll_model;             /* 0 mpi, 1 smpi: het_netem.coll_smpi */
    int bcast_model;            /* 0 mpi, 1 linear, 2 binomial: het_netem.bcast */
    int p2p_model;              /* 0 local, 1 arbiter: het_netem.arbiter */
    char platform[HET_PATH_LEN]; /* "" or a SimGrid platform file: hosts (nodes, speeds) and
                                   links in place of the options above (emul/platform.c) */
    char hostfile[HET_PATH_LEN]; /* "" or ranks on the platform's hosts, one name a line */
    int clock;                  /* het_clock_kind: 0 wall (the emulation sleeps), 1 virtual */
    char compute_cost[HET_PATH_LEN]; /* virtual clock: "measured" (CPU time), "calibrated"
                                   (rank 0 measures a cost table) or "calibrated:FILE" */
    char trace[HET_PATH_LEN];   /* "" = none; Chrome trace JSON of every rank's steps */
    float stall_warn;           /* rank 0 names the missing ranks of a collective it waited
                                   on this many seconds (0 = off; default 60) */
    float stall_abort;          /* MPI_Abort after a wait of this many seconds (0 = off) */
    char slowdown_at[256];      /* "" or "EPOCH:RANK:FACTOR,...": from 1-based EPOCH on, RANK's
                                   emulated slowdown is FACTOR (a device that slows mid-run) */
    /* hgc's speeds and their calibration. Its other options, and daso's, are in their
     * strategies' tables (strategy_opts below); these stay keys because `hetrain calibrate`,
     * which runs no strategy, measures with calibrate_steps and writes a speeds file, and the
     * command line's precedence of speeds and speeds-file and a resume's refusal of new speeds
     * (cli/main.c) read them outside hgc. */
    char speeds[256];           /* "auto" (calibrate at start), or one speed > 0 per rank */
    char speeds_file[HET_PATH_LEN]; /* "" or a file of speeds, one per line (hetrain calibrate) */
    int calibrate_steps;        /* timed forward+backward passes of the calibration */
    char out[HET_PATH_LEN];     /* hetrain calibrate: the speeds file to write */
    char costs_out[HET_PATH_LEN]; /* hetrain calibrate: the compute-cost table to write */
    /* The strategies' own options (each strategy's option table, src/strategy/strategy.h),
     * those set: "name=value\n" lines sorted by name, values in canonical form (integers
     * "%lld", numbers the shortest text that reads back the same, words as written), the rest
     * of the array zero, so that equal settings are equal bytes. "" = none set. Read a value
     * with het_strategy_opt_value (strategy.h), which falls back to the table's default. */
    char strategy_opts[1024];
} het_train_config;

/* ---- per-epoch record ---- */
typedef struct het_epoch_stats {
    int epoch;             /* 1-based */
    int64_t samples;       /* training samples seen in the epoch */
    double loss;           /* mean training loss over the epoch's samples (train mode) */
    double train_acc;      /* fraction of the epoch's training samples predicted right */
    double test_loss;      /* mean loss over the test set (eval mode) */
    double test_acc;
    double lr;             /* learning rate of the epoch's last step */
    double samples_per_s;  /* training throughput (evaluation not counted); not checkpointed */
    double elapsed_s;      /* seconds since this process started the run; not checkpointed */
    double epoch_s;        /* the epoch's training on the run's clock (wall or virtual: the
                              epoch's V on rank 0); not checkpointed */
    double vtime_s;        /* virtual clock: rank 0's V since the run started (0 on the wall
                              clock); not checkpointed */
    /* This rank's time split of the epoch's training steps (not checkpointed): compute
     * (forward, backward, optimizer, emulated slowdown included), communication, waiting for
     * slower ranks, emulated network delay. */
    double compute_s, comm_s, wait_s, delay_s;
    int64_t skipped;       /* steps whose update --on-nan skip-step dropped (daso: summed over
                              ranks, which decide alone); not checkpointed */
    /* Memory at the epoch's end (not checkpointed: 0 in a resumed run's earlier epochs): the
     * ranks' peak resident sets in bytes (getrusage), the largest and the sum (a page of the
     * host's shared datasets counts in every rank that read it), the sum of their proportional
     * sets now (-1 where the system does not report it), and the datasets: the bytes of one
     * decoded copy of train + test and the copies held over all ranks (one per host when its
     * ranks share one, HET_SHARED_DATA). */
    int64_t peak_rss_max, peak_rss_sum, pss_sum;
    int64_t data_bytes;
    int data_copies;
    /* the network model's sanity counter (virtual clock, several ranks; comm/links.c): the
     * worst node link's busy and oversubscribed shares of the epoch; link_measured 0: none */
    int link_measured;
    double link_busy_max, link_over_max;
} het_epoch_stats;

#ifdef __cplusplus
}
#endif
#endif
