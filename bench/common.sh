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
# het_paired "A1 A2 ..." "B1 B2 ..." ratio|points: the mean over pairs of A/B (ratio) or of
# 100 (A - B) (points), and its 95 % interval (Student's t, n - 1 degrees of freedom), as
# "MEAN [LO, HI]" ("MEAN (1 pair)" for one).
het_paired() {
    awk -v a="$1" -v b="$2" -v how="$3" 'BEGIN {
        split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228", t, " ")
        n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) { d[i] = how == "ratio" ? x[i] / y[i] : 100 * (x[i] - y[i]); m += d[i] / n }
        fmt = how == "ratio" ? "%.3f" : "%+.2f"
        if (n < 2) { printf fmt " (1 pair)", m; exit }
        for (i = 1; i <= n; i++) v += (d[i] - m) ^ 2 / (n - 1)
        h = (n - 1 <= 10 ? t[n - 1] : 1.96) * sqrt(v / n)
        printf fmt " [" fmt ", " fmt "]", m, m - h, m + h }'
}
