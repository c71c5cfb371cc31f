/* DESIGN: ranks that must read the same inputs (shared FINDINGS #5).
 *
 * Every rank of a run reads its own configuration (command line, config file), its own data
 * files and its own checkpoint copy; on a cluster these are node-local and may differ (an MPMD
 * command line, a config file edited on one node, a stale checkpoint copy). Ranks that differ
 * pair collectives of other sizes or counts: a crash inside MPI or a hang. So before the first
 * collective that depends on them, the ranks compare (het_comm_compare: one all-reduce when
 * they agree):
 *   the configuration   one value per key: its text when at most 8 bytes (so that the message
 *                       can show both values), else its 64-bit FNV-1a hash. Keys that may
 *                       differ per rank are left out: data-dir and speeds-file (node-local
 *                       paths), threads (a rank's workers: the sums over ranks stay the same),
 *                       and what only rank 0 writes or prints (metrics, progress, quiet, out).
 *                       For checkpoint, trace and export-safetensors only whether one is given
 *                       counts: it decides collective calls, the path may differ. The
 *                       strategy's own options (strategy_opts) are one more value.
 *   the dataset         training and test samples used, sample shape, classes;
 *   a checkpoint        (on resume) epoch and step, and CRC-32s of its parameters, state and
 *                       optimizer state;
 *   the strategy        its agreed_state (strategy.h): after init, and after a resume's
 *                       load_state (hgc's speeds and partition, daso's schedule), per value
 *                       over the world or inside each node.
 * On a difference every rank returns HET_EINVAL with the same one-line message, e.g.
 * "rank 1 differs from rank 0: configuration (batch 32 vs 64 on rank 0)". */
#include <stdio.h>
#include <string.h>

#include "train/trainer.h"

/* Keys whose values may differ between ranks, and keys of which only presence counts. */
static const char *const local_keys[] = {"data-dir", "speeds-file", "threads", "metrics",
                                         "metrics-steps", "progress", "quiet", "out", NULL};
static const char *const presence_keys[] = {"checkpoint", "trace", "export-safetensors", NULL};

static int listed(const char *const *list, const char *key) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], key) == 0) return 1;
    return 0;
}

/* A value's text packed into 8 bytes (<= 8 bytes long, then it can be shown), else its FNV-1a
 * hash with the top bit set (packed text is 7-bit ASCII in its top byte). */
static uint64_t value_code(const char *v, size_t n) {
    uint64_t h = 0;
    if (n <= 8 && (n == 0 || (unsigned char)v[n - 1] < 0x80)) {
        memcpy(&h, v, n);
        return h;
    }
    h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)v[i]) * 0x100000001b3ULL;
    return h | 1ULL << 63;
}

/* The text of a code made by value_code, or "" for a hash. */
static void code_text(uint64_t code, char *buf, size_t n) {
    buf[0] = '\0';
    if (code >> 63) return;
    char v[9] = {0};
    memcpy(v, &code, 8);
    snprintf(buf, n, "%s", v);
}

/* One line for a difference d in `what`; field names the value (NULL: none); with text, the
 * two values as "X vs Y on rank 0". Returns HET_EINVAL. */
static int differs(const het_comm_diff *d, const char *what, const char *field,
                   const char *theirs, const char *mine) {
    char who[64], detail[160] = "";
    if (d->n_ranks > 1)
        snprintf(who, sizeof who, "rank %d and %d other rank%s differ", d->rank, d->n_ranks - 1,
                 d->n_ranks > 2 ? "s" : "");
    else
        snprintf(who, sizeof who, "rank %d differs", d->rank);
    if (field && theirs && theirs[0] && mine && mine[0])
        snprintf(detail, sizeof detail, " (%s %s vs %s on rank 0)", field, theirs, mine);
    else if (field)
        snprintf(detail, sizeof detail, " (%s)", field);
    return het_error_set(HET_EINVAL, "%s from rank 0: %s%s; every rank must run the same "
                         "inputs", who, what, detail);
}

int het_trainer_compare_config(const het_trainer *t) {
    if (!t->mpi || t->size <= 1) return HET_OK;
    char text[HET_COMPARE_MAX * 96 + 16 * HET_PATH_LEN + sizeof t->cfg.strategy_opts];
    uint64_t v[HET_COMPARE_MAX];
    const char *name[HET_COMPARE_MAX];
    het_train_config_format(&t->cfg, 1, text, sizeof text);
    int n = 0;
    const het_config_key *k = het_train_config_keys();
    const char *p = text;
    for (; k->key && n < HET_COMPARE_MAX; k++) {
        /* this key's value: from "key = " to the line of the next key */
        char head[80], next[84];
        snprintf(head, sizeof head, "%s = ", k->key);
        const char *at = strncmp(p, head, strlen(head)) == 0 ? p : strstr(p, head);
        if (!at) continue; /* cannot happen: format writes every key */
        const char *val = at + strlen(head), *end = NULL;
        if (k[1].key) {
            snprintf(next, sizeof next, "\n%s = ", k[1].key);
            end = strstr(val, next);
        }
        if (!end) end = val + strcspn(val, "\n");
        p = end + (*end == '\n');
        if (listed(local_keys, k->key)) continue;
        size_t len = (size_t)(end - val);
        if (listed(presence_keys, k->key)) val = len ? "given" : "none", len = strlen(val);
        name[n] = k->key;
        v[n++] = value_code(val, len);
    }
    if (n < HET_COMPARE_MAX) { /* the strategy's own options: one value for them all, never
                                  shown (their text has line breaks) */
        name[n] = "strategy options";
        v[n++] = value_code(t->cfg.strategy_opts, strlen(t->cfg.strategy_opts)) | 1ULL << 63;
    }
    het_comm_diff d;
    int st = het_comm_compare(MPI_COMM_WORLD, v, n, &d);
    if (st || d.rank < 0) return st;
    char theirs[16], mine[16];
    code_text(d.theirs, theirs, sizeof theirs);
    code_text(d.mine, mine, sizeof mine);
    return differs(&d, "configuration", name[d.index], theirs, mine);
}

/* Numbers: value i is names[i] of what[i]; bit i of `numeric`: the message shows both. */
static int compare_numbers(const het_trainer *t, const char *const *what,
                           const char *const *names, const uint64_t *v, int n, int numeric) {
    if (!t->mpi || t->size <= 1) return HET_OK;
    het_comm_diff d;
    int st = het_comm_compare(MPI_COMM_WORLD, v, n, &d);
    if (st || d.rank < 0) return st;
    char theirs[32], mine[32];
    snprintf(theirs, sizeof theirs, "%llu", (unsigned long long)d.theirs);
    snprintf(mine, sizeof mine, "%llu", (unsigned long long)d.mine);
    int shown = numeric & (1 << d.index);
    return differs(&d, what[d.index], names[d.index], shown ? theirs : NULL,
                   shown ? mine : NULL);
}

int het_trainer_compare_data(const het_trainer *t) {
    static const char *const names[] = {"training samples", "test samples", "channels",
                                        "height", "width", "classes"};
    const het_shape s = t->train.shape;
    uint64_t v[6] = {(uint64_t)t->n_train, (uint64_t)t->n_test, (uint64_t)s.c, (uint64_t)s.h,
                     (uint64_t)s.w, (uint64_t)t->train.n_classes};
    static const char *const what[] = {"dataset", "dataset", "dataset", "dataset", "dataset",
                                       "dataset"};
    return compare_numbers(t, what, names, v, 6, 0x3f);
}

int het_trainer_compare_checkpoint(const het_trainer *t, uint64_t epoch, uint64_t step,
                                   const uint32_t crc[3]) {
    static const char *const names[] = {"epoch", "step", "parameters", "state",
                                         "optimizer state"};
    uint64_t v[5] = {epoch, step, crc[0], crc[1], crc[2]};
    static const char *const what[] = {"checkpoint position", "checkpoint position",
                                       "checkpoint", "checkpoint", "checkpoint"};
    return compare_numbers(t, what, names, v, 5, 0x3);
}

/* Values of one scope: over the world (reference rank 0) or inside each node (reference the
 * node's first rank; the world ranks are named). The message is this rank's own; the caller
 * agrees over the world. */
static int compare_scope(het_trainer *t, const het_agreed_value *a, int n, het_comm_scope s) {
    uint64_t v[HET_AGREED_MAX];
    int at[HET_AGREED_MAX], m = 0;
    for (int i = 0; i < n; i++)
        if (a[i].scope == s) at[m] = i, v[m++] = a[i].value;
    if (m == 0) return HET_OK;
    MPI_Comm comm = s == HET_COMM_WORLD ? MPI_COMM_WORLD : het_comm_mpi(t->comm, s);
    het_comm_diff d;
    int st = het_comm_compare(comm, v, m, &d);
    if (st || d.rank < 0) return st;
    const het_agreed_value *x = &a[at[d.index]];
    int ref = 0, who = d.rank;
    if (s != HET_COMM_WORLD) { /* node ranks -> world ranks */
        MPI_Group g, w;
        int local[2] = {0, d.rank}, world[2] = {0, d.rank};
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &w);
        MPI_Group_translate_ranks(g, 2, local, w, world);
        MPI_Group_free(&g);
        MPI_Group_free(&w);
        ref = world[0];
        who = world[1];
    }
    char detail[200] = "";
    if (x->shown)
        snprintf(detail, sizeof detail, " (%s %llu vs %llu on rank %d)", x->field,
                 (unsigned long long)d.theirs, (unsigned long long)d.mine, ref);
    else
        snprintf(detail, sizeof detail, " (%s)", x->field);
    char others[48] = "";
    if (d.n_ranks > 1)
        snprintf(others, sizeof others, " and %d other rank%s", d.n_ranks - 1,
                 d.n_ranks > 2 ? "s" : "");
    return het_error_set(HET_EINVAL, "rank %d%s differ%s from rank %d: strategy state%s; every "
                         "rank must run the same inputs (each rank's copy of a checkpoint "
                         "included)", who, others, d.n_ranks > 1 ? "" : "s", ref, detail);
}

int het_trainer_compare_strategy(het_trainer *t) {
    if (!t->mpi || t->size <= 1 || !t->strat->agreed_state) return HET_OK;
    het_agreed_value a[HET_AGREED_MAX];
    int n = t->strat->agreed_state(&t->ctx, a, HET_AGREED_MAX);
    if (n > HET_AGREED_MAX) n = HET_AGREED_MAX;
    int st = compare_scope(t, a, n, HET_COMM_WORLD);
    if (!st) st = het_trainer_agree(t, compare_scope(t, a, n, HET_COMM_NODE));
    return st;
}
