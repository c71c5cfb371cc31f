# Sourced by the bench scripts (run.sh, bench_dist.sh, compare_ref.sh): what they share.
# Sets data_dir and py, exports Open MPI's root permission, and defines the helpers below.
# Env: HET_DATA_DIR (data directory), PYTHON (default /usr/bin/python3), BLAS_CORETYPE.

data_dir=${HET_DATA_DIR:-/usr/share/datasets/fashion-mnist}
py=${PYTHON:-/usr/bin/python3}
# Open MPI refuses root without these; harmless for other users.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# het_bench_blas_kernels BENCH_TRAIN: one OpenBLAS kernel set for every program of a benchmark,
# exported as OPENBLAS_CORETYPE, and its name left in blas_core.
# OpenBLAS 0.3.21 does not know some newer CPUs (e.g. family 6 model 207) and falls back to its
# generic "Prescott" kernels, ~10x slower than its AVX-512 ones; `hetrain` then re-executes
# itself with better ones (src/tensor/blas_select.c), torch does not. BLAS_CORETYPE=auto
# (default): on an AVX-512 CPU where OpenBLAS picked non-AVX-512 kernels, both sides run with
# OPENBLAS_CORETYPE=SkylakeX, and the script says so; a value of OPENBLAS_CORETYPE already set
# is kept. BLAS_CORETYPE=default keeps what OpenBLAS picks; any other value is passed on as
# OPENBLAS_CORETYPE. BENCH_TRAIN is a bench_train binary (its --blas-info prints the choice).
het_bench_blas_kernels() {
    local bt=$1 me coretype=${BLAS_CORETYPE:-auto}
    me=$(basename "$0")
    blas_core=$(HET_BLAS_NO_REEXEC=1 "$bt" --blas-info | cut -d= -f2)
    if [ "$coretype" = auto ]; then
        if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo \
           && ! echo "$blas_core" | grep -qE 'SkylakeX|Cooperlake|SapphireRapids'; then
            export OPENBLAS_CORETYPE=SkylakeX
            echo "$me: OpenBLAS picked '$blas_core' kernels on an AVX-512 CPU; every run uses" \
                 "OPENBLAS_CORETYPE=SkylakeX (BLAS_CORETYPE=default to keep '$blas_core')" >&2
        fi
    elif [ "$coretype" != default ]; then
        export OPENBLAS_CORETYPE=$coretype
    fi
    blas_core=$(HET_BLAS_NO_REEXEC=1 "$bt" --blas-info | cut -d= -f2)
}

# het_epoch_rate FILE: samples/s of the last epoch line of a `hetrain train` output (rank 0's
# line: the global figure over all ranks). het_epoch_acc FILE: its test accuracy.
het_epoch_rate() { sed -n 's/^epoch .* \([0-9]*\) samples\/s .*/\1/p' "$1" | tail -n 1; }
het_epoch_acc() { sed -n 's/^epoch .* test_acc \([0-9.]*\) .*/\1/p' "$1" | tail -n 1; }
