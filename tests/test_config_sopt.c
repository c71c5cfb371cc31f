/* A strategy's own options (strategy.h, het_strategy_opt) in the configuration: setting them
 * (het_train_config_set, config files), the checks of each kind (integer, word, number with
 * closed and open ends, list, flag), the replacement of a repeated setting, the refusal of an
 * option the chosen strategy does not declare, het_strategy_opt_value's values and defaults
 * (and its abort on an undeclared name), the echo and its re-reading as a checkpoint does, the
 * normalized field that makes equal settings equal bytes, that tables sharing a name agree,
 * and hgc's and daso's options (once config fields) with their old defaults, read from a
 * checkpoint written while they were keys. */
#define _POSIX_C_SOURCE 200809L
#include <hetrain.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strategy/strategy.h"
#include "test.h"
#include "train/internal.h"

/* het_train_config_set fails with a message containing `want`. */
static void expect_error(het_train_config *c, const char *key, const char *value,
                         const char *want) {
    int st = het_train_config_set(c, key, value);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), want), "%s %s: status %d, message '%s', "
          "expected '%s'", key, value ? value : "(none)", st, st ? het_error_msg() : "", want);
}

static void set_ok(het_train_config *c, const char *key, const char *value) {
    int st = het_train_config_set(c, key, value);
    CHECK(st == HET_OK, "%s %s: %s", key, value, het_error_msg());
}

static void test_set_and_check(void) {
    het_train_config c = het_train_config_defaults();
    CHECK(c.strategy_opts[0] == '\0', "defaults set options: '%s'", c.strategy_opts);
    /* integers: the whole text (else "not an integer"), in [lo, hi] (else "out of range", as
     * the built-in keys say), canonical form */
    expect_error(&c, "max-staleness", "x", "max-staleness: 'x' is not an integer");
    expect_error(&c, "max-staleness", "3.5", "'3.5' is not an integer");
    expect_error(&c, "max-staleness", "", "'' is not an integer");
    expect_error(&c, "max-staleness", " 3", "' 3' is not an integer");
    expect_error(&c, "max-staleness", "-2",
                 "max-staleness: -2 is out of range, expected [-1, 1000000]");
    expect_error(&c, "max-staleness", "1000001",
                 "1000001 is out of range, expected [-1, 1000000]");
    expect_error(&c, "ps-shards", "0", "ps-shards: 0 is out of range, expected [1, 64]");
    expect_error(&c, "ps-rank", "99999999999999999999", "is out of range");
    expect_error(&c, "ps-rank", NULL, "ps-rank: missing value");
    /* words */
    expect_error(&c, "staleness-lr", "maybe",
                 "staleness-lr: unknown value 'maybe', expected off or on");
    expect_error(&c, "staleness-lr", "ON", "unknown value 'ON'");
    CHECK(c.strategy_opts[0] == '\0', "failed settings changed the options: '%s'",
          c.strategy_opts);
    /* an option of no table stays unknown */
    expect_error(&c, "no-such-option", "1", "no-such-option: unknown key");

    set_ok(&c, "max-staleness", "+3");
    set_ok(&c, "ps_rank", "4"); /* '_' as '-', as the built-in keys */
    set_ok(&c, "staleness-lr", "on");
    CHECK(strcmp(c.strategy_opts, "max-staleness=3\nps-rank=4\nstaleness-lr=on\n") == 0,
          "options '%s'", c.strategy_opts);
    set_ok(&c, "max-staleness", "007"); /* a repeated setting replaces the earlier one */
    CHECK(strcmp(c.strategy_opts, "max-staleness=7\nps-rank=4\nstaleness-lr=on\n") == 0,
          "after replacing: '%s'", c.strategy_opts);
    size_t len = strlen(c.strategy_opts);
    int zero = 1;
    for (size_t i = len; i < sizeof c.strategy_opts; i++) zero &= c.strategy_opts[i] == 0;
    CHECK(zero, "the field is not zero after its text");

    /* the chosen strategy's table decides */
    CHECK(het_train_config_check(&c) == HET_EINVAL &&
          strcmp(het_error_msg(), "max-staleness: an option of --strategy asp or inhad, not of "
                 "allreduce") == 0, "allreduce with asp's options: '%s'", het_error_msg());
    set_ok(&c, "strategy", "asp");
    CHECK(het_train_config_check(&c) == HET_OK, "asp with its options: %s", het_error_msg());
    het_train_config hgc = het_train_config_defaults();
    set_ok(&hgc, "strategy", "hgc");
    set_ok(&hgc, "ps-rank", "1");
    CHECK(het_train_config_check(&hgc) == HET_EINVAL &&
          strstr(het_error_msg(), "ps-rank: an option of --strategy asp or inhad, not of hgc"),
          "hgc with --ps-rank: '%s'", het_error_msg());
    /* eval and export train nothing: the options go with the strategy */
    het_train_config_for_eval(&c);
    CHECK(c.strategy_opts[0] == '\0' && het_train_config_check(&c) == HET_OK,
          "for_eval kept '%s'", c.strategy_opts);
}

/* Options set in another order are the same bytes. */
static void test_equal_bytes(void) {
    het_train_config a = het_train_config_defaults(), b = het_train_config_defaults();
    set_ok(&a, "strategy", "asp");
    set_ok(&a, "staleness-lr", "on");
    set_ok(&a, "ps-rank", "2");
    set_ok(&a, "max-staleness", "5");
    set_ok(&b, "max-staleness", "9");
    set_ok(&b, "ps-rank", "2");
    set_ok(&b, "max-staleness", "5");
    set_ok(&b, "staleness-lr", "on");
    set_ok(&b, "strategy", "asp");
    CHECK(memcmp(&a, &b, sizeof a) == 0, "configs differ: '%s' vs '%s'", a.strategy_opts,
          b.strategy_opts);
}

/* Values and defaults through het_strategy_opt_value, with strategy asp. */
static void test_values(void) {
    het_train_config c = het_train_config_defaults();
    set_ok(&c, "strategy", "asp");
    for (const het_strategy_opt *o = het_asp_opts; o->name; o++)
        CHECK(het_strategy_opt_value(&c, o->name) == o->def, "%s: %g, default %g", o->name,
              het_strategy_opt_value(&c, o->name), o->def);
    CHECK(het_strategy_opt_value(&c, "max-staleness") == -1, "max-staleness default");
    CHECK(het_strategy_opt_value(&c, "staleness-lr") == 0, "staleness-lr default: off = 0");
    CHECK(het_strategy_opt_value(&c, "ps-shards") == 1, "ps-shards default");
    set_ok(&c, "max-staleness", "12");
    set_ok(&c, "staleness-lr", "on");
    set_ok(&c, "ps-shards", "3");
    CHECK(het_strategy_opt_value(&c, "max-staleness") == 12, "max-staleness set: %g",
          het_strategy_opt_value(&c, "max-staleness"));
    CHECK(het_strategy_opt_value(&c, "staleness-lr") == 1, "staleness-lr on: index 1");
    CHECK(het_strategy_opt_value(&c, "ps-shards") == 3, "ps-shards set");
    CHECK(het_strategy_opt_value(&c, "ps-rank") == -1, "ps-rank unset: its default");
    /* a name outside asp's table (inhad's own) is a bug of the caller: it aborts */
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);
        het_strategy_opt_value(&c, "soft-sync");
        _exit(0);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT, "soft-sync under asp: status 0x%x, "
          "expected SIGABRT", ws);
}

/* HET_SOPT_FLOAT with a closed range, on an entry of its own (the open ends: test_open). */
static void test_float(void) {
    const het_strategy_opt f = {"mix", "X", "a test number", HET_SOPT_FLOAT, 0, 1, 0.5, NULL, 0};
    char canon[64];
    CHECK(het_sopt_parse(&f, "0.1", canon, sizeof canon) == HET_OK &&
          strcmp(canon, "0.1") == 0, "0.1: '%s'", canon);
    CHECK(het_sopt_parse(&f, "1e-1", canon, sizeof canon) == HET_OK &&
          strcmp(canon, "0.1") == 0, "1e-1: '%s'", canon);
    CHECK(het_sopt_parse(&f, "-0", canon, sizeof canon) == HET_OK && strcmp(canon, "0") == 0,
          "-0: '%s'", canon);
    CHECK(het_sopt_parse(&f, "1", canon, sizeof canon) == HET_OK && strcmp(canon, "1") == 0,
          "1: '%s'", canon);
    static const char *const bad[] = {"x", "", "0.5x", "nan", " 0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = het_sopt_parse(&f, bad[i], canon, sizeof canon);
        char want[64];
        snprintf(want, sizeof want, "mix: '%s' is not a number", bad[i]);
        CHECK(st == HET_EINVAL && strcmp(het_error_msg(), want) == 0, "'%s': '%s'", bad[i],
              st ? het_error_msg() : "accepted");
    }
    static const char *const out[] = {"1.5", "-0.1", "inf", "-1e300"};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        int st = het_sopt_parse(&f, out[i], canon, sizeof canon);
        char want[64];
        snprintf(want, sizeof want, "mix: %s is out of range, expected [0, 1]", out[i]);
        CHECK(st == HET_EINVAL && strcmp(het_error_msg(), want) == 0, "'%s': '%s'", out[i],
              st ? het_error_msg() : "accepted");
    }
}

/* HET_SOPT_LIST (the pipelines' --stages): ascending integers in [lo, hi], written back
 * without blanks or leading zeros; anything else refused with one message. */
static void test_list(void) {
    const het_strategy_opt l = {"cuts", "C1,C2", "a test list", HET_SOPT_LIST, 1, 100, 0, NULL, 0};
    char canon[64];
    CHECK(het_sopt_parse(&l, "3", canon, sizeof canon) == HET_OK && strcmp(canon, "3") == 0,
          "3: '%s'", canon);
    CHECK(het_sopt_parse(&l, "3,7,100", canon, sizeof canon) == HET_OK &&
          strcmp(canon, "3,7,100") == 0, "3,7,100: '%s'", canon);
    CHECK(het_sopt_parse(&l, "03,07", canon, sizeof canon) == HET_OK &&
          strcmp(canon, "3,7") == 0, "03,07: '%s'", canon);
    static const char *const bad[] = {"", "0", "101", "3,3", "7,3", "3,", ",3", "3;7", "x",
                                      "3,x", " 3", "3 ,7", "-1", "3,,7", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = het_sopt_parse(&l, bad[i], canon, sizeof canon);
        char want[128];
        snprintf(want, sizeof want, "cuts: '%s' is not a list of ascending integers in 1..100 "
                 "separated by commas", bad[i]);
        CHECK(st == HET_EINVAL && strcmp(het_error_msg(), want) == 0, "'%s': '%s'", bad[i],
              st ? het_error_msg() : "accepted");
    }
}

/* Two NULL-terminated word lists with the same words in the same order (or both NULL). */
static int same_words(const char *const *a, const char *const *b) {
    for (; a && b && *a && *b; a++, b++)
        if (strcmp(*a, *b) != 0) return 0;
    return (!a && !b) || (a && b && !*a && !*b);
}

/* Tables that share a name agree on kind, bounds, metavar and words (strategy.h: a value is
 * checked against the first table with the name, so every other table must accept the same
 * values), for every pair of registered strategies (asp and inhad, gpipe and qfb, and any
 * pair a new strategy makes); and no registered strategy's option is named as a built-in key
 * (which would hide it). Defaults and help may differ: each strategy reads its own. */
static void test_tables_agree(void) {
    int shared = 0;
    for (const char *const *s = het_strategy_names(); *s; s++) {
        const het_strategy_ops *ops = het_strategy_find(*s);
        for (const het_strategy_opt *o = ops->opts; o && o->name; o++) {
            for (const het_config_key *k = het_train_config_keys(); k->key; k++)
                CHECK(strcmp(k->key, o->name) != 0, "%s's option %s is a built-in key", *s,
                      o->name);
            /* a flag has no metavar, every other kind one */
            CHECK((o->kind == HET_SOPT_BOOL) == (o->metavar == NULL), "%s's option %s: kind %d, "
                  "metavar %s", *s, o->name, (int)o->kind, o->metavar ? o->metavar : "NULL");
            for (const char *const *t = s + 1; *t; t++) {
                const het_strategy_ops *other = het_strategy_find(*t);
                const het_strategy_opt *b = het_strategy_opt_find(other->opts, o->name);
                if (!b) continue;
                shared++;
                const char *ma = o->metavar ? o->metavar : "", *mb = b->metavar ? b->metavar : "";
                CHECK(o->kind == b->kind && o->lo == b->lo && o->hi == b->hi &&
                          o->open == b->open && strcmp(ma, mb) == 0 &&
                          same_words(o->words, b->words),
                      "%s: %s's and %s's entries differ (kind %d/%d, range [%g, %g]/[%g, %g], "
                      "open %d/%d, metavar %s/%s)", o->name, *s, *t, (int)o->kind, (int)b->kind,
                      o->lo, o->hi, b->lo, b->hi, o->open, b->open, ma, mb);
            }
        }
    }
    /* asp and inhad share 4 options, gpipe and qfb 3 */
    CHECK(shared >= 7, "%d options shared between strategies, expected at least 7", shared);
}

/* Open ends of HET_SOPT_FLOAT ranges, on the moved options that have them (as config.c's
 * F_LO_OPEN / F_HI_OPEN keys did): the end itself is refused, and so is a value that is the
 * end once rounded to the float the strategy keeps. */
static void test_open(void) {
    het_train_config c = het_train_config_defaults();
    expect_error(&c, "daso-plateau-threshold", "1",
                 "daso-plateau-threshold: 1 is out of range, expected [0, 1)");
    expect_error(&c, "daso-plateau-threshold", "0.9999999999",
                 "0.9999999999 is out of range, expected [0, 1)");
    expect_error(&c, "daso-plateau-threshold", "-0.01", "is out of range, expected [0, 1)");
    expect_error(&c, "rebalance-threshold", "0",
                 "rebalance-threshold: 0 is out of range, expected (0, 10]");
    expect_error(&c, "rebalance-threshold", "1e-50", "1e-50 is out of range, expected (0, 10]");
    expect_error(&c, "rebalance-threshold", "10.5", "10.5 is out of range, expected (0, 10]");
    CHECK(c.strategy_opts[0] == '\0', "refused values were kept: '%s'", c.strategy_opts);
    set_ok(&c, "daso-plateau-threshold", "0");
    set_ok(&c, "daso-plateau-threshold", "0.99");
    set_ok(&c, "rebalance-threshold", "10");
    set_ok(&c, "rebalance-threshold", "1e-6");
    CHECK(strcmp(c.strategy_opts, "daso-plateau-threshold=0.99\nrebalance-threshold=1e-06\n")
          == 0, "options '%s'", c.strategy_opts);
}

/* HET_SOPT_BOOL: a bare flag is on, the built-in flags' words are accepted (and nothing else),
 * kept as true / false, read as 1 / 0; a bare key in a config file is on too. */
static void test_bool(void) {
    het_train_config c = het_train_config_defaults();
    set_ok(&c, "strategy", "daso");
    CHECK(het_strategy_opt_value(&c, "daso-merge-last") == 0, "daso-merge-last default: %g",
          het_strategy_opt_value(&c, "daso-merge-last"));
    set_ok(&c, "daso-merge-last", NULL);
    CHECK(strcmp(c.strategy_opts, "daso-merge-last=true\n") == 0, "bare flag: '%s'",
          c.strategy_opts);
    CHECK(het_strategy_opt_value(&c, "daso-merge-last") == 1, "daso-merge-last on: %g",
          het_strategy_opt_value(&c, "daso-merge-last"));
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false",
                                                                                 "no", "off"};
    for (int i = 0; i < 4; i++) {
        set_ok(&c, "daso-one-node-fp32", no[i]);
        CHECK(het_strategy_opt_value(&c, "daso-one-node-fp32") == 0, "'%s': %g", no[i],
              het_strategy_opt_value(&c, "daso-one-node-fp32"));
        set_ok(&c, "daso-one-node-fp32", yes[i]);
        CHECK(het_strategy_opt_value(&c, "daso-one-node-fp32") == 1, "'%s': %g", yes[i],
              het_strategy_opt_value(&c, "daso-one-node-fp32"));
    }
    expect_error(&c, "daso-merge-last", "maybe",
                 "daso-merge-last: 'maybe' is not a boolean, expected true or false");
    expect_error(&c, "rebalance", "", "rebalance: '' is not a boolean");
    CHECK(strcmp(c.strategy_opts, "daso-merge-last=true\ndaso-one-node-fp32=true\n") == 0,
          "options '%s'", c.strategy_opts);
    /* a config file's bare key, and the echo read back */
    char path[] = "/tmp/het_sopt_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL, "temporary file");
    if (!f) return;
    fputs("strategy = hgc\nrebalance\nweighting = rank\n", f);
    fclose(f);
    het_train_config g = het_train_config_defaults();
    int st = het_train_config_load(&g, path);
    remove(path);
    CHECK(st == HET_OK && strcmp(g.strategy_opts, "rebalance=true\nweighting=rank\n") == 0,
          "file: %s '%s'", st ? het_error_msg() : "ok", g.strategy_opts);
    char text[16384];
    het_train_config_format(&g, 0, text, sizeof text);
    CHECK(strstr(text, "\nrebalance = true\nweighting = rank\n") != NULL, "echo:\n%s", text);
    het_train_config back = het_train_config_defaults();
    st = het_train_config_apply_text(&back, "ckpt", 0, text, strlen(text));
    CHECK(st == HET_OK && memcmp(&back, &g, sizeof g) == 0, "echo read back: %s '%s'",
          st ? het_error_msg() : "differs", back.strategy_opts);
}

/* hgc's and daso's options, once fields of het_train_config: the defaults of then, refused
 * with another strategy as --ps-rank is, and a checkpoint written while they were keys (they
 * are in its text whatever the strategy) still read, with another strategy's dropped. */
static void test_moved(void) {
    static const struct {
        const char *strategy, *name;
        double def;
    } was[] = {
        {"daso", "daso-warmup-epochs", 4}, {"daso", "daso-cooldown-epochs", 4},
        {"daso", "daso-max-global-skips", 8}, {"daso", "daso-chunk", 10000000},
        {"daso", "daso-wire", 2 /* bf16 */}, {"daso", "daso-plateau-threshold", 0.05},
        {"daso", "daso-patience", 2}, {"daso", "daso-skip-reduction-factor", 2},
        {"daso", "daso-local-skip-factor", 4}, {"daso", "daso-merge-last", 0},
        {"daso", "daso-one-node-fp32", 0}, {"hgc", "batching", 0 /* proportional */},
        {"hgc", "weighting", 0 /* sample */}, {"hgc", "rebalance", 0},
        {"hgc", "rebalance-threshold", 0.1}, {"hgc", "rebalance-steps", 0},
    };
    for (size_t i = 0; i < sizeof was / sizeof was[0]; i++) {
        het_train_config c = het_train_config_defaults();
        set_ok(&c, "strategy", was[i].strategy);
        CHECK(het_strategy_opt_value(&c, was[i].name) == was[i].def, "%s: default %g, was %g",
              was[i].name, het_strategy_opt_value(&c, was[i].name), was[i].def);
    }
    het_train_config c = het_train_config_defaults();
    set_ok(&c, "daso-patience", "3");
    CHECK(het_train_config_check(&c) == HET_EINVAL &&
          strcmp(het_error_msg(), "daso-patience: an option of --strategy daso, not of "
                 "allreduce") == 0, "allreduce with --daso-patience: '%s'", het_error_msg());
    c = het_train_config_defaults();
    set_ok(&c, "strategy", "daso");
    set_ok(&c, "rebalance", NULL);
    CHECK(het_train_config_check(&c) == HET_EINVAL &&
          strcmp(het_error_msg(), "rebalance: an option of --strategy hgc, not of daso") == 0,
          "daso with --rebalance: '%s'", het_error_msg());
    /* speeds stay keys of het_train_config: any strategy takes them, as before */
    c = het_train_config_defaults();
    set_ok(&c, "speeds", "1,2");
    set_ok(&c, "calibrate-steps", "3");
    CHECK(c.strategy_opts[0] == '\0' && het_train_config_check(&c) == HET_OK,
          "allreduce with --speeds: '%s' %s", c.strategy_opts, het_error_msg());

    /* a checkpoint of an hgc run from before the move: every key echoed */
    const char *old = "strategy = hgc\nspeeds = 1,3\nbatching = equal\nrebalance = false\n"
                      "rebalance-threshold = 0.1\ndaso-warmup-epochs = 4\ndaso-wire = bf16\n"
                      "daso-merge-last = false\n";
    char path[] = "/tmp/het_sopt_ckpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temporary file");
    if (fd < 0) return;
    close(fd);
    het_ckpt_writer *w = NULL;
    int st = het_ckpt_writer_open(&w, path);
    if (!st) st = het_ckpt_put(w, "config", old, strlen(old));
    if (!st) st = het_ckpt_writer_commit(w);
    else if (w) het_ckpt_writer_abort(w);
    CHECK(st == HET_OK, "writing %s: %s", path, het_error_msg());
    het_train_config ck = het_train_config_defaults();
    st = het_train_config_from_checkpoint(&ck, path);
    remove(path);
    CHECK(st == HET_OK && strcmp(ck.strategy, "hgc") == 0 && strcmp(ck.speeds, "1,3") == 0 &&
              strcmp(ck.strategy_opts, "batching=equal\nrebalance=false\n"
                     "rebalance-threshold=0.1\n") == 0,
          "old checkpoint: %s, strategy %s, options '%s'", st ? het_error_msg() : "read",
          ck.strategy, ck.strategy_opts);
    CHECK(het_train_config_check(&ck) == HET_OK, "old checkpoint's config refused: %s",
          het_error_msg());
}

/* The echo has the options; read back as a checkpoint's configuration it is the same. */
static void test_echo(void) {
    het_train_config c = het_train_config_defaults();
    set_ok(&c, "strategy", "asp");
    set_ok(&c, "ps-rank", "0");
    set_ok(&c, "staleness-lr", "on");
    char text[16384];
    size_t n = het_train_config_format(&c, 0, text, sizeof text);
    CHECK(n < sizeof text, "echo of %zu bytes", n);
    CHECK(strstr(text, "\nps-rank = 0\nstaleness-lr = on\n") != NULL, "echo:\n%s", text);
    size_t short_n = het_train_config_format(&c, 0, NULL, 0);
    CHECK(short_n == n, "length %zu, then %zu", short_n, n);
    het_train_config back = het_train_config_defaults();
    int st = het_train_config_apply_text(&back, "ckpt", 0, text, strlen(text));
    CHECK(st == HET_OK, "re-read: %s", het_error_msg());
    CHECK(strcmp(back.strategy_opts, c.strategy_opts) == 0, "re-read '%s', was '%s'",
          back.strategy_opts, c.strategy_opts);
    /* a config file: a line each, and one given twice is refused as any key */
    char path[] = "/tmp/het_sopt_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL, "temporary file");
    if (!f) return;
    fputs("strategy = asp\nmax-staleness = 2\nstaleness-lr on\nmax-staleness = 3\n", f);
    fclose(f);
    het_train_config g = het_train_config_defaults();
    st = het_train_config_load(&g, path);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), ":4: max-staleness given twice (line 2)"),
          "twice in a file: '%s'", st ? het_error_msg() : "accepted");
    f = fopen(path, "w");
    fputs("strategy = asp\nmax-staleness = 2\nstaleness-lr on\nps-shards = x\n", f);
    fclose(f);
    g = het_train_config_defaults();
    st = het_train_config_load(&g, path);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), ":4: ps-shards: 'x' is not an integer"),
          "bad value in a file: '%s'", st ? het_error_msg() : "accepted");
    f = fopen(path, "w");
    fputs("strategy = asp\nmax-staleness = 2\nstaleness-lr on\n", f);
    fclose(f);
    g = het_train_config_defaults();
    st = het_train_config_load(&g, path);
    CHECK(st == HET_OK && strcmp(g.strategy_opts, "max-staleness=2\nstaleness-lr=on\n") == 0,
          "file: %s '%s'", st ? het_error_msg() : "ok", g.strategy_opts);
    remove(path);
}

int main(void) {
    test_set_and_check();
    test_equal_bytes();
    test_values();
    test_float();
    test_list();
    test_tables_agree();
    test_echo();
    test_open();
    test_bool();
    test_moved();
    return het_test_finish("test_config_sopt");
}
