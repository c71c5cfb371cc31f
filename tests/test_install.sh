#!/usr/bin/env bash
# make install: the library, headers and pkg-config file install into a prefix, and a program
# built only from them (examples/train_mlp.c, compiled with pkg-config's flags) trains and passes;
# a program that starts MPI through the installed library sums across 2 ranks (the MPI named in
# hetrain.pc is the one the library was built with).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
: "${HET_BUILD_DIR:?}" "${HET_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$HET_BUILD_DIR" --prefix "$tmp/prefix" >/dev/null
for f in lib/libhetrain.a lib/pkgconfig/hetrain.pc include/hetrain.h include/hetrain/nn.h bin/hetrain; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs hetrain)
# a sanitized build (make test-asan) installs an instrumented library: link its runtime too
if nm "$tmp/prefix/lib/libhetrain.a" 2>/dev/null | grep -c " U __asan_init" >/dev/null; then
  flags="-fsanitize=address,undefined $flags"
fi
# shellcheck disable=SC2086
cc -std=c11 -O2 -o "$tmp/train_mlp" "$HET_SOURCE_DIR/examples/train_mlp.c" $flags
"$tmp/train_mlp"

# A program that starts MPI through the installed library must get the MPI it was built with
# (pkg-config's Requires): 2 ranks sum a vector through het_comm. With another MPI's headers
# or library it crashes or each rank runs alone (world size 1), which fails here.
cat >"$tmp/mpi_sum.c" <<'EOF_C'
#include <hetrain.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int provided = 0, size = 0, rank = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    het_topo topo;
    het_comm *c = NULL;
    het_netem ne = {0};
    float v[3] = {1.0f, 2.0f, (float)rank};
    int bad = het_topo_init(&topo, MPI_COMM_WORLD, 0) || het_comm_create(&c, &topo, ne) ||
              het_comm_allreduce_sum(c, HET_COMM_WORLD, v, 3);
    if (!bad && rank == 0) printf("mpi_sum: %d ranks: %g %g %g\n", size, v[0], v[1], v[2]);
    bad = bad || v[0] != (float)size || v[2] != (float)(size * (size - 1) / 2);
    het_comm_free(c);
    het_topo_free(&topo);
    MPI_Finalize();
    return bad;
}
EOF_C
# shellcheck disable=SC2086
cc -std=c11 -O2 -o "$tmp/mpi_sum" "$tmp/mpi_sum.c" $flags
. "$(dirname "$0")/mpi.sh"
if het_mpi_found; then
    out=$(het_mpirun 2 "$tmp/mpi_sum" 2>&1) || { echo "FAIL: mpi_sum under $HET_MPIEXEC: $out"; exit 1; }
    echo "$out" | grep -q "^mpi_sum: 2 ranks: 2 4 1$" || { echo "FAIL: mpi_sum printed '$out'"; exit 1; }
fi
echo "install: ok"
