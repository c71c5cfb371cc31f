/* The registry of strategies: --strategy NAME selects one; het_agreed_bytes for their
 * agreed_state; the values of a strategy's own options (het_strategy_opt_value). */
#include <stddef.h>
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
    &het_strategy_gpipe,
    &het_strategy_qfb,
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

const het_strategy_opt *het_strategy_opt_find(const het_strategy_opt *table, const char *name) {
    for (const het_strategy_opt *o = table; o && o->name; o++)
        if (strcmp(o->name, name) == 0) return o;
    return NULL;
}

int het_strategy_opts_lookup(const char *opts, const char *name, char *val, size_t n) {
    size_t len = strlen(name);
    for (const char *p = opts; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) eol = p + strlen(p);
        if ((size_t)(eol - p) > len && strncmp(p, name, len) == 0 && p[len] == '=') {
            snprintf(val, n, "%.*s", (int)(eol - p - (ptrdiff_t)len - 1), p + len + 1);
            return 1;
        }
        p = *eol ? eol + 1 : eol;
    }
    return 0;
}

/* A broken promise of the caller (an option missing from the table, a configuration that the
 * parser did not build): no status can be handled there, so it stops the process. */
static _Noreturn void opt_abort(const char *what, const char *name, const char *strategy) {
    fprintf(stderr, "hetrain: het_strategy_opt_value(\"%s\"): %s of --strategy %s (a bug)\n",
            name, what, strategy);
    abort();
}

/* The configured strategy's entry `name` (aborts when there is none). */
static const het_strategy_opt *configured_opt(const het_train_config *c, const char *name) {
    const het_strategy_ops *s = NULL;
    for (int i = 0; i < N_STRATEGIES && !s; i++)
        if (strcmp(strategies[i]->name, c->strategy) == 0) s = strategies[i];
    if (!s) opt_abort("not a registered strategy", name, c->strategy);
    const het_strategy_opt *o = het_strategy_opt_find(s->opts, name);
    if (!o) opt_abort("not an option", name, c->strategy);
    return o;
}

int het_strategy_opt_list(const het_train_config *c, const char *name, int *out, int cap) {
    const het_strategy_opt *o = configured_opt(c, name);
    if (o->kind != HET_SOPT_LIST) opt_abort("not a list option", name, c->strategy);
    char val[sizeof c->strategy_opts];
    if (!het_strategy_opts_lookup(c->strategy_opts, name, val, sizeof val)) return 0;
    int n = 0;
    for (char *p = val, *end; *p && n < cap; p = *end ? end + 1 : end) {
        out[n++] = (int)strtol(p, &end, 10);
        if (end == p) opt_abort("not a list in strategy_opts for an option", name, c->strategy);
    }
    return n;
}

double het_strategy_opt_value(const het_train_config *c, const char *name) {
    const het_strategy_opt *o = configured_opt(c, name);
    if (o->kind == HET_SOPT_LIST) opt_abort("a list option (het_strategy_opt_list)", name,
                                            c->strategy);
    char val[sizeof c->strategy_opts];
    if (!het_strategy_opts_lookup(c->strategy_opts, name, val, sizeof val)) return o->def;
    if (o->kind == HET_SOPT_WORD) {
        for (int i = 0; o->words && o->words[i]; i++)
            if (strcmp(o->words[i], val) == 0) return i;
        opt_abort("an unknown word in strategy_opts for an option", name, c->strategy);
    }
    if (o->kind == HET_SOPT_BOOL) { /* kept as "true" / "false" (train/config_sopt.c) */
        if (strcmp(val, "true") == 0 || strcmp(val, "false") == 0) return val[0] == 't';
        opt_abort("not a boolean in strategy_opts for an option", name, c->strategy);
    }
    char *end = NULL;
    double x = strtod(val, &end);
    if (end == val || *end) opt_abort("not a number in strategy_opts for an option", name,
                                      c->strategy);
    return x;
}
