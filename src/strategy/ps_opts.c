/* The options of the parameter-server strategies (asp.c, inhad.c): one table each, sharing
 * their common entries, so that --ps-rank and friends are never fields of het_train_config. */
#include "strategy/strategy.h"

static const char *const onoff_words[] = {"off", "on", NULL};
static const char *const agg_words[] = {"thread", "loop", NULL};

#define PS_RANK                                                                               \
    {"ps-rank", "N", "the parameter server's rank (-1: the last rank); it runs no batches",    \
     HET_SOPT_INT, -1, 1e6, -1, NULL, 0}
#define PS_SHARDS                                                                             \
    {"ps-shards", "K", "parameter servers, each owning a contiguous slice of the parameters " \
     "(ranks ps-rank, ps-rank - 1, ...)", HET_SOPT_INT, 1, 64, 1, NULL, 0}
#define MAX_STALENESS(help, def) {"max-staleness", "N", help, HET_SOPT_INT, -1, 1e6, def, NULL, 0}
#define STALENESS_LR(def)                                                                     \
    {"staleness-lr", "on|off", "divide the learning rate by the mean staleness of an "      \
     "update's gradients (n-softsync)", HET_SOPT_WORD, 0, 0, def, onoff_words, 0}

const het_strategy_opt het_asp_opts[] = {
    PS_RANK, PS_SHARDS,
    MAX_STALENESS("the server holds back a worker more than N batches ahead of the slowest "
                  "unfinished one (stale synchronous parallel; -1: no bound)", -1),
    STALENESS_LR(0),
    {NULL, NULL, NULL, HET_SOPT_INT, 0, 0, 0, NULL, 0},
};

const het_strategy_opt het_inhad_opts[] = {
    PS_RANK, PS_SHARDS,
    MAX_STALENESS("a worker with more than N of its gradients not yet in the weights it holds "
                  "waits for them (0: synchronous; -1: no bound)", 1),
    STALENESS_LR(1),
    {"soft-sync", "n", "n-softsync: an update every workers / n iteration numbers",
     HET_SOPT_INT, 1, 1e6, 1, NULL, 0},
    {"inhad-threshold", "T", "iteration numbers per update (0: workers / soft-sync)",
     HET_SOPT_INT, 0, 1e6, 0, NULL, 0},
    {"inhad-aggregator", "thread|loop", "on the virtual clock: thread, the paper's aggregator "
     "thread beside its rank's batches, and workers that go on without the answer to their "
     "iteration number; loop, one thread a rank as a plain MPI program runs it (the wall "
     "clock, SMPI): pulls served between batches, every worker waiting for its answer",
     HET_SOPT_WORD, 0, 0, 0, agg_words, 0},
    {NULL, NULL, NULL, HET_SOPT_INT, 0, 0, 0, NULL, 0},
};
