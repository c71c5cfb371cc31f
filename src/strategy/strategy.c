/* The registry of strategies: --strategy NAME selects one; het_agreed_bytes for their
 * agreed_state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/strategy.h"

static const het_strategy_ops *const strategies[] = {
    &het_strategy_allreduce,
    &het_strategy_hgc,
    &het_strategy_daso,
    &het_strategy_asp,
    &het_strategy_inhad,
};
#define N_STRATEGIES (int)(sizeof strategies / sizeof strategies[0])

const char *const *het_strategy_names(void) {
    static const char *names[N_STRATEGIES + 1];
    if (!names[0])
        for (int i = 0; i < N_STRATEGIES; i++) names[i] = strategies[i]->name;
    return names;
}

const het_strategy_ops *het_strategy_find(const char *name) {
    for (int i = 0; i < N_STRATEGIES; i++)
        if (strcmp(strategies[i]->name, name) == 0) return strategies[i];
    char list[256] = "";
    for (int i = 0; i < N_STRATEGIES; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 strategies[i]->name);
    het_error_set(HET_EINVAL, "strategy: unknown strategy '%s', expected one of: %s", name,
                  list);
    return NULL;
}

het_agreed_value het_agreed_bytes(const char *field, const void *p, size_t n,
                                  het_comm_scope s) {
    het_agreed_value v = {field, het_crc32(0, p, n), 0, s};
    return v;
}

/* (defaults only until the parser keeps set values: replaced by the option-table work) */
double het_strategy_opt_value(const het_train_config *c, const char *name) {
    const het_strategy_ops *s = het_strategy_find(c->strategy);
    for (const het_strategy_opt *o = s ? s->opts : NULL; o && o->name; o++)
        if (strcmp(o->name, name) == 0) return o->def;
    fprintf(stderr, "hetrain: strategy %s has no option '%s' (a bug)\n", c->strategy, name);
    abort();
}
