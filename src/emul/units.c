/* SimGrid's units (xbt_parse_units), as platform files write them: speeds f, kf ... Yf and
 * flops, kiloflops ...; bandwidths Bps or bps with decimal (k M G T P E Z Y) or binary (Ki Mi
 * ...) prefixes; times w d h m s ms us ns ps. A bare number is the base unit (SimGrid warns
 * and takes it so). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emul/emul.h"

/* value with unit: the number, then one of `units` (or none: the base unit). */
int het_unit_parse(const char *s, const het_unit *units, double *out) {
    if (!s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0) return -1;
    if (!*end) {
        *out = v;
        return 0;
    }
    for (int i = 0; units[i].name; i++)
        if (!strcmp(end, units[i].name)) {
            *out = v * units[i].scale;
            return 0;
        }
    return -1;
}

const het_unit het_speed_units[] = {
    {"f", 1}, {"kf", 1e3}, {"Mf", 1e6}, {"Gf", 1e9}, {"Tf", 1e12}, {"Pf", 1e15}, {"Ef", 1e18},
    {"Zf", 1e21}, {"Yf", 1e24}, {"flops", 1}, {"kiloflops", 1e3}, {"megaflops", 1e6},
    {"gigaflops", 1e9}, {"teraflops", 1e12}, {"petaflops", 1e15}, {"exaflops", 1e18},
    {NULL, 0}};
const het_unit het_time_units[] = {{"w", 604800}, {"d", 86400}, {"h", 3600}, {"m", 60},
                                  {"s", 1},      {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9},
                                  {"ps", 1e-12}, {NULL, 0}};
static het_unit bw_table[2 * 2 * 9 + 1]; /* Bps, bps with decimal and binary prefixes */

const het_unit *het_bw_units(void) {
    static const char *dec[] = {"", "k", "M", "G", "T", "P", "E", "Z", "Y"};
    static const char *bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"};
    static char names[36][8];
    if (bw_table[0].name) return bw_table;
    int k = 0;
    for (int byte = 0; byte < 2; byte++)
        for (int i = 0; i < 9; i++)
            for (int b2 = 0; b2 < 2; b2++) {
                if (b2 && i == 0) continue;
                snprintf(names[k], sizeof names[k], "%s%s", b2 ? bin[i] : dec[i],
                         byte ? "bps" : "Bps");
                bw_table[k].name = names[k];
                bw_table[k].scale = pow(b2 ? 1024.0 : 1000.0, i) * (byte ? 0.125 : 1.0);
                k++;
            }
    bw_table[k].name = NULL;
    return bw_table;
}

int het_platform_parse_speed(const char *text, double *flops) {
    double v;
    if (het_unit_parse(text, het_speed_units, &v) || !(v > 0)) return -1;
    *flops = v;
    return 0;
}

