/* Chrome trace events (the JSON format Perfetto and chrome://tracing read):
 *   {"traceEvents":[{"name":"forward+backward","ph":"X","pid":0,"tid":0,"ts":12.5,"dur":830.0,
 *                    "args":{"i":3}}, ...],"displayTimeUnit":"ms"}
 * pid = rank, tid 0 = the compute thread, tid 1 = communication (bucket all-reduces), ts and
 * dur in microseconds since the trace started (a barrier at creation aligns the ranks).
 * Each rank buffers its events (up to HET_TRACE_MAX; later ones are counted and dropped);
 * het_trace_write gathers them to rank 0 (MPI_Gatherv of bytes), which writes the file
 * through a temporary file and a rename, so a reader never sees half a trace. Process names
 * ("rank 0") are metadata events ("ph":"M"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "train/internal.h"

#define HET_TRACE_MAX (1 << 20)

typedef struct ev {
    double t0, t1; /* seconds since the trace's origin */
    int32_t kind, arg;
} ev;

struct het_trace {
    MPI_Comm world;
    int rank, size;
    double origin;
    ev *ev;
    int n, cap;
    int64_t dropped;
};

static const struct { const char *name; int tid; } kinds[HET_EV_N] = {
    [HET_EV_FWDBWD] = {"forward+backward", 0}, [HET_EV_OPTIM] = {"optimizer", 0},
    [HET_EV_SLOWDOWN] = {"slowdown (emulated)", 0}, [HET_EV_WAIT] = {"wait for all-reduce", 0},
    [HET_EV_BUCKET] = {"bucket all-reduce", 1}, [HET_EV_ALLREDUCE] = {"flat all-reduce", 1},
    [HET_EV_EVAL] = {"evaluation", 0}, [HET_EV_CKPT] = {"checkpoint", 0},
    [HET_EV_STEP] = {"forward+backward+optimizer", 0},
};

int het_trace_create(het_trace **out, MPI_Comm world) {
    *out = NULL;
    het_trace *t = calloc(1, sizeof *t);
    if (!t) return het_error_set(HET_ENOMEM, "out of memory for the trace");
    t->world = world;
    t->size = 1;
    if (world != MPI_COMM_NULL) {
        MPI_Comm_rank(world, &t->rank);
        MPI_Comm_size(world, &t->size);
        MPI_Barrier(world);
    }
    t->origin = het_now();
    *out = t;
    return HET_OK;
}

void het_trace_free(het_trace *t) {
    if (!t) return;
    free(t->ev);
    free(t);
}

void het_trace_add(het_trace *t, het_event e, int arg, double t0, double t1) {
    if (!t || e < 0 || e >= HET_EV_N) return;
    if (t->n == t->cap) {
        if (t->cap >= HET_TRACE_MAX) {
            t->dropped++;
            return;
        }
        int cap = t->cap ? 2 * t->cap : 4096;
        ev *p = realloc(t->ev, (size_t)cap * sizeof *p);
        if (!p) {
            t->dropped++;
            return;
        }
        t->ev = p;
        t->cap = cap;
    }
    t->ev[t->n++] = (ev){t0 - t->origin, t1 - t->origin, (int32_t)e, (int32_t)arg};
}

static void write_events(FILE *f, const ev *e, int n, int rank, int *first) {
    for (int i = 0; i < n; i++) {
        int k = e[i].kind >= 0 && e[i].kind < HET_EV_N ? e[i].kind : 0;
        double dur = (e[i].t1 - e[i].t0) * 1e6;
        fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
                "\"dur\":%.3f,\"args\":{\"i\":%d}}", *first ? "" : ",", kinds[k].name, rank,
                kinds[k].tid, e[i].t0 * 1e6, dur > 0 ? dur : 0.0, (int)e[i].arg);
        *first = 0;
    }
}

int het_trace_write(het_trace *t, const char *path) {
    int P = t->size, rank = t->rank;
    int *counts = NULL, *displs = NULL;
    ev *all = NULL;
    int total = t->n, st = HET_OK;
    int64_t dropped = t->dropped;
    if (P > 1) {
        int mine = t->n * (int)sizeof(ev);
        if (rank == 0) {
            counts = calloc((size_t)P, sizeof *counts);
            displs = calloc((size_t)P, sizeof *displs);
        }
        MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, t->world);
        long long drop = (long long)t->dropped;
        MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &drop, &drop, 1, MPI_LONG_LONG, MPI_SUM, 0,
                   t->world);
        dropped = drop;
        if (rank == 0) {
            long long bytes = 0;
            for (int q = 0; q < P; q++) {
                displs[q] = (int)bytes;
                bytes += counts[q];
            }
            total = (int)(bytes / (long long)sizeof(ev));
            all = malloc(bytes > 0 ? (size_t)bytes : 1);
        }
        MPI_Gatherv(t->ev, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, t->world);
        if (rank != 0) return HET_OK;
        if (!all || !counts || !displs) {
            st = het_error_set(HET_ENOMEM, "out of memory gathering the trace");
            goto done;
        }
    }
    char tmp[HET_PATH_LEN + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        st = het_error_set(HET_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    fputs("{\"traceEvents\":[", f);
    int first = 1;
    for (int q = 0; q < P; q++) {
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"rank %d\"}}", first ? "" : ",", q, q);
        first = 0;
    }
    if (P > 1)
        for (int q = 0; q < P; q++)
            write_events(f, all + displs[q] / (int)sizeof(ev), counts[q] / (int)sizeof(ev), q,
                         &first);
    else
        write_events(f, t->ev, t->n, 0, &first);
    fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"events\":%d,\"dropped\":%lld}}\n",
            total, (long long)dropped);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        st = het_error_set(HET_EIO, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
    }
done:
    free(counts);
    free(displs);
    free(all);
    return st;
}
