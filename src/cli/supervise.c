/* hetrain run: a supervisor that relaunches a job that lost a rank.
 *
 *   hetrain run [--restarts K] [--min-ranks Q] [--hosts FILE] [--metrics FILE] --
 *               LAUNCHER ... hetrain train ... --checkpoint CKPT ...
 *
 * DESIGN. Debian's Open MPI has no ULFM, so a job that loses a rank cannot go on in place: the
 * job ends (a rank of the lost one's host names it within a second and ends the job, watch.c;
 * Open MPI's mpirun and Slurm's srun end the others), the checkpoint on disk is intact
 * (temp file + rename), and the way on is a new job on the ranks that are left, which the
 * trainer resumes on any number of ranks (run_state.c). This file is that loop, as torchrun's
 * elastic agent does for PyTorch: it starts the command after `--` (mpirun, mpiexec,
 * tools/vcluster run, srun) as a job of its own session (job.c: signals passed on, leftovers
 * ended, every wait bounded), copies its output through, and reads it for the lost rank:
 *   hetrain: rank N (pid P) is gone                              (hetrain's peer watch)
 *   process rank N with PID P on node HOST exited on signal S    (Open MPI's mpirun)
 *   srun: error: HOST: task N: ...                               (Slurm's srun)
 *   hetrain: rank N: injected failure ...                        (--fail-at, --fail-rate)
 * A job that failed without a lost rank (a usage error, divergence) is not relaunched: its
 * exit status is the supervisor's. After a loss it relaunches, up to K times and never below
 * Q ranks, with one rank fewer per lost rank (-np / -n / --ntasks rewritten), without the lost
 * host when it is known (mpirun-like launchers: --host of the hosts left of --hosts FILE, an
 * Open MPI hostfile; srun: --exclude=HOST, the allocation's other nodes), the lost rank's
 * factor out of --slowdown (its emulated device is gone), with --resume once the checkpoint
 * exists, and without --fail-at (an injected failure happens once, as a lost node does not
 * come back) or hgc's --speeds / --speeds-file (the checkpoint's, re-scaled, hold). Each
 * restart is one line and one JSON object in --metrics FILE: the lost rank and host, the
 * checkpoint's epoch and step, the steps lost (known when the failure was injected;
 * otherwise at most --checkpoint-steps), and the downtime: from the
 * failed job's end to the first line of the relaunched run's training ("resumed from ...",
 * printed as it starts its first step). A job whose train options set no --stall-abort gets
 * --stall-abort 600, so that a frozen rank (not a lost one: it is not relaunched) ends the job
 * too and no wait of the supervisor is unbounded. No MPI here: it runs before MPI_Init. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/bytes.h"

#define SUP_MAX_ARGS 512
#define SUP_MAX_HOSTS 256
#define SUP_STALL_ABORT "600" /* --stall-abort of a job that sets none (seconds) */

typedef struct sup_opts {
    int restarts, min_ranks;
    const char *hosts_file, *metrics;
} sup_opts;

/* What the job's output said, filled by the reader thread. */
typedef struct sup_seen {
    int fd;                 /* the read end of the job's output */
    int lost_rank;          /* -1: none seen */
    char lost_host[64];     /* "": not known */
    long long fail_step;    /* the injected failure's step, -1: none */
    double t_first;         /* when the run's training began (resumed / first epoch), 0: not */
    char line[1024];
    size_t n;
} sup_seen;

static void sup_parse(sup_seen *s, const char *l) {
    int r, pid;
    char host[64];
    const char *p;
    if ((p = strstr(l, "hetrain: rank ")) && sscanf(p, "hetrain: rank %d (pid %d) is gone", &r,
                                                    &pid) == 2 && s->lost_rank < 0)
        s->lost_rank = r;
    if ((p = strstr(l, "process rank ")) &&
        sscanf(p, "process rank %d with PID %d on node %63s exited", &r, &pid, host) == 3) {
        if (s->lost_rank < 0) s->lost_rank = r;
        if (!s->lost_host[0] && r == s->lost_rank) snprintf(s->lost_host, sizeof s->lost_host, "%s", host);
    }
    if ((p = strstr(l, "srun: error: ")) && sscanf(p, "srun: error: %63[^:]: task %d:", host,
                                                   &r) == 2) {
        if (s->lost_rank < 0) s->lost_rank = r;
        if (!s->lost_host[0] && r == s->lost_rank) snprintf(s->lost_host, sizeof s->lost_host, "%s", host);
    }
    long long step;
    /* an injected failure names its rank itself: the lost rank where the launcher ends the job
     * before a peer's watch can (MPICH's hydra kills every rank at once) */
    if ((p = strstr(l, "hetrain: rank ")) && sscanf(p, "hetrain: rank %d: injected failure", &r) == 1 &&
        strstr(p, ": injected failure ") && s->lost_rank < 0)
        s->lost_rank = r;
    if ((p = strstr(l, ": injected failure ")) && (p = strstr(p, " at step ")) &&
        sscanf(p, " at step %lld", &step) == 1)
        s->fail_step = step;
    if (s->t_first == 0 && (strncmp(l, "resumed from ", 13) == 0 || strncmp(l, "epoch ", 6) == 0))
        s->t_first = het_now();
}

/* The reader: the job's output through to ours, line by line into sup_parse. */
static void *sup_reader(void *arg) {
    sup_seen *s = arg;
    char buf[4096];
    ssize_t k;
    while ((k = read(s->fd, buf, sizeof buf)) != 0) {
        if (k < 0) {
            if (errno == EINTR) continue;
            break;
        }
        fwrite(buf, 1, (size_t)k, stdout);
        fflush(stdout);
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] == '\n' || s->n + 1 >= sizeof s->line) {
                s->line[s->n] = '\0';
                sup_parse(s, s->line);
                s->n = 0;
            } else {
                s->line[s->n++] = buf[i];
            }
        }
    }
    return NULL;
}

static int sup_usage(const char *fmt, const char *what) {
    fprintf(stderr, "hetrain run: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\nusage: hetrain run [--restarts K] [--min-ranks Q] [--hosts FILE] "
            "[--metrics FILE] -- LAUNCHER ... hetrain train ... --checkpoint FILE\n");
    return CLI_USAGE;
}

/* The hosts of an Open MPI hostfile: the first word of each line, and its slots (0: none). */
static int sup_read_hosts(const char *path, char hosts[][64], int *slots, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        size_t w = strcspn(p, " \t\r\n");
        if (w == 0 || w >= 64) continue;
        memcpy(hosts[n], p, w);
        hosts[n][w] = '\0';
        const char *s = strstr(p + w, "slots=");
        slots[n] = s ? atoi(s + 6) : 0;
        n++;
    }
    fclose(f);
    return n;
}

/* The checkpoint's epoch and step (its progress section); -1 when it cannot be read. */
static void sup_ckpt_progress(const char *path, long long *epoch, long long *step) {
    *epoch = *step = -1;
    het_ckpt_reader *r;
    if (access(path, R_OK) != 0 || het_ckpt_reader_open(&r, path) != HET_OK) return;
    const void *p;
    size_t n;
    uint64_t off;
    if (het_ckpt_find(r, "progress", &p, &n, &off) == HET_OK && n >= 16) {
        *epoch = (long long)het_get_u64((const uint8_t *)p);
        *step = (long long)het_get_u64((const uint8_t *)p + 8);
    }
    het_ckpt_reader_close(r);
}

/* Removes entry `r` (0-based) of the comma-separated list in place (a lost rank's factor of
 * --slowdown: the ranks after it move down by one in the relaunch). */
static void sup_drop_entry(char *list, int r) {
    char *p = list;
    for (int k = 0; k < r && p; k++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    if (!p) return;
    char *e = strchr(p, ',');
    if (e) memmove(p, e + 1, strlen(e + 1) + 1);
    else if (p > list) p[-1] = '\0';
    else p[0] = '\0';
}

static int is_np(const char *a) {
    return !strcmp(a, "-np") || !strcmp(a, "-n") || !strcmp(a, "--np") || !strcmp(a, "--ntasks");
}

int cli_supervise(int argc, char **argv) {
    sup_opts o = {2, 1, NULL, NULL};
    int i = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return sup_usage("%s needs a value", a);
        char *end;
        if (!strcmp(a, "--restarts") || !strcmp(a, "--min-ranks")) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < (a[2] == 'r' ? 0 : 1) || v > 100000)
                return sup_usage("%s: expected a whole number (restarts >= 0, ranks >= 1)", a);
            if (a[2] == 'r') o.restarts = (int)v;
            else o.min_ranks = (int)v;
        } else if (!strcmp(a, "--hosts")) {
            o.hosts_file = argv[++i];
        } else if (!strcmp(a, "--metrics")) {
            o.metrics = argv[++i];
        } else {
            return sup_usage("unknown option '%s'", a);
        }
    }
    if (i >= argc - 1) return sup_usage("%s", "missing '-- LAUNCHER ... hetrain train ...'");
    char **cmd = argv + i + 1;
    const int n_cmd = argc - i - 1;
    if (n_cmd > SUP_MAX_ARGS - 8) return sup_usage("%s", "too many words after --");
    int np_at = -1, train_at = -1, ckpt_at = -1;
    for (int k = 0; k < n_cmd; k++) {
        const char *b = strrchr(cmd[k], '/');
        b = b ? b + 1 : cmd[k];
        if (train_at < 0 && np_at < 0 && is_np(cmd[k]) && k + 1 < n_cmd) np_at = k + 1;
        if (train_at < 0 && !strncmp(b, "hetrain", 7) && k + 1 < n_cmd &&
            !strcmp(cmd[k + 1], "train"))
            train_at = k;
        if (train_at >= 0 && !strcmp(cmd[k], "--checkpoint") && k + 1 < n_cmd) ckpt_at = k + 1;
    }
    if (train_at < 0) return sup_usage("%s", "no 'hetrain train' in the command after --");
    if (ckpt_at < 0) return sup_usage("%s", "the train options need --checkpoint FILE (what a "
                                      "relaunch resumes from)");
    if (np_at < 0) return sup_usage("%s", "the launcher needs -np N (or -n N, --ntasks N)");
    int P = atoi(cmd[np_at]);
    if (P < 1) return sup_usage("-np '%s': expected a rank count >= 1", cmd[np_at]);
    const char *b0 = strrchr(cmd[0], '/');
    const int srun = !strcmp(b0 ? b0 + 1 : cmd[0], "srun");
    static char hosts[SUP_MAX_HOSTS][64];
    int slots[SUP_MAX_HOSTS], live[SUP_MAX_HOSTS], n_hosts = 0;
    if (o.hosts_file && (n_hosts = sup_read_hosts(o.hosts_file, hosts, slots, SUP_MAX_HOSTS)) < 1)
        return sup_usage("--hosts '%s': no host names in it (an Open MPI hostfile)", o.hosts_file);
    for (int h = 0; h < n_hosts; h++) live[h] = 1;
    FILE *mf = NULL;
    if (o.metrics && !(mf = fopen(o.metrics, "w")))
        return sup_usage("--metrics '%s': cannot be written", o.metrics);
    if (cli_signals_forward()) {
        if (mf) fclose(mf);
        fprintf(stderr, "hetrain run: %s\n", het_error_msg());
        return CLI_FAIL;
    }
    const char *ckpt = cmd[ckpt_at];
    int stall = 0; /* --stall-abort given */
    for (int k = train_at; k < n_cmd; k++) stall |= !strcmp(cmd[k], "--stall-abort");
    int slow_at = -1; /* --slowdown LIST of the train options: a lost rank's entry goes */
    static char slow[1024];
    for (int k = train_at; k + 1 < n_cmd; k++)
        if (!strcmp(cmd[k], "--slowdown")) slow_at = k + 1;
    if (slow_at >= 0) snprintf(slow, sizeof slow, "%s", cmd[slow_at]);
    char np_text[16], host_arg[4096], excl[4096] = "";
    double t_fail = 0;
    int rc = CLI_FAIL;
    for (int launch = 0;; launch++) {
        char *av[SUP_MAX_ARGS];
        int n = 0, resume = 0;
        snprintf(np_text, sizeof np_text, "%d", P);
        for (int k = 0; k < n_cmd; k++) {
            if (launch > 0 && k > train_at && k + 1 < n_cmd &&
                (!strcmp(cmd[k], "--fail-at") || !strcmp(cmd[k], "--speeds") ||
                 !strcmp(cmd[k], "--speeds-file"))) {
                k++; /* --fail-at once: the lost node does not come back; hgc's speeds are
                      * the checkpoint's (a resume refuses others), re-scaled to the ranks */
                continue;
            }
            if (k == train_at && launch > 0 && srun && excl[0]) av[n++] = excl;
            if (k == train_at && launch > 0 && !srun && n_hosts) {
                size_t w = 0; /* the hosts left, with their slots ("vh1:2,vh3:2") */
                for (int h = 0; h < n_hosts && w + 80 < sizeof host_arg; h++) {
                    if (!live[h]) continue;
                    w += (size_t)snprintf(host_arg + w, sizeof host_arg - w, "%s%s", w ? "," : "",
                                          hosts[h]);
                    if (slots[h])
                        w += (size_t)snprintf(host_arg + w, sizeof host_arg - w, ":%d", slots[h]);
                }
                av[n++] = "--host";
                av[n++] = host_arg;
            }
            av[n++] = k == np_at ? np_text : k == slow_at ? slow : cmd[k];
            resume |= k > train_at && !strcmp(cmd[k], "--resume");
        }
        if (launch > 0 && !resume && access(ckpt, R_OK) == 0) av[n++] = "--resume";
        if (!stall) { /* a frozen rank ends the job too: every wait of the job is bounded */
            av[n++] = "--stall-abort";
            av[n++] = SUP_STALL_ABORT;
        }
        av[n] = NULL;
        char shown[2048];
        cli_job_shell_line(shown, sizeof shown, av);
        printf("hetrain run: launch %d: %s\n", launch + 1, shown);
        fflush(stdout);
        int pfd[2];
        if (pipe(pfd) != 0) {
            fprintf(stderr, "hetrain run: pipe: %s\n", strerror(errno));
            break;
        }
        sup_seen seen;
        memset(&seen, 0, sizeof seen);
        seen.fd = pfd[0];
        seen.lost_rank = -1;
        seen.fail_step = -1;
        pthread_t th;
        if (pthread_create(&th, NULL, sup_reader, &seen) != 0) {
            close(pfd[0]);
            close(pfd[1]);
            fprintf(stderr, "hetrain run: cannot start the output reader\n");
            break;
        }
        const double t0 = het_now();
        int status = 0, killed = 0;
        int e = cli_job_run(av, pfd[1], 10.0, &status, &killed);
        close(pfd[1]); /* leftovers were ended: the reader sees the end of the output */
        pthread_join(th, NULL);
        close(pfd[0]);
        const double t_end = het_now();
        if (launch > 0) {
            double down = seen.t_first > 0 ? seen.t_first - t_fail : -1;
            if (down >= 0) printf("hetrain run: restart %d: downtime %.2f s (the failed job's "
                                  "end to the relaunched run's training)\n", launch, down);
            if (mf) fprintf(mf, "{\"restart\":%d,\"downtime_s\":%.3f}\n", launch, down);
        }
        if (e) {
            fprintf(stderr, "hetrain run: cannot run %s: %s\n", av[0], strerror(e));
            rc = CLI_FAIL;
            break;
        }
        if (cli_signals_caught()) {
            fprintf(stderr, "hetrain run: interrupted (signal %d); the job ended, not relaunched\n",
                    cli_signals_caught());
            rc = 128 + cli_signals_caught();
            break;
        }
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code == 0) {
            printf("hetrain run: done after %d restart%s\n", launch, launch == 1 ? "" : "s");
            rc = CLI_OK;
            break;
        }
        if (seen.lost_rank < 0) {
            fprintf(stderr, "hetrain run: the job failed (exit %d) without a lost rank; not "
                    "relaunched\n", code);
            rc = code;
            break;
        }
        t_fail = t_end;
        long long ep, st;
        sup_ckpt_progress(ckpt, &ep, &st);
        char lost[160];
        snprintf(lost, sizeof lost, "rank %d%s%s lost after %.1f s (exit %d)", seen.lost_rank,
                 seen.lost_host[0] ? " on " : "", seen.lost_host, t_end - t0, code);
        if (launch >= o.restarts) {
            fprintf(stderr, "hetrain run: %s; no restarts left (--restarts %d)\n", lost,
                    o.restarts);
            rc = CLI_FAIL;
            break;
        }
        if (P - 1 < o.min_ranks) {
            fprintf(stderr, "hetrain run: %s; %d ranks left, below --min-ranks %d: not "
                    "relaunched\n", lost, P - 1, o.min_ranks);
            rc = CLI_FAIL;
            break;
        }
        P--;
        if (slow_at >= 0) sup_drop_entry(slow, seen.lost_rank);
        int dropped = 0;
        for (int h = 0; h < n_hosts; h++)
            if (live[h] && !strcmp(hosts[h], seen.lost_host)) live[h] = 0, dropped = 1;
        if (srun && seen.lost_host[0]) {
            size_t w = strlen(excl);
            snprintf(excl + w, sizeof excl - w, "%s%s", w ? "," : "--exclude=", seen.lost_host);
            dropped = 1;
        }
        char lost_steps[64];
        if (seen.fail_step >= 0 && st >= 0)
            snprintf(lost_steps, sizeof lost_steps, "%lld", seen.fail_step - st);
        else
            snprintf(lost_steps, sizeof lost_steps, "unknown (at most the checkpoint interval)");
        printf("hetrain run: restart %d/%d: %s; relaunching on %d ranks%s%s from %s (after epoch "
               "%lld, step %lld); lost steps %s\n", launch + 1, o.restarts, lost, P,
               dropped ? " without " : "", dropped ? seen.lost_host : "",
               st >= 0 ? ckpt : "the start (no checkpoint yet)", ep, st, lost_steps);
        fflush(stdout);
        if (mf) {
            fprintf(mf, "{\"restart\":%d,\"lost_rank\":%d,\"lost_host\":\"%s\",\"exit\":%d,"
                    "\"job_s\":%.3f,\"ranks\":%d,\"ckpt_epoch\":%lld,\"ckpt_step\":%lld,"
                    "\"lost_steps\":%lld}\n", launch + 1, seen.lost_rank, seen.lost_host, code,
                    t_end - t0, P, ep, st, seen.fail_step >= 0 && st >= 0 ?
                    seen.fail_step - st : -1LL);
            fflush(mf);
        }
    }
    if (mf) fclose(mf);
    return rc;
}
