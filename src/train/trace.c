/* Writing the Chrome trace (the JSON format Perfetto and chrome://tracing read):
 *   {"traceEvents":[{"name":"forward+backward","ph":"X","pid":0,"tid":0,"ts":12.5,"dur":830.0,
 *                    "args":{"i":3}}, ...],"displayTimeUnit":"ms"}
 * pid = rank, tid 0 = the compute thread, tid 1 = communication (bucket all-reduces), ts and
 * dur in microseconds since the trace started (a barrier at creation aligns the ranks).
 * Recording is core/trace.c; here every rank formats its own events and het_trace_write
 * gathers the texts to rank 0 (MPI_Gatherv of bytes), which writes the file through a
 * temporary file and a rename, so a reader never sees half a trace. Process names ("rank 0")
 * are metadata events ("ph":"M"). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/emul.h"
#include "core/outfile.h"
#include "train/internal.h"

int het_trace_create_world(het_trace **out, MPI_Comm world) {
    int st = het_trace_create(out);
    if (st || world == MPI_COMM_NULL) return st;
    MPI_Barrier(world);
    het_trace_set_origin(*out, het_clock_now());
    return HET_OK;
}

int het_trace_write(het_trace *t, MPI_Comm world, const char *path) {
    int P = 1, rank = 0;
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
        MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, world);
        long long c[2] = {cnt[0], cnt[1]};
        MPI_Reduce(rank == 0 ? MPI_IN_PLACE : c, c, 2, MPI_LONG_LONG, MPI_SUM, 0, world);
        cnt[0] = c[0];
        cnt[1] = c[1];
        if (rank == 0 && counts && displs) {
            total_len = 0;
            for (int q = 0; q < P; q++) {
                displs[q] = (int)total_len;
                total_len += counts[q];
            }
            if (total_len > INT_MAX) total_len = 0; /* refused below */
            all = malloc((size_t)total_len + 1);
        }
        MPI_Gatherv(mine, n, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, world);
        free(mine);
        mine = NULL;
        if (rank != 0) return st;
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
