/* The live progress bar: one line redrawn with '\r' at most 10 times a second, through het_log
 * (so rank 0 only, and never when quiet). Mode auto shows it only when the user's stdout is a
 * terminal, so files and pipes get the plain per-epoch lines alone.
 *
 * Under mpirun, Open MPI gives every rank a pseudo-terminal even when mpirun's own output goes
 * to a file or a pipe, so a rank's isatty says nothing about where its lines end up. A rank
 * started by a launcher (its environment says so) therefore asks of its parent's stdout
 * instead: mpirun's on a local launch, the user's terminal or not. On a remote node the parent
 * is Open MPI's daemon or slurmstepd, whose stdout is no terminal: no bar, plain lines. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/internal.h"

static int launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                       "SLURM_PROCID", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

/* Whether the file open as fd 1 of process pid is a terminal (0 when it cannot be told). */
static int fd1_of_is_terminal(pid_t pid) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld/fd/1", (long)pid);
    if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode)) return 0;
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return 0;
    int tty = isatty(fd);
    close(fd);
    return tty;
}

int het_stdout_is_terminal(void) {
    if (!isatty(STDOUT_FILENO)) return 0;
    return launched_by_mpi() ? fd1_of_is_terminal(getppid()) : 1;
}

void het_bar_init(het_bar *b, het_progress mode) {
    b->on = mode == HET_PROGRESS_ON || (mode == HET_PROGRESS_AUTO && het_stdout_is_terminal());
    if (het_log_rank() != 0 || het_log_get_level() < HET_LOG_INFO) b->on = 0;
}

void het_bar_begin(het_bar *b, int epoch, int epochs, int64_t total) {
    b->epoch = epoch;
    b->epochs = epochs;
    b->total = total;
    b->start = het_now();
    b->last = 0.0;
}

void het_bar_update(het_bar *b, int64_t done, double loss, double acc) {
    if (!b->on) return;
    double now = het_now();
    if (done < b->total && now - b->last < 0.1) return;
    b->last = now;
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int fill = b->total > 0 ? (int)(WIDTH * done / b->total) : WIDTH;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    double secs = now - b->start;
    het_log(HET_LOG_INFO, "\r\033[Kepoch %d/%d [%s] %3d%% loss %.4f acc %.4f %.0f samples/s",
            b->epoch, b->epochs, bar, b->total > 0 ? (int)(100 * done / b->total) : 100, loss,
            acc, secs > 0 ? (double)done / secs : 0.0);
}

void het_bar_end(het_bar *b) {
    if (b->on) het_log(HET_LOG_INFO, "\r\033[K");
}
