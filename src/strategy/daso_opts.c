/* daso's options (--daso-*): its table of het_strategy_opt (strategy.h), and the schedule's
 * knobs read from them (daso_init reads the others with het_strategy_opt_value). They were fields of het_train_config; the names, ranges,
 * defaults and the flags' bare form are those of then, so config files, command lines and the
 * configuration stored in checkpoints read as before. A file of its own because daso.c is the
 * method (about 600 lines) and this is its list of knobs. */
#include "strategy/daso.h"
#include "strategy/strategy.h"

/* het_wire order (0 fp32, 1 fp16, 2 bf16): the value read is the wire type */
static const char *const wire_words[] = {"fp32", "fp16", "bf16", NULL};

const het_strategy_opt het_daso_opts[] = {
    {"daso-warmup-epochs", "N", "blocking epochs at the start (a parameter average every "
     "batch)", HET_SOPT_INT, 0, 1e6, 4, NULL, 0},
    {"daso-cooldown-epochs", "N", "blocking epochs at the end", HET_SOPT_INT, 0, 1e6, 4, NULL,
     0},
    {"daso-max-global-skips", "N", "batches between global syncs after a reset", HET_SOPT_INT,
     1, 65536, 8, NULL, 0},
    {"daso-chunk", "N", "elements per non-blocking global all-reduce (raised to at most 64 "
     "chunks per sync)", HET_SOPT_INT, 1, 2147483647, 10000000, NULL, 0},
    {"daso-wire", "fp32|fp16|bf16", "wire type of the syncs of warm-up and cool-down",
     HET_SOPT_WORD, 0, 0, 2, wire_words, 0},
    {"daso-plateau-threshold", "X", "relative loss improvement that counts, in [0, 1)",
     HET_SOPT_FLOAT, 0, 1, 0.05, NULL, HET_SOPT_HI_OPEN},
    {"daso-patience", "N", "epochs without improvement before a plateau", HET_SOPT_INT, 0, 1e6,
     2, NULL, 0},
    {"daso-skip-reduction-factor", "N", "on a plateau gs and ls are divided by N (HeAT: 2)",
     HET_SOPT_INT, 1, 65536, 2, NULL, 0},
    {"daso-local-skip-factor", "N", "after a reset ls = S = max global skips / N (HeAT: 4)",
     HET_SOPT_INT, 1, 65536, 4, NULL, 0},
    {"daso-merge-last", NULL, "merge the pending sync before the last batch's average (not "
     "HeAT: its average discards that merge)", HET_SOPT_BOOL, 0, 0, 0, NULL, 0},
    {"daso-one-node-fp32", NULL, "on one node, no cast of blocking syncs to the wire type (not "
     "HeAT: it casts)", HET_SOPT_BOOL, 0, 0, 0, NULL, 0},
    {NULL, NULL, NULL, HET_SOPT_INT, 0, 0, 0, NULL, 0},
};

het_daso_params het_daso_params_read(const het_train_config *c) {
    /* the plateau threshold through a float, as when it was a float field of the
     * configuration, so that the schedule decides as it did then */
    return (het_daso_params){
        .warmup_epochs = (int)het_strategy_opt_value(c, "daso-warmup-epochs"),
        .cooldown_epochs = (int)het_strategy_opt_value(c, "daso-cooldown-epochs"),
        .total_epochs = c->epochs,
        .max_global_skips = (int)het_strategy_opt_value(c, "daso-max-global-skips"),
        .threshold = (double)(float)het_strategy_opt_value(c, "daso-plateau-threshold"),
        .patience = (int)het_strategy_opt_value(c, "daso-patience"),
        .skip_factor = (int)het_strategy_opt_value(c, "daso-skip-reduction-factor"),
        .local_factor = (int)het_strategy_opt_value(c, "daso-local-skip-factor"),
    };
}
