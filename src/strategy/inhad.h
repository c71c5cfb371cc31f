/* inhad's internals shared by its worker and aggregator (inhad.c) and its server
 * (inhad_server.c): the messages and the state. */
#ifndef HET_STRATEGY_INHAD_H
#define HET_STRATEGY_INHAD_H

#include "strategy/ps.h"

enum { K_REPLY = 1, K_PULL, K_PUSH, K_END }; /* kinds of the server's control messages */

typedef struct in_msg { /* worker -> server (HET_TAG_COUNT) */
    int64_t version;    /* of the weights the gradient was computed on */
    int64_t count;      /* its samples */
} in_msg;

typedef struct ctrl_msg { /* server -> aggregator / worker (HET_TAG_CTRL), aggregator -> worker
                           * (HET_TAG_PARAMS); a push is followed by the weights, a pull by
                           * W int32 counts of gradients to take per worker */
    int32_t kind, pad;
    int64_t version;    /* push: of the weights; reply: the server's now; pull: the update's */
    int64_t pos;        /* reply: the worker's next batch (-1: none) */
    int64_t avail;      /* reply: the newest update finished by the IN's send time */
    int32_t len;        /* reply: the next batch's samples */
    float lr;           /* reply: the last update's learning rate */
} ctrl_msg;

typedef struct agg_hdr { /* aggregator -> server (HET_TAG_GRADS), then the mean if count > 0 */
    double stale_sum, stale_max;
    int64_t count, grads;
} agg_hdr;

typedef struct grad_hdr { /* worker -> aggregator (HET_TAG_GRADS), then the mean gradient */
    int64_t version, count;
} grad_hdr;

typedef struct pending { /* weights received, not yet taken */
    int64_t version, incl; /* incl: this worker's gradients in them (this epoch) */
    double deliver;
    float *w;
    struct pending *next;
} pending;

typedef struct own { /* an aggregator's own gradient, not yet pulled */
    int64_t version, count;
    float *g;
    struct own *next;
} own;

typedef struct inhad {
    het_ps ps;
    int T, n_nodes;
    int *agg_of;          /* by worker index: its aggregator's world rank */
    int *agg_rank;        /* by node (in order): the aggregator's world rank */
    int *local, n_local;  /* an aggregator: its node's worker indexes (itself first) */
    size_t cbytes;        /* the largest control message */
    unsigned char *cbuf;  /* a control message being received */
    unsigned char *big;   /* gradients, aggregates, pushes: one n-float message */
    float *acc;           /* an aggregator: the sum; the server: the average */
    het_ps_out *out;         /* this rank's sends in flight */
    unsigned char *gbuf;  /* an aggregator: a gradient received */
    pending *pend;        /* a worker: weights received, by version */
    int64_t got, got_incl;/* ... the newest version received, and its incl */
    int64_t iter, held_incl; /* a worker: its gradients this epoch; those in its weights */
    int64_t *incl;        /* the server: per worker, its gradients in the updates (epoch) */
    own *mine, **mine_tail;
    het_lane agg;         /* an aggregator: its thread's lane (with --inhad-aggregator loop
                             the rank's main lane is used instead: agg_lane) */
    int loop;             /* --inhad-aggregator loop on the virtual clock: one thread a rank */
    /* the server */
    unsigned char **abuf; /* per node: its aggregate */
    int32_t *counted;     /* per worker: INs since the last update */
    double *done_t;       /* the finishing time of the epoch's updates */
    int push_due;         /* the last update's push is in big, not yet sent */
    ctrl_msg push;        /* ... its header */
    double push_t;        /* ... its update's finishing time */
    int64_t *sent_incl;   /* per worker, its gradients in the weights pushed so far */
    int64_t done_base, n_done, cap_done;
} inhad;

static inline size_t nbytes(const inhad *a) { return a->ps.n * sizeof(float); }

/* The server's epoch (inhad_server.c). */
int het_inhad_server_epoch(inhad *a, het_strategy_ctx *ctx, int epoch);

#endif
