/* Calibrated compute costs: a table of what each compute piece of a training step costs, so
 * that the virtual clock charges the same piece the same time, whatever else runs on the host.
 * Measured once (strategy/costs.c: medians of CPU times at two batch sizes) or read from a
 * file that `hetrain calibrate --costs-out` wrote; this file holds the arithmetic and the file
 * format. The file is text, one record per line, in a fixed order:
 *   # a comment
 *   hetrain-costs 2
 *   model lenet5
 *   net 9f3c0a5e12d4b677   (fingerprint of the network's layers: kinds and shapes)
 *   layers 9
 *   batch 16 64 reps 7 threads 1
 *   ref sgemm512 9.0e10    (the measuring host's flop/s on the reference kernel)
 *   fb A B          (the whole forward + backward of `count` samples: A + B count seconds)
 *   opt A B         (the optimizer update)
 *   step A B        (the fused one-rank step)
 *   layer L A B     (from the step's start to layer L's gradients being final), L = 0 ...
 *   range L FA FB BA BB   (layer L's forward and backward on the range executor), L = 0 ...
 * Values print with 17 digits, so a table read back charges the very same doubles. Version 1
 * tables (no fingerprint, no reference rate, no ranges) are refused with a line that says to
 * calibrate again. */
#define _GNU_SOURCE /* fmemopen */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "core/outfile.h"
#include "emul/emul.h"

int het_costs_init(het_costs *c, const char *model, int n_layers) {
    memset(c, 0, sizeof *c);
    snprintf(c->model, sizeof c->model, "%s", model ? model : "");
    if (n_layers < 1 || n_layers > 100000)
        return het_error_set(HET_EINVAL, "compute costs: %d layers", n_layers);
    c->n_layers = n_layers;
    c->threads = 1;
    c->to_layer = calloc((size_t)n_layers, sizeof *c->to_layer);
    c->fwd = calloc((size_t)n_layers, sizeof *c->fwd);
    c->bwd = calloc((size_t)n_layers, sizeof *c->bwd);
    if (c->to_layer && c->fwd && c->bwd) return HET_OK;
    het_costs_free(c);
    return het_error_set(HET_ENOMEM, "compute costs: out of memory");
}

void het_costs_free(het_costs *c) {
    if (!c) return;
    free(c->to_layer);
    free(c->fwd);
    free(c->bwd);
    c->to_layer = c->fwd = c->bwd = NULL;
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

static double range_line(const het_cost_line *v, int a, int b, int n, int count) {
    if (a < 0) a = 0;
    if (b > n) b = n;
    double t = 0.0;
    for (int l = a; l < b; l++) t += line_at(v[l], count);
    return t;
}

double het_costs_range_s(const het_costs *c, int a, int b, int count) {
    return range_line(c->fwd, a, b, c->n_layers, count) +
           range_line(c->bwd, a, b, c->n_layers, count);
}

double het_costs_charge(het_costs *c, int piece, int layer, int layer_end, int count) {
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
    case HET_PIECE_RANGE_FWD: t = range_line(c->fwd, layer, layer_end, c->n_layers, count); break;
    case HET_PIECE_RANGE_BWD: t = range_line(c->bwd, layer, layer_end, c->n_layers, count); break;
    default: break;
    }
    return t > 0.0 ? t : 0.0;
}

int het_costs_write(const het_costs *c, const char *path, const char *comment) {
    het_outfile o;
    int st = het_outfile_open(&o, path, "cost table");
    if (st) return st;
    FILE *f = o.f;
    fprintf(f, "# %s\nhetrain-costs %d\nmodel %s\nnet %016llx\nlayers %d\n"
            "batch %d %d reps %d threads %d\nref sgemm512 %.17g\n", comment, HET_COSTS_VERSION,
            c->model, c->net, c->n_layers, c->lo, c->hi, c->reps, c->threads, c->ref_flops);
    fprintf(f, "fb %.17g %.17g\nopt %.17g %.17g\nstep %.17g %.17g\n", c->fb.a, c->fb.b,
            c->opt.a, c->opt.b, c->step.a, c->step.b);
    for (int l = 0; l < c->n_layers; l++)
        fprintf(f, "layer %d %.17g %.17g\n", l, c->to_layer[l].a, c->to_layer[l].b);
    for (int l = 0; l < c->n_layers; l++)
        fprintf(f, "range %d %.17g %.17g %.17g %.17g\n", l, c->fwd[l].a, c->fwd[l].b,
                c->bwd[l].a, c->bwd[l].b);
    return het_outfile_commit(&o);
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

/* Reads a table from f (named `path` in errors); closes f. */
static int read_table(het_costs *c, FILE *f, const char *path) {
    char buf[512], model[64] = "";
    int ln = 0, v = 0, layers = 0, lo = 0, hi = 0, reps = 0, threads = 0, used = 0, st = HET_OK;
    unsigned long long net = 0;
    double ref = 0;
    het_cost_line fb, opt, step;
#define EXPECT(cond, what)                                                                   \
    if (!(cond)) {                                                                           \
        st = het_error_set(HET_EFORMAT, "%s:%d: expected %s", path, ln, what);               \
        goto done;                                                                           \
    }
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "hetrain-costs %d %n", &v, &used) == 1
           && !buf[used] && v >= 1, "'hetrain-costs 2' (a cost table of hetrain calibrate)");
    if (v != HET_COSTS_VERSION) {
        st = het_error_set(HET_EFORMAT, "%s:%d: a cost table of version %d, this hetrain reads "
                           "version %d (it records the network and the host's reference rate): "
                           "measure it again with hetrain calibrate --costs-out", path, ln, v,
                           HET_COSTS_VERSION);
        goto done;
    }
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "model %31s %n", model, &used) == 1
           && !buf[used], "'model NAME'");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "net %16llx %n", &net, &used) == 1
           && !buf[used], "'net FINGERPRINT' (16 hex digits)");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "layers %d %n", &layers, &used) == 1
           && !buf[used] && layers >= 1 && layers <= 100000, "'layers N', N in 1..100000");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "batch %d %d reps %d threads %d %n",
           &lo, &hi, &reps, &threads, &used) == 4 && !buf[used] && lo >= 1 && hi >= lo &&
           reps >= 1 && threads >= 1 && threads <= 1024,
           "'batch LO HI reps R threads T', 1 <= LO <= HI, R >= 1, T in 1..1024");
    EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "ref sgemm512 %lf %n", &ref,
           &used) == 1 && !buf[used] && isfinite(ref) && ref >= 1e6 && ref <= 1e18,
           "'ref sgemm512 FLOPS', the measuring host's flop/s in [1e6, 1e18]");
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
    for (int l = 0; l < layers; l++) {
        int k = -1;
        het_cost_line x, y;
        char what[96];
        snprintf(what, sizeof what, "'range %d FA FB BA BB', seconds in [0, 1e6)", l);
        EXPECT(next_line(f, buf, sizeof buf, &ln) && sscanf(buf, "range %d %lf %lf %lf %lf %n",
               &k, &x.a, &x.b, &y.a, &y.b, &used) == 5 && !buf[used] && k == l && ok_cost(x) &&
               ok_cost(y), what);
        c->fwd[l] = x;
        c->bwd[l] = y;
    }
    EXPECT(!next_line(f, buf, sizeof buf, &ln), "the end of the file after the last range");
    c->net = net;
    c->lo = lo;
    c->hi = hi;
    c->reps = reps;
    c->threads = threads;
    c->ref_flops = ref;
    c->fb = fb;
    c->opt = opt;
    c->step = step;
#undef EXPECT
done:
    fclose(f);
    if (st) het_costs_free(c);
    return st;
}

int het_costs_read(het_costs *c, const char *path) {
    memset(c, 0, sizeof *c);
    FILE *f; /* a regular file of at most 16 MiB, opened without blocking (core/infile.h) */
    int opened = het_infile_fopen(path, "a cost table", (uint64_t)1 << 24, &f, NULL);
    if (opened) return opened;
    return read_table(c, f, path);
}

/* The shipped tables (costs/NAME.costs), built in by cmake/embed_nets.cmake. */
extern const char *const het_cost_table_names[];
extern const char *const het_cost_table_texts[];

int het_costs_shipped(het_costs *c, unsigned long long net) {
    char names[512] = "";
    size_t o = 0;
    memset(c, 0, sizeof *c);
    for (int i = 0; het_cost_table_names[i]; i++) {
        char what[96];
        snprintf(what, sizeof what, "shipped table %s", het_cost_table_names[i]);
        const char *text = het_cost_table_texts[i];
        FILE *f = fmemopen((void *)text, strlen(text), "r");
        if (!f) return het_error_set(HET_ENOMEM, "%s: cannot open: %s", what, strerror(errno));
        int st = read_table(c, f, what);
        if (st) return st; /* a broken shipped table is a build fault: say so */
        if (c->net == net) return HET_OK;
        het_costs_free(c);
        if (o < sizeof names)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "",
                                  het_cost_table_names[i]);
    }
    return het_error_set(HET_EINVAL, "compute-cost shipped: no shipped table is for this "
                         "network (fingerprint %016llx; shipped: %s, each for its model on its "
                         "standard data); measure one with hetrain calibrate --costs-out FILE "
                         "and use --compute-cost calibrated:FILE", net, o ? names : "none");
}

enum { PACKED_HEAD = 12 };

size_t het_costs_packed_len(int n_layers) { return PACKED_HEAD + 6 * (size_t)n_layers; }

void het_costs_pack(const het_costs *c, double *o) {
    double h[PACKED_HEAD] = {c->n_layers, c->lo,     c->hi,     c->fb.a,   c->fb.b,
                             c->opt.a,    c->opt.b,  c->step.a, c->step.b, c->ref_flops,
                             c->threads,  c->reps};
    memcpy(o, h, sizeof h);
    for (int l = 0; l < c->n_layers; l++) {
        double *x = o + PACKED_HEAD + 6 * l;
        x[0] = c->to_layer[l].a, x[1] = c->to_layer[l].b;
        x[2] = c->fwd[l].a, x[3] = c->fwd[l].b;
        x[4] = c->bwd[l].a, x[5] = c->bwd[l].b;
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
    c->ref_flops = in[9];
    c->threads = (int)in[10];
    c->reps = (int)in[11];
    for (int l = 0; l < c->n_layers; l++) {
        const double *x = in + PACKED_HEAD + 6 * l;
        c->to_layer[l] = (het_cost_line){x[0], x[1]};
        c->fwd[l] = (het_cost_line){x[2], x[3]};
        c->bwd[l] = (het_cost_line){x[4], x[5]};
    }
    return HET_OK;
}
