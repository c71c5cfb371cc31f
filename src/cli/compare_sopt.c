/* compare and the strategies' own options (strategy.h's opts tables): compare takes them on
 * its command line and passes each only to the runs of the strategies whose table has it
 * (--max-staleness to asp and inhad, not to allreduce), so that one comparison can set them;
 * every run gets the others' options as the user wrote them, but --eval-every only the runs of
 * strategies that evaluate inside an epoch (het_strategy_evals_inside; the others evaluate at
 * epoch ends: compare.md says which). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "strategy/strategy.h"

/* The strategy option that word w (--name or --name=value) names, or NULL. */
static const het_strategy_opt *word_opt(const char *w, int *inline_value) {
    if (strncmp(w, "--", 2) != 0) return NULL;
    const char *eq = strchr(w, '=');
    char key[64];
    size_t kn = eq ? (size_t)(eq - w - 2) : strlen(w + 2);
    if (kn == 0 || kn >= sizeof key) return NULL;
    memcpy(key, w + 2, kn);
    key[kn] = '\0';
    *inline_value = eq != NULL;
    return cli_strategy_opt(key);
}

/* Whether w is an option that smpirun takes instead of train under --simulator smpi. */
static int smpi_word(const char *w, int *inline_value) {
    static const char *const keys[] = {"--platform", "--hostfile", "--clock"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(keys[k]);
        if (!strncmp(w, keys[k], n) && (w[n] == '\0' || w[n] == '=')) {
            *inline_value = w[n] == '=';
            return 1;
        }
    }
    return 0;
}

int cli_compare_run_words(char *const *rest, int n_rest, const char *strategy, char **out) {
    const het_strategy_ops *s = het_strategy_find(strategy);
    int n = 0;
    for (int i = 0; i < n_rest; i++) {
        int inline_value = 0;
        if (cli_compare_smpi() && smpi_word(rest[i], &inline_value)) { /* smpirun's, not train's */
            if (!inline_value) i++;
            continue;
        }
        if (s && !het_strategy_evals_inside(s) && !strncmp(rest[i], "--eval-every", 12) &&
            (rest[i][12] == '\0' || rest[i][12] == '=')) { /* at epoch ends only (trainer.c) */
            if (rest[i][12] == '\0') i++;
            continue;
        }
        const het_strategy_opt *o = word_opt(rest[i], &inline_value);
        if (o && !(s && het_strategy_opt_find(s->opts, o->name))) { /* not this strategy's */
            /* its value (main.c's parse_args took the next word; a flag takes none) */
            if (!inline_value && o->kind != HET_SOPT_BOOL) i++;
            continue;
        }
        out[n++] = rest[i];
    }
    return n;
}

int cli_compare_check_sopts(const het_train_config *c, const char *const *strat, int n_strat) {
    for (const char *p = c->strategy_opts; *p;) {
        size_t nl = strcspn(p, "=\n");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)nl, p);
        int used = 0;
        for (int i = 0; i < n_strat && !used; i++) {
            const het_strategy_ops *s = het_strategy_find(strat[i]);
            used = s && het_strategy_opt_find(s->opts, name);
        }
        if (!used) {
            char list[256] = "";
            for (int i = 0; i < n_strat; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         i ? ", " : "", strat[i]);
            return het_error_set(HET_EINVAL, "hetrain compare: --%s: an option of none of the "
                                 "strategies compared (%s)", name, list);
        }
        p += strcspn(p, "\n");
        if (*p) p++;
    }
    return HET_OK;
}
