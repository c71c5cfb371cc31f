/* hetrain compare: its two plots as SVG, written with fprintf (no dependency).
 *
 * DESIGN. Each plot is one self-contained SVG 1.1 document with a viewBox (it scales in a
 * browser), a white background, the plot area on the left and the legend on the right. Text
 * (titles, strategy names) is XML-escaped. The accuracy plot has exactly one <polyline> per
 * series (tests count them); markers are circles and legend swatches are lines, so that count
 * stays true. Axis ranges are "nice": ticks at 1, 2 or 5 times a power of ten. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

enum { W = 760, H = 460, LEFT = 72, RIGHT = W - 180, TOP = 56, BOTTOM = H - 62 };

/* Okabe-Ito colours, distinguishable with colour-blindness; then they repeat. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                      "#56B4E9", "#000000"};
#define N_PALETTE (int)(sizeof palette / sizeof palette[0])

static void text(FILE *f, const char *s) {
    for (; *s; s++) switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f); /* no control chars */
        }
}

/* The document, its title (bold) and under it the subtitle (what was run). */
static void begin(FILE *f, const char *title, const char *subtitle) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"13\">\n"
            "<title>", W, H, W, H);
    text(f, title);
    fputs(": ", f);
    text(f, subtitle);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
            "font-weight=\"bold\">", W, H, W / 2);
    text(f, title);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"41\" text-anchor=\"middle\" font-size=\"12\" "
            "fill=\"#444444\">", W / 2);
    text(f, subtitle);
    fputs("</text>\n", f);
}

/* A tick step of 1, 2 or 5 x 10^k near span / 5. */
static double nice_step(double span) {
    if (!(span > 0)) return 1;
    double raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static int decimals(double step) {
    int d = (int)-floor(log10(step) + 1e-9);
    return d > 0 ? d : 0;
}

static double sx(double x, double lo, double hi) {
    return LEFT + (x - lo) / (hi - lo) * (RIGHT - LEFT);
}
static double sy(double y, double lo, double hi) {
    return BOTTOM - (y - lo) / (hi - lo) * (BOTTOM - TOP);
}

/* The y axis from lo to hi with ticks every step and grid lines; the axis label. */
static void y_axis(FILE *f, double lo, double hi, double step, double scale, const char *unit,
                   const char *label) {
    int d = decimals(step * scale);
    for (double v = lo; v <= hi + step * 1e-6; v += step) {
        double y = sy(v, lo, hi);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f%s</text>\n", LEFT, y, RIGHT,
                y, LEFT - 6, y + 4, d, v * scale, unit);
    }
    fprintf(f, "<text transform=\"translate(18 %d) rotate(-90)\" text-anchor=\"middle\">%s"
            "</text>\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
            (TOP + BOTTOM) / 2, label, LEFT, TOP, LEFT, BOTTOM);
}

static void legend_entry(FILE *f, int i, const char *colour, int swatch_line, const char *name) {
    int y = TOP + 10 + 22 * i;
    if (swatch_line)
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n", RIGHT + 24, y, RIGHT + 50, y, colour);
    else
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"26\" height=\"12\" fill=\"%s\"/>\n",
                RIGHT + 24, y - 6, colour);
    fprintf(f, "<text x=\"%d\" y=\"%d\">", RIGHT + 58, y + 4);
    text(f, name);
    fputs("</text>\n", f);
}

void cli_svg_accuracy(FILE *f, const cli_series *s, int n, double target,
                      const char *clock, const char *subtitle) {
    double xmax = 0, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < s[i].n; k++) {
            if (isfinite(s[i].x[k])) xmax = fmax(xmax, s[i].x[k]);
            if (isfinite(s[i].y[k])) ylo = fmin(ylo, s[i].y[k]), yhi = fmax(yhi, s[i].y[k]);
        }
    int show_target = target > 0 && target <= 1;
    if (show_target) ylo = fmin(ylo, target), yhi = fmax(yhi, target);
    if (!isfinite(ylo)) ylo = 0, yhi = 1;
    if (yhi - ylo < 0.02) ylo -= 0.01, yhi += 0.01;
    double ys = nice_step(yhi - ylo), xs = nice_step(xmax > 0 ? xmax : 1);
    ylo = fmax(0, floor(ylo / ys + 1e-9) * ys);
    yhi = fmin(ceil(yhi / ys - 1e-9) * ys, ceil(1 / ys - 1e-9) * ys);
    double xhi = ceil((xmax > 0 ? xmax : 1) / xs - 1e-9) * xs;
    begin(f, "Test accuracy against time (the runs' clock)", subtitle);
    y_axis(f, ylo, yhi, ys, 1, "", "test accuracy");
    int d = decimals(xs);
    for (double v = 0; v <= xhi + xs * 1e-6; v += xs) {
        double x = sx(v, 0, xhi);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n", x, BOTTOM, x,
                BOTTOM + 5, x, BOTTOM + 20, d, v);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s since the start of "
            "training (s)</text>\n", LEFT, BOTTOM, RIGHT, BOTTOM, (LEFT + RIGHT) / 2, H - 20, clock);
    if (show_target) {
        double y = sy(target, ylo, yhi);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#666666\" "
                "stroke-dasharray=\"6 4\"/>\n<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                "fill=\"#666666\">target %.4g</text>\n", LEFT, y, RIGHT, y, RIGHT - 4, y - 5,
                target);
    }
    for (int i = 0; i < n; i++) {
        const char *c = palette[i % N_PALETTE];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" points=\"", c);
        for (int k = 0, first = 1; k < s[i].n; k++)
            if (isfinite(s[i].x[k]) && isfinite(s[i].y[k])) {
                fprintf(f, "%s%.1f,%.1f", first ? "" : " ", sx(s[i].x[k], 0, xhi),
                        sy(s[i].y[k], ylo, yhi));
                first = 0;
            }
        fputs("\"/>\n", f);
        for (int k = 0; k < s[i].n; k++)
            if (isfinite(s[i].x[k]) && isfinite(s[i].y[k]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                        sx(s[i].x[k], 0, xhi), sy(s[i].y[k], ylo, yhi), c);
        legend_entry(f, i, c, 1, s[i].name);
    }
    fputs("</svg>\n", f);
}

void cli_svg_split(FILE *f, const cli_series *s, int n, const char *subtitle) {
    static const char *const part[4] = {"compute", "comm", "wait", "delay"};
    static const char *const colour[4] = {"#0072B2", "#E69F00", "#D55E00", "#999999"};
    static const char *const ink[4] = {"white", "black", "white", "black"}; /* labels on them */
    begin(f, "Time split of the ranks", subtitle);
    y_axis(f, 0, 1, 0.2, 100, " %", "share of the ranks' time");
    double slot = (double)(RIGHT - LEFT) / (n > 0 ? n : 1), bw = fmin(90, slot * 0.6);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT,
            BOTTOM, RIGHT, BOTTOM);
    for (int i = 0; i < n; i++) {
        double cx = LEFT + slot * (i + 0.5), base = 0;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", cx, BOTTOM + 20);
        text(f, s[i].name);
        fputs("</text>\n", f);
        if (s[i].share[0] < 0) {
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#666666\">no "
                    "split (1 rank)</text>\n", cx, BOTTOM - 10);
            continue;
        }
        for (int k = 0; k < 4; k++) {
            double v = fmax(0, s[i].share[k]), y1 = sy(base + v, 0, 1), y0 = sy(base, 0, 1);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                    "<title>%s %.1f %%</title></rect>\n", cx - bw / 2, y1, bw, y0 - y1,
                    colour[k], part[k], v * 100);
            if (y0 - y1 >= 16)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">"
                        "%.0f %%</text>\n", cx, (y0 + y1) / 2 + 4, ink[k], v * 100);
            base += v;
        }
    }
    for (int k = 0; k < 4; k++) legend_entry(f, k, colour[k], 0, part[k]);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">summed over ranks and epochs; "
            "wait: waiting for slower ranks</text>\n", (LEFT + RIGHT) / 2, H - 20);
    fputs("</svg>\n", f);
}
