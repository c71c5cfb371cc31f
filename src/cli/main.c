/* hetrain: the command line. Parses "hetrain <command> [options]", builds the configuration
 * (defaults < checkpoint's stored configuration for eval / export / --resume < --config FILE <
 * the command line; of hgc's --speeds and --speeds-file, the one a higher source gives wins,
 * both from one source are refused, a resumed hgc run refuses other speeds than its
 * checkpoint's and a resumed pipeline other stages; a resume under another strategy drops the
 * checkpoint's options of its own) and runs the command. Only this file, commands.c and compare.c print to
 * stderr and choose exit statuses: 0 success, 1 runtime failure, 2 usage error (one line on
 * stderr, nothing on stdout).
 *
 * MPI: `mpirun -np P hetrain train ...` (or srun) runs P ranks of the same command; hetrain
 * never launches processes itself (only `hetrain compare` does, below). Every rank parses the
 * same arguments; the outcome is agreed on (het_comm_agree) before any other collective, so a
 * usage error exits 2 on every rank with one message from rank 0, and a rank that cannot read a
 * file (a config file or a checkpoint present on one node only) stops all ranks instead of
 * leaving them in a collective. Output comes from rank 0 only.
 *
 * `hetrain compare` is the exception: it launches `mpirun ... hetrain train` itself, once per
 * strategy and seed (compare.c), so it runs without MPI and refuses to run under a launcher. */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "hetero/hetero.h"
#include "strategy/strategy.h"

#define HET_VERSION "0.1.0"
#define MAX_PAIRS 256

typedef struct command {
    const char *name;
    int (*run)(const het_train_config *c);
    const char *summary;
    const char *const *keys; /* options it takes on the command line; NULL: all */
    /* A command with options of its own (not config keys): takes them out of argv before the
     * rest is parsed (cli_compare_options); NULL: none. */
    int (*own_options)(int argc, char **argv, int *n_rest);
    void (*own_help)(void); /* prints its own options for --help */
    int no_mpi;             /* 1: runs without MPI (it launches MPI runs itself, or none) */
} command;

static const char *const eval_keys[] = {"model", "model-file", "init-from", "data", "data-dir",
                                        "synthetic-shape", "classes", "batch", "threads",
                                        "checkpoint", "test-limit", "quiet", NULL};
static const char *const info_keys[] = {"model", "model-file", "data", "data-dir",
                                        "synthetic-shape", "classes", "batch", "threads",
                                        "platform", "hostfile", NULL};
static const char *const platform_keys[] = {"model", "model-file", "data", "data-dir",
                                            "synthetic-shape", "classes", "ranks-per-node",
                                            "placement", "slowdown", "net-bw", "net-lat",
                                            "node-bw", "node-lat", "net-factors", "quiet", NULL};
static const char *const export_keys[] = {"checkpoint", "model", "model-file", "init-from",
                                          "data", "data-dir", "synthetic-shape", "classes",
                                          "seed", "export-safetensors", "export-onnx", "quiet",
                                          NULL};
static const char *const calibrate_keys[] = {"model", "model-file", "data", "data-dir",
                                             "synthetic-shape", "classes", "batch", "threads",
                                             "slowdown", "ranks-per-node", "platform",
                                             "hostfile", "calibrate-steps",
                                             "clock", "compute-cost", "costs-out",
                                             "train-limit", "test-limit", "seed", "progress",
                                             "out", "quiet", "net-lat", "net-bw", NULL};

/* compare forwards these to every `train` run; it sets --strategy, --seed, --metrics and
 * --progress itself. A strategy's own options (its opts table) it takes too, and passes each
 * only to the runs of the strategies that have it (compare_sopt.c). */
static const char *const compare_keys[] = {
    "model", "model-file", "init-from", "data", "data-dir", "synthetic-shape", "classes",
    "epochs", "batch", "lr", "schedule", "warmup-epochs",
    "step-epochs", "gamma", "min-lr", "patience", "factor", "threshold", "optimizer", "momentum",
    "nesterov", "weight-decay", "beta1", "beta2", "eps", "seed", "threads", "train-limit",
    "test-limit", "ranks-per-node", "placement", "bucket-mb", "allreduce-algo", "slowdown",
    "slowdown-at", "net-bw", "net-lat", "node-bw", "node-lat", "net-factors", "platform",
    "hostfile", "clock",
    "compute-cost", "speeds", "speeds-file", "calibrate-steps", "on-nan", "eval-every", NULL};

static const command commands[] = {
    {"train", cli_train, "train a model; one line per epoch, metrics, checkpoints", NULL, NULL,
     NULL, 0},
    {"eval", cli_eval, "evaluate a checkpoint (--checkpoint) or a model file's weights on the "
     "test set", eval_keys,
     NULL, NULL, 0},
    {"info", cli_info, "describe a model (layers, shapes, parameters, FLOPs) and a dataset",
     info_keys, NULL, NULL, 0},
    {"export", cli_export, "write a checkpoint's model as safetensors or ONNX (needs "
     "--checkpoint and --export-safetensors or --export-onnx; --safetensors and --onnx for "
     "short)", export_keys, NULL, NULL, 0},
    {"calibrate", cli_calibrate, "measure every rank's training speed (for hgc's "
     "--speeds-file: --out FILE), or with --network the link between two ranks (MPI's "
     "message-size factors for hetrain platform --factors)", calibrate_keys,
     cli_calibrate_options, cli_calibrate_help, 0},
    {"compare", cli_compare, "train with each strategy under mpirun (and seeds), then tables "
     "and plots of the runs (--out DIR)", compare_keys, cli_compare_options, cli_compare_help,
     1},
    {"platform", cli_platform, "write the emulated cluster of --ranks-per-node, --slowdown, "
     "--net-bw ... as a SimGrid platform file (--out FILE) and hostfile, for --platform and "
     "smpirun", platform_keys, cli_platform_options, cli_platform_help, 1},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static int g_rank = 0, g_size = 1;

/* Records one line "hetrain[ CMD]: ..." as the error message; main prints it (rank 0) after
 * the ranks agreed. */
static void usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    het_error_set(HET_EINVAL, "hetrain%s%s: %s", cmd ? " " : "", cmd ? cmd : "", msg);
}

int cli_fail(void) {
    if (g_rank == 0) fprintf(stderr, "hetrain: %s\n", het_error_msg());
    return CLI_FAIL;
}

int cli_agree(int status) {
    return g_size > 1 ? het_comm_agree(MPI_COMM_WORLD, status) : status;
}

/* A failure before the command ran: its message as the full line "hetrain: ...". */
static int pre_fail(void) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", het_error_msg());
    het_error_set(HET_EIO, "hetrain: %s", msg);
    return CLI_FAIL;
}

static void print_main_help(void) {
    printf("hetrain %s: data-parallel training of neural networks in C, built for "
           "heterogeneous clusters\n\n"
           "usage: hetrain <command> [options]     (hetrain <command> --help for its options)\n\n"
           "commands:\n", HET_VERSION);
    for (int i = 0; i < N_COMMANDS; i++)
        printf("  %-9s %s\n", commands[i].name, commands[i].summary);
    printf("  %-9s %s\n", "run", "supervise a job: hetrain run [--restarts K] [--min-ranks Q] "
           "[--hosts FILE] [--metrics FILE] -- mpirun -np N ... hetrain train ... --checkpoint "
           "FILE: relaunch on the ranks left when one is lost");
    printf("\nexample:\n  hetrain train --model lenet5 --data fashion-mnist --epochs 5 "
           "--metrics run.jsonl --checkpoint run.ckpt\n\n"
           "exit status: 0 success, 1 runtime failure (data, files, divergence), 2 usage "
           "error\n");
}

static int allowed(const command *cmd, const char *key) {
    if (!cmd->keys || (cmd->own_options == cli_compare_options && cli_strategy_opt(key)))
        return 1;
    for (int i = 0; cmd->keys[i]; i++)
        if (strcmp(cmd->keys[i], key) == 0) return 1;
    return 0;
}

const het_strategy_opt *cli_strategy_opt(const char *key) {
    for (const char *const *n = het_strategy_names(); *n; n++) {
        const het_strategy_ops *s = het_strategy_find(*n);
        const het_strategy_opt *o = s ? het_strategy_opt_find(s->opts, key) : NULL;
        if (o) return o;
    }
    return NULL;
}

/* --help of train: each strategy's own options under a heading of their strategy. */
static void print_strategy_options(void) {
    for (const char *const *n = het_strategy_names(); *n; n++) {
        const het_strategy_ops *s = het_strategy_find(*n);
        if (!s || !s->opts || !s->opts->name) continue;
        printf("\noptions of --strategy %s: %s\n", s->name, s->summary);
        for (const het_strategy_opt *o = s->opts; o->name; o++) {
            char left[64], def[64];
            snprintf(left, sizeof left, "--%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
            if (o->kind == HET_SOPT_BOOL) { /* a flag: no default shown, as the built-in ones */
                printf("  %-26s %s\n", left, o->help);
                continue;
            }
            if (o->kind == HET_SOPT_WORD) snprintf(def, sizeof def, "%s", o->words[(int)o->def]);
            else if (o->kind == HET_SOPT_LIST) snprintf(def, sizeof def, "unset");
            else snprintf(def, sizeof def, "%.10g", o->def);
            printf("  %-26s %s (default %s)\n", left, o->help, def);
        }
    }
}

static void print_command_help(const command *cmd) {
    printf("usage: hetrain %s [options]\n%s\n\noptions:\n", cmd->name, cmd->summary);
    if (cmd->own_help) cmd->own_help();
    het_train_config d = het_train_config_defaults();
    size_t len = het_train_config_format(&d, 1, NULL, 0);
    char *defs = malloc(len + 2); /* "\nkey = value\n..." */
    if (defs) {
        defs[0] = '\n';
        het_train_config_format(&d, 1, defs + 1, len + 1);
    }
    for (const het_config_key *k = het_train_config_keys(); k->key; k++) {
        if (!allowed(cmd, k->key)) continue;
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", k->key, k->arg ? " " : "", k->arg ? k->arg : "");
        char def[64] = "", needle[80];
        snprintf(needle, sizeof needle, "\n%s = ", k->key);
        const char *p = defs ? strstr(defs, needle) : NULL;
        if (p && k->arg) {
            p += strlen(needle);
            int n = (int)strcspn(p, "\n");
            if (n > 0 && n < 40) snprintf(def, sizeof def, " (default %.*s)", n, p);
        }
        printf("  %-26s %s%s\n", left, k->help, def);
    }
    free(defs);
    printf("  %-26s %s\n  %-26s %s\n", "--config FILE",
           "read options from FILE (once): 'key = value' lines, each key once, # comments; the "
           "command line wins",
           "-h, --help", "this help");
    if (!cmd->keys || cmd->own_options == cli_compare_options) print_strategy_options();
    if (strcmp(cmd->name, "train") == 0)
        printf("\nThreads: --threads N runs N worker threads per model and OpenBLAS with 1 "
               "thread. They split\neach batch, or on one rank, for dense stacks (mlp), the rows "
               "of every weight matrix,\nwith the update folded into the step. Results are "
               "bitwise reproducible for a given N.\n"
               "--resume takes the configuration stored in the checkpoint; options given again "
               "override it,\nexcept those its state fixes (--stages of gpipe / qfb, hgc's "
               "speeds: refused).\n"
               "SIGINT / SIGTERM: a checkpoint's temp file is removed; rank 0 prints "
               "'hetrain: interrupted\n(checkpoint FILE: epoch N)' (the checkpoint on disk) "
               "and every rank exits 130 / 143.\nUnder mpirun, a rank that vanished is named "
               "when the launcher ends the job; a rank\nmissing from a collective is named "
               "after --stall-warn seconds (rank 0, on stderr).\n");
}

typedef struct pair {
    const char *key;
    const char *value; /* NULL: a flag without value */
} pair;

/* Parses options into pairs; returns -1 after printing an error, 1 for --help, 0 otherwise. */
static int parse_args(const command *cmd, int argc, char **argv, pair *pairs, int *n_pairs,
                      const char **config_file) {
    static char keybuf[MAX_PAIRS][64];
    *n_pairs = 0;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            usage_error(cmd->name, "unexpected argument '%s'%s", a,
                        a[0] == '-' ? " (options are --name or --name=value)" : "");
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t kn = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (kn >= sizeof keybuf[0] || *n_pairs == MAX_PAIRS) {
            usage_error(cmd->name, "option '%s' is too long", a);
            return -1;
        }
        char *key = keybuf[*n_pairs];
        memcpy(key, a + 2, kn);
        key[kn] = '\0';
        /* export's short names: `hetrain export --onnx FILE` (--safetensors FILE) */
        if (strcmp(cmd->name, "export") == 0 &&
            (strcmp(key, "onnx") == 0 || strcmp(key, "safetensors") == 0))
            strcpy(key, key[0] == 'o' ? "export-onnx" : "export-safetensors");
        const het_config_key *k = NULL;
        for (const het_config_key *p = het_train_config_keys(); p->key; p++)
            if (strcmp(p->key, key) == 0) k = p;
        const het_strategy_opt *so = k ? NULL : cli_strategy_opt(key);
        int is_config = strcmp(key, "config") == 0;
        if (!is_config && (!(k || so) || !allowed(cmd, key))) {
            if (k || so) usage_error(cmd->name, "option --%s does not apply to this command", key);
            else usage_error(cmd->name, "unknown option --%s (see hetrain %s --help)", key,
                             cmd->name);
            return -1;
        }
        const char *value = eq ? eq + 1 : NULL;
        /* a flag (a built-in key without arg, a HET_SOPT_BOOL option) takes no next word */
        if (!eq && (is_config || (so && so->kind != HET_SOPT_BOOL) || (k && k->arg))) {
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                usage_error(cmd->name, "--%s: missing value", key);
                return -1;
            }
            value = argv[++i];
        }
        if (is_config) {
            if (*config_file) { /* one file: several would raise the question which wins */
                usage_error(cmd->name, "--config given twice ('%s', then '%s'), expected one "
                            "config file", *config_file, value);
                return -1;
            }
            *config_file = value;
            continue;
        }
        pairs[*n_pairs].key = key;
        pairs[*n_pairs].value = value;
        (*n_pairs)++;
    }
    return 0;
}

/* hgc's speeds come from --speeds or from --speeds-file: a source (config file, command line)
 * that gives one replaces the other from the sources below it; one source giving both is
 * refused (checked by het_train_config_check). */
static int gives_speeds(const het_train_config *c) { return strcmp(c->speeds, "auto") != 0; }

/* Applies the config file and the command-line pairs on top of *c; prints the error. */
static int apply(const command *cmd, het_train_config *c, const char *config_file,
                 const pair *pairs, int n_pairs) {
    const het_train_config d = het_train_config_defaults();
    if (config_file) {
        het_train_config f = d; /* what the file alone says */
        if (het_train_config_load(&f, config_file) || het_train_config_load(c, config_file)) {
            usage_error(NULL, "%s", het_error_msg());
            return -1;
        }
        if (gives_speeds(&f) && f.speeds_file[0]) {
            usage_error(NULL, "%s: speeds '%s' and speeds-file '%s' both give hgc's speeds; "
                        "give one", config_file, f.speeds, f.speeds_file);
            return -1;
        }
        if (gives_speeds(&f)) memcpy(c->speeds_file, d.speeds_file, sizeof c->speeds_file);
        if (f.speeds_file[0]) memcpy(c->speeds, d.speeds, sizeof c->speeds);
    }
    int speeds = -1, file = -1;
    for (int i = 0; i < n_pairs; i++) {
        if (strcmp(pairs[i].key, "speeds") == 0) speeds = i;
        if (strcmp(pairs[i].key, "speeds-file") == 0) file = i;
    }
    if (speeds >= 0 && file >= 0) {
        usage_error(cmd->name, "--speeds '%s' and --speeds-file '%s' both give hgc's speeds; "
                    "give one", pairs[speeds].value, pairs[file].value);
        return -1;
    }
    if (speeds >= 0) memcpy(c->speeds_file, d.speeds_file, sizeof c->speeds_file);
    if (file >= 0) memcpy(c->speeds, d.speeds, sizeof c->speeds);
    for (int i = 0; i < n_pairs; i++)
        if (het_train_config_set(c, pairs[i].key, pairs[i].value)) {
            usage_error(cmd->name, "--%s", het_error_msg());
            return -1;
        }
    return 0;
}

/* A resumed hgc run continues with the speeds in its checkpoint's state (they may have been
 * re-balanced): other speeds given now would be silently overridden, so they are refused.
 * ck: the checkpoint's own configuration; c: the resolved one. */
static int resume_speeds(const command *cmd, const het_train_config *ck,
                         const het_train_config *c) {
    if (!c->resume || strcmp(c->strategy, "hgc") != 0 || strcmp(ck->strategy, "hgc") != 0)
        return 0;
    if (strcmp(ck->speeds, c->speeds) == 0 && strcmp(ck->speeds_file, c->speeds_file) == 0)
        return 0;
    const int f = c->speeds_file[0] != 0;
    usage_error(cmd->name, "--%s '%s': the checkpoint %s continues hgc with the speeds it "
                "saved (trained with %s '%s'); resume without --speeds / --speeds-file",
                f ? "speeds-file" : "speeds", f ? c->speeds_file : c->speeds, c->checkpoint,
                ck->speeds_file[0] ? "speeds-file" : "speeds",
                ck->speeds_file[0] ? ck->speeds_file : ck->speeds);
    return -1;
}

/* Options of a strategy that a resume under the same strategy cannot honour: the checkpoint's
 * state fixes what they set (the pipelines' stage cuts). Given now with another value than the
 * checkpoint's (or than its measured plan), they are refused instead of silently replaced.
 * ck: the checkpoint's configuration; given: what is given now; c: the resolved one. */
static int resume_kept(const command *cmd, const het_train_config *ck,
                       const het_train_config *given, const het_train_config *c) {
    static const struct {
        const char *strategies, *option, *kept;
    } kept[] = {
        {" gpipe qfb ", "stages", "the stage cuts it saved"},
    };
    if (!c->resume || strcmp(ck->strategy, c->strategy) != 0) return 0;
    char pat[40];
    snprintf(pat, sizeof pat, " %.32s ", c->strategy);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        char now[HET_PATH_LEN], was[HET_PATH_LEN] = "";
        if (!strstr(kept[i].strategies, pat) ||
            !het_strategy_opts_lookup(given->strategy_opts, kept[i].option, now, sizeof now))
            continue;
        int stored = het_strategy_opts_lookup(ck->strategy_opts, kept[i].option, was, sizeof was);
        if (stored && strcmp(now, was) == 0) continue;
        char how[HET_PATH_LEN + 32];
        if (stored) snprintf(how, sizeof how, "trained with --%s %s", kept[i].option, was);
        else snprintf(how, sizeof how, "trained without --%s", kept[i].option);
        usage_error(cmd->name, "--%s %s: the checkpoint %s continues %s with %s (%s); resume "
                    "without --%s", kept[i].option, now, c->checkpoint, c->strategy,
                    kept[i].kept, how, kept[i].option);
        return -1;
    }
    return 0;
}

/* Parses the command line into *out and *cmd_out; CLI_OK with *cmd_out NULL when there is
 * nothing to run (help, version). Errors: the status, with the line to print recorded. */
static int parse_cli(int argc, char **argv, het_train_config *out, const command **cmd_out) {
    *cmd_out = NULL;
    if (argc < 2) {
        usage_error(NULL, "missing command: train, eval, info, export, calibrate or compare (see "
                    "hetrain --help)");
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2 && strcmp(name, "help") == 0) {
            for (int i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, argv[2]) == 0) {
                    if (g_rank == 0) print_command_help(&commands[i]);
                    return CLI_OK;
                }
        }
        if (g_rank == 0) print_main_help();
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0) {
        if (g_rank == 0) printf("hetrain %s\n", HET_VERSION);
        return CLI_OK;
    }
    const command *cmd = NULL;
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) cmd = &commands[i];
    if (!cmd) {
        usage_error(NULL, "unknown command '%s' (expected train, eval, info, export, calibrate, "
                    "compare or platform; see hetrain --help)", name);
        return CLI_USAGE;
    }
    pair pairs[MAX_PAIRS];
    int n_pairs = 0;
    const char *config_file = NULL;
    int n_args = argc - 2;
    if (cmd->own_options && cmd->own_options(argc - 2, argv + 2, &n_args)) return CLI_USAGE;
    int pr = parse_args(cmd, n_args, argv + 2, pairs, &n_pairs, &config_file);
    if (pr < 0) return CLI_USAGE;
    if (pr > 0) {
        if (g_rank == 0) print_command_help(cmd);
        return CLI_OK;
    }
    /* First pass: every value must parse, whatever the checkpoint holds. */
    het_train_config c = het_train_config_defaults();
    if (apply(cmd, &c, config_file, pairs, n_pairs)) return CLI_USAGE;
    int needs_ckpt = strcmp(cmd->name, "eval") == 0 || strcmp(cmd->name, "export") == 0;
    if (needs_ckpt && !c.checkpoint[0] && !c.model_file[0] && !c.init_from[0]) {
        usage_error(cmd->name, "--checkpoint FILE is required (or the weights from "
                    "--model-file FILE.onnx or --init-from FILE)");
        return CLI_USAGE;
    }
    if (strcmp(cmd->name, "export") == 0 && !c.export_safetensors[0] && !c.export_onnx[0]) {
        usage_error(cmd->name, "--export-safetensors FILE or --export-onnx FILE is required");
        return CLI_USAGE;
    }
    if (strcmp(cmd->name, "train") != 0) c.resume = 0;
    /* the strategy whose options those set must be may still come from the checkpoint: with
     * one, the second pass checks them */
    het_train_config first = c;
    int compare = cmd->own_options == cli_compare_options; /* strategies checked per run */
    if (compare && config_file) {
        het_train_config f = het_train_config_defaults();
        if (het_train_config_load(&f, config_file) == HET_OK && f.strategy_opts[0]) {
            usage_error(cmd->name, "%s sets %.*s, an option of some strategies: give it on the "
                        "command line, where compare passes it to the runs of those", config_file,
                        (int)strcspn(f.strategy_opts, "="), f.strategy_opts);
            return CLI_USAGE;
        }
    }
    if (needs_ckpt || c.resume || compare)
        memset(first.strategy_opts, 0, sizeof first.strategy_opts);
    if (het_train_config_check(&first)) {
        usage_error(cmd->name, "%s", het_error_msg());
        return CLI_USAGE;
    }
    if ((needs_ckpt && c.checkpoint[0]) || c.resume) {
        /* Second pass: the checkpoint's configuration underneath. */
        het_train_config base = het_train_config_defaults();
        if (het_train_config_from_checkpoint(&base, c.checkpoint)) return pre_fail();
        const het_train_config ck = base;
        if (apply(cmd, &base, config_file, pairs, n_pairs)) return CLI_USAGE;
        if (resume_speeds(cmd, &ck, &base) || resume_kept(cmd, &ck, &c, &base))
            return CLI_USAGE;
        /* the checkpoint's options of its own strategy do not bind another one */
        if (base.resume && strcmp(ck.strategy, base.strategy) != 0)
            het_train_config_for_resume(&base, &c);
        if (strcmp(cmd->name, "train") != 0) base.resume = 0;
        if (het_train_config_check(&base)) {
            usage_error(cmd->name, "%s", het_error_msg());
            return CLI_USAGE;
        }
        c = base;
    }
    /* eval and export use the weights alone: how they were trained (strategy, ranks, their
     * speeds and slowdowns, emulated nodes and network) stays with the checkpoint */
    if (needs_ckpt) het_train_config_for_eval(&c);
    if (het_train_check_paths(&c, config_file)) {
        usage_error(cmd->name, "%s", het_error_msg());
        return CLI_USAGE;
    }
    if ((strcmp(cmd->name, "train") == 0 || strcmp(cmd->name, "calibrate") == 0) && c.slowdown[0]) {
        int nf = het_slowdown_parse(c.slowdown, NULL, 0);
        if (nf != g_size) {
            usage_error(cmd->name, "--slowdown: %d factor%s for %d rank%s, expected one per "
                        "rank", nf, nf == 1 ? "" : "s", g_size, g_size == 1 ? "" : "s");
            return CLI_USAGE;
        }
    }
    *out = c;
    *cmd_out = cmd;
    return CLI_OK;
}

static int run_cli(int argc, char **argv) {
    het_train_config c;
    const command *cmd;
    int rc = parse_cli(argc, argv, &c, &cmd);
    if (g_size > 1) { /* every rank stops if any failed: the highest exit status wins */
        int worst = rc;
        MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (worst != CLI_OK) {
            cli_agree(rc != CLI_OK ? HET_EINVAL : HET_OK);
            rc = worst;
        }
    }
    if (rc != CLI_OK) {
        if (g_rank == 0) fprintf(stderr, "%s\n", het_error_msg());
        return rc;
    }
    if (!cmd) return CLI_OK;
    if (c.quiet) het_log_set_level(HET_LOG_QUIET);
    het_dnnl_bf16_choose((het_bf16_kernels)c.bf16_kernels); /* before any model is made */
    int mpi = 0;
    MPI_Initialized(&mpi);
    if (mpi && g_size > 1 && cli_agree(het_stall_start_for(MPI_COMM_WORLD, c.stall_warn,
                                                           c.stall_abort, c.p2p_model)) != HET_OK)
        rc = cli_fail();
    else
        rc = cmd->run(&c);
    het_stall_stop();
    return rc;
}

/* A launcher of another MPI than the one hetrain was built with starts P processes that each
 * see a world of 1 and would all train alone: say so when the launcher's environment names more
 * ranks than MPI sees. */
static void warn_launcher_mismatch(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        long n = v ? strtol(v, NULL, 10) : 0;
        if (n <= 1) continue;
        char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, ",\n")] = '\0';
        for (char *p = lib; *p; p++)
            if (*p == '\t') *p = ' ';
        fprintf(stderr, "hetrain: warning: the launcher started %ld ranks (%s=%s) but MPI sees 1: "
                "this hetrain is built with %s; use that MPI's launcher\n", n, vars[i], v, lib);
        return;
    }
}

/* A sanitized build's leak check ignores what MPI allocates inside MPI_Init_thread and
 * MPI_Finalize (MPI's, kept until exit): matching those few thousand blocks to tests/lsan.supp
 * took a quarter of a leak-checked 5-rank run (8.4 s -> 6.0 s). Everything else stays checked. */
#if defined(__SANITIZE_ADDRESS__) /* GCC */
#define HET_LSAN 1
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer)
#define HET_LSAN 1
#endif
#endif
#if defined(HET_LSAN)
#include <sanitizer/lsan_interface.h>
static void lsan_disable(void) { __lsan_disable(); }
static void lsan_enable(void) { __lsan_enable(); }
#else
static void lsan_disable(void) {}
static void lsan_enable(void) {}
#endif

int main(int argc, char **argv) {
    int size = 1, provided = MPI_THREAD_SINGLE; /* het_comm_create checks the level */
#ifndef HET_SMPI /* under smpirun the ranks are threads of one process: no re-exec */
    het_blas_select_kernels(argv); /* may re-exec once with OPENBLAS_CORETYPE set */
#endif
    if (argc > 1 && strcmp(argv[1], "run") == 0) /* the supervisor: no MPI of its own */
        return cli_supervise(argc - 2, argv + 2);
    for (int i = 0; argc > 1 && i < N_COMMANDS; i++)
        if (commands[i].no_mpi && strcmp(argv[1], commands[i].name) == 0) {
            int rc = run_cli(argc, argv); /* without MPI: it launches MPI runs itself */
            fflush(stdout);
            return rc;
        }
    lsan_disable();
    int init_rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    lsan_enable();
    if (init_rc != MPI_SUCCESS) {
        fprintf(stderr, "hetrain: MPI_Init_thread failed\n");
        return CLI_FAIL;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    g_size = size;
    if (size == 1) warn_launcher_mismatch();
    het_log_set_rank(g_rank);
#ifndef HET_SMPI /* a lost rank, a pid, a signal: none of them under the simulator */
    cli_signals_setup(g_rank, g_size);
#endif
    int rc = run_cli(argc, argv);
    fflush(stdout);
    cli_signals_finish(rc);
    lsan_disable();
    MPI_Finalize();
    lsan_enable();
    return rc;
}
