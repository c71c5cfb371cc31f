/* The speed model: relative speeds of the ranks, from a list, a file, or a calibration that
 * times this rank's forward + backward passes (the emulated slowdown included, so that a rank
 * slowed by --slowdown looks to it exactly like a slower device). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "core/stats.h"
#include "core/outfile.h"
#include "hetero/hetero.h"

/* A speeds file holds one line a rank: a MiB is far more than any cluster needs. */
#define SPEEDS_MAX_BYTES ((uint64_t)1 << 20)

/* Seconds a calibration runs at least: passes of a few ms are at the mercy of the scheduler. */
#ifndef HET_CALIBRATE_S
#define HET_CALIBRATE_S 0.5
#endif

int het_speeds_parse(const char *text, double *out, int cap) {
    return het_parse_numbers(text, out, cap, 0.0, 1, 1e12,
                             "speeds > 0, one per rank, such as 0.4,0.4,0.2 (or auto)");
}

int het_speeds_read_file(const char *path, double *out, int cap) {
    FILE *f;
    int st0 = het_infile_fopen(path, "a speeds file (one speed a line)", SPEEDS_MAX_BYTES, &f,
                               NULL);
    if (st0) return st0;
    char line[256];
    int n = 0, lineno = 0, st = HET_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            st = het_error_set(HET_EFORMAT, "%s:%d: line longer than %d bytes", path, lineno,
                               (int)sizeof line - 2);
            break;
        }
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "#\r\n")] = '\0';
        if (!*p) continue;
        double v;
        if (het_speeds_parse(p, &v, 1) != 1) {
            st = het_error_set(HET_EFORMAT, "%s:%d: '%s' is not one speed > 0", path, lineno, p);
            break;
        }
        if (out && n < cap) out[n] = v;
        n++;
    }
    if (!st && ferror(f)) st = het_error_set(HET_EIO, "%s: read error", path);
    fclose(f);
    if (!st && n == 0) st = het_error_set(HET_EFORMAT, "%s: no speeds, expected one per rank", path);
    return st ? st : n;
}

int het_speeds_write_file(const char *path, const double *s, int n, const char *comment) {
    het_outfile o;
    int st = het_outfile_open(&o, path, "speeds file");
    if (st) return st;
    fprintf(o.f, "# %s\n", comment);
    for (int r = 0; r < n; r++) fprintf(o.f, "%.6f\n", s[r]);
    return het_outfile_commit(&o);
}

void het_speeds_normalize(double *s, int n) {
    double sum = 0.0;
    for (int r = 0; r < n; r++) sum += s[r];
    for (int r = 0; r < n && sum > 0; r++) s[r] /= sum;
}

int het_calibrate_rank(het_model *m, const het_dataset *d, int batch, int steps,
                       het_pace *pace, float *x, uint8_t *y, int64_t *idx, double *rate) {
    *rate = 0.0;
    if (batch < 1 || batch > het_model_max_batch(m) || batch > d->n || steps < 1)
        return het_error_set(HET_EINVAL, "calibration: batch %d of %lld samples, %d steps",
                             batch, (long long)d->n, steps);
    size_t ns = het_model_n_state(m);
    float *state = ns ? malloc(ns * sizeof(float)) : NULL;
    int cap = steps * 64; /* passes beyond `steps` while under the time budget */
    double *t = malloc((size_t)cap * sizeof(double));
    if ((ns && !state) || !t) {
        free(state);
        free(t);
        return het_error_set(HET_ENOMEM, "calibration: out of memory");
    }
    if (ns) memcpy(state, het_model_state(m), ns * sizeof(float));
    for (int i = 0; i < batch; i++) idx[i] = i;
    int st = HET_OK, done = 0;
    double t0 = het_now();
    /* s = -1: warm-up, not timed; then at least `steps` passes and HET_CALIBRATE_S seconds,
     * or on the virtual clock with a cost table exactly `steps`: every pass then costs the
     * table's line, and a count of passes set by the wall clock moved the mean below in its
     * last bits, which decided a tie in hgc's rounding of the batches from run to run */
    const int budget = !(pace->costs && het_clock_virtual());
    for (int s = -1; !st && s < cap && (s < steps || (budget && het_now() - t0 < HET_CALIBRATE_S));
         s++) {
        het_batch_result r;
        het_pace_begin(pace);
        st = het_batch_grads(m, &(het_batch){d, idx, batch, x, y}, 1.0f / (float)batch,
                             (uint64_t)s, &r);
        het_pace_piece(pace, HET_PIECE_FB, 0, batch); /* a calibrated table's forward+backward */
        double secs = het_pace_mark(pace);
        if (s >= 0) t[done++] = secs;
    }
    het_model_zero_grads(m);
    if (ns) memcpy(het_model_state(m), state, ns * sizeof(float));
    if (!st) {
        /* the lower half's mean: passes slowed by other processes are dropped, and the
         * carried sleep debt of the emulated slowdown still averages out over many passes */
        het_sort_double(t, (size_t)done);
        double sum = 0.0;
        int half = (done + 1) / 2;
        for (int i = 0; i < half; i++) sum += t[i];
        *rate = sum > 0 ? (double)batch * half / sum : 0.0;
        if (!(*rate > 0)) st = het_error_set(HET_EINVAL, "calibration: no measurable time");
    }
    free(state);
    free(t);
    return st;
}
