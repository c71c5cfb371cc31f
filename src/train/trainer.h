/* The trainer's state, shared by its files: trainer.c (create, epochs, evaluation, the run),
 * run_state.c (the checkpoint sections of a run: save, load, weights, configuration) and
 * report.c (the printed configuration and time split). Internal to src/train. */
#ifndef HET_TRAIN_TRAINER_H
#define HET_TRAIN_TRAINER_H

#include "hetrain/comm.h"
#include "hetrain/train.h"
#include "strategy/strategy.h"
#include "train/internal.h"

#define HET_MAX_CHANGES 64

struct het_trainer {
    het_train_config cfg;
    het_dataset train, test;
    int64_t n_train, n_test;   /* after --train-limit / --test-limit */
    het_model *model;
    float *opt_state;
    size_t n_opt_state;
    het_schedule sched;
    het_sampler sampler;
    float *x;                  /* batch x sample floats */
    uint8_t *y;
    int64_t *idx;
    int epoch;                 /* epochs completed; ctx.step counts optimizer steps */
    het_epoch_stats *hist;
    int n_hist, cap_hist;
    het_metrics_file *metrics;
    het_bar bar;
    int started;               /* run_begin done */
    double t_start;
    double v_start; /* the main lane's time when the run started */
    double eval_wall;       /* wall seconds of the evaluations inside epochs (--eval-every), left
                               out of the run's wall times */
    double eval_wall_epoch; /* the same, this epoch */
    het_costs costs; /* --compute-cost calibrated: the table (to_layer NULL: none) */
    /* distributed */
    int mpi;                   /* MPI is initialized: collective over MPI_COMM_WORLD */
    int rank, size;
    int size0;                 /* the world size the run started on (a resume: the
                                  checkpoint's "world" section), for --resize-lr */
    het_topo topo;
    int have_topo;
    het_comm *comm;
    const het_strategy_ops *strat;
    int strat_ready;           /* strat->init succeeded: free it */
    het_strategy_ctx ctx;
    double base_factor;        /* this rank's --slowdown factor (or its platform host's) */
    double plat_speed_max;     /* --platform: the fastest host any rank is on, flop/s; 0 none */
    het_slowdown_change changes[HET_MAX_CHANGES]; /* --slowdown-at */
    int n_changes;
    double bar_loss;           /* progress bar: running sums of the epoch */
    int64_t bar_correct, bar_samples;
    /* the datasets' bytes (shared_data.c) */
    MPI_Comm host;             /* ranks of this real host (MPI_COMM_TYPE_SHARED), if have_host */
    int have_host, host_rank, host_size;
    int wait_spin;             /* the wall clock's emulation spins (1) or sleeps (choose_wait) */
    MPI_Win data_win;          /* the host's copy of train + test, if have_win */
    int have_win;
    void *ro_base;             /* the window's whole pages, mprotect'ed read-only */
    size_t ro_len;
    uint64_t data_bytes;       /* one decoded copy of train + test */
    int data_copies, data_hosts; /* copies held over the world; hosts */
    const char *data_why;      /* why this host's copies are private; NULL: it shares one */
};

/* Every rank passes its status; all get the lowest failing rank's (see het_comm_agree). */
static inline int het_trainer_agree(const het_trainer *t, int st) {
    return t->mpi && t->size > 1 ? het_comm_agree(MPI_COMM_WORLD, st) : st;
}

/* consistency.c: ranks compare what they read with rank 0 (collective over MPI_COMM_WORLD,
 * nothing on one rank); on a difference all return HET_EINVAL with the same message naming the
 * rank and what differs. config: before any other collective of the trainer; data: once the
 * datasets are loaded and limited; checkpoint: a resume's epoch, step and the CRC-32s of its
 * parameters, state and optimizer state, before they are used. */
int het_trainer_compare_config(const het_trainer *t);
int het_trainer_compare_data(const het_trainer *t);
int het_trainer_compare_checkpoint(const het_trainer *t, uint64_t epoch, uint64_t step,
                                   const uint32_t crc[3]);
/* The strategy's state that ranks must share (its agreed_state, strategy.h): after init and
 * after a resume's load_state. Values of scope world are compared with rank 0's, values of
 * scope node with the node's first rank's; the message names the rank, the field and, for
 * numbers, both values. */
int het_trainer_compare_strategy(het_trainer *t);

/* shared_data.c */
/* Loads the configured train and test sets, once per host when several ranks share a host
 * (one copy in an MPI shared window, read-only; HET_SHARED_DATA=0: one per rank), otherwise
 * privately through het_train_data_load. Collective over the world under MPI; the status
 * is agreed, so every rank returns the loading rank's error. */
int  het_trainer_load_data(het_trainer *t);
/* Frees the datasets and the host's window (collective over the host); before MPI_Finalize. */
void het_trainer_free_data(het_trainer *t);
/* cluster.c: the distributed part of create (topology, comm, slowdown, --platform); how the
 * wall clock's emulation waits (HET_EMUL_WAIT); the cost table (rank 0 measures it, file NULL,
 * or reads FILE or the shipped one; every rank charges it); on a platform, the virtual
 * clock's compute rescaled by the hosts' speeds (after the table). */
int  het_trainer_create_mpi(het_trainer *t);
int  het_trainer_choose_wait(het_trainer *t);
int  het_trainer_costs_setup(het_trainer *t, const char *file, int shipped);
void het_trainer_platform_scale(het_trainer *t);
/* The ranks' peak resident sets (getrusage), the largest and the sum, and the sum of their
 * proportional sets now (-1 where /proc/self/smaps_rollup is missing), in bytes, on every
 * rank. Collective over the world under MPI (called at every epoch's end and the run's). */
int  het_trainer_memory(het_trainer *t, int64_t *rss_max, int64_t *rss_sum, int64_t *pss_sum);

/* faults.c: --fail-at / --fail-rate for this rank (ctx.fail_*), from the step the launch
 * starts at; HET_EINVAL naming the option's offset for a bad value (the same on every rank). */
int  het_trainer_faults(het_trainer *t);

/* report.c */
/* Prints the run's header (rank 0): data, model, the resolved configuration and, under MPI,
 * the ranks and their emulation. het_trainer_create calls it before the first transfer. */
void het_trainer_print_config(const het_trainer *t);
/* " | compute 81% comm 6% wait 11% delay 2% (rank 0), slowest rank 3 compute 97%" into buf
 * (empty on one rank or on ranks other than 0). */
void het_trainer_format_split(const het_trainer *t, char *buf, size_t n);
/* "memory: peak RSS per rank max 85 MB, sum 1.3 GB over 16 ranks, proportional set sum 0.41
 * GB; dataset 55 MB shared per host (1 copy)" (rank 0), at the end of a run. Collective. */
int  het_trainer_report_memory(het_trainer *t);

/* eval.c: an evaluation inside an epoch (--eval-every) at a pause or step end of every rank,
 * charged to no clock, its record logged and written; and the context's evaluation hooks for
 * the strategies with ops.evals (ctx->eval_fn, eval_here, eval_put). */
int  het_trainer_eval_inside(het_trainer *t);
void het_trainer_eval_hooks(het_trainer *t);

#endif
