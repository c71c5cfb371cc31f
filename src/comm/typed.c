/* All-reduces of other element types than float (comm.c has the float ones, the clock rule
 * and the statistics they share).
 *
 * DESIGN. Wire all-reduce: one chunk at a time is packed into 16-bit scratch owned by the comm
 * (grown to min(n, chunk) elements, kept), reduced with MPI_UINT16_T and a user MPI_Op (created
 * on first use, freed with the comm; the conversions are wire.c's), and unpacked. Double
 * all-reduce: an all-gather of each chunk into owned scratch, then a sum in rank order, so its
 * bits depend on nothing but the number of ranks. */
#include <stdint.h>
#include <stdlib.h>

#include "comm/internal.h"
#include "emul/emul.h"

/* Most doubles one rank gathers per call of the double all-reduce (P x elements). */
#define HET_F64_GATHER_MAX ((size_t)1 << 16)

/* ---- wire types ---- */

/* The user MPI_Op adding wire type w (created on first use). */
static int wire_op(het_comm *c, het_wire w, MPI_Op *op) {
    if (c->wire_op[w] == MPI_OP_NULL) {
        int err = MPI_Op_create(het_wire_sum_fn(w), 1 /* commutative */, &c->wire_op[w]);
        if (err != MPI_SUCCESS) {
            c->wire_op[w] = MPI_OP_NULL;
            return het_comm_mpi_error(err, "MPI_Op_create(wire sum)");
        }
    }
    *op = c->wire_op[w];
    return HET_OK;
}

/* Makes the wire scratch hold at least n elements. */
static int wire_reserve(het_comm *c, size_t n) {
    if (c->wire_cap >= n) return HET_OK;
    uint16_t *p = realloc(c->wire_buf, n * sizeof *p);
    if (!p)
        return het_error_set(HET_ENOMEM, "wire all-reduce: out of memory for %zu elements", n);
    c->wire_buf = p;
    c->wire_cap = n;
    return HET_OK;
}

int het_comm_allreduce_sum_wire(het_comm *c, het_comm_scope s, float *buf, size_t n,
                                het_wire w) {
    if (w == HET_WIRE_FP32) return het_comm_allreduce_sum(c, s, buf, n);
    if (w != HET_WIRE_FP16 && w != HET_WIRE_BF16)
        return het_error_set(HET_EINVAL, "wire all-reduce: unknown wire type %d", (int)w);
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, buf, n, "wire all-reduce", &comm);
    if (rc != HET_OK || n == 0) return rc;
    MPI_Op op = MPI_OP_NULL;
    if ((rc = wire_op(c, w, &op)) != HET_OK) return rc;
    if ((rc = wire_reserve(c, n < c->chunk ? n : c->chunk)) != HET_OK) return rc;
    double t_mpi = 0.0;
    int span = het_comm_span(c, s);
    size_t bytes = n * het_wire_bytes(w);
    double model = het_comm_allreduce_model(c, s, bytes, het_stall_blocking_model());
    het_arrival a;
    if ((rc = het_arrival_post(c, s, bytes, het_stall_blocking_model() ? HET_LINK_BLOCKING
                           : HET_LINK_NONBLOCKING, comm, model, &a)) != HET_OK)
        return rc;
    for (size_t off = 0; off < n; off += c->chunk) {
        size_t cnt = n - off < c->chunk ? n - off : c->chunk;
        het_wire_pack(w, buf + off, c->wire_buf, cnt);
        double t1 = het_now();
        MPI_Request req;
        int err;
        if (!het_stall_on()) {
            het_stall_post(comm);
            err = MPI_Allreduce(MPI_IN_PLACE, c->wire_buf, (int)cnt, MPI_UINT16_T, op, comm);
        } else if ((err = MPI_Iallreduce(MPI_IN_PLACE, c->wire_buf, (int)cnt, MPI_UINT16_T, op,
                                         comm, &req)) == MPI_SUCCESS) {
            err = het_stall_collective(comm, "allreduce", &req);
        }
        t_mpi += het_now() - t1;
        if (err != MPI_SUCCESS) {
            c->st.comm_s += t_mpi;
            return het_comm_mpi_error(err, "MPI_Iallreduce(wire)");
        }
        het_wire_unpack(w, c->wire_buf, buf + off, cnt);
    }
    c->st.comm_s += t_mpi;
    het_comm_count_op(c, span, bytes);
    return het_arrival_end(c, comm, model, &a);
}

/* ---- doubles ---- */

int het_comm_allreduce_sum_f64(het_comm *c, het_comm_scope s, double *v, size_t n) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, v, n, "double all-reduce", &comm);
    if (rc != HET_OK || n == 0) return rc;
    int p = 1;
    MPI_Comm_size(comm, &p);
    /* elements per all-gather: the chunk, and at most HET_F64_GATHER_MAX gathered doubles */
    size_t step = HET_F64_GATHER_MAX / (size_t)p;
    if (step == 0) step = 1;
    if (step > c->chunk) step = c->chunk;
    if (step > n) step = n;
    size_t need = step * (size_t)p;
    if (c->f64_cap < need) {
        double *q = realloc(c->f64_buf, need * sizeof *q);
        if (!q)
            return het_error_set(HET_ENOMEM, "double all-reduce: out of memory for %zu "
                                 "elements", need);
        c->f64_buf = q;
        c->f64_cap = need;
    }
    double t0 = het_now();
    int span = het_comm_span(c, s);
    double model = het_comm_allreduce_model(c, s, n * sizeof(double), 0); /* an all-gather */
    het_arrival a;
    if ((rc = het_arrival_post(c, s, n * sizeof(double), HET_LINK_NONBLOCKING, comm, model, &a)) !=
        HET_OK)
        return rc;
    for (size_t off = 0; off < n; off += step) {
        size_t cnt = n - off < step ? n - off : step;
        MPI_Request req;
        int err = MPI_Iallgather(v + off, (int)cnt, MPI_DOUBLE, c->f64_buf, (int)cnt,
                                 MPI_DOUBLE, comm, &req);
        if (err == MPI_SUCCESS) err = het_stall_collective(comm, "allgather", &req);
        if (err != MPI_SUCCESS) {
            c->st.comm_s += het_now() - t0;
            return het_comm_mpi_error(err, "MPI_Iallgather(doubles)");
        }
        for (size_t i = 0; i < cnt; i++) { /* rank 0 + rank 1 + ... in that order */
            double sum = c->f64_buf[i];
            for (int r = 1; r < p; r++) sum += c->f64_buf[(size_t)r * cnt + i];
            v[off + i] = sum;
        }
    }
    c->st.comm_s += het_now() - t0;
    het_comm_count_op(c, span, (uint64_t)n * sizeof(double));
    return het_arrival_end(c, comm, model, &a);
}
