/* A strategy's own options (strategy.h, het_strategy_opt) in the configuration: setting them
 * (het_train_config_set, config files), the checks of each kind (integer, word, number), the
 * replacement of a repeated setting, the refusal of an option the chosen strategy does not
 * declare, het_strategy_opt_value's values and defaults (and its abort on an undeclared name),
 * the echo and its re-reading as a checkpoint does, and the normalized field that makes equal
 * settings equal bytes. */
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
    /* integers: the whole text, in [lo, hi], canonical form */
    expect_error(&c, "max-staleness", "x", "max-staleness: 'x' is not an integer in -1..1000000");
    expect_error(&c, "max-staleness", "3.5", "'3.5' is not an integer in -1..1000000");
    expect_error(&c, "max-staleness", "", "'' is not an integer");
    expect_error(&c, "max-staleness", " 3", "' 3' is not an integer");
    expect_error(&c, "max-staleness", "-2", "'-2' is not an integer in -1..1000000");
    expect_error(&c, "max-staleness", "1000001", "'1000001' is not an integer in -1..1000000");
    expect_error(&c, "ps-shards", "0", "ps-shards: '0' is not an integer in 1..64");
    expect_error(&c, "ps-rank", "99999999999999999999", "is not an integer");
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

/* HET_SOPT_FLOAT: no table has one yet, so the checker is tested on an entry of its own. */
static void test_float(void) {
    const het_strategy_opt f = {"mix", "X", "a test number", HET_SOPT_FLOAT, 0, 1, 0.5, NULL};
    char canon[64];
    CHECK(het_sopt_parse(&f, "0.1", canon, sizeof canon) == HET_OK &&
          strcmp(canon, "0.1") == 0, "0.1: '%s'", canon);
    CHECK(het_sopt_parse(&f, "1e-1", canon, sizeof canon) == HET_OK &&
          strcmp(canon, "0.1") == 0, "1e-1: '%s'", canon);
    CHECK(het_sopt_parse(&f, "-0", canon, sizeof canon) == HET_OK && strcmp(canon, "0") == 0,
          "-0: '%s'", canon);
    CHECK(het_sopt_parse(&f, "1", canon, sizeof canon) == HET_OK && strcmp(canon, "1") == 0,
          "1: '%s'", canon);
    static const char *const bad[] = {"1.5", "-0.1", "x", "", "0.5x", "nan", "inf", " 0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = het_sopt_parse(&f, bad[i], canon, sizeof canon);
        char want[64];
        snprintf(want, sizeof want, "mix: '%s' is not a number in 0..1", bad[i]);
        CHECK(st == HET_EINVAL && strcmp(het_error_msg(), want) == 0, "'%s': '%s'", bad[i],
              st ? het_error_msg() : "accepted");
    }
}

/* HET_SOPT_LIST (the pipelines' --stages): ascending integers in [lo, hi], written back
 * without blanks or leading zeros; anything else refused with one message. */
static void test_list(void) {
    const het_strategy_opt l = {"cuts", "C1,C2", "a test list", HET_SOPT_LIST, 1, 100, 0, NULL};
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
            for (const char *const *t = s + 1; *t; t++) {
                const het_strategy_ops *other = het_strategy_find(*t);
                const het_strategy_opt *b = het_strategy_opt_find(other->opts, o->name);
                if (!b) continue;
                shared++;
                CHECK(o->kind == b->kind && o->lo == b->lo && o->hi == b->hi &&
                          strcmp(o->metavar, b->metavar) == 0 && same_words(o->words, b->words),
                      "%s: %s's and %s's entries differ (kind %d/%d, range [%g, %g]/[%g, %g], "
                      "metavar %s/%s)", o->name, *s, *t, (int)o->kind, (int)b->kind, o->lo, o->hi,
                      b->lo, b->hi, o->metavar, b->metavar);
            }
        }
    }
    /* asp and inhad share 4 options, gpipe and qfb 3 */
    CHECK(shared >= 7, "%d options shared between strategies, expected at least 7", shared);
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
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), ":4: ps-shards: 'x' is not an integer "
          "in 1..64"), "bad value in a file: '%s'", st ? het_error_msg() : "accepted");
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
    return het_test_finish("test_config_sopt");
}
