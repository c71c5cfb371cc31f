#!/usr/bin/env bash
# The command's own leak check under real mpirun (the other command-line tests run without it
# in a sanitized build: tests/no_leaks.sh says why). Every strategy once, on the rank counts and
# options that reach its code (servers, node leaders, pipeline stages and their threads), with a
# checkpoint written and resumed, evaluation inside an epoch, the virtual clock and bf16. Each
# run must exit 0 and print no sanitizer report; in a sanitized build (make test-asan) LeakSanitizer
# checks every rank at exit (Open MPI's own allocations matched by tests/lsan.supp), so a leak of
# hetrain's fails here. In other builds the same runs check only that they end cleanly.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
# the check on, and the full unwinder that tests/lsan.supp's module names need (later wins)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:fast_unwind_on_malloc=0"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
T=$(mktemp -d /tmp/het_leaks_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
if nm "$HETRAIN" 2>/dev/null | grep -q "__asan_init"; then
    checked="LeakSanitizer on every rank"
else
    checked="not a sanitized build: clean exits only"
fi
C=(--model lenet5 --data synthetic --train-limit 192 --test-limit 64 --seed 3 --progress off
   --batch 32)
n=0
# run NAME P ARGS...: P ranks of hetrain train, exit 0 and no sanitizer line
run() {
    local name=$1 P=$2
    shift 2
    n=$((n + 1))
    if ! het_mpi_np_ok "$P"; then echo "test_leaks_mpi: $name skipped ($P ranks, $het_mpi_flavor)"; return; fi
    HET_MPI_TIMEOUT=240 het_mpirun "$P" "$HETRAIN" train "${C[@]}" "$@" >"$name.out" 2>&1 ||
        { fail "$name on $P ranks exited $?: $(grep -m3 -A3 'Sanitizer\|hetrain:' "$name.out")"; return; }
    ! grep -q "Sanitizer" "$name.out" || fail "$name: $(grep -m1 -A6 Sanitizer "$name.out")"
}
run allreduce 2 --strategy allreduce --epochs 1 --checkpoint ar.ckpt --eval-every 3
run resume 2 --strategy allreduce --epochs 2 --checkpoint ar.ckpt --resume
run steps 2 --strategy allreduce --epochs 1 --checkpoint st.ckpt --checkpoint-steps 2
run hgc 3 --strategy hgc --speeds 0.5,0.3,0.2 --epochs 1 --clock virtual
run asp 3 --strategy asp --clock virtual --lr 0.02 --epochs 1 --checkpoint asp.ckpt
run inhad 5 --strategy inhad --ranks-per-node 2 --clock virtual --lr 0.02 --epochs 1
run daso 4 --strategy daso --ranks-per-node 2 --epochs 2 --checkpoint daso.ckpt
run gpipe 2 --strategy gpipe --stages 4 --micro-batches 2 --epochs 1 --pipe-schedule 1f1b
run qfb 3 --strategy qfb --stages 3,4 --epochs 1 --checkpoint qfb.ckpt
run bf16 2 --strategy allreduce --precision bf16 --epochs 1
[ -s ar.ckpt ] || fail "no checkpoint written by the allreduce run"
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "test_leaks_mpi: OK ($n runs, $checked)"
