/* bench_allreduce: hetrain's all-reduce paths against plain MPI_Allreduce of the same bytes.
 *
 * DESIGN (after the OSU micro-benchmarks). For each size from 4 KiB to 16 MiB (powers of 4)
 * three methods reduce the same float buffer in place on the world communicator:
 *   plain     MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM): the ceiling
 *   flat      het_comm_allreduce_sum (chunked; one chunk below 64 MiB)
 *   bucketed  het_buckets: the buffer cut into ranges of --range-kib (like a model's layers),
 *             grouped into buckets of --bucket-kib; every iteration marks the ranges ready in
 *             reverse order (as backward does), then waits
 * Untimed warm-up repetitions, then --reps timed repetitions; a repetition runs each method in
 * turn (so that drift of a shared machine hits all three alike): an MPI_Barrier, then `iters`
 * operations timed with MPI_Wtime (iters = 4 MiB / size, at least
 * 1, so that small sizes are not below the clock's resolution), giving seconds per operation;
 * the repetition's time is the max over ranks. The table reports min / median / max over
 * repetitions, and bandwidth = bytes / median time with its ratio to plain. The buffer holds
 * zeros, so repeated in-place sums never overflow or turn denormal. The emulated network is
 * off: this measures the framework's overhead over MPI. It also reports whether the bucketed
 * sum equals the flat one bitwise on random data.
 *
 * Run with one rank per core: mpirun --oversubscribe -np 2 BUILD/bench_allreduce
 * Usage: bench_allreduce [--reps 15] [--warmup 3] [--range-kib 256] [--bucket-kib 1024]
 *                        [--max-kib 16384] [--stall-warn 60]
 * --stall-warn as hetrain's: flat and bucketed run the non-blocking all-reduce and the poll
 * loop of the stall inspector (src/comm/stall.c); 0 = the blocking MPI_Allreduce.
 * A benchmark prints figures; it never fails on time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/comm.h"

typedef struct opts {
    int reps, warmup;
    double stall_warn;
    size_t range_kib, bucket_kib, max_kib;
} opts;

enum { M_PLAIN, M_FLAT, M_BUCKETED, N_METHODS };
static const char *k_names[N_METHODS] = {"plain", "flat", "bucketed"};

static int g_rank, g_size;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Range offsets of `range` elements each covering n elements; returns the count. */
static int make_ranges(size_t *off, size_t n, size_t range) {
    int k = 0;
    for (size_t o = 0; o < n || k == 0; o += range) off[k++] = o;
    return k;
}

static int run_once(int m, het_comm *c, het_buckets *bk, float *buf, size_t n, const size_t *off,
                    int n_ranges) {
    switch (m) {
    case M_PLAIN:
        return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                             het_comm_mpi(c, HET_COMM_WORLD)) == MPI_SUCCESS ? HET_OK : HET_EMPI;
    case M_FLAT: return het_comm_allreduce_sum(c, HET_COMM_WORLD, buf, n);
    default:
        for (int i = n_ranges - 1; i >= 0; i--) {
            size_t end = i + 1 < n_ranges ? off[i + 1] : n;
            int rc = het_buckets_ready(bk, off[i], end - off[i]);
            if (rc != HET_OK) return rc;
        }
        return het_buckets_wait(bk);
    }
}

/* Fills t[m * reps + r] with the seconds per operation of method m in timed repetition r
 * (max over ranks), each sorted. A repetition runs every method in turn, so that the drift of
 * a shared machine hits the three alike. */
static int time_methods(const opts *o, het_comm *c, het_buckets *bk, float *buf, size_t n,
                        const size_t *off, int n_ranges, double *t) {
    size_t bytes = n * sizeof(float);
    int iters = bytes >= ((size_t)4 << 20) ? 1 : (int)(((size_t)4 << 20) / bytes);
    MPI_Comm world = het_comm_mpi(c, HET_COMM_WORLD);
    for (int r = -o->warmup; r < o->reps; r++)
        for (int m = 0; m < N_METHODS; m++) {
            MPI_Barrier(world);
            double t0 = MPI_Wtime();
            for (int k = 0; k < iters; k++) {
                int rc = run_once(m, c, bk, buf, n, off, n_ranges);
                if (rc != HET_OK) {
                    het_error_set(rc, "%s: %s", k_names[m], het_error_msg());
                    return rc;
                }
            }
            double dt = (MPI_Wtime() - t0) / iters;
            MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, world);
            if (r >= 0) t[m * o->reps + r] = dt;
        }
    for (int m = 0; m < N_METHODS; m++)
        qsort(t + m * o->reps, (size_t)o->reps, sizeof *t, cmp_double);
    return HET_OK;
}

/* 1 when the bucketed sum of random data equals the flat one bitwise on every rank. */
static int bitwise_same(het_comm *c, het_buckets *bk, float *buf, float *ref, size_t n,
                        const size_t *off, int n_ranges) {
    het_rng rng;
    het_rng_seed2(&rng, 7, (uint64_t)g_rank);
    for (size_t i = 0; i < n; i++) buf[i] = ref[i] = het_rng_normal(&rng);
    int same = het_comm_allreduce_sum(c, HET_COMM_WORLD, ref, n) == HET_OK &&
               run_once(M_BUCKETED, c, bk, buf, n, off, n_ranges) == HET_OK &&
               memcmp(buf, ref, n * sizeof *buf) == 0;
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, het_comm_mpi(c, HET_COMM_WORLD));
    memset(buf, 0, n * sizeof *buf);
    return same;
}

static int parse(int argc, char **argv, opts *o) {
    o->reps = 15;
    o->warmup = 3;
    o->range_kib = 256;
    o->bucket_kib = 1024;
    o->max_kib = 16384;
    o->stall_warn = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v = i + 1 < argc ? atol(argv[i + 1]) : -1;
        if (v < 0 || (v == 0 && strcmp(a, "--warmup") != 0 && strcmp(a, "--stall-warn") != 0))
            return -1;
        if (strcmp(a, "--reps") == 0) o->reps = (int)v;
        else if (strcmp(a, "--warmup") == 0) o->warmup = (int)v;
        else if (strcmp(a, "--range-kib") == 0) o->range_kib = (size_t)v;
        else if (strcmp(a, "--bucket-kib") == 0) o->bucket_kib = (size_t)v;
        else if (strcmp(a, "--max-kib") == 0) o->max_kib = (size_t)v;
        else if (strcmp(a, "--stall-warn") == 0) o->stall_warn = (double)v;
        else return -1;
        i++;
    }
    return o->reps > 0 && o->reps < 100000 ? 0 : -1;
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0}); /* hetrain needs FUNNELED */
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    opts o;
    if (parse(argc, argv, &o) != 0) {
        if (g_rank == 0)
            fprintf(stderr, "usage: bench_allreduce [--reps 15] [--warmup 3] [--range-kib 256] "
                            "[--bucket-kib 1024] [--max-kib 16384] [--stall-warn 60]\n");
        MPI_Finalize();
        return 2;
    }
    het_topo topo;
    het_comm *c = NULL;
    het_netem off_ne = {0};
    if (het_topo_init(&topo, MPI_COMM_WORLD, 0) != HET_OK ||
        het_comm_create(&c, &topo, off_ne) != HET_OK ||
        het_stall_start(MPI_COMM_WORLD, o.stall_warn, 0.0) != HET_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", het_error_msg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char desc[128];
    het_topo_describe(&topo, desc, sizeof desc);
    size_t max_n = o.max_kib * 1024 / sizeof(float);
    size_t range_n = o.range_kib * 1024 / sizeof(float);
    float *buf = calloc(max_n, sizeof *buf), *ref = calloc(max_n, sizeof *ref);
    size_t *off = malloc((max_n / range_n + 2) * sizeof *off);
    double *t = malloc((size_t)o.reps * N_METHODS * sizeof *t);
    if (!buf || !ref || !off || !t) MPI_Abort(MPI_COMM_WORLD, 1);
    if (g_rank == 0) {
        printf("bench_allreduce: %s; %d timed reps (+%d warm-up), max over ranks per rep; "
               "bucketed: ranges of %zu KiB, buckets of %zu KiB, ready() in reverse order; "
               "--stall-warn %g (%s)\n\n", desc, o.reps, o.warmup, o.range_kib, o.bucket_kib,
               o.stall_warn, het_stall_on() ? "non-blocking + poll loop" : "blocking calls");
        printf("| size | plain µs min/med/max | flat µs min/med/max | bucketed µs min/med/max "
               "| buckets | plain GB/s | flat GB/s (vs plain) | bucketed GB/s (vs plain) "
               "| bucketed == flat |\n|---|---|---|---|---|---|---|---|---|\n");
    }
    int goal_flat = 1, goal_bk = 1;
    for (size_t kib = 4; kib <= o.max_kib; kib *= 4) {
        size_t n = kib * 1024 / sizeof(float);
        int n_ranges = make_ranges(off, n, range_n);
        het_buckets *bk = NULL;
        if (het_buckets_create(&bk, c, HET_COMM_WORLD, buf, n, off, n_ranges,
                               o.bucket_kib * 1024, NULL, 0) != HET_OK) {
            fprintf(stderr, "bench_allreduce: %s\n", het_error_msg());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        int same = bitwise_same(c, bk, buf, ref, n, off, n_ranges);
        double med[N_METHODS], mn[N_METHODS], mx[N_METHODS];
        if (time_methods(&o, c, bk, buf, n, off, n_ranges, t) != HET_OK) {
            fprintf(stderr, "bench_allreduce: %s\n", het_error_msg());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int m = 0; m < N_METHODS; m++) {
            mn[m] = t[m * o.reps];
            med[m] = t[m * o.reps + o.reps / 2];
            mx[m] = t[m * o.reps + o.reps - 1];
        }
        double bytes = (double)n * sizeof(float);
        double gbs[N_METHODS];
        for (int m = 0; m < N_METHODS; m++) gbs[m] = bytes / med[m] / 1e9;
        if (kib >= 1024) {
            if (gbs[M_FLAT] < 0.9 * gbs[M_PLAIN]) goal_flat = 0;
            if (gbs[M_BUCKETED] < 0.9 * gbs[M_PLAIN]) goal_bk = 0;
        }
        if (g_rank == 0) {
            char size_s[32];
            if (kib >= 1024) snprintf(size_s, sizeof size_s, "%zu MiB", kib / 1024);
            else snprintf(size_s, sizeof size_s, "%zu KiB", kib);
            printf("| %s ", size_s);
            for (int m = 0; m < N_METHODS; m++)
                printf("| %.1f / %.1f / %.1f ", 1e6 * mn[m], 1e6 * med[m], 1e6 * mx[m]);
            printf("| %d | %.2f | %.2f (%.0f%%) | %.2f (%.0f%%) | %s |\n", het_buckets_n(bk),
                   gbs[M_PLAIN], gbs[M_FLAT], 100 * gbs[M_FLAT] / gbs[M_PLAIN], gbs[M_BUCKETED],
                   100 * gbs[M_BUCKETED] / gbs[M_PLAIN], same ? "bitwise" : "differs");
            fflush(stdout);
        }
        het_buckets_free(bk);
    }
    if (g_rank == 0 && o.max_kib >= 1024)
        printf("\ngoal >= 90%% of plain MPI_Allreduce bandwidth (median) at >= 1 MiB: flat %s, "
               "bucketed %s\n", goal_flat ? "met" : "NOT met", goal_bk ? "met" : "NOT met");
    free(buf);
    free(ref);
    free(off);
    free(t);
    het_stall_stop();
    het_comm_free(c);
    het_topo_free(&topo);
    MPI_Finalize();
    return 0;
}
