/* hetrain codec: the compressions of the Q-FB pipeline, on plain float arrays (tensor/codec.c).
 * No MPI: a codec turns floats into bytes and back; who sends the bytes is another layer's job.
 *
 * - het_q8_*: activations. Per-tensor affine 8-bit quantization: code q in 0..255 stands for
 *   min + q * scale, scale = (max - min) / 255 (rounded up to a float), q the nearest code.
 * - het_gradc_*: gradients. "2-Step GC" with error feedback: v = g + r (r the residual the caller
 *   keeps between calls), step 1 keeps some elements of v (top-k, a threshold, or all), step 2
 *   quantizes the kept ones to symmetric int8 (or sends them as fp32), and r becomes
 *   v - (what the receiver decodes), so nothing of the gradient is ever lost, only delayed.
 *
 * Wire forms are little-endian, written field by field (no struct goes on the wire, so no
 * padding); each starts with a 16-byte header whose first byte names the kind. Readers check
 * every field against what the caller expects and the bytes given, refuse with HET_EFORMAT and
 * a sentence saying what was expected, and never read past `len` nor write before the whole
 * buffer is checked. Element counts are at most UINT32_MAX (they travel as uint32).
 *
 *   q8 (het_q8_bytes(n) = 16 + n):
 *     [0] 'Q' (0x51)  [1] version 1  [2..3] 0  [4..7] n u32  [8..11] min f32
 *     [12..15] scale f32 (>= 0)  [16..16+n) codes u8
 *   gc (het_gradc_bytes(n, k, quantize) = 16 + min(k * (4 + w), n * w), w = 1 quantized, 4
 *   not):
 *     [0] 'G' (0x47)  [1] w: 1 (int8 codes) or 4 (fp32 values)  [2..3] 0  [4..7] n u32
 *     [8..11] k u32 (elements kept, <= n)  [12..15] scale f32 (w = 1: max|kept| / 127; w = 4: 0)
 *     sparse when k * (4 + w) < n * w: k u32 indices, strictly ascending, < n, then k values;
 *     dense otherwise: n values, 0 where not kept (no index list: cheaper from there on, so
 *     mode HET_GRADC_NONE costs n + 16 bytes quantized, not 5 n). Codes are -127..127. */
#ifndef HETRAIN_CODEC_H
#define HETRAIN_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HET_Q8_KIND 0x51 /* 'Q' */
#define HET_GRADC_KIND 0x47 /* 'G' */
#define HET_CODEC_HEADER 16

/* ---- activations: affine uint8 ---- */

/* What the codes of one tensor mean: x = min + q * scale. scale = 0: every code means min. */
typedef struct het_q8_params {
    float min;
    float scale;
} het_q8_params;

/* codes[n] and *p from x[n]: min and max of x, scale = (max - min) / 255 rounded up to a float,
 * q = the nearest code, so |x - decoded| <= scale / 2 plus the float rounding of the decode
 * (half an ulp of the value); a constant tensor (scale 0) decodes exactly. HET_EINVAL, with the
 * index, when some x is NaN or infinite (codes and *p then unspecified). n = 0: p = {0, 0}. */
int het_q8_encode(uint8_t *codes, het_q8_params *p, const float *x, size_t n);
/* x[n] = p.min + codes * p.scale (computed in double, rounded once to float). */
void het_q8_decode(float *x, const uint8_t *codes, size_t n, het_q8_params p);
/* Exact size of the wire form of n values: HET_CODEC_HEADER + n. */
size_t het_q8_bytes(size_t n);
/* Writes the wire form of x[n] into buf (cap bytes, the caller's), het_q8_bytes(n) bytes of
 * it. HET_EINVAL when cap is smaller, n > UINT32_MAX or some x is not finite. */
int het_q8_pack(uint8_t *buf, size_t cap, const float *x, size_t n);
/* x[n] (the caller's) from the wire form buf[len]: refused with HET_EFORMAT unless len is
 * exactly het_q8_bytes(n), the kind, version and reserved bytes are right, the header's n is
 * the n expected, and min and scale are finite with min + 255 * scale a float. x is written
 * only when everything checks. */
int het_q8_unpack(float *x, size_t n, const uint8_t *buf, size_t len);

/* ---- gradients: 2-Step GC with error feedback ---- */

/* Step 1, which elements of v = g + r are sent. */
typedef enum {
    HET_GRADC_NONE = 0,     /* all of them (only step 2 compresses) */
    HET_GRADC_TOPK = 1,     /* the k of largest |v|; equal |v| at the cut: the lower indices */
    HET_GRADC_THRESHOLD = 2 /* those with |v| >= threshold */
} het_gradc_mode;

/* k and the threshold are two fields, not one double that means either: a count is an integer
 * (het_gradc_k_of_ratio turns a ratio into one) and each mode reads only its own field. */
typedef struct het_gradc_config {
    int mode;        /* het_gradc_mode */
    size_t k;        /* HET_GRADC_TOPK: elements sent, 1..n */
    float threshold; /* HET_GRADC_THRESHOLD: finite, >= 0 */
    int quantize;    /* step 2: 1 sends kept values as int8 codes, 0 as fp32 (exactly) */
} het_gradc_config;

/* k for a ratio of n: max(1, ceil(ratio * n)), at most n (0 when n is 0). A product within
 * 1e-9 (relative) of an integer counts as that integer, so 0.07 of 100 is 7, not the 8 that
 * double arithmetic (7.000000000000001) would give. A ratio that is NaN or <= 0 gives 1. */
size_t het_gradc_k_of_ratio(double ratio, size_t n);
/* Exact size of the wire form for n elements of which k are kept (k <= n), quantized or not
 * (see the top of this file); non-decreasing in k, so het_gradc_bytes(n, n, quantize) is enough
 * for any k (what HET_GRADC_THRESHOLD needs, whose k depends on the data). */
size_t het_gradc_bytes(size_t n, size_t k, int quantize);
/* One round of 2-Step GC on g[n] with the residual r[n] (the caller's, zero at the start,
 * kept between calls; must not overlap g). Writes the wire form into buf (cap bytes, the
 * caller's) and its size to *len, and sets r = g + r - decoded for every element: unsent ones
 * keep all of g + r, sent ones their quantization error (|error| <= scale / 2), so decoded +
 * new r sums to g + old r up to float rounding. Quantized: scale = max|kept| / 127, code =
 * v / scale rounded to nearest (ties away from zero). work: n floats of scratch for HET_GRADC_TOPK
 * (|v| for the selection: a radix select, O(n), no sort), or NULL to have them
 * allocated in the call; unused by the other modes. Fails, with nothing written and r
 * unchanged: HET_EINVAL when some g + r is not finite (the index is named), the config is
 * invalid for n (k not in 1..n, threshold NaN or < 0, unknown mode), n > UINT32_MAX or cap is
 * smaller than the form needs; HET_ENOMEM. */
int het_gradc_encode(uint8_t *buf, size_t cap, size_t *len, float *r, const float *g, size_t n,
                     const het_gradc_config *cfg, float *work);
/* The dense gradient out[n] (the caller's) from the wire form buf[len]: add = 0 writes every
 * element (0 where nothing was sent), add = 1 adds the sent values onto out. Refused with
 * HET_EFORMAT, out untouched, unless: len >= 16, kind 'G', w 1 or 4, reserved bytes 0, the
 * header's n is the n expected, k <= n, len is exactly het_gradc_bytes(n, k, w == 1), indices
 * strictly ascending and < n, scale finite and >= 0 (0 when w = 4) with 127 * scale a float,
 * codes in -127..127, fp32 values finite. */
int het_gradc_decode(float *out, size_t n, const uint8_t *buf, size_t len, int add);

#ifdef __cplusplus
}
#endif
#endif
