/* emul (internal part): the per-rank slowdown and its pacing of compute (slowdown.c); the
 * public part (network cost model, clock) is hetrain/emul.h. */
#ifndef HET_EMUL_H
#define HET_EMUL_H

#include <time.h>

#include "hetrain/core.h"
#include "hetrain/emul.h"

/* Parses a comma-separated list of numbers in [lo, hi] ((lo, hi] with lo_open), blanks
 * allowed around them. Writes up to `cap` of them into out (out may be NULL) and returns how
 * many the list holds, or HET_EINVAL (negative) with a message "... expected <what>". */
int het_parse_numbers(const char *text, double *out, int cap, double lo, int lo_open,
                      double hi, const char *what);
/* Slowdown factors "1,1,2,4": numbers in 1..1000 (het_parse_numbers). */
int het_slowdown_parse(const char *text, double *out, int cap);

/* A slowdown that changes mid-run (--slowdown-at EPOCH:RANK:FACTOR,...). */
typedef struct het_slowdown_change {
    int epoch;      /* 1-based: from this epoch on */
    int rank;
    double factor;
} het_slowdown_change;
/* Parses "2:1:3,4:0:2" into up to cap changes (out may be NULL); returns how many, or
 * HET_EINVAL with a message naming the bad item. */
int het_slowdown_at_parse(const char *text, het_slowdown_change *out, int cap);
/* The factor of `rank` in 1-based `epoch`: the latest change started at or before it, else
 * base. A pure function, so a resumed run gets the same factors. */
double het_slowdown_factor_at(const het_slowdown_change *c, int n, int epoch, int rank,
                              double base);

/* Sleeps for `s` seconds (nothing when s <= 0), resuming after signals. */
void het_sleep_s(double s);
/* Sleeps until het_now() >= until; returns the seconds slept (0 if already past). */
double het_sleep_until(double until);
/* How the two above wait, for the process: 0 sleeps (nanosleep: the core goes to other ranks),
 * 1 spins on the clock (a core per compute thread: no wake-up cost). The trainer chooses
 * (HET_EMUL_WAIT, trainer.c); 0 until set. Set before any thread waits. */
void het_emul_wait_set(int spin);
int het_emul_wait_spin(void);
/* What the trainer decides for HET_EMUL_WAIT=auto (the default; "sleep" and "spin" force):
 * spin when the host's ranks x their compute threads fit its online cores. */
int het_emul_wait_auto(int host_ranks, int threads_per_rank, long cores);

/* Paces one rank's compute. begin() starts a compute interval; mark() ends it: the piece's
 * cost t is stretched to factor*t and a new interval starts; skip() drops the time since the
 * last begin/mark (communication, not compute). On the wall clock t is the elapsed time and the
 * stretch a sleep; on the virtual clock t is the piece's cost (the CPU time of the threads that
 * did it: the calling thread's and, when set, the model's workers', the most of them; or the
 * `cost` hook's figure) and the stretch is charged to the lane (het_lane_advance), with no
 * sleep. `compute_s` accumulates the stretched compute time, `slept_s` the sleeps alone;
 * `last` and `mid` are on the lane's time (het_lane_now). */
#define HET_PACE_MAX_THREADS 64

/* ---- calibrated compute costs (cost.c) ----
 * What a compute piece of a training step costs, as a linear function of the samples the rank
 * computes (a + b count seconds, fitted through medians at two batch sizes), measured once
 * and then charged whatever the host does: virtual times become reproducible bit for bit for a
 * given seed, cost table and configuration. The pieces are those the strategies mark: from
 * the step's start to layer l's gradients being final (its gradient hook: forward, and
 * backward down to l), the whole forward + backward, the optimizer update, the fused one-rank
 * step (forward + backward + update), and a pipeline stage's forward or backward of a range
 * of layers (the range executor, one thread).
 *
 * A table says what it was measured on: the network (a fingerprint of its layers' kinds and
 * shapes: a table of another network is refused) and the measuring host's rate on a reference
 * kernel (het_blas_reference_flops: single-thread SGEMM). A rank on a host of speed S flop/s
 * (a platform file's) is charged the table's seconds x ref / S, so that tables measured on two
 * hosts charge the same virtual seconds to within how well the reference kernel predicts
 * their ratio (het_pace's scale and factor; without a platform the hosts are as fast as the
 * one that measured the table). */
enum {
    HET_PIECE_NONE = 0,
    HET_PIECE_TO_LAYER,
    HET_PIECE_FB,
    HET_PIECE_OPT,
    HET_PIECE_STEP,
    HET_PIECE_RANGE_FWD, /* layers [layer, layer_end) forward (a pipeline stage) */
    HET_PIECE_RANGE_BWD, /* the same layers' backward */
};
typedef struct het_cost_line {
    double a, b; /* seconds = a + b count */
} het_cost_line;
#define HET_COSTS_VERSION 2
typedef struct het_costs {
    char model[32];          /* the model's name (a zoo name or the model file's) */
    unsigned long long net;  /* fingerprint of the network's layers (het_step_costs_net) */
    int n_layers;
    int lo, hi;              /* the batch sizes measured */
    int reps;                /* repetitions per size (the median is fitted) */
    int threads;             /* the compute threads per rank it was measured with */
    double ref_flops;        /* the measuring host's rate on the reference kernel, flop/s */
    het_cost_line fb, opt, step;
    het_cost_line *to_layer; /* n_layers: from the step's start to layer l's gradients */
    het_cost_line *fwd, *bwd; /* n_layers: layer l's forward / backward on the range executor
                                (a segment between two cut points is kept on its first layer;
                                the others of it are 0) */
    double charged;          /* of the current step's forward + backward so far */
} het_costs;
/* Allocates the per-layer lines (zeroed). HET_ENOMEM. */
int  het_costs_init(het_costs *c, const char *model, int n_layers);
void het_costs_free(het_costs *c);
/* The line through (lo, t_lo) and (hi, t_hi); a negative slope gives the flat line at t_lo, a
 * negative intercept the line through the origin and (hi, t_hi). */
het_cost_line het_cost_fit(int lo, double t_lo, int hi, double t_hi);
/* The cost of a piece ending now: TO_LAYER l charges what forward and backward
 * down to l cost beyond what this step was charged already (never below 0), FB the rest of the
 * step's forward + backward (then a new step starts), OPT and STEP their lines, RANGE_FWD /
 * RANGE_BWD the sum of the layers [layer, layer_end)'s lines. */
double het_costs_charge(het_costs *c, int piece, int layer, int layer_end, int count);
/* The unscaled table seconds of layers [a, b)'s forward plus backward on `count` samples (a
 * pipeline plan's segment cost). */
double het_costs_range_s(const het_costs *c, int a, int b, int count);
/* Writes the table durably (core/outfile.c), a '#' comment line first. HET_EIO. */
int  het_costs_write(const het_costs *c, const char *path, const char *comment);
/* Reads a table het_costs_write wrote: HET_EIO, or HET_EFORMAT "FILE:LINE: expected ...". */
int  het_costs_read(het_costs *c, const char *path);
/* The shipped table (costs/NAME.costs, built in) whose network fingerprint is `net`; HET_EINVAL
 * naming the shipped tables when none is. */
int  het_costs_shipped(het_costs *c, unsigned long long net);
/* The table as doubles, for a broadcast (het_costs_unpack reverses; HET_EFORMAT on a table
 * that does not fit `n_layers`). The fingerprint is not packed (rank 0 checks it). */
size_t het_costs_packed_len(int n_layers);
void het_costs_pack(const het_costs *c, double *out);
int  het_costs_unpack(het_costs *c, const double *in);

/* ---- SimGrid's units (units.c) and the platform reader's helpers (platform.c) ---- */
typedef struct het_unit {
    const char *name;
    double scale;
} het_unit;
extern const het_unit het_speed_units[], het_time_units[]; /* NULL-named last entries */
const het_unit *het_bw_units(void);
/* A number and one of `units` (none: the base unit), >= 0 and finite: 0, else -1. */
int het_unit_parse(const char *s, const het_unit *units, double *out);
/* A regular file's bytes (at most 64 MiB, NUL-terminated; a FIFO is refused unopened). */
int het_platform_slurp(const char *path, char **out, size_t *len);
/* The index of the host called `name`, or -1. */
int het_platform_host(const het_platform *p, const char *name);

typedef struct het_pace {
    double factor;
    double last;       /* start of the current interval (het_lane_now) */
    double mid;        /* the last piece's end before its slowdown (het_lane_now) */
    double compute_s;  /* stretched compute so far (caller may reset) */
    double slept_s;    /* emulation sleeps so far (caller may reset) */
    double debt_s;     /* sleep still owed (< 0: overslept), carried to the next piece */
    /* virtual clock: CPU clocks of the workers besides the calling thread, and their readings
     * at the interval's start (cpu0[0]: the calling thread's) */
    int n_threads;
    clockid_t threads[HET_PACE_MAX_THREADS];
    double cpu0[HET_PACE_MAX_THREADS + 1];
    /* virtual clock: a piece's cost in seconds instead of the CPU time measured (tests give
     * fixed costs; a calibrated cost model plugs in here); NULL: measured */
    double (*cost)(void *user, double measured_s);
    void *cost_user;
    /* virtual clock: a calibrated cost table (NULL: none); the piece ending at the next mark
     * (HET_PIECE_*, its layer, its samples), which het_pace_piece sets and mark resets */
    het_costs *costs;
    int piece, piece_layer, piece_layer_end, piece_count;
    double piece_share; /* the fraction of the piece's table cost the next mark charges (a
                           server's update of its slice of the parameters); 0: all of it */
    double scale;       /* virtual clock: seconds charged per second of cost, before the
                           slowdown (a platform's hosts: the cost's reference rate over the
                           fastest host's speed); 0: 1 */
    het_lane *lane;     /* the lane whose compute it paces (the rank's main lane, a qfb
                           thread's): begin and mark read and advance its time */
} het_pace;

/* A pace of `lane`'s compute with slowdown `factor`; its interval starts at the lane's time. */
void   het_pace_init(het_pace *p, het_lane *lane, double factor);
/* The CPU clocks (pthread_getcpuclockid) of the worker threads whose CPU time a piece costs
 * besides the calling thread's (at most HET_PACE_MAX_THREADS; n = 0: the calling thread alone). */
void   het_pace_set_threads(het_pace *p, const clockid_t *clocks, int n);
void   het_pace_begin(het_pace *p);
/* Names the piece the next mark ends (HET_PIECE_*, a layer, its samples; count < 0 keeps the
 * count set before): with a cost table, what it costs. het_pace_range names a pipeline
 * stage's forward (backward = 0) or backward of layers [first, end) on `count` samples. */
void   het_pace_piece(het_pace *p, int piece, int layer, int count);
void   het_pace_range(het_pace *p, int backward, int first, int end, int count);
/* The CPU time since the last begin / mark / take as a piece would be costed (the busiest of
 * the calling thread and the workers), restarting the count; charges nothing. */
void   het_pace_cpu_start(het_pace *p);
double het_pace_cpu_take(het_pace *p);
/* Returns the stretched length of the interval it ends. */
double het_pace_mark(het_pace *p);
void   het_pace_skip(het_pace *p);

/* ---- message-size factors from a ping-pong (netfit.c; hetrain calibrate --network) ----
 * het_netfit: one piece per interval between the n measured sizes (ascending; one-way times
 * t > 0), through every measured time: lat_factor and bw_factor relative to *lat and *bw, which
 * are estimated when not > 0 (the smallest messages' intercept, the largest ones' slope).
 * HET_EINVAL for fewer than 2 or more than HET_NETEM_PIECES + 1 sizes, sizes not growing, a time
 * not > 0, or no bandwidth to estimate. het_netfit_write: the file `hetrain platform --factors`
 * reads (net-lat, net-bw, smpi/lat-factor, smpi/bw-factor lines), replaced by a rename;
 * het_netfit_read: all four keys required, HET_EFORMAT with FILE:LINE. */
int het_netfit(const double *size, const double *t, int n, double *lat, double *bw,
               het_netem_pw *lat_factor, het_netem_pw *bw_factor);
int het_netfit_write(const char *path, const char *comment, double lat, double bw,
                     const het_netem_pw *lat_factor, const het_netem_pw *bw_factor);
int het_netfit_read(const char *path, double *lat, double *bw, het_netem_pw *lat_factor,
                    het_netem_pw *bw_factor);

#endif
