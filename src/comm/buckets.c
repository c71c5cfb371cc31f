/* Bucketed gradient all-reduce that overlaps backward (the DDP / Horovod scheme).
 *
 * DESIGN. The buffer [0, n) is cut into ranges (one per layer, in buffer order); empty ranges
 * (layers without parameters) are allowed and count as always ready. Buckets group consecutive
 * non-empty ranges from the END of the buffer, up to bucket_bytes each (a range larger than
 * the limit is a bucket of its own; 0 = one bucket). Bucket 0 holds the last ranges, the last
 * bucket holds offset 0. Each bucket is one contiguous span, reduced by one
 * het_comm_iallreduce_sum (chunked like every other all-reduce).
 *
 * Order: MPI requires non-blocking collectives to be posted in the same order on every rank.
 * Buckets therefore start strictly in bucket order: bucket i starts once all its ranges are
 * ready AND buckets 0..i-1 have started. With ready() called in reverse buffer order (as
 * backward produces gradients) each bucket starts the moment it is complete; a rank that
 * calls ready() in another order still posts the same sequence, only later.
 *
 * Progress: MPI progresses non-blocking collectives only inside MPI calls, so every ready()
 * call also tests every bucket in flight.
 *
 * The last bucket (the one holding offset 0) starts when every range is ready: nothing is left
 * to overlap with, so it is completed inside that ready() call (see start_bucket); the
 * earlier buckets are left in flight.
 *
 * Two levels (het_buckets_set_algo HIER, comm/hier.c): each bucket's reduction is a chain of
 * stages (node reduce, leaders' all-reduce, node broadcast). A bucket's first stage is posted
 * non-blocking when it starts (the last bucket's too); every ready() call tests the stages in
 * flight and posts a bucket's next stage once its current one completed, in bucket order per
 * stage (bucket k moves on only when bucket k-1 is past k's stage), since the stages' own
 * communicators need the same order on every rank; wait() completes the buckets in order. A
 * stage completes no earlier than its modeled time.
 *
 * Wire types (het_buckets_set_wire, --precision bf16): with BF16 or FP16 each bucket is
 * reduced when it starts by het_comm_allreduce_sum_wire over the scope (flat, blocking: the
 * gradients are packed into 16-bit words, summed by the user MPI_Op that adds two of them in
 * fp32 and rounds the sum once, and unpacked), whatever the algorithm; elements from n_wire
 * on (a reducer's loss figures in the gradient buffer's tail) are summed in fp32 after it.
 * Nothing of it stays in flight, so backward does not overlap it. The extra floats stay
 * fp32. With P ranks each element is rounded P - 1 times on its way (once per partial sum),
 * so |err| <= P 2^-8 sum_r |g_r| (comm.h: het_comm_allreduce_sum_wire).
 *
 * Extra floats: reduced by a separate small all-reduce on the same scope, right after the last
 * bucket's, so that values written into `extra` before the last ready() call travel with this
 * step's gradients. It is one more "call" in the statistics; its modeled time runs alongside
 * the last bucket's.
 *
 * Result: each element is summed by MPI over the ranks of the scope, and every rank gets the
 * same bits. The order in which ranks' values are added depends on MPI's algorithm (blocking
 * or non-blocking, message size), so with 3 or more ranks the bucketed and the flat reduction
 * of the same data differ in the last bits: by at most (P-1) eps sum_r |x_r| per element
 * (measured: up to 1.8 eps sum|x| on 4 ranks, tests/test_comm.c). With 2 ranks (a + b is
 * commutative) they are bitwise equal. Same buckets, same data, same ranks => bitwise the same
 * result. */
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"

typedef struct bucket {
    size_t lo, hi;       /* element span [lo, hi) */
    int r_first, r_last; /* non-empty ranges r_first..r_last (inclusive) */
    int pending;         /* ranges not yet ready this step */
    int started;
    het_req req;         /* flat */
    het_hier hier;       /* two levels */
    int wired;           /* reduced on a 16-bit wire this step (blocking, nothing in flight) */
} bucket;

struct het_buckets {
    het_comm *c;
    het_comm_scope scope;
    het_allreduce_algo algo; /* FLAT or HIER */
    het_wire wire;           /* FP32: the algorithms above; else het_comm_allreduce_sum_wire */
    size_t wire_n;           /* elements [0, wire_n) go on that wire, the rest fp32 */
    float *grads;
    size_t n;
    int n_ranges;          /* non-empty ranges */
    size_t *lo, *cnt;      /* per non-empty range: first element, element count */
    int *bucket_of;        /* per non-empty range */
    unsigned char *ready;  /* per non-empty range, this step */
    size_t *empty_at;      /* offsets of the empty ranges */
    int n_empty;
    bucket *bk;
    int n_buckets;
    int next;              /* first bucket not started */
    float *extra;
    size_t n_extra;
    int extra_started;
    het_req extra_req;
};

void het_buckets_free(het_buckets *b) {
    if (!b) return;
    /* requests still in flight must complete before their buffers may go */
    for (int i = 0; i < b->n_buckets; i++) {
        if (!b->bk[i].started) continue;
        if (b->algo == HET_ALLREDUCE_HIER) het_hier_finish(b->c, &b->bk[i].hier);
        else het_comm_wait(b->c, &b->bk[i].req);
    }
    if (b->extra_started) het_comm_wait(b->c, &b->extra_req);
    free(b->lo);
    free(b->cnt);
    free(b->bucket_of);
    free(b->ready);
    free(b->empty_at);
    free(b->bk);
    free(b);
}

/* Groups the non-empty ranges into buckets from the end of the buffer. */
static void make_buckets(het_buckets *b, size_t bucket_bytes) {
    int nb = 0;
    size_t cur = 0;
    for (int i = b->n_ranges - 1; i >= 0; i--) {
        size_t bytes = b->cnt[i] * sizeof(float);
        if (nb == 0 || (bucket_bytes > 0 && cur + bytes > bucket_bytes)) {
            nb++;
            b->bk[nb - 1].r_last = i;
            cur = 0;
        }
        b->bk[nb - 1].r_first = i;
        b->bucket_of[i] = nb - 1;
        cur += bytes;
    }
    b->n_buckets = nb;
    for (int k = 0; k < nb; k++) {
        bucket *q = &b->bk[k];
        q->lo = b->lo[q->r_first];
        q->hi = b->lo[q->r_last] + b->cnt[q->r_last];
        q->pending = q->r_last - q->r_first + 1;
        q->started = 0;
    }
}

int het_buckets_create(het_buckets **out, het_comm *c, het_comm_scope s, float *grads, size_t n,
                       const size_t *range_offsets, int n_ranges, size_t bucket_bytes,
                       float *extra, size_t n_extra) {
    if (!out) return het_error_set(HET_EINVAL, "buckets: NULL output");
    *out = NULL;
    if (!c) return het_error_set(HET_EINVAL, "buckets: NULL comm");
    if (het_comm_mpi(c, s) == MPI_COMM_NULL)
        return het_error_set(HET_EINVAL, "buckets: bad scope %d", (int)s);
    if (n > 0 && !grads) return het_error_set(HET_EINVAL, "buckets: NULL gradient buffer");
    if (n_extra > 0 && !extra) return het_error_set(HET_EINVAL, "buckets: NULL extra buffer");
    size_t one_range = 0;
    if (n_ranges == 0 && !range_offsets) { /* no ranges given: the whole buffer is one */
        range_offsets = &one_range;
        n_ranges = 1;
    }
    if (n_ranges < 1 || !range_offsets)
        return het_error_set(HET_EINVAL, "buckets: %d ranges: need at least one", n_ranges);
    if (range_offsets[0] != 0)
        return het_error_set(HET_EINVAL, "buckets: first range starts at %zu, not 0",
                             range_offsets[0]);
    for (int i = 0; i < n_ranges; i++) {
        size_t end = i + 1 < n_ranges ? range_offsets[i + 1] : n;
        if (end < range_offsets[i] || end > n)
            return het_error_set(HET_EINVAL, "buckets: range %d [%zu, %zu) is not increasing "
                                 "inside [0, %zu)", i, range_offsets[i], end, n);
    }
    het_buckets *b = calloc(1, sizeof *b);
    if (!b) return het_error_set(HET_ENOMEM, "buckets: out of memory");
    size_t nr = (size_t)n_ranges;
    b->lo = malloc(nr * sizeof *b->lo);
    b->cnt = malloc(nr * sizeof *b->cnt);
    b->bucket_of = malloc(nr * sizeof *b->bucket_of);
    b->ready = calloc(nr, 1);
    b->empty_at = malloc(nr * sizeof *b->empty_at);
    b->bk = calloc(nr, sizeof *b->bk);
    if (!b->lo || !b->cnt || !b->bucket_of || !b->ready || !b->empty_at || !b->bk) {
        het_buckets_free(b);
        return het_error_set(HET_ENOMEM, "buckets: out of memory for %d ranges", n_ranges);
    }
    for (int i = 0; i < n_ranges; i++) {
        size_t end = i + 1 < n_ranges ? range_offsets[i + 1] : n;
        if (end == range_offsets[i]) {
            b->empty_at[b->n_empty++] = end;
        } else {
            b->lo[b->n_ranges] = range_offsets[i];
            b->cnt[b->n_ranges] = end - range_offsets[i];
            b->n_ranges++;
        }
    }
    b->c = c;
    b->scope = s;
    b->algo = HET_ALLREDUCE_FLAT;
    b->grads = grads;
    b->n = n;
    b->extra = extra;
    b->n_extra = n_extra;
    make_buckets(b, bucket_bytes);
    *out = b;
    return HET_OK;
}

int het_buckets_n(const het_buckets *b) { return b ? b->n_buckets : 0; }

int het_buckets_span(const het_buckets *b, int k, size_t *lo, size_t *hi) {
    if (!b) return het_error_set(HET_EINVAL, "buckets: NULL");
    if (k < 0 || k >= b->n_buckets)
        return het_error_set(HET_EINVAL, "buckets: bucket %d outside [0, %d)", k, b->n_buckets);
    if (lo) *lo = b->bk[k].lo;
    if (hi) *hi = b->bk[k].hi;
    return HET_OK;
}

/* Starts bucket k's all-reduce and, after the last bucket, the extra floats'. The last bucket
 * has nothing left to overlap with (every range is ready), so it and the extra floats are
 * completed at once (het_comm_allreduce_deferred; the emulated delay still ends at wait): a
 * non-blocking all-reduce waited in the stall inspector's poll loop, or with the inspector off
 * the blocking MPI_Allreduce, Open MPI's tuned one (comm.c selects libnbc's ring for the
 * non-blocking calls; its default binomial reduce + broadcast was about 2x slower). */
static int start_bucket(het_buckets *b, int k) {
    bucket *q = &b->bk[k];
    int last = k == b->n_buckets - 1, rc;
    if (b->wire != HET_WIRE_FP32) { /* blocking, flat: nothing left in flight */
        size_t mid = q->hi < b->wire_n ? q->hi : q->lo > b->wire_n ? q->lo : b->wire_n;
        rc = het_comm_allreduce_sum_wire(b->c, b->scope, b->grads + q->lo, mid - q->lo, b->wire);
        if (rc == HET_OK && mid < q->hi) /* the elements from wire_n on stay fp32 */
            rc = het_comm_allreduce_sum(b->c, b->scope, b->grads + mid, q->hi - mid);
        q->wired = 1;
    } else if (b->algo == HET_ALLREDUCE_HIER)
        rc = het_hier_start(b->c, &q->hier, b->grads + q->lo, q->hi - q->lo);
    else if (last)
        rc = het_comm_allreduce_deferred(b->c, b->scope, b->grads + q->lo, q->hi - q->lo,
                                         &q->req);
    else
        rc = het_comm_iallreduce_sum(b->c, b->scope, b->grads + q->lo, q->hi - q->lo, &q->req);
    q->started = !q->wired; /* even on failure: wait() completes whatever was posted */
    b->next = k + 1;
    if (rc != HET_OK) return rc;
    if (last && b->n_extra > 0 && !b->extra_started) {
        rc = het_comm_allreduce_deferred(b->c, b->scope, b->extra, b->n_extra, &b->extra_req);
        b->extra_started = 1;
    }
    return rc;
}

/* Index of the non-empty range starting at `offset`, or -1. */
static int find_range(const het_buckets *b, size_t offset) {
    int lo = 0, hi = b->n_ranges - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (b->lo[mid] == offset) return mid;
        if (b->lo[mid] < offset) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int het_buckets_bucket_of(const het_buckets *b, size_t offset) {
    if (!b) return -1;
    int r = find_range(b, offset);
    return r < 0 ? -1 : b->bucket_of[r];
}

int het_buckets_ready(het_buckets *b, size_t offset, size_t count) {
    if (!b) return het_error_set(HET_EINVAL, "buckets: NULL");
    if (count == 0) {
        for (int i = 0; i < b->n_empty; i++)
            if (b->empty_at[i] == offset) return HET_OK;
        return het_error_set(HET_EINVAL, "buckets: no empty range at offset %zu", offset);
    }
    int r = find_range(b, offset);
    if (r < 0 || b->cnt[r] != count)
        return het_error_set(HET_EINVAL, "buckets: [%zu, %zu) is not one of the ranges",
                             offset, offset + count);
    if (b->ready[r])
        return het_error_set(HET_EINVAL, "buckets: range [%zu, %zu) marked ready twice in one "
                             "step", offset, offset + count);
    b->ready[r] = 1;
    b->bk[b->bucket_of[r]].pending--;
    int rc = HET_OK;
    while (rc == HET_OK && b->next < b->n_buckets && b->bk[b->next].pending == 0)
        rc = start_bucket(b, b->next);
    /* progress what is in flight */
    for (int k = 0; rc == HET_OK && k < b->next; k++) {
        int done;
        if (b->bk[k].wired) continue;
        if (b->algo == HET_ALLREDUCE_HIER) /* in bucket order per stage */
            rc = het_hier_advance(b->c, &b->bk[k].hier,
                                  k == 0 || b->bk[k - 1].hier.stage > b->bk[k].hier.stage);
        else
            rc = het_comm_test(b->c, &b->bk[k].req, &done);
    }
    if (rc == HET_OK && b->extra_started) {
        int done;
        rc = het_comm_test(b->c, &b->extra_req, &done);
    }
    return rc;
}

int het_buckets_wait(het_buckets *b) {
    if (!b) return het_error_set(HET_EINVAL, "buckets: NULL");
    int rc = HET_OK;
    while (rc == HET_OK && b->next < b->n_buckets) rc = start_bucket(b, b->next);
    if (rc == HET_OK && b->n_extra > 0 && !b->extra_started) { /* no buckets at all */
        rc = het_comm_allreduce_deferred(b->c, b->scope, b->extra, b->n_extra, &b->extra_req);
        b->extra_started = 1;
    }
    for (int k = 0; k < b->n_buckets; k++) {
        bucket *q = &b->bk[k];
        if (q->started) {
            int w = b->algo == HET_ALLREDUCE_HIER ? het_hier_finish(b->c, &q->hier)
                                                  : het_comm_wait(b->c, &q->req);
            if (rc == HET_OK) rc = w;
        }
        q->started = q->wired = 0;
        q->pending = q->r_last - q->r_first + 1;
    }
    if (b->extra_started) {
        int w = het_comm_wait(b->c, &b->extra_req);
        if (rc == HET_OK) rc = w;
        b->extra_started = 0;
    }
    memset(b->ready, 0, (size_t)b->n_ranges);
    b->next = 0;
    return rc;
}

int het_buckets_set_algo(het_buckets *b, het_allreduce_algo a) {
    if (!b) return het_error_set(HET_EINVAL, "buckets: NULL");
    if (a != HET_ALLREDUCE_AUTO && a != HET_ALLREDUCE_FLAT && a != HET_ALLREDUCE_HIER)
        return het_error_set(HET_EINVAL, "buckets: unknown all-reduce algorithm %d", (int)a);
    if (b->next > 0 || b->extra_started)
        return het_error_set(HET_EINVAL, "buckets: algorithm changed with buckets in flight");
    if (a == HET_ALLREDUCE_HIER && b->scope != HET_COMM_WORLD)
        return het_error_set(HET_EINVAL, "buckets: the two-level all-reduce runs over the world "
                             "scope only, not scope %d", (int)b->scope);
    a = b->scope == HET_COMM_WORLD ? het_comm_allreduce_algo(b->c, a) : HET_ALLREDUCE_FLAT;
    if (a == HET_ALLREDUCE_HIER) {
        int rc = het_hier_setup(b->c);
        if (rc != HET_OK) return rc;
    }
    b->algo = a;
    return HET_OK;
}

int het_buckets_set_wire(het_buckets *b, het_wire w, size_t n_wire) {
    if (!b) return het_error_set(HET_EINVAL, "buckets: NULL");
    if (w != HET_WIRE_FP32 && w != HET_WIRE_FP16 && w != HET_WIRE_BF16)
        return het_error_set(HET_EINVAL, "buckets: unknown wire type %d", (int)w);
    if (b->next > 0 || b->extra_started)
        return het_error_set(HET_EINVAL, "buckets: wire type changed with buckets in flight");
    b->wire = w;
    b->wire_n = n_wire;
    return HET_OK;
}

het_wire het_buckets_wire(const het_buckets *b) { return b ? b->wire : HET_WIRE_FP32; }

het_allreduce_algo het_buckets_algo(const het_buckets *b) {
    return b ? b->algo : HET_ALLREDUCE_FLAT;
}
