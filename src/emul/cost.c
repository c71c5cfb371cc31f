/* Calibrated compute costs: a table of what each compute piece of a training step costs, so
 * that the virtual clock charges the same piece the same time, whatever else runs on the host.
 * Measured once (strategy/costs.c: medians of CPU times at two batch sizes) or read from a
 * file that `hetrain calibrate --costs-out` wrote; this file holds the arithmetic and the file
 * format. The file is text, one record per line, in a fixed order:
 *   # a comment
 *   hetrain-costs 1
 *   model lenet5
 *   layers 9
 *   batch 16 64 reps 7
 *   fb A B          (the whole forward + backward of `count` samples: A + B count seconds)
 *   opt A B         (the optimizer update)
 *   step A B        (the fused one-rank step)
 *   layer L A B     (from the step's start to layer L's gradients being final), L = 0 ...
 * Values print with 17 digits, so a table read back charges the very same doubles. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "emul/emul.h"

int het_costs_init(het_costs *c, const char *model, int n_layers) {
    memset(c, 0, sizeof *c);
    snprintf(c->model, sizeof c->model, "%s", model ? model : "");
    if (n_layers < 1 || n_layers > 100000)
        return het_error_set(HET_EINVAL, "compute costs: %d layers", n_layers);
    c->n_layers = n_layers;
    c->to_layer = calloc((size_t)n_layers, sizeof *c->to_layer);
    return c->to_layer ? HET_OK : het_error_set(HET_ENOMEM, "compute costs: out of memory");
}

void het_costs_free(het_costs *c) {
    if (!c) return;
    free(c->to_layer);
    c->to_layer = NULL;
    c->n_layers = 0;
}

het_cost_line het_cost_fit(int lo, double t_lo, int hi, double t_hi) {
    het_cost_line l = {t_lo, 0.0};
    if (hi > lo) l.b = (t_hi - t_lo) / (double)(hi - lo);
    if (!(l.b > 0.0)) l.b = 0.0; /* noise: a flat line at the smaller size's time */
    l.a = t_lo - l.b * lo;
    if (!(l.a > 0.0)) { /* noise the other way: through the origin and the larger size */
        l.a = 0.0;
        l.b = hi > 0 && t_hi > 0.0 ? t_hi / (double)hi : 0.0;
    }
    return l;
}

static double line_at(het_cost_line l, int count) { return l.a + l.b * (double)count; }

double het_costs_charge(het_costs *c, int piece, int layer, int count) {
    double t = 0.0;
    switch (piece) {
    case HET_PIECE_TO_LAYER:
        if (layer >= 0 && layer < c->n_layers) {
            double cum = line_at(c->to_layer[layer], count);
            t = cum - c->charged;
            if (cum > c->charged) c->charged = cum;
        }
        break;
    case HET_PIECE_FB:
        t = line_at(c->fb, count) - c->charged;
        c->charged = 0.0;
        break;
    case HET_PIECE_OPT: t = line_at(c->opt, count); break;
    case HET_PIECE_STEP:
        t = line_at(c->step, count);
        c->charged = 0.0;
        break;
    default: break;
    }
    return t > 0.0 ? t : 0.0;
}

int het_costs_write(const het_costs *c, const char *path, const char *comment) {
    char tmp[HET_PATH_LEN + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return het_error_set(HET_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    fprintf(f, "# %s\nhetrain-costs 1\nmodel %s\nlayers %d\nbatch %d %d reps %d\n", comment,
            c->model, c->n_layers, c->lo, c->hi, c->reps);
    fprintf(f, "fb %.17g %.17g\nopt %.17g %.17g\nstep %.17g %.17g\n", c->fb.a, c->fb.b,
            c->opt.a, c->opt.b, c->step.a, c->step.b);
    for (int l = 0; l < c->n_layers; l++)
        fprintf(f, "layer %d %.17g %.17g\n", l, c->to_layer[l].a, c->to_layer[l].b);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return het_error_set(HET_EIO, "%s: write failed: %s", path, strerror(errno));
    }
    return HET_OK;
}

/* The next line that is not a comment, into buf; 0 at the end of the file. */
static int next_line(FILE *f, char *buf, int n, int *lineno) {
    while (fgets(buf, n, f)) {
        (*lineno)++;
        if (buf[0] != '#') return 1;
    }
    return 0;
}

static int ok_cost(het_cost_line l) {
    return isfinite(l.a) && isfinite(l.b) && l.a >= 0 && l.b >= 0 && l.a < 1e6 && l.b < 1e6;
}

int het_costs_read(het_costs *c, const char *path) {
    memset(c, 0, sizeof *c);
    FILE *f; /* a regular file of at most 16 MiB, opened without blocking (core/infile.h) */
    int opened = het_infile_fopen(path, "a cost table", (uint64_t)1 << 24, &f, NULL);
    if (opened) return opened;
    char buf[512], model[64] = "";
    int ln = 0, v = 0, layers = 0, lo = 0, hi = 0, reps = 0, used = 0, st = HET_OK;
    het_cost_line fb, opt, step;
#define EXPECT(cond, what)                                                                   \
    if (!(cond)) {                                                                           \
        st = het_error_set(HET_EFORMAT, "%s:%d: expected %s", path, ln, what);               \
        goto done;                                                                           \
    }
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "hetrain-costs %d %n", &v, &used) == 1
           && v == 1 && !buf[used], "'hetrain-costs 1' (a cost table of hetrain calibrate)");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "model %31s %n", model, &used) == 1
           && !buf[used], "'model NAME'");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "layers %d %n", &layers, &used) == 1
           && !buf[used] && layers >= 1 && layers <= 100000, "'layers N', N in 1..100000");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "batch %d %d reps %d %n", &lo, &hi,
           &reps, &used) == 3 && !buf[used] && lo >= 1 && hi >= lo && reps >= 1,
           "'batch LO HI reps R', 1 <= LO <= HI, R >= 1");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "fb %lf %lf %n", &fb.a, &fb.b,
           &used) == 2 && !buf[used] && ok_cost(fb), "'fb A B', seconds in [0, 1e6)");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "opt %lf %lf %n", &opt.a, &opt.b,
           &used) == 2 && !buf[used] && ok_cost(opt), "'opt A B', seconds in [0, 1e6)");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "step %lf %lf %n", &step.a,
           &step.b, &used) == 2 && !buf[used] && ok_cost(step),
           "'step A B', seconds in [0, 1e6)");
    if ((st = het_costs_init(c, model, layers))) goto done;
    for (int l = 0; l < layers; l++) {
        int k = -1;
        het_cost_line x;
        char what[96];
        snprintf(what, sizeof what, "'layer %d A B', seconds in [0, 1e6)", l);
        EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "layer %d %lf %lf %n", &k, &x.a,
               &x.b, &used) == 3 && !buf[used] && k == l && ok_cost(x), what);
        c->to_layer[l] = x;
    }
    EXPECT(!next_line(f, buf, sizeof buf, &ln), "the end of the file after the last layer");
    c->lo = lo;
    c->hi = hi;
    c->reps = reps;
    c->fb = fb;
    c->opt = opt;
    c->step = step;
#undef EXPECT
done:
    fclose(f);
    if (st) het_costs_free(c);
    return st;
}

size_t het_costs_packed_len(int n_layers) { return 9 + 2 * (size_t)n_layers; }

void het_costs_pack(const het_costs *c, double *o) {
    double h[9] = {c->n_layers, c->lo, c->hi, c->fb.a, c->fb.b, c->opt.a, c->opt.b, c->step.a,
                   c->step.b};
    memcpy(o, h, sizeof h);
    for (int l = 0; l < c->n_layers; l++) {
        o[9 + 2 * l] = c->to_layer[l].a;
        o[10 + 2 * l] = c->to_layer[l].b;
    }
}

int het_costs_unpack(het_costs *c, const double *in) {
    if ((int)in[0] != c->n_layers)
        return het_error_set(HET_EFORMAT, "compute costs: a table of %d layers for a model of "
                             "%d", (int)in[0], c->n_layers);
    c->lo = (int)in[1];
    c->hi = (int)in[2];
    c->fb = (het_cost_line){in[3], in[4]};
    c->opt = (het_cost_line){in[5], in[6]};
    c->step = (het_cost_line){in[7], in[8]};
    for (int l = 0; l < c->n_layers; l++) c->to_layer[l] = (het_cost_line){in[9 + 2 * l],
                                                                             in[10 + 2 * l]};
    return HET_OK;
}
