/* oneDNN convolution: a handle's primitive sets, one per batch size and thread count. A set
 * holds the three primitives of a layer shape (forward, input gradient, weight gradient) in the
 * layouts oneDNN picked ("any"), the reorders between those and the caller's plain and blocked
 * layouts, and the scratchpad bytes each needs; conv_dnnl.c runs them (its DESIGN comment).
 * The scratchpads are the calling thread's (below). */
#include <stdlib.h>
#include <string.h>

#include "hetrain/core.h"
#include "tensor/internal.h"

#ifdef HET_HAVE_DNNL

#include "tensor/conv_dnnl_prims.h"

/* Every primitive takes its scratchpad from the caller (dnnl_scratchpad_mode_user): oneDNN's
 * own (library) scratchpad is per thread and sized for the primitives the thread created,
 * while a layer's primitives are made by whichever worker calls first and then run by all of
 * them (the bf16 weight-gradient kernels need one: two workers then wrote over each other's).
 * The scratchpad is the calling thread's buffer, grown on demand and freed when the thread
 * ends. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
typedef struct scratch_buf {
    void *p;
    size_t n;
} scratch_buf;

static void scratch_drop(void *v) {
    scratch_buf *b = v;
    if (b) free(b->p);
    free(b);
}

static void scratch_key_make(void) { (void)pthread_key_create(&scratch_key, scratch_drop); }

/* The calling thread's scratchpad of at least n bytes (64-byte aligned); NULL when out of
 * memory. */
void * het_dnnl_scratch_get(size_t n) {
    pthread_once(&scratch_once, scratch_key_make);
    scratch_buf *b = pthread_getspecific(scratch_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        if (pthread_setspecific(scratch_key, b) != 0) return free(b), NULL;
    }
    if (b->n < n) {
        size_t want = (n + 4095) / 4096 * 4096;
        void *p = aligned_alloc(64, want);
        if (!p) return NULL;
        free(b->p);
        b->p = p, b->n = want;
    }
    return b->p;
}

/* Sets *attr (made when NULL) to take its scratchpad from the caller. */
static dnnl_status_t user_scratch(dnnl_primitive_attr_t *attr) {
    dnnl_status_t e = *attr ? dnnl_success : dnnl_primitive_attr_create(attr);
    return e == dnnl_success ? dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user)
                             : e;
}

/* The scratchpad bytes a primitive of pd needs. */
static size_t scratch_of(const_dnnl_primitive_desc_t pd) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* A reorder src -> dst (NULL primitive when they are equal and sum == 0); with sum the
 * destination keeps its contents and receives the reordered values added. */
static int make_reorder(reorder *r, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                        int sum) {
    r->p = NULL;
    size_t a = dnnl_memory_desc_get_size(src), b = dnnl_memory_desc_get_size(dst);
    r->bytes = a > b ? a : b;
    if (!sum && dnnl_memory_desc_equal(src, dst)) return HET_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = user_scratch(&attr);
    if (sum) {
        if (s == dnnl_success) s = dnnl_post_ops_create(&ops);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(ops, 1.0f);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&pd, src, het_dnnl_engine(), dst, het_dnnl_engine(), attr);
    if (s == dnnl_success) r->scratch = scratch_of(pd);
    if (s == dnnl_success) s = dnnl_primitive_create(&r->p, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s == dnnl_success ? HET_OK : het_dnnl_fail(s, "reorder");
}

static void drop_reorder(reorder *r) {
    if (r->p) dnnl_primitive_destroy(r->p);
    r->p = NULL;
}

void het_dnnl_set_free(prim_set *s) {
    if (!s) return;
    dnnl_primitive_t *ps[] = {&s->fwd, &s->bwd_d, &s->bwd_w};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        if (*ps[i]) dnnl_primitive_destroy(*ps[i]);
    reorder *rs[] = {&s->f_w_in, &s->d_w_in, &s->w_dw_add};
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) drop_reorder(rs[i]);
    for (int l = 0; l < 2; l++) {
        reorder *ls[] = {&s->f_src_in[l],  &s->f_dst_out[l], &s->d_ddst_in[l], &s->d_dsrc_out[l],
                         &s->d_dsrc_add[l], &s->w_src_in[l], &s->w_ddst_in[l]};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) drop_reorder(ls[i]);
    }
    drop_reorder(&s->f_src_in[2]), drop_reorder(&s->w_src_in[2]), drop_reorder(&s->f_dst_out[2]);
    free(s);
}

static int md_type(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t,
                   dnnl_format_tag_t tag) {
    TRY(dnnl_memory_desc_init_by_tag(md, nd, d, t, tag), "memory descriptor");
    return HET_OK;
}

static int md_init(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t d, dnnl_format_tag_t tag) {
    return md_type(md, nd, d, dnnl_f32, tag);
}

/* Queries the layout a primitive picked for one argument. */
static void picked(dnnl_memory_desc_t *md, const_dnnl_primitive_desc_t pd, dnnl_query_t q) {
    *md = *dnnl_primitive_desc_query_md(pd, q, 0);
}

static int make_prim(dnnl_primitive_t *p, const_dnnl_primitive_desc_t pd) {
    TRY(dnnl_primitive_create(p, pd), "primitive");
    return HET_OK;
}

/* The reorders between the caller's layout l and the primitives' picks. */
static int side_reorders(prim_set *s, int l, int x_side, int y_side) {
    int rc = HET_OK;
    if (x_side && ((rc = make_reorder(&s->f_src_in[l], &s->u_src[l], &s->f_src, 0)) ||
                   (rc = make_reorder(&s->d_dsrc_out[l], &s->d_dsrc, &s->u_src[l], 0)) ||
                   (rc = make_reorder(&s->d_dsrc_add[l], &s->d_dsrc, &s->u_src[l], 1)) ||
                   (rc = make_reorder(&s->w_src_in[l], &s->u_src[l], &s->w_src, 0))))
        return rc;
    if (y_side && ((rc = make_reorder(&s->f_dst_out[l], &s->f_dst, &s->u_dst[l], 0)) ||
                   (rc = make_reorder(&s->d_ddst_in[l], &s->u_dst[l], &s->d_ddst, 0)) ||
                   (rc = make_reorder(&s->w_ddst_in[l], &s->u_dst[l], &s->w_ddst, 0))))
        return rc;
    return HET_OK;
}

/* A bf16 set's reorders between the caller's channel-blocked bf16 activations ([2]) and the
 * primitives' picks: none where oneDNN picked nChw16c bf16 itself. */
static int lp_reorders(prim_set *s, int x_side, int y_side, const dnnl_dims_t ds,
                       const dnnl_dims_t dd) {
    int rc = HET_OK;
    if (x_side && ((rc = md_type(&s->u_src[2], 4, ds, dnnl_bf16, dnnl_nChw16c)) ||
                   (rc = make_reorder(&s->f_src_in[2], &s->u_src[2], &s->f_src, 0)) ||
                   (rc = make_reorder(&s->w_src_in[2], &s->u_src[2], &s->w_src, 0))))
        return rc;
    if (y_side && ((rc = md_type(&s->u_dst[2], 4, dd, dnnl_bf16, dnnl_nChw16c)) ||
                   (rc = make_reorder(&s->f_dst_out[2], &s->f_dst, &s->u_dst[2], 0))))
        return rc;
    return HET_OK;
}

/* The attributes of a forward: the caller's scratchpad, and a fused ReLU when relu. */
static dnnl_status_t relu_attr(int relu, dnnl_primitive_attr_t *attr) {
    *attr = NULL;
    dnnl_status_t e = user_scratch(attr);
    if (!relu || e != dnnl_success) return e;
    dnnl_post_ops_t ops = NULL;
    if (e == dnnl_success) e = dnnl_post_ops_create(&ops);
    if (e == dnnl_success) e = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    if (e == dnnl_success) e = dnnl_primitive_attr_set_post_ops(*attr, ops);
    if (ops) dnnl_post_ops_destroy(ops);
    return e;
}

/* Builds the primitives and reorders of batch size n (forward with a ReLU when relu; bf16
 * operands when bf16, 2: and forward's output bf16 too); on failure the message names the step and oneDNN's status (reword adds
 * the shape). */
int het_dnnl_set_build(const het_dnnl_conv *h, int n, int relu, int bf16, prim_set *s) {
    if (het_dnnl_injected(HET_DNNL_INJECT_REFUSE))
        return het_dnnl_fail(dnnl_unimplemented, "convolution descriptor (a test's injected refusal)");
    dnnl_dims_t ds = {n, h->C, h->H, h->W}, dw = {h->O, h->C, h->k, h->k}, db = {h->O};
    dnnl_dims_t dd = {n, h->O, h->oh, h->ow};
    dnnl_dims_t st = {h->stride, h->stride}, pl = {h->pad, h->pad};
    dnnl_dims_t pr = {(h->oh - 1) * h->stride + h->k - h->H - h->pad,
                      (h->ow - 1) * h->stride + h->k - h->W - h->pad};
    /* what the primitives read (x, w, dy: bf16 or fp32) and write (dx, dw: fp32; y: fp32, or
     * bf16 for a caller that keeps it so), each in the layout oneDNN picks */
    const dnnl_data_type_t lo = bf16 ? dnnl_bf16 : dnnl_f32;
    const dnnl_data_type_t yt = bf16 == 2 ? dnnl_bf16 : dnnl_f32; /* 2: forward writes bf16 */
    dnnl_memory_desc_t a_src, a_w, a_dst, a_dsrc, a_ddst, a_dw;
    int rc = HET_OK;
    if ((rc = md_init(&s->u_src[0], 4, ds, dnnl_nchw)) ||
        (rc = md_init(&s->u_src[1], 4, ds, dnnl_nChw16c)) ||
        (rc = md_init(&s->u_w, 4, dw, dnnl_oihw)) ||
        (rc = md_init(&s->u_dst[0], 4, dd, dnnl_nchw)) ||
        (rc = md_init(&s->u_dst[1], 4, dd, dnnl_nChw16c)) ||
        (rc = md_init(&s->u_b, 1, db, dnnl_x)) ||
        (rc = md_type(&a_src, 4, ds, lo, dnnl_format_tag_any)) ||
        (rc = md_type(&a_w, 4, dw, lo, dnnl_format_tag_any)) ||
        (rc = md_type(&a_dst, 4, dd, yt, dnnl_format_tag_any)) ||
        (rc = md_init(&a_dsrc, 4, ds, dnnl_format_tag_any)) ||
        (rc = md_type(&a_ddst, 4, dd, lo, dnnl_format_tag_any)) ||
        (rc = md_init(&a_dw, 4, dw, dnnl_format_tag_any)))
        return rc;
    const dnnl_memory_desc_t *bias = h->bias ? &s->u_b : NULL;
    dnnl_convolution_desc_t fd, bd, wd;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL, wpd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t e = dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                         dnnl_convolution_direct, &a_src, &a_w,
                                                         bias, &a_dst, st, pl, pr);
    if (e == dnnl_success) e = relu_attr(relu, &attr);
    if (e == dnnl_success) e = dnnl_primitive_desc_create(&fpd, &fd, attr, het_dnnl_engine(), NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    attr = NULL;
    if (e == dnnl_success) e = user_scratch(&attr); /* the two backward primitives' */
    if (e == dnnl_success)
        e = dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &a_dsrc, &a_w,
                                                     &a_ddst, st, pl, pr);
    if (e == dnnl_success) e = dnnl_primitive_desc_create(&bpd, &bd, attr, het_dnnl_engine(), fpd);
    if (e == dnnl_success)
        e = dnnl_convolution_backward_weights_desc_init(&wd, dnnl_convolution_direct, &a_src,
                                                        &a_dw, bias, &a_ddst, st, pl, pr);
    if (e == dnnl_success) e = dnnl_primitive_desc_create(&wpd, &wd, attr, het_dnnl_engine(), fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (e != dnnl_success) {
        rc = het_dnnl_fail(e, "convolution descriptor");
    } else {
        picked(&s->f_src, fpd, dnnl_query_src_md);
        picked(&s->f_w, fpd, dnnl_query_weights_md);
        picked(&s->f_dst, fpd, dnnl_query_dst_md);
        picked(&s->d_dsrc, bpd, dnnl_query_diff_src_md);
        picked(&s->d_w, bpd, dnnl_query_weights_md);
        picked(&s->d_ddst, bpd, dnnl_query_diff_dst_md);
        picked(&s->w_src, wpd, dnnl_query_src_md);
        picked(&s->w_dw, wpd, dnnl_query_diff_weights_md);
        picked(&s->w_ddst, wpd, dnnl_query_diff_dst_md);
        s->scr_f = scratch_of(fpd), s->scr_d = scratch_of(bpd), s->scr_w = scratch_of(wpd);
        if (!(rc = make_prim(&s->fwd, fpd)) && !(rc = make_prim(&s->bwd_d, bpd)) &&
            !(rc = make_prim(&s->bwd_w, wpd)) &&
            !(rc = make_reorder(&s->f_w_in, &s->u_w, &s->f_w, 0)) &&
            !(rc = make_reorder(&s->d_w_in, &s->u_w, &s->d_w, 0)) &&
            !(rc = make_reorder(&s->w_dw_add, &s->w_dw, &s->u_w, 1)) &&
            !(rc = side_reorders(s, 0, 1, 1)))
            rc = side_reorders(s, 1, h->x_blk, h->y_blk);
        if (rc == HET_OK && bf16) /* bf16 activations: x read by two primitives, y written */
            rc = lp_reorders(s, h->x_blk, h->y_blk, ds, dd);
    }
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    s->ddst_shared = dnnl_memory_desc_equal(&s->w_ddst, &s->d_ddst);
    s->n = n;
    s->relu = relu;
    s->bf16 = bf16;
    s->threads = het_dnnl_threads();
    return rc;
}

/* Work layout of a call (floats): per-sample part, then the fixed part. Forward: src, dst,
 * weights. Backward: src (weight gradient's), ddst (input gradient's), ddst (weight
 * gradient's, when another layout), dsrc, weights, dweights, dbias. */
void het_dnnl_set_sizes(const prim_set *s, size_t *act, size_t *fixed) {
    /* the plain side's copies are the largest a call can need */
    size_t f = het_dnnl_fl(s->f_src_in[0].bytes) + het_dnnl_fl(s->f_dst_out[0].bytes);
    size_t b = het_dnnl_fl(s->w_src_in[0].bytes) + het_dnnl_fl(s->d_ddst_in[0].bytes) + het_dnnl_fl(s->w_ddst_in[0].bytes) +
               het_dnnl_fl(s->d_dsrc_out[0].bytes);
    *act = f > b ? f : b;
    size_t wf = het_dnnl_fl(s->f_w_in.bytes);
    size_t wb = het_dnnl_fl(s->d_w_in.bytes) + het_dnnl_fl(dnnl_memory_desc_get_size(&s->w_dw)) +
                het_dnnl_fl(sizeof(float) * (size_t)s->u_b.dims[0]);
    *fixed = wf > wb ? wf : wb;
}

#endif /* HET_HAVE_DNNL */
