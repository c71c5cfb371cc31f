/* Metrics as JSON Lines: one object per epoch
 *   {"type":"epoch","epoch":1,"loss":..,"train_acc":..,"test_loss":..,"test_acc":..,"lr":..,
 *    "samples":..,"samples_per_s":..,"elapsed_s":..}
 * (runs of several MPI ranks add per-rank arrays of the epoch's time split, index = rank:
 *    "compute_s":[..],"comm_s":[..],"wait_s":[..],"delay_s":[..])
 * then the memory at the epoch's end (bytes; pss_sum only where /proc reports it):
 *    "peak_rss_max":..,"peak_rss_sum":..,"pss_sum":..,"data_bytes":..,"data_copies":..
 * (the ranks' largest and summed peak RSS, the sum of their proportional sets, one decoded copy
 * of train + test and the copies held over all ranks: 1 per host when its ranks share one)
 * and with --metrics-steps one per step
 *   {"type":"step","epoch":1,"step":7,"loss":..,"acc":..,"lr":..,"batch":64,"time_s":..}
 * and with --eval-every one per test accuracy inside an epoch (time_s: the run's clock since
 * the start, evaluations left out; eval_s: the evaluation's wall time)
 *   {"type":"eval","epoch":1,"step":50,"samples":3200,"test_loss":..,"test_acc":..,"time_s":..,
 *    "eval_s":..}
 * Timing fields come last in each object. Non-finite numbers are written as null (JSON has no
 * NaN). On resume the file is continued: lines after the checkpoint's epoch (left by a run that
 * stopped later) are dropped, the rest kept. Nothing in an existing file changes before the
 * first line is written: a run that fails before it leaves the file as it was. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetrain/emul.h"
#include "train/internal.h"

struct het_metrics_file {
    FILE *f;        /* NULL until the first line (a file that did not exist) */
    int started;    /* the first line was written: the old content is replaced */
    int failed;
    int keep_epochs;
    char *old;      /* the existing content (resume), until the first line */
    size_t n_old;
    char path[HET_PATH_LEN];
};

/* Reads the whole file; NULL (and *n = 0) if it does not exist. */
static char *slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 14;
    char *buf = malloc(cap);
    while (buf) {
        *n += fread(buf + *n, 1, cap - *n, f);
        if (*n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    return buf;
}

int het_metrics_open(het_metrics_file **out, const char *path, int keep_epochs) {
    *out = NULL;
    het_metrics_file *m = calloc(1, sizeof *m);
    if (!m) return het_error_set(HET_ENOMEM, "out of memory opening %s", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->keep_epochs = keep_epochs;
    m->old = keep_epochs >= 0 ? slurp(path, &m->n_old) : NULL;
    /* an existing file is opened without truncating it (that waits for the first line) */
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) m->f = fdopen(fd, "w");
    if ((fd < 0 && errno != ENOENT) || (fd >= 0 && !m->f)) {
        int st = het_error_set(HET_EIO, "%s: cannot write: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        free(m->old);
        free(m);
        return st;
    }
    *out = m;
    return HET_OK;
}

/* Before the first line: replaces the file's content by the lines kept (resume). */
static int start(het_metrics_file *m) {
    if (m->started) return m->failed ? HET_EIO : HET_OK;
    m->started = 1;
    if (!m->f) m->f = fopen(m->path, "w");
    else if (ftruncate(fileno(m->f), 0) != 0) {
        fclose(m->f);
        m->f = NULL;
    }
    if (!m->f) {
        m->failed = 1;
        free(m->old);
        m->old = NULL;
        return het_error_set(HET_EIO, "%s: cannot create: %s", m->path, strerror(errno));
    }
    /* keep complete lines whose epoch is <= keep_epochs */
    char *old = m->old;
    for (size_t pos = 0, n = m->n_old; old && pos < n;) {
        char *nl = memchr(old + pos, '\n', n - pos);
        if (!nl) break;
        size_t len = (size_t)(nl - (old + pos)) + 1;
        *nl = '\0';
        const char *e = strstr(old + pos, "\"epoch\":");
        if (e && atoi(e + 8) <= m->keep_epochs) {
            *nl = '\n';
            fwrite(old + pos, 1, len, m->f);
        }
        pos += len;
    }
    free(old);
    m->old = NULL;
    return HET_OK;
}

static void num(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, ",\"%s\":%.9g", key, v);
    else fprintf(f, ",\"%s\":null", key);
}

/* A float value (the learning rate) in its shortest exact form. */
static void num_float(FILE *f, const char *key, float v) {
    char buf[32];
    het_fmt_float(buf, sizeof buf, v);
    if (isfinite(v)) fprintf(f, ",\"%s\":%s", key, buf);
    else fprintf(f, ",\"%s\":null", key);
}

static int finish(het_metrics_file *m) {
    fputs("}\n", m->f);
    if (fflush(m->f) != 0 || ferror(m->f)) {
        if (!m->failed) het_error_set(HET_EIO, "%s: write failed: %s", m->path, strerror(errno));
        m->failed = 1;
        return HET_EIO;
    }
    return HET_OK;
}

int het_metrics_epoch(het_metrics_file *m, const het_epoch_stats *s, const double *rank_times,
                      const double *rank_bytes, int n_ranks, const char *extra_json) {
    if (start(m)) return HET_EIO;
    fprintf(m->f, "{\"type\":\"epoch\",\"epoch\":%d", s->epoch);
    num(m->f, "loss", s->loss);
    num(m->f, "train_acc", s->train_acc);
    num(m->f, "test_loss", s->test_loss);
    num(m->f, "test_acc", s->test_acc);
    num_float(m->f, "lr", (float)s->lr);
    fprintf(m->f, ",\"samples\":%lld", (long long)s->samples);
    if (s->skipped) fprintf(m->f, ",\"skipped_steps\":%lld", (long long)s->skipped);
    num(m->f, "samples_per_s", s->samples_per_s);
    num(m->f, "elapsed_s", s->elapsed_s);
    /* the run's clock; virtual times in full (17 digits): reproducible runs compare them */
    if (het_clock_virtual()) {
        fprintf(m->f, ",\"clock\":\"virtual\",\"epoch_s\":%.17g,\"vtime_s\":%.17g", s->epoch_s,
                s->vtime_s);
    } else {
        num(m->f, "epoch_s", s->epoch_s);
    }
    static const char *const split[4] = {"compute_s", "comm_s", "wait_s", "delay_s"};
    for (int k = 0; rank_times && k < 4; k++) {
        fprintf(m->f, ",\"%s\":[", split[k]);
        for (int q = 0; q < n_ranks; q++)
            fprintf(m->f, "%s%.6g", q ? "," : "", rank_times[4 * q + k]);
        fputc(']', m->f);
    }
    static const char *const bytes[2] = {"bytes_node", "bytes_cross"};
    for (int k = 0; rank_bytes && k < 2; k++) {
        fprintf(m->f, ",\"%s\":[", bytes[k]);
        for (int q = 0; q < n_ranks; q++)
            fprintf(m->f, "%s%.0f", q ? "," : "", rank_bytes[2 * q + k]);
        fputc(']', m->f);
    }
    if (s->link_measured) /* the worst node link's shares of the epoch (comm/links.c) */
        fprintf(m->f, ",\"link_busy_max\":%.6g,\"link_over_max\":%.6g", s->link_busy_max,
                s->link_over_max);
    if (s->data_copies > 0) { /* not in the epochs of a resumed run's checkpoint */
        fprintf(m->f, ",\"peak_rss_max\":%lld,\"peak_rss_sum\":%lld", (long long)s->peak_rss_max,
                (long long)s->peak_rss_sum);
        if (s->pss_sum >= 0) fprintf(m->f, ",\"pss_sum\":%lld", (long long)s->pss_sum);
        fprintf(m->f, ",\"data_bytes\":%lld,\"data_copies\":%d", (long long)s->data_bytes,
                s->data_copies);
    }
    if (extra_json && *extra_json) fprintf(m->f, ",%s", extra_json);
    return finish(m);
}

int het_metrics_step(het_metrics_file *m, int epoch, int64_t step, double loss, double acc,
                     double lr, int batch, double secs) {
    if (start(m)) return HET_EIO;
    fprintf(m->f, "{\"type\":\"step\",\"epoch\":%d,\"step\":%lld", epoch, (long long)step);
    num(m->f, "loss", loss);
    num(m->f, "acc", acc);
    num_float(m->f, "lr", (float)lr);
    fprintf(m->f, ",\"batch\":%d", batch);
    num(m->f, "time_s", secs);
    return finish(m);
}

int het_metrics_eval(het_metrics_file *m, int epoch, int64_t step, int64_t samples,
                     double test_loss, double test_acc, double time_s, double eval_s) {
    if (start(m)) return HET_EIO;
    fprintf(m->f, "{\"type\":\"eval\",\"epoch\":%d,\"step\":%lld,\"samples\":%lld", epoch,
            (long long)step, (long long)samples);
    num(m->f, "test_loss", test_loss);
    num(m->f, "test_acc", test_acc);
    if (het_clock_virtual()) fprintf(m->f, ",\"clock\":\"virtual\",\"time_s\":%.17g", time_s);
    else num(m->f, "time_s", time_s);
    num(m->f, "eval_s", eval_s);
    return finish(m);
}

void het_metrics_close(het_metrics_file *m) {
    if (!m) return;
    if (m->f) fclose(m->f);
    free(m->old);
    free(m);
}

int het_metrics_close_checked(het_metrics_file **pm) {
    het_metrics_file *m = *pm;
    *pm = NULL;
    if (!m) return HET_OK;
    int closed = m->f ? fclose(m->f) : 0;
    int bad = m->failed || closed != 0;
    m->f = NULL;
    int st = bad ? het_error_set(HET_EIO, "%s: write failed", m->path) : HET_OK;
    het_metrics_close(m);
    return st;
}
