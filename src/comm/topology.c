/* Topology: the world, node-local and cross-node communicators of one rank.
 *
 * DESIGN. `node` groups the ranks of one node: the real shared-memory node
 * (MPI_Comm_split_type SHARED) or, with ranks_per_node > 0, an emulated node of that many
 * consecutive world ranks, or (het_topo_init_nodes) an emulated node of the ranks that pass the
 * same color, for any placement (interleaved: color = rank % 2). Nodes are numbered by their lowest world rank, so node_id and
 * n_nodes agree on every rank whatever the placement. `cross` joins the ranks that have the
 * same local rank, one per node, ordered by node. All three communicators are our own (the
 * caller's world is duplicated) and return errors instead of aborting (MPI_ERRORS_RETURN).
 * Whether the nodes are emulated is remembered in the node communicator's MPI name, so that
 * het_topo_describe needs no field beyond the public struct. */
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"

#define NODE_NAME_EMULATED "hetrain-node-emulated"
#define NODE_NAME_SHARED "hetrain-node-shared"

static int mpi_fail(int err, const char *what) { return het_comm_mpi_error(err, what); }

static void comm_release(MPI_Comm *c) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    *c = MPI_COMM_NULL;
}

void het_topo_free(het_topo *t) {
    if (!t) return;
    comm_release(&t->cross);
    comm_release(&t->node);
    comm_release(&t->world);
}

/* node_id, n_nodes and uniform from every rank's node leader (lowest world rank of its node). */
static int number_nodes(het_topo *t) {
    int leader = t->rank, err;
    err = MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, t->node);
    if (err != MPI_SUCCESS) return mpi_fail(err, "topology: MPI_Allreduce(node leader)");
    int *leaders = malloc((size_t)t->size * sizeof *leaders);
    int *count = calloc((size_t)t->size, sizeof *count);
    if (!leaders || !count) {
        free(leaders);
        free(count);
        return het_error_set(HET_ENOMEM, "topology: out of memory for %d ranks", t->size);
    }
    err = MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, t->world);
    if (err != MPI_SUCCESS) {
        free(leaders);
        free(count);
        return mpi_fail(err, "topology: MPI_Allgather(node leaders)");
    }
    for (int r = 0; r < t->size; r++) count[leaders[r]]++;
    t->n_nodes = 0;
    t->node_id = 0;
    t->uniform = 1; /* every node the size of the first (node of rank 0): same on all ranks */
    for (int r = 0; r < t->size; r++) {
        if (!count[r]) continue;
        if (r < leader) t->node_id++;
        if (count[r] != count[leaders[0]]) t->uniform = 0;
        t->n_nodes++;
    }
    free(leaders);
    free(count);
    return HET_OK;
}

/* Builds the topology; color >= 0: emulated nodes by color, -1: the real nodes. */
static int topo_build(het_topo *t, MPI_Comm world, int color) {
    t->world = t->node = t->cross = MPI_COMM_NULL;
    int err = MPI_Comm_dup(world, &t->world);
    if (err != MPI_SUCCESS) {
        t->world = MPI_COMM_NULL;
        return mpi_fail(err, "topology: MPI_Comm_dup(world)");
    }
    MPI_Comm_set_errhandler(t->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(t->world, &t->rank);
    MPI_Comm_size(t->world, &t->size);
    if (color >= 0)
        err = MPI_Comm_split(t->world, color, t->rank, &t->node);
    else
        err = MPI_Comm_split_type(t->world, MPI_COMM_TYPE_SHARED, t->rank, MPI_INFO_NULL,
                                  &t->node);
    if (err != MPI_SUCCESS) {
        t->node = MPI_COMM_NULL;
        het_topo_free(t);
        return mpi_fail(err, "topology: splitting nodes");
    }
    MPI_Comm_set_errhandler(t->node, MPI_ERRORS_RETURN);
    MPI_Comm_set_name(t->node, color >= 0 ? NODE_NAME_EMULATED : NODE_NAME_SHARED);
    MPI_Comm_rank(t->node, &t->local_rank);
    MPI_Comm_size(t->node, &t->local_size);
    int rc = number_nodes(t);
    if (rc != HET_OK) {
        het_topo_free(t);
        return rc;
    }
    err = MPI_Comm_split(t->world, t->local_rank, t->node_id, &t->cross);
    if (err != MPI_SUCCESS) {
        t->cross = MPI_COMM_NULL;
        het_topo_free(t);
        return mpi_fail(err, "topology: splitting cross-node groups");
    }
    MPI_Comm_set_errhandler(t->cross, MPI_ERRORS_RETURN);
    return HET_OK;
}

int het_topo_init(het_topo *t, MPI_Comm world, int ranks_per_node) {
    if (!t) return het_error_set(HET_EINVAL, "topology: NULL output");
    t->world = t->node = t->cross = MPI_COMM_NULL;
    if (ranks_per_node < 0)
        return het_error_set(HET_EINVAL, "topology: ranks per node %d: must be >= 0 (0 = real "
                             "nodes)", ranks_per_node);
    int rank = 0;
    if (ranks_per_node > 0 && MPI_Comm_rank(world, &rank) != MPI_SUCCESS)
        return het_error_set(HET_EINVAL, "topology: not a valid communicator");
    return topo_build(t, world, ranks_per_node > 0 ? rank / ranks_per_node : -1);
}

int het_topo_init_nodes(het_topo *t, MPI_Comm world, int node_color) {
    if (!t) return het_error_set(HET_EINVAL, "topology: NULL output");
    t->world = t->node = t->cross = MPI_COMM_NULL;
    /* every rank builds (a collective must not be skipped by one rank); a bad color is
     * reported after, by the ranks that passed it */
    int rc = topo_build(t, world, node_color >= 0 ? node_color : 0);
    if (rc == HET_OK && node_color < 0) {
        het_topo_free(t);
        return het_error_set(HET_EINVAL, "topology: node color %d: must be >= 0", node_color);
    }
    return rc;
}

void het_topo_describe(const het_topo *t, char *buf, size_t n) {
    if (!buf || n == 0) return;
    if (!t || t->world == MPI_COMM_NULL) {
        snprintf(buf, n, "no topology");
        return;
    }
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    if (t->node != MPI_COMM_NULL) MPI_Comm_get_name(t->node, name, &len);
    const char *kind = strcmp(name, NODE_NAME_EMULATED) == 0 ? "emulated" : "shared memory";
    if (t->uniform)
        snprintf(buf, n, "%d rank%s on %d node%s (%d rank%s per node, %s)", t->size,
                 t->size == 1 ? "" : "s", t->n_nodes, t->n_nodes == 1 ? "" : "s",
                 t->local_size, t->local_size == 1 ? "" : "s", kind);
    else
        snprintf(buf, n, "%d ranks on %d nodes (uneven; %d on this node, %s)", t->size,
                 t->n_nodes, t->local_size, kind);
}
