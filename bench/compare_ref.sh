#!/usr/bin/env bash
# compare_ref.sh: training throughput of the working tree against a git reference, side by side
# in one run (a benchmark: prints figures, never fails on time).
#
#   bash bench/compare_ref.sh [REF] [BUILD]     # ~1 minute of builds, then ~20 s per round
#
# REF (default: the merge-base of HEAD with origin/main, else with main) is exported with
# `git archive` into a temporary directory and built there (Release); the working tree is built
# in BUILD (default build, Release). Then ROUNDS rounds of, for each model and rank count, the
# real command, old and new binary back to back (old first in odd rounds, new first in even):
#   hetrain train --model M --data fashion-mnist --strategy allreduce --epochs 1 --batch 64
#   1 rank: --threads 2;  P ranks: mpirun --oversubscribe -np P ... --threads 1
# Each run's figure is the samples/s of its epoch line (rank 0's: global over all ranks, the
# training loop only: data loading and the test pass are outside it). The table gives per
# configuration the median samples/s of each side, the ratio new/old of every round, the median
# of those ratios, the ratio of each side's best run, and the median over rounds of the ratio of
# 64 / median step time (--metrics-steps). See bench/README.md for how to read it.
#
# Env: ROUNDS (default 3), MODELS (default "lenet5 mlp"), RANKS (default "1 2"), TRAIN_LIMIT
# (training samples per epoch, default 0 = all 60 000), REF_DIR (keep REF's export and build
# there and reuse them next time, instead of a temporary directory), CMAKE_FLAGS (passed to both
# builds), BLAS_CORETYPE and HET_DATA_DIR (bench/common.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/common.sh" # data_dir, Open MPI as root, het_bench_blas_kernels, het_epoch_rate
cd "$root"
build=${2:-build}
rounds=${ROUNDS:-3}
models=${MODELS:-lenet5 mlp}
ranks=${RANKS:-1 2}
limit=${TRAIN_LIMIT:-0}
jobs=$(nproc 2>/dev/null || echo 2)
me=compare_ref.sh

if [ -n "${1:-}" ]; then
    ref=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "$me: '$1' is not a commit" >&2; exit 2; }
else
    ref=$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main 2>/dev/null) ||
        { echo "$me: neither origin/main nor main: give REF" >&2; exit 2; }
fi
new_id=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain)" ] || new_id="$new_id+uncommitted changes"

out=$(mktemp -d /tmp/het_compare_XXXXXX)
if [ -n "${REF_DIR:-}" ]; then
    mkdir -p "$REF_DIR"
    ref_dir=$(cd "$REF_DIR" && pwd)
    trap 'rm -rf "$out"' EXIT
else
    ref_dir=$(mktemp -d /tmp/het_ref_XXXXXX)
    trap 'rm -rf "$out" "$ref_dir"' EXIT
fi

# Both builds get the same options: the sanitizers and -march=native off (a BUILD configured
# earlier with them would keep them in its CMake cache), then CMAKE_FLAGS.
# shellcheck disable=SC2206
flags=(-DCMAKE_BUILD_TYPE=Release -DHET_NATIVE=OFF -DHET_SANITIZE=OFF -DHET_TSAN=OFF ${CMAKE_FLAGS:-})
stamp="$ref ${flags[*]}"
if [ ! -x "$ref_dir/build/hetrain" ] || [ "$(cat "$ref_dir/stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "$me: building $ref in $ref_dir" >&2
    rm -rf "$ref_dir/src" "$ref_dir/build" "$ref_dir/stamp"
    mkdir -p "$ref_dir/src"
    git archive "$ref" | tar -x -C "$ref_dir/src"
    { cmake -S "$ref_dir/src" -B "$ref_dir/build" "${flags[@]}" &&
      cmake --build "$ref_dir/build" -j "$jobs" --target hetrain_cli; } >"$out/ref_build.log" 2>&1 ||
        { cat "$out/ref_build.log" >&2; echo "$me: building $ref failed" >&2; exit 1; }
    echo "$stamp" >"$ref_dir/stamp"
fi
echo "$me: building the working tree in $build" >&2
{ cmake -S . -B "$build" "${flags[@]}" &&
  cmake --build "$build" -j "$jobs" --target hetrain_cli bench_train; } >"$out/new_build.log" 2>&1 ||
    { cat "$out/new_build.log" >&2; echo "$me: building the working tree failed" >&2; exit 1; }
old_bin="$ref_dir/build/hetrain"
new_bin="$build/hetrain"

# One kernel set for both sides (common.sh); hetrain's BLAS runs one thread (it sets that itself).
het_bench_blas_kernels "$build/bench_train"
export OPENBLAS_NUM_THREADS=1

# Per-step times (--metrics-steps: one JSON line per step, rank 0's wall time of the whole step)
# give a second figure, 64 / the median step time, which a burst of other jobs during a few
# steps does not move. Only for a binary that knows the option.
steps_old=(); steps_new=()
"$old_bin" train --help 2>&1 | grep -q -- --metrics-steps && steps_old=(--metrics-steps)
"$new_bin" train --help 2>&1 | grep -q -- --metrics-steps && steps_new=(--metrics-steps)

# run_one SIDE MODEL RANKS ROUND: one training run; appends its figures to $out/results.
run_one() {
    local side=$1 m=$2 P=$3 r=$4 bin f steps
    if [ "$side" = old ]; then bin=$old_bin steps=("${steps_old[@]}"); else bin=$new_bin steps=("${steps_new[@]}"); fi
    f="$out/$side.$m.$P.$r.out"
    local args=(train --model "$m" --data fashion-mnist --data-dir "$data_dir" --strategy allreduce
                --epochs 1 --batch 64 --lr 0.05 --momentum 0.9 --seed 1 --train-limit "$limit"
                --test-limit 1000 --progress off)
    [ ${#steps[@]} = 0 ] || args+=(--metrics "$f.jsonl" "${steps[@]}")
    if [ "$P" = 1 ]; then
        "$bin" "${args[@]}" --threads 2 >"$f" 2>&1 || { cat "$f" >&2; exit 1; }
    else
        mpirun --oversubscribe -np "$P" "$bin" "${args[@]}" --threads 1 >"$f" 2>&1 ||
            { cat "$f" >&2; exit 1; }
    fi
    local rate kern step
    rate=$(het_epoch_rate "$f")
    [ -n "$rate" ] || { cat "$f" >&2; echo "$me: no epoch line in $side $m $P ranks" >&2; exit 1; }
    kern=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9_]*\).*/\1/p' "$f" | head -n 1)
    step=$( (sed -n 's/.*"type":"step".*"batch":64,"time_s":\([0-9.eE+-]*\)}.*/\1/p' "$f.jsonl" \
             2>/dev/null || true) | sort -g | awk '{ t[NR] = $1 } END { if (NR) printf "%.0f", 64 / t[int((NR + 1) / 2)] }')
    echo "side=$side model=$m ranks=$P round=$r samples_per_s=$rate step_samples_per_s=${step:-0}" \
         "kernels=${kern:-?}" >>"$out/results"
    printf ' %s %s' "$side" "$rate" >&2
}

echo "# hetrain throughput: old = $(git rev-parse --short "$ref") (REF), new = $new_id (working" \
     "tree); Fashion-MNIST, 1 epoch, batch 64, allreduce, train-limit $limit; $(nproc) CPUs," \
     "OpenBLAS ${OPENBLAS_CORETYPE:-$blas_core}; $rounds rounds; $(date -u +%Y-%m-%dT%H:%MZ);" \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    for m in $models; do
        for P in $ranks; do
            printf '%s: round %d/%d %s %d rank(s):' "$me" "$r" "$rounds" "$m" "$P" >&2
            if [ $((r % 2)) = 1 ]; then
                run_one old "$m" "$P" "$r"; run_one new "$m" "$P" "$r"
            else
                run_one new "$m" "$P" "$r"; run_one old "$m" "$P" "$r"
            fi
            echo >&2
        done
    done
done

echo
awk -v models="$models" -v ranks="$ranks" -v rounds="$rounds" '
function best(s,   a, n, i, b) { n = split(s, a, " "); b = 0; for (i = 1; i <= n; i++) if (a[i] + 0 > b) b = a[i] + 0; return b }
function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ delete kv; for (i = 1; i <= NF; i++) { p = index($i, "="); kv[substr($i, 1, p - 1)] = substr($i, p + 1) }
  k = kv["model"] ":" kv["ranks"]
  v[kv["side"] ":" k] = v[kv["side"] ":" k] " " kv["samples_per_s"]
  x[kv["side"] ":" k ":" kv["round"]] = kv["samples_per_s"]
  y[kv["side"] ":" k ":" kv["round"]] = kv["step_samples_per_s"]
  kern[kv["side"] ":" kv["kernels"]] = 1 }
END {
  print "| model | ranks | old samples/s (median) | new samples/s (median) | new/old, round by round | new/old (median) | best new / best old | new/old of median step (median) |"
  print "|---|---|---|---|---|---|---|---|"
  nm = split(models, M, " "); np = split(ranks, P, " ")
  for (i = 1; i <= nm; i++) for (j = 1; j <= np; j++) {
      k = M[i] ":" P[j]; rs = ""; ratios = ""; sratios = ""
      for (r = 1; r <= rounds; r++) {
          q = x["new:" k ":" r] / x["old:" k ":" r]
          rs = rs sprintf("%s%.3f", r > 1 ? " " : "", q); ratios = ratios " " q
          if (y["old:" k ":" r] > 0 && y["new:" k ":" r] > 0) sratios = sratios " " y["new:" k ":" r] / y["old:" k ":" r] }
      printf "| %s | %s | %.0f | %.0f | %s | **%.3f** | %.3f | %s |\n", M[i], P[j], median(v["old:" k]),
             median(v["new:" k]), rs, median(ratios), best(v["new:" k]) / best(v["old:" k]),
             sratios == "" ? "-" : sprintf("%.3f", median(sratios)) }
  ks = ""; for (s in kern) ks = ks " " s
  print ""
  print "OpenBLAS kernels reported (side:kernels):" ks
}' "$out/results"
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (at the start: see the first line)."
