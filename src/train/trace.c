/* Writing the Chrome trace (the JSON format Perfetto and chrome://tracing read):
 *   {"traceEvents":[{"name":"forward+backward","ph":"X","pid":0,"tid":0,"ts":12.5,"dur":830.0,
 *                    "args":{"i":3}}, ...],"displayTimeUnit":"ms"}
 * pid = rank, tid 0 = the compute thread, tid 1 = communication (bucket all-reduces), ts and
 * dur in microseconds since the trace started (a barrier at creation aligns the ranks).
 * Recording is core/trace.c; here every rank formats its own events and het_trace_write
 * gathers the texts to rank 0 (comm's bookkeeping gather of bytes: watched by the stall
 * inspector, charged to no clock), which writes the file through a
 * temporary file and a rename, so a reader never sees half a trace. Process names ("rank 0")
 * are metadata events ("ph":"M"). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/emul.h"
#include "core/outfile.h"
#include "train/internal.h"

int het_trace_create_world(het_trace **out, het_comm *comm) {
    int st = het_trace_create(out);
    if (st || !comm) return st;
    if ((st = het_comm_barrier_aside(comm, HET_COMM_WORLD))) return st;
    het_trace_set_origin(*out, het_lane_now(het_comm_lane(comm)));
    return HET_OK;
}

int het_trace_write(het_trace *t, het_comm *comm, const char *path) {
    int P = 1, rank = 0;
    MPI_Comm world = comm ? het_comm_mpi(comm, HET_COMM_WORLD) : MPI_COMM_NULL;
    if (world != MPI_COMM_NULL) {
        MPI_Comm_rank(world, &rank);
        MPI_Comm_size(world, &P);
    }
    char *mine = NULL, *all = NULL;
    size_t len = 0;
    int64_t cnt[2] = {0, 0}; /* events, dropped */
    int st = het_trace_format(t, rank, &mine, &len, &cnt[0], &cnt[1]);
    int *counts = NULL, *displs = NULL;
    long long total_len = (long long)len;
    if (P > 1) {
        /* a rank that failed to format sends nothing; rank 0 reports the shortfall */
        int n = !st && len <= (size_t)INT_MAX ? (int)len : 0;
        if (rank == 0) {
            counts = calloc((size_t)P, sizeof *counts);
            displs = calloc((size_t)P, sizeof *displs);
        }
        int rc = het_comm_gather_aside(comm, HET_COMM_WORLD, &n, counts, sizeof n, 0);
        /* events, dropped, bytes in all: exact as doubles below 2^53 */
        double c[3] = {(double)cnt[0], (double)cnt[1], (double)n};
        if (!rc) rc = het_comm_allreduce_aside(comm, HET_COMM_WORLD, c, 3, HET_T_DOUBLE,
                                               HET_OP_SUM);
        if (rc) { /* MPI failed (a lost rank): no more collectives */
            free(mine), free(counts), free(displs);
            return rc;
        }
        cnt[0] = (int64_t)c[0];
        cnt[1] = (int64_t)c[1];
        const int too_big = c[2] > (double)INT_MAX;
        if (too_big) { /* one gather cannot carry it: every rank sends nothing */
            n = 0;
            if (rank == 0)
                st = het_error_set(HET_EINVAL, "%s: the trace holds %.0f bytes of events, more "
                                   "than one gather carries (2 GiB): trace fewer epochs", path,
                                   c[2]);
        }
        if (rank == 0 && counts && displs) {
            total_len = 0;
            for (int q = 0; q < P; q++) {
                if (too_big) counts[q] = 0;
                displs[q] = (int)total_len;
                total_len += counts[q];
            }
            all = malloc((size_t)total_len + 1);
        }
        rc = het_comm_gatherv_aside(comm, HET_COMM_WORLD, mine, (size_t)n, all, counts, displs,
                                    0);
        free(mine);
        mine = NULL;
        if (rc) st = rc;
        if (rank != 0 || rc) goto done;
        if (!all || !counts || !displs) {
            st = het_error_set(HET_ENOMEM, "out of memory gathering the trace");
            goto done;
        }
        all[total_len] = '\0';
    } else {
        all = mine;
        mine = NULL;
    }
    if (st) goto done;
    het_outfile o;
    if ((st = het_outfile_open(&o, path, "trace"))) goto done;
    FILE *f = o.f;
    fputs("{\"traceEvents\":[", f);
    for (int q = 0; q < P; q++)
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"rank %d\"}}", q ? "," : "", q, q);
    fwrite(all, 1, (size_t)total_len, f);
    fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"events\":%lld,\"dropped\":%lld}}\n",
            (long long)cnt[0], (long long)cnt[1]);
    st = het_outfile_commit(&o);
done:
    free(counts);
    free(displs);
    free(all);
    free(mine);
    return st;
}
