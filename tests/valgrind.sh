#!/usr/bin/env bash
# A short training run under Valgrind memcheck: one rank (lenet5: convolutions, pooling, the
# trainer, the checkpoint written and resumed) and two ranks under mpirun (the gradient
# all-reduce). Any memcheck error fails (--error-exitcode). Leaks are left to `make test-asan`
# (LeakSanitizer), which tells MPI's from ours. Not a CTest (minutes under Valgrind): run by
# `make test-valgrind` and CI.
# Valgrind 3.19 emulates no AVX-512: OPENBLAS_CORETYPE is unset so that OpenBLAS and our
# kernels pick their instruction set from the CPUID Valgrind shows.
set -euo pipefail
H=${HETRAIN:-build/hetrain}
unset OPENBLAS_CORETYPE
export HWLOC_COMPONENTS=-x86   # hwloc probes CPUID itself, which it says Valgrind breaks
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
here=$(cd "$(dirname "$0")" && pwd)
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
vg=(valgrind -q --error-exitcode=99 --leak-check=no
    --suppressions=/usr/share/openmpi/openmpi-valgrind.supp --suppressions="$here/valgrind.supp")
small=(--train-limit 128 --test-limit 64 --batch 32 --progress off --quiet)
"${vg[@]}" "$H" train --model lenet5 --epochs 1 "${small[@]}" --checkpoint "$w/a.ckpt"
"${vg[@]}" "$H" train --model lenet5 --epochs 2 "${small[@]}" --checkpoint "$w/a.ckpt" --resume
mpirun --oversubscribe -np 2 "${vg[@]}" "$H" train --model mlp --epochs 1 "${small[@]}"
echo "valgrind: ok (1 rank lenet5 train + resume, 2 ranks mlp)"
