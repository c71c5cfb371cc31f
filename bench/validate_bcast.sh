#!/usr/bin/env bash
# One broadcast, hetrain's model against SimGrid's SMPI (a benchmark: prints figures, never fails
# on them). For each algorithm both sides run, each cluster shape and size: a four-line MPI
# program broadcasts SIZE bytes (MPI_BYTE) from ROOT under smpirun on `hetrain platform`'s file
# (network factors 1, no cross-traffic: the file's own settings), SMPI forced onto the
# algorithm (smpi/bcast), and prints the simulated time at which its last rank has the data;
# a small C program linked with hetrain's library prints the model's time for the same
# broadcast on the same links (src/emul/bcast.c, bcast_sched.c). The pairs:
#   split_bintree       SMPI's ompi_split_bintree (Open MPI's split binary tree; SMPI's copy
#                       cuts 1 KiB segments below 370728 bytes, 8 KiB above) and
#                       het_netem_bcast_split_bintree_s with those segments;
#   binomial            binomial_tree and het_netem_bcast_binomial_s;
#   linear              flattree and het_netem_bcast_linear_s;
#   scatter_allgather   scatter_rdb_allgather and het_netem_bcast_scatter_allgather_s.
# Usage: bench/validate_bcast.sh [BUILD]   (make build first; needs smpicc: make smpi installs it)
# Env: ALGOS, SHAPES (RANKSxRANKS_PER_NODE, default "4x1 5x1 8x1 8x2 16x4"), SIZES (bytes,
#      default "200000 1000000"), ROOTS ("0 3"), BW (bytes/s between nodes, 12.5M), LAT (50e-6).
set -eu
BUILD=$(readlink -f "${1:-build}")
[ -x "$BUILD/hetrain" ] && [ -f "$BUILD/libhetrain.a" ] ||
    { echo "validate_bcast: $BUILD/hetrain and libhetrain.a not found (make build)" >&2; exit 1; }
command -v smpicc >/dev/null && command -v smpirun >/dev/null ||
    { echo "validate_bcast: smpicc / smpirun not found (make smpi installs SimGrid)" >&2; exit 1; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
ALGOS=${ALGOS:-"split_bintree binomial linear scatter_allgather"}
SHAPES=${SHAPES:-"4x1 5x1 8x1 8x2 16x4"}
SIZES=${SIZES:-"200000 1000000"}
ROOTS=${ROOTS:-"0 3"}
BW=${BW:-12.5M} LAT=${LAT:-50e-6}
T=$(mktemp -d /tmp/het_vbcast_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"

cat >sim.c <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = atoi(argv[1]), root = atoi(argv[2]), rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *b = calloc((size_t)n, 1);
    MPI_Bcast(b, n, MPI_BYTE, root, MPI_COMM_WORLD);
    printf("end %d %.9f\n", rank, MPI_Wtime());
    free(b);
    MPI_Finalize();
    return 0;
}
EOF
cat >model.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hetrain/emul.h"
/* model ALGO P RANKS_PER_NODE ROOT BYTES BW LAT: the model's time, the node link as SMPI's
 * loopback in hetrain platform's files (1 us + bytes / 10 GB/s) */
int main(int argc, char **argv) {
    if (argc != 8) return 2;
    const char *a = argv[1];
    int p = atoi(argv[2]), rpn = atoi(argv[3]), root = atoi(argv[4]);
    size_t n = (size_t)atol(argv[5]);
    het_netem ne = {.lat_s = atof(argv[7]), .bw_bytes_per_s = atof(argv[6]),
                    .node_lat_s = 1e-6, .node_bw_bytes_per_s = 1e10};
    int *node = malloc((size_t)p * sizeof *node);
    if (!node) return 1;
    for (int i = 0; i < p; i++) node[i] = i / rpn;
    double t = -1.0;
    if (!strcmp(a, "split_bintree"))
        t = het_netem_bcast_split_bintree_s(ne, node, p, root, n, 1, n < 370728 ? 1024 : 8192);
    else if (!strcmp(a, "binomial")) t = het_netem_bcast_binomial_s(ne, node, p, root, n, 1);
    else if (!strcmp(a, "linear")) t = het_netem_bcast_linear_s(ne, node, p, root, n, 1);
    else if (!strcmp(a, "scatter_allgather"))
        t = het_netem_bcast_scatter_allgather_s(ne, node, p, root, n, 1);
    printf("%.9f\n", t);
    free(node);
    return t < 0.0;
}
EOF
smpicc -O1 -o sim sim.c 2>/dev/null
# libhetrain's other objects need MPI and the math library only for what model.c calls
cc -O1 -I"$SRC/include" -I"$SRC/src" $(mpicc --showme:compile 2>/dev/null || true) -o model \
    model.c "$BUILD/libhetrain.a" $(mpicc --showme:link 2>/dev/null || echo -lmpi) -lm

smpi_name() {
    case $1 in
        split_bintree) echo ompi_split_bintree ;; binomial) echo binomial_tree ;;
        linear) echo flattree ;; scatter_allgather) echo scatter_rdb_allgather ;;
        *) echo "validate_bcast: unknown algorithm $1" >&2; exit 1 ;;
    esac
}

echo "| algorithm | ranks (x per node) | root | bytes | SMPI s | hetrain model s | model / SMPI |"
echo "|---|---|---:|---:|---:|---:|---:|"
sum=0 n=0 worst=0
for shape in $SHAPES; do
    P=${shape%x*} rpn=${shape#*x}
    "$BUILD/hetrain" platform --ranks "$P" --ranks-per-node "$rpn" --net-bw "$BW" \
        --net-lat "$LAT" --out "p$shape.xml" --hostfile "h$shape" >/dev/null
    for algo in $ALGOS; do
        for root in $ROOTS; do
            [ "$root" -lt "$P" ] || continue
            for size in $SIZES; do
                s=$(smpirun -np "$P" -platform "p$shape.xml" -hostfile "h$shape" \
                    --cfg=smpi/simulate-computation:no --cfg=smpi/bcast:"$(smpi_name "$algo")" \
                    --log=root.thresh:error ./sim "$size" "$root" 2>/dev/null |
                    awk '/^end/ { if ($3 > m) m = $3 } END { printf "%.9f", m }')
                bw=$(numfmt --from=si "$BW")
                m=$(./model "$algo" "$P" "$rpn" "$root" "$size" "$bw" "$LAT")
                r=$(awk -v a="$m" -v b="$s" 'BEGIN { printf "%.4f", (b > 0) ? a / b : 0 }')
                echo "| $algo | $P ($rpn) | $root | $size | $s | $m | $r |"
                read -r sum n worst < <(awk -v s="$sum" -v n="$n" -v w="$worst" -v r="$r" \
                    'BEGIN { e = r - 1; if (e < 0) e = -e; if (e > w) w = e;
                             printf "%g %d %g\n", s + e, n + 1, w }')
            done
        done
    done
done
awk -v s="$sum" -v n="$n" -v w="$worst" 'BEGIN {
    printf "\n%d broadcasts: mean |model / SMPI - 1| %.2f %%, worst %.2f %%\n",
           n, n ? 100 * s / n : 0, 100 * w }'
