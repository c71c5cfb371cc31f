/* The live progress bar: one line redrawn with '\r' at most 10 times a second, through het_log
 * (so rank 0 only, and never when quiet). Mode auto shows it only when stdout is a terminal,
 * so files and pipes get the plain per-epoch lines alone. */
#include <unistd.h>

#include "train/internal.h"

void het_bar_init(het_bar *b, het_progress mode) {
    b->on = mode == HET_PROGRESS_ON || (mode == HET_PROGRESS_AUTO && isatty(STDOUT_FILENO));
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
