/* Scopes: the topology's world, node and cross communicators, and groups split from any scope.
 *
 * DESIGN. A group is an MPI_Comm_split of a parent scope, owned by the het_comm, with
 * MPI_ERRORS_RETURN. Its scope id is HET_COMM_FIRST_GROUP + its index on this rank, so ids are
 * local handles: they agree across ranks that made the same sequence of splits, which is the
 * usual case, but nothing relies on that. A group's span (distinct nodes among its members)
 * is computed once at the split by an all-gather of the members' node ids, and gives the
 * emulated delay of every operation on it, as n_nodes does for WORLD.
 *
 * Failure without hangs: MPI_Comm_split is collective over the parent, so a rank that cannot
 * take a group (no slot left, no memory for the all-gather) still calls it, with
 * MPI_UNDEFINED: the others get a group without it and go on; it returns the error. */
#include <stdlib.h>

#include "comm/internal.h"

/* The group behind scope s, or NULL. */
static const het_comm_group *group_of(const het_comm *c, het_comm_scope s) {
    int i = (int)s - HET_COMM_FIRST_GROUP;
    if (i < 0 || i >= c->n_groups) return NULL;
    return &c->group[i];
}

MPI_Comm het_comm_mpi(const het_comm *c, het_comm_scope s) {
    if (!c) return MPI_COMM_NULL;
    switch (s) {
    case HET_COMM_NONE: return MPI_COMM_NULL;
    case HET_COMM_WORLD: return c->topo->world;
    case HET_COMM_NODE: return c->topo->node;
    case HET_COMM_CROSS: return c->topo->cross;
    default: break;
    }
    const het_comm_group *g = group_of(c, s);
    return g ? g->comm : MPI_COMM_NULL;
}

int het_comm_span(const het_comm *c, het_comm_scope s) {
    if (!c) return 1;
    switch (s) {
    case HET_COMM_WORLD: return c->topo->n_nodes;
    case HET_COMM_NODE: return 1;
    case HET_COMM_CROSS: {
        /* one member per node; on uneven nodes some cross groups miss the last nodes */
        int n = 1;
        if (c->topo->cross != MPI_COMM_NULL) MPI_Comm_size(c->topo->cross, &n);
        return n;
    }
    default: break;
    }
    const het_comm_group *g = group_of(c, s);
    return g ? g->span : 1;
}

void het_comm_costs(het_netem_cost *k, het_netem_cost *local, const int *node, int p) {
    for (int a = 0; a < HET_AR_N; a++) {
        k[a] = het_netem_allreduce_cost(node, p, (het_ar_algo)a);
        local[a] = het_netem_allreduce_cost_local(node, p, (het_ar_algo)a);
    }
}

/* The node-local part of an all-reduce on scope s (virtual clock only). */
static double local_model(const het_comm *c, het_comm_scope s, size_t bytes, int blocking) {
    if (!het_clock_virtual()) return 0.0;
    int p = het_comm_scope_size(c, s);
    if (p <= 1) return 0.0;
    het_ar_algo a = het_netem_allreduce_algo(c->ne, p, bytes, blocking);
    const het_netem_cost *k = NULL;
    if (s == HET_COMM_WORLD) k = c->world_local;
    else if (s == HET_COMM_NODE) k = c->node_local;
    else if (s == HET_COMM_CROSS) return 0.0; /* one rank per node */
    else if (group_of(c, s)) k = group_of(c, s)->local;
    return k ? het_netem_local_cost_s(c->ne, k[a], bytes) : 0.0;
}

enum { BCAST_KNOMIAL_RADIX = 4 }; /* Open MPI's coll_tuned_bcast_knomial_radix default */

double het_comm_bcast_model(const het_comm *c, het_comm_scope s, size_t bytes, int root) {
    int span = het_comm_span(c, s), p = het_comm_scope_size(c, s);
    het_bc_algo a = s == HET_COMM_WORLD && span > 1 && c->world_node
                        ? het_netem_bcast_algo(c->ne, p, bytes, het_stall_blocking_model())
                        : HET_BC_N;
    const int *node = c->world_node, local = het_clock_virtual();
    double t = -1.0; /* its messages over the ranks, where the model has the algorithm */
    if (a == HET_BC_BINOMIAL && het_netem_bcast_ompi_tree(c->ne)) {
        t = het_netem_bcast_ompi_binomial_s(c->ne, node, p, root, bytes, local);
    } else if (a == HET_BC_BINOMIAL || a == HET_BC_LINEAR || a == HET_BC_KNOMIAL) {
        int radix = a == HET_BC_BINOMIAL ? 2 : a == HET_BC_LINEAR ? p : BCAST_KNOMIAL_RADIX;
        t = het_netem_bcast_knomial_s(c->ne, node, p, root, bytes, local, radix);
    } else if (a == HET_BC_CHAIN || a == HET_BC_PIPELINE) { /* unsegmented: fixed rules */
        t = het_netem_bcast_chain_s(c->ne, node, p, root, bytes, local, 0);
    } else if (a == HET_BC_SCATTER_ALLGATHER) {
        t = het_netem_bcast_scatter_allgather_s(c->ne, node, p, root, bytes, local);
    } else if (a == HET_BC_NBC_BINOMIAL) {
        t = het_netem_bcast_nbc_binomial_s(c->ne, node, p, root, bytes, local);
    } else if (a == HET_BC_BINTREE) {
        t = het_netem_bcast_bintree_s(c->ne, node, p, root, bytes, local);
    } else if (a == HET_BC_SPLIT_BINTREE) {
        t = het_netem_bcast_split_bintree_s(c->ne, node, p, root, bytes, local, 0);
    }
    if (t >= 0.0) return t;
    t = het_netem_bcast_s(c->ne, bytes, span); /* another scope, or out of memory */
    if (het_clock_virtual() && p > span) /* ranks sharing nodes: the node link's rounds too */
        t += het_netem_local_bcast_s(c->ne, bytes, (p + span - 1) / span);
    return t;
}

static double cross_model_on(const het_comm *c, het_netem ne, het_comm_scope s, size_t bytes,
                             int blocking) {
    int span = het_comm_span(c, s);
    if (span <= 1) return 0.0;
    int p = het_comm_scope_size(c, s);
    het_ar_algo a = het_netem_allreduce_algo(ne, p, bytes, blocking);
    const het_netem_cost *k = NULL;
    if (s == HET_COMM_WORLD) k = c->world_cost;
    else if (s != HET_COMM_CROSS && group_of(c, s)) k = group_of(c, s)->cost;
    if (!k || !(k[HET_AR_RING].steps > 0.0)) /* CROSS (one rank per node), or not gathered */
        return het_netem_nodes_allreduce_s(ne, bytes, span, blocking);
    return het_netem_cost_s(ne, k[a], bytes);
}

static double cross_model(const het_comm *c, het_comm_scope s, size_t bytes, int blocking) {
    return cross_model_on(c, c->ne, s, bytes, blocking);
}

/* The scope's ranks on this rank's node. */
static int on_node(const het_comm *c, het_comm_scope s) {
    if (s == HET_COMM_WORLD || s == HET_COMM_NODE) return c->topo->local_size;
    const het_comm_group *g = s == HET_COMM_CROSS ? NULL : group_of(c, s);
    return g && g->on_node > 0 ? g->on_node : 1;
}

void het_comm_link_model(const het_comm *c, het_comm_scope s, size_t bytes, int kind,
                         double *wire, double *share) {
    *wire = 0.0, *share = 0.0;
    if (!het_clock_virtual() || het_comm_span(c, s) <= 1) return;
    het_netem ne = c->ne;
    ne.lat_s = 0.0; /* the wire time alone */
    *wire = kind == HET_LINK_BCAST ? het_netem_bcast_s(ne, bytes, het_comm_span(c, s))
                                   : cross_model_on(c, ne, s, bytes, kind == HET_LINK_BLOCKING);
    *share = 1.0 / on_node(c, s);
}

double het_comm_allreduce_model(const het_comm *c, het_comm_scope s, size_t bytes, int blocking) {
    return cross_model(c, s, bytes, blocking) + local_model(c, s, bytes, blocking);
}

int het_comm_scope_size(const het_comm *c, het_comm_scope s) {
    if (!c) return het_error_set(HET_EINVAL, "scope size: NULL comm");
    if (s == HET_COMM_NONE) return 0;
    MPI_Comm m = het_comm_mpi(c, s);
    if (m == MPI_COMM_NULL) return het_error_set(HET_EINVAL, "scope size: bad scope %d", (int)s);
    int n = 0;
    MPI_Comm_size(m, &n);
    return n;
}

int het_comm_scope_rank(const het_comm *c, het_comm_scope s) {
    if (!c) return het_error_set(HET_EINVAL, "scope rank: NULL comm");
    MPI_Comm m = het_comm_mpi(c, s);
    if (m == MPI_COMM_NULL)
        return het_error_set(HET_EINVAL, "scope rank: %s", s == HET_COMM_NONE ? "this rank is "
                             "in no group (HET_COMM_NONE)" : "bad scope");
    int r = 0;
    MPI_Comm_rank(m, &r);
    return r;
}

/* Distinct values among n ints (n small: the members of one group); sorts v. */
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int count_distinct(int *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_int);
    int d = n > 0;
    for (int i = 1; i < n; i++) d += v[i] != v[i - 1];
    return d;
}

int het_comm_split(het_comm *c, het_comm_scope parent, int color, int key,
                   het_comm_scope *out) {
    if (!out) return het_error_set(HET_EINVAL, "comm split: NULL output");
    *out = HET_COMM_NONE;
    if (!c) return het_error_set(HET_EINVAL, "comm split: NULL comm");
    MPI_Comm pc = het_comm_mpi(c, parent);
    if (pc == MPI_COMM_NULL)
        return het_error_set(HET_EINVAL, "comm split: bad parent scope %d", (int)parent);
    int psize = 0;
    MPI_Comm_size(pc, &psize);
    int rc = HET_OK, *nodes = NULL;
    if (color >= 0 && c->n_groups >= HET_COMM_MAX_GROUPS)
        rc = het_error_set(HET_EINVAL, "comm split: this comm already holds %d groups, the "
                           "most it can (HET_COMM_MAX_GROUPS)", HET_COMM_MAX_GROUPS);
    if (color >= 0 && rc == HET_OK && !(nodes = malloc((size_t)psize * sizeof *nodes)))
        rc = het_error_set(HET_ENOMEM, "comm split: out of memory for %d node ids", psize);
    MPI_Comm nc = MPI_COMM_NULL;
    int err = MPI_Comm_split(pc, color >= 0 && rc == HET_OK ? color : MPI_UNDEFINED, key, &nc);
    if (rc != HET_OK) return rc; /* nc is MPI_COMM_NULL: we passed MPI_UNDEFINED */
    if (err != MPI_SUCCESS) {
        free(nodes);
        return het_comm_mpi_error(err, "comm split: MPI_Comm_split");
    }
    if (nc == MPI_COMM_NULL) return HET_OK; /* color < 0 */
    MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    int gsize = 0;
    MPI_Comm_size(nc, &gsize);
    err = MPI_Allgather(&c->topo->node_id, 1, MPI_INT, nodes, 1, MPI_INT, nc);
    if (err != MPI_SUCCESS) {
        free(nodes);
        MPI_Comm_free(&nc);
        return het_comm_mpi_error(err, "comm split: MPI_Allgather(node ids)");
    }
    het_comm_group *g = &c->group[c->n_groups];
    g->comm = nc;
    het_comm_costs(g->cost, g->local, nodes, gsize); /* before count_distinct sorts them */
    g->on_node = 0;
    for (int i = 0; i < gsize; i++) g->on_node += nodes[i] == c->topo->node_id;
    g->span = count_distinct(nodes, gsize);
    free(nodes);
    *out = (het_comm_scope)(HET_COMM_FIRST_GROUP + c->n_groups);
    c->n_groups++;
    return HET_OK;
}

void het_comm_groups_free(het_comm *c) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    for (int i = 0; i < c->n_groups; i++)
        if (!finalized && c->group[i].comm != MPI_COMM_NULL) MPI_Comm_free(&c->group[i].comm);
    c->n_groups = 0;
}
