/* The strategies' own options (--ps-rank, --max-staleness ...: each strategy's table of
 * het_strategy_opt, strategy.h) in the configuration. They are not fields of
 * het_train_config: every option set lives, checked and normalized, in one text field,
 * het_train_config.strategy_opts, as "name=value\n" lines sorted by name with values in a
 * canonical form, the rest of the field zero. So two configurations with the same settings are
 * the same bytes (ranks compare them, checkpoints store them), whatever order they were set in.
 *
 * The options a key may name are those of every registered strategy's table (het_strategy_names,
 * ops->opts): a value is checked against the entry of the first table that has the name
 * (tables sharing a name agree on kind, bounds and words: strategy.h), and the chosen strategy's
 * table decides only at het_train_config_check, once every source (checkpoint, config file,
 * command line) has said which strategy runs. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/internal.h"

/* Keys compare with '-' and '_' equal (as the built-in keys, config.c). */
static int name_eq(const char *a, const char *b) {
    for (;; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y) return 0;
        if (!x) return 1;
    }
}

/* Calls visit(entry, first, arg) for every entry of every registered strategy's table, in
 * registry order; `first` is 1 where no earlier table had the name. Stops at a non-zero return
 * of visit and returns it. */
static int each_opt(int (*visit)(const het_strategy_opt *o, int first, void *arg), void *arg) {
    const char *const *names = het_strategy_names();
    for (int s = 0; names[s]; s++) {
        const het_strategy_ops *ops = het_strategy_find(names[s]);
        for (const het_strategy_opt *o = ops ? ops->opts : NULL; o && o->name; o++) {
            int first = 1;
            for (int t = 0; t < s && first; t++) {
                const het_strategy_ops *earlier = het_strategy_find(names[t]);
                first = !het_strategy_opt_find(earlier ? earlier->opts : NULL, o->name);
            }
            int r = visit(o, first, arg);
            if (r) return r;
        }
    }
    return 0;
}

typedef struct find_arg {
    const char *key;   /* the name looked for (by name_eq), or NULL: by index */
    int index;         /* in: the index looked for; out: the index found */
    int seen;          /* distinct names visited */
    const het_strategy_opt *found;
} find_arg;

static int find_visit(const het_strategy_opt *o, int first, void *arg) {
    find_arg *f = arg;
    if (!first) return 0;
    int hit = f->key ? name_eq(o->name, f->key) : f->seen == f->index;
    if (hit) {
        f->found = o;
        f->index = f->seen;
        return 1;
    }
    f->seen++;
    return 0;
}

const het_strategy_opt *het_sopt_entry(const char *key, int *index) {
    find_arg f = {key, 0, 0, NULL};
    each_opt(find_visit, &f);
    if (f.found && f.index >= HET_SOPT_MAX_NAMES) {
        fprintf(stderr, "hetrain: strategy option '%s' is distinct name %d, expected at most %d "
                "(raise HET_SOPT_MAX_NAMES, train/internal.h)\n", f.found->name, f.index + 1,
                HET_SOPT_MAX_NAMES);
        abort();
    }
    if (index) *index = f.found ? f.index : -1;
    return f.found;
}

const char *het_sopt_name(int index) {
    find_arg f = {NULL, index, 0, NULL};
    each_opt(find_visit, &f);
    return f.found ? f.found->name : "?";
}

/* The shortest "%.Ng" text of x that reads back as x (0.1, not 0.10000000000000001). */
static void fmt_double(char *buf, size_t n, double x) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

int het_sopt_parse(const het_strategy_opt *o, const char *v, char *canon, size_t n) {
    if (o->kind == HET_SOPT_WORD) {
        char list[256] = "";
        for (int i = 0; o->words && o->words[i]; i++) {
            if (strcmp(v, o->words[i]) == 0) {
                snprintf(canon, n, "%s", o->words[i]);
                return HET_OK;
            }
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     i == 0 ? "" : o->words[i + 1] ? ", " : " or ", o->words[i]);
        }
        return het_error_set(HET_EINVAL, "%s: unknown value '%s', expected %s", o->name, v,
                             list);
    }
    char *end = NULL;
    if (o->kind == HET_SOPT_LIST) { /* "3,7": integers in [lo, hi], strictly ascending */
        char lo[32], hi[32];
        snprintf(lo, sizeof lo, "%.10g", o->lo);
        snprintf(hi, sizeof hi, "%.10g", o->hi);
        size_t used = 0;
        long long prev = 0;
        int count = 0;
        canon[0] = '\0';
        for (const char *p = v;;) {
            char *e = NULL;
            errno = 0;
            long long x = isdigit((unsigned char)*p) || *p == '-' ? strtoll(p, &e, 10) : 0;
            if (!e || e == p || errno == ERANGE || (*e && *e != ',') || (double)x < o->lo ||
                (double)x > o->hi || (count && x <= prev))
                return het_error_set(HET_EINVAL, "%s: '%s' is not a list of ascending integers "
                                     "in %s..%s separated by commas", o->name, v, lo, hi);
            used += (size_t)snprintf(canon + used, used < n ? n - used : 0, "%s%lld",
                                     count ? "," : "", x);
            prev = x;
            count++;
            if (!*e) break;
            p = e + 1;
        }
        return used < n ? HET_OK : het_error_set(HET_EINVAL, "%s: '%s' is too long", o->name, v);
    }
    if (o->kind == HET_SOPT_BOOL) {
        int on;
        if (!het_config_parse_bool(v, &on))
            return het_error_set(HET_EINVAL, "%s: '%s' is not a boolean, expected true or false",
                                 o->name, v);
        snprintf(canon, n, "%s", on ? "true" : "false");
        return HET_OK;
    }
    /* numbers: the whole text must parse (else "not an integer / a number"), then lie in the
     * range (else "out of range"), the built-in keys' two messages (config.c) */
    errno = 0;
    int parsed = *v && !isspace((unsigned char)*v);
    if (o->kind == HET_SOPT_INT) {
        long long x = parsed ? strtoll(v, &end, 10) : 0;
        if (!parsed || *end)
            return het_error_set(HET_EINVAL, "%s: '%s' is not an integer", o->name, v);
        if (errno == ERANGE || (double)x < o->lo || (double)x > o->hi)
            return het_config_range_error(o->name, v, o->lo, o->hi, 0, 0);
        snprintf(canon, n, "%lld", x);
        return HET_OK;
    }
    double x = parsed ? strtod(v, &end) : 0;
    if (!parsed || *end || isnan(x))
        return het_error_set(HET_EINVAL, "%s: '%s' is not a number", o->name, v);
    /* an open end holds for the float the strategy keeps (strategy.h), a closed one for x */
    const double f = isfinite(x) && fabs(x) <= 3.0e38 ? (double)(float)x : x;
    const int lo_open = o->open & HET_SOPT_LO_OPEN, hi_open = o->open & HET_SOPT_HI_OPEN;
    if (!isfinite(x) || (lo_open ? !(f > o->lo) : !(x >= o->lo)) ||
        (hi_open ? !(f < o->hi) : !(x <= o->hi)))
        return het_config_range_error(o->name, v, o->lo, o->hi, lo_open, hi_open);
    fmt_double(canon, n, x == 0 ? 0.0 : x); /* -0 is written 0 */
    return HET_OK;
}

int het_sopt_set(het_train_config *c, const het_strategy_opt *o, const char *value) {
    if (!value && o->kind == HET_SOPT_BOOL) value = "true"; /* a flag given alone */
    if (!value) return het_error_set(HET_EINVAL, "%s: missing value", o->name);
    char canon[64];
    if (strlen(value) >= sizeof canon)
        return het_error_set(HET_EINVAL, "%s: '%.32s...' is longer than %zu bytes", o->name,
                             value, sizeof canon - 1);
    if (het_sopt_parse(o, value, canon, sizeof canon)) return HET_EINVAL;
    /* the lines as they are, with this option's replaced or put in its sorted place */
    char text[sizeof c->strategy_opts + 512] = ""; /* room for two lines past the limit */
    size_t used = 0, cap = sizeof text;
    int placed = 0;
    for (const char *p = c->strategy_opts; *p || !placed;) {
        const char *eol = *p ? strchr(p, '\n') : p;
        size_t len = *p ? (eol ? (size_t)(eol - p) : strlen(p)) : 0;
        size_t nl = strcspn(p, "=\n");
        int cmp = *p ? strncmp(o->name, p, nl) : -1;
        if (cmp == 0 && o->name[nl]) cmp = 1; /* p's name is a prefix of ours */
        if (!placed && cmp <= 0) {
            used += (size_t)snprintf(text + used, cap - used, "%s=%s\n", o->name, canon);
            placed = 1;
        }
        if (*p && cmp != 0) used += (size_t)snprintf(text + used, cap - used, "%.*s\n",
                                                     (int)len, p);
        if (used >= sizeof c->strategy_opts)
            return het_error_set(HET_EINVAL, "%s: the strategy options set take more than %zu "
                                 "bytes", o->name, sizeof c->strategy_opts - 1);
        if (*p) p += len + (p[len] == '\n');
    }
    memset(c->strategy_opts, 0, sizeof c->strategy_opts);
    memcpy(c->strategy_opts, text, used);
    return HET_OK;
}

int het_sopt_check(const het_train_config *c) {
    const het_strategy_ops *chosen = het_strategy_find(c->strategy);
    if (!chosen) return HET_EINVAL;
    for (const char *p = c->strategy_opts; *p;) {
        size_t nl = strcspn(p, "=\n");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)nl, p);
        if (!het_strategy_opt_find(chosen->opts, name)) {
            char list[256] = "";
            const char *const *names = het_strategy_names();
            int n = 0;
            for (int s = 0; names[s]; s++) {
                const het_strategy_ops *ops = het_strategy_find(names[s]);
                if (ops && het_strategy_opt_find(ops->opts, name))
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                             n++ ? " or " : "", names[s]);
            }
            return het_error_set(HET_EINVAL, "%s: an option of --strategy %s, not of %s", name,
                                 n ? list : "(none)", c->strategy);
        }
        p += strcspn(p, "\n");
        if (*p) p++;
    }
    return HET_OK;
}

void het_train_config_for_resume(het_train_config *c, const het_train_config *given) {
    const het_strategy_ops *chosen = het_strategy_find(c->strategy);
    char text[sizeof c->strategy_opts] = "";
    size_t used = 0;
    for (const char *p = c->strategy_opts; *p;) {
        size_t nl = strcspn(p, "=\n"), len = strcspn(p, "\n");
        char name[64], val[sizeof c->strategy_opts];
        snprintf(name, sizeof name, "%.*s", (int)nl, p);
        int keep = !chosen || het_strategy_opt_find(chosen->opts, name) ||
                   het_strategy_opts_lookup(given->strategy_opts, name, val, sizeof val);
        if (keep && used + len + 1 < sizeof text) {
            memcpy(text + used, p, len);
            text[used + len] = '\n';
            used += len + 1;
        }
        p += len + (p[len] == '\n');
    }
    memset(c->strategy_opts, 0, sizeof c->strategy_opts);
    memcpy(c->strategy_opts, text, used);
}

size_t het_sopt_format(const het_train_config *c, char *buf, size_t n, size_t used) {
    for (const char *p = c->strategy_opts; *p;) {
        size_t nl = strcspn(p, "=\n"), len = strcspn(p, "\n");
        const char *val = p[nl] == '=' ? p + nl + 1 : p + len;
        int k = snprintf(used < n ? buf + used : NULL, used < n ? n - used : 0, "%.*s = %.*s\n",
                         (int)nl, p, (int)(p + len - val), val);
        if (k > 0) used += (size_t)k;
        p += len + (p[len] == '\n');
    }
    return used;
}
