/* compare's runs as jobs: a run starts in a session of its own, SIGINT / SIGTERM to compare
 * reach it, and nothing of it outlives it.
 *
 * DESIGN. A session of its own (its process group too; POSIX_SPAWN_SETSID, a process group
 * where that is missing) keeps a terminal's Ctrl-C to compare alone, and lets compare find the
 * run's processes afterwards by their session id, also those the launcher put in groups of
 * their own (Open MPI's mpirun gives every rank one). The handler of signals.c
 * (cli_signals_forward) records a signal and passes it on to the run's process group, that
 * is to the launcher, which ends its ranks; cli_job_run then waits for the launcher, polling
 * (SIGKILL to the group kill_after_s after a signal), and once it has ended, however it
 * ended, ends what is left of its session: the signal (SIGTERM without one) to each, SIGKILL
 * after JOB_SWEEP_S. The processes are found through /proc (Linux); elsewhere only the group
 * is signalled. A signal between the spawn and the moment the handler knows the run's group
 * is held back (blocked), then passed on. Also here: the check of the folder the runs write
 * to (compare's --out). */
#define _GNU_SOURCE /* POSIX_SPAWN_SETSID */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

extern char **environ;

#define JOB_SWEEP_S 5.0  /* what is left of a run's session: its time to end before SIGKILL */
#define JOB_MAX_LEFT 256 /* leftover processes signalled one by one */
#ifdef POSIX_SPAWN_SETSID
#define JOB_SPAWN_OWN POSIX_SPAWN_SETSID
#define JOB_BY_SESSION 1
#else
#define JOB_SPAWN_OWN POSIX_SPAWN_SETPGROUP
#define JOB_BY_SESSION 0
#endif

/* Sleeps s seconds (less when a signal comes). */
static void nap_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The live processes (not zombies) of session `id` (process group without setsid), up to n of
 * them into pids; returns how many there are. Reads /proc: 0 where there is none. */
static int job_left(pid_t id, pid_t *pids, int n) {
    DIR *d = opendir("/proc");
    int k = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end, path[300], buf[512];
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t m = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[m] = '\0';
        char *name_end = strrchr(buf, ')'), state = 0; /* "pid (name) state ppid pgrp sid" */
        long ppid, pgrp, sid;
        if (!name_end || sscanf(name_end + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &sid) != 4)
            continue;
        if (state == 'Z' || state == 'X' || (JOB_BY_SESSION ? sid : pgrp) != (long)id) continue;
        if (k < n) pids[k] = (pid_t)pid;
        k++;
    }
    if (d) closedir(d);
    return k;
}

/* Ends what is left of the run whose session (or group) is `id`: `sig` to each, then SIGKILL
 * to those still there after JOB_SWEEP_S. */
static void sweep(pid_t id, int sig) {
    pid_t pids[JOB_MAX_LEFT];
    int n = job_left(id, pids, JOB_MAX_LEFT);
    if (n == 0) return;
    kill(-id, sig);
    for (int i = 0; i < n && i < JOB_MAX_LEFT; i++) kill(pids[i], sig);
    for (double t0 = het_now(); n > 0 && het_now() - t0 < JOB_SWEEP_S;) {
        nap_s(0.02);
        n = job_left(id, pids, JOB_MAX_LEFT);
    }
    for (int i = 0; i < n && i < JOB_MAX_LEFT; i++) kill(pids[i], SIGKILL);
    kill(-id, SIGKILL);
}

void cli_job_hold(int hold, sigset_t *old) {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(hold ? SIG_BLOCK : SIG_SETMASK, hold ? &sigs : old, hold ? old : NULL);
}

int cli_job_pending(void) {
    sigset_t p;
    return sigpending(&p) == 0 && (sigismember(&p, SIGINT) == 1 || sigismember(&p, SIGTERM) == 1);
}

int cli_job_run(char *const *argv, int out, double kill_after_s, int *status, int *killed) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t sigs, none, old;
    sigemptyset(&none);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pid_t pid = 0;
    *status = 0;
    *killed = 0;
    int e = posix_spawn_file_actions_init(&fa);
    if (e) return e;
    if (!(e = posix_spawnattr_init(&at))) {
        e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (!e) e = posix_spawn_file_actions_adddup2(&fa, out, 1);
        if (!e) e = posix_spawn_file_actions_adddup2(&fa, out, 2);
        /* the run: a session of its own, SIGINT / SIGTERM unblocked and at their default */
        if (!e) e = posix_spawnattr_setflags(&at, JOB_SPAWN_OWN | POSIX_SPAWN_SETSIGMASK |
                                             POSIX_SPAWN_SETSIGDEF);
        if (!e) e = posix_spawnattr_setsigmask(&at, &none);
        if (!e) e = posix_spawnattr_setsigdefault(&at, &sigs);
        cli_job_hold(1, &old); /* until the handler knows the run's group */
        if (!e && !cli_signals_caught()) e = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
        if (pid > 0) cli_signals_job((int)pid);
        cli_job_hold(0, &old);
        posix_spawnattr_destroy(&at);
    }
    posix_spawn_file_actions_destroy(&fa);
    double t_sig = -1;
    while (!e && pid > 0) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w > 0) break;
        if (w < 0 && errno != EINTR) {
            e = errno;
            break;
        }
        if (cli_signals_caught() && t_sig < 0) t_sig = het_now();
        if (t_sig >= 0 && !*killed && het_now() - t_sig > kill_after_s) {
            kill(-pid, SIGKILL);
            *killed = 1;
        }
        nap_s(0.02); /* a signal cuts it short */
    }
    cli_signals_job(0);
    if (pid > 0) sweep(pid, cli_signals_caught() ? cli_signals_caught() : SIGTERM);
    return e;
}

int cli_job_out_dir(const char *path) {
    char buf[HET_PATH_LEN];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1;; s++) {
        char ch = *s;
        if (ch != '/' && ch != '\0') continue;
        *s = '\0';
        if (mkdir(buf, 0777) && errno != EEXIST)
            return het_error_set(HET_EIO, "hetrain compare: --out %s: cannot create %s: %s",
                                 path, buf, strerror(errno));
        if (!ch) break;
        *s = ch;
    }
    struct stat sb;
    if (stat(path, &sb) != 0)
        return het_error_set(HET_EIO, "hetrain compare: --out %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return het_error_set(HET_EIO, "hetrain compare: --out %s: exists and is not a folder",
                             path);
    if (access(path, W_OK | X_OK) != 0)
        return het_error_set(HET_EIO, "hetrain compare: --out %s: cannot write in it: %s", path,
                             strerror(errno));
    return HET_OK;
}

/* The command as a shell line: arguments with odd characters in single quotes. */
void cli_job_shell_line(char *dst, size_t n, char *const *argv) {
    size_t len = 0;
    dst[0] = '\0';
    for (int i = 0; argv[i] && len + 1 < n; i++) {
        int plain = argv[i][0] && !argv[i][strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGH"
                                                  "IJKLMNOPQRSTUVWXYZ0123456789-_=+.,/:@%")];
        len += (size_t)snprintf(dst + len, n - len, i ? plain ? " %s" : " '%s'" : plain ? "%s"
                                : "'%s'", argv[i]);
        if (len >= n) len = n - 1;
    }
}

/* The last line of the log that starts "hetrain", else its last non-empty line. The start's
 * banner ("hetrain: mlp on synthetic: 256 train / 128 test samples of ...", on stdout) is not
 * one: the launcher forwards a rank's stdout and stderr through two pipes, so under load the
 * banner can land in the log after the error that ended the run. */
void cli_job_last_line(const char *log, char *dst, size_t n) {
    FILE *f = fopen(log, "r");
    char line[512];
    dst[0] = '\0';
    int mine = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        int banner = strstr(line, " train / ") && strstr(line, " test samples of ");
        int is_mine = strncmp(line, "hetrain", 7) == 0 && !banner;
        if (line[0] && (is_mine || !mine)) {
            size_t m = strlen(line) < n ? strlen(line) : n - 1;
            memcpy(dst, line, m);
            dst[m] = '\0';
        }
        mine |= is_mine;
    }
    if (f) fclose(f);
}
