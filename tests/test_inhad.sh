#!/usr/bin/env bash
# inhad's options do what they say (strategy/inhad.c, inhad_server.c), on the virtual clock with
# the shipped cost table (every count below is the same on any host), under real mpirun; 2
# nodes x 2 workers and the server, --batch 32 per worker:
# - --max-staleness 0 with the default threshold (one gradient of every worker per update) is
#   synchronous SGD: its training and test loss track allreduce's on 4 ranks with the global
#   batch 128 within 1e-4 (relative) for 2 epochs (the same batches summed in another order);
# - --max-staleness 1 on equal workers is one-step-delayed synchronous SGD: every update holds
#   one gradient of every worker, each one update old (staleness mean (U - 1) / U, max 1);
# - --soft-sync 2 halves the threshold: twice the updates, 2 gradients per update; with
#   --inhad-threshold 1 an update per gradient: 4x the updates; their gradients grow stale
#   (staleness mean > 1) and --staleness-lr (on by default) divides the learning rate by it:
#   the mean scale applied is < 1, and exactly 1 with --staleness-lr off, whose staleness and
#   updates are otherwise the same;
# - one worker 3x slower at --max-staleness 2: the fast workers do more batches than it, the
#   batches of the epoch are all done, each once;
# - --inhad-aggregator loop (the aggregator in its rank's loop, workers waiting for their IN's
#   answer): the same updates, a longer epoch, reproducible.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
het_mpi_np_ok 5 || { echo "test_inhad: SKIPPED: needs 5 ranks, more than the cores ($het_mpi_flavor busy-polls)"; exit 77; }
T=$(mktemp -d /tmp/het_inhad_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
C=(--model lenet5 --data synthetic --train-limit 2048 --test-limit 256 --seed 3 --progress off
   --lr 0.02 --clock virtual --compute-cost shipped --ranks-per-node 2)
I=("${C[@]}" --strategy inhad --batch 32)
# a member of the ps object of the metrics' last epoch line: ps_val FILE KEY
ps_val() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"ps\":{.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
ps_arr() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"ps\":{.*\"$2\":\\[\\([-0-9.e+,]*\\)\\].*/\\1/p"; }
# an epoch member of every epoch line, space separated
ep_all() { grep '"type":"epoch"' "$1" | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p" | tr '\n' ' '; }
run() { # name P args...
    local name=$1 P=$2; shift 2
    mpi "$P" train "$@" --metrics "$name.jsonl" >"$name.out" 2>&1 ||
        { fail "$name exited $?: $(tail -3 "$name.out")"; return 1; }
}
close() { # a b tol: every pair of the two lists within tol relative
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { n = split(a, x, " "); m = split(b, y, " ")
        if (n != m || n == 0) exit 1
        for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > t * (y[i] < 0 ? -y[i] : y[i])) exit 1 } }'
}

# ---- bound 0: synchronous SGD ----
run b0 5 "${I[@]}" --epochs 2 --max-staleness 0 &&
    run ar 4 "${C[@]}" --strategy allreduce --batch 128 --epochs 2 && {
    for k in loss test_loss; do
        close "$(ep_all b0.jsonl $k)" "$(ep_all ar.jsonl $k)" 1e-4 ||
            fail "bound 0: $k '$(ep_all b0.jsonl $k)' does not track allreduce's '$(ep_all ar.jsonl $k)'"
    done
    [ "$(ps_val b0.jsonl grads_per_update)" = 4 ] && [ "$(ps_val b0.jsonl staleness_max)" = 0 ] ||
        fail "bound 0: gradients per update '$(ps_val b0.jsonl grads_per_update)' (4), staleness max '$(ps_val b0.jsonl staleness_max)' (0)"
}

# ---- bound 1 on equal workers: one-step-delayed synchronous SGD ----
run b1 5 "${I[@]}" --epochs 1 --max-staleness 1 &&
    awk -v u="$(ps_val b1.jsonl updates)" -v g="$(ps_val b1.jsonl grads_per_update)" \
        -v m="$(ps_val b1.jsonl staleness_mean)" -v x="$(ps_val b1.jsonl staleness_max)" \
        'BEGIN { exit !(u == 16 && g == 4 && x == 1 && (m - (u - 1) / u) ^ 2 < 1e-9) }' ||
    fail "bound 1: updates '$(ps_val b1.jsonl updates)' (16), gradients per update '$(ps_val b1.jsonl grads_per_update)' (4), staleness mean '$(ps_val b1.jsonl staleness_mean)' (15/16), max '$(ps_val b1.jsonl staleness_max)' (1)"

# ---- --inhad-aggregator loop: one thread a rank (as SMPI runs it) ----
# the same rules on the rank's own clock: the same updates of the same size, a longer epoch
# (each worker waits for its IN's answer, each pull waits for its aggregator's batch), the
# same figures twice
if run lp 5 "${I[@]}" --epochs 1 --max-staleness 1 --inhad-aggregator loop &&
    run lp2 5 "${I[@]}" --epochs 1 --max-staleness 1 --inhad-aggregator loop; then
    [ "$(ps_val lp.jsonl updates)" = 16 ] && [ "$(ps_val lp.jsonl grads_per_update)" = 4 ] ||
        fail "loop: updates '$(ps_val lp.jsonl updates)' (16), gradients per update '$(ps_val lp.jsonl grads_per_update)' (4)"
    awk -v l="$(ep_all lp.jsonl epoch_s)" -v t="$(ep_all b1.jsonl epoch_s)" \
        'BEGIN { exit !(l + 0 > t + 0 && t + 0 > 0) }' ||
        fail "loop: epoch '$(ep_all lp.jsonl epoch_s)' s not longer than the thread's '$(ep_all b1.jsonl epoch_s)'"
    [ "$(ep_all lp.jsonl epoch_s)$(ep_all lp.jsonl loss)" = "$(ep_all lp2.jsonl epoch_s)$(ep_all lp2.jsonl loss)" ] ||
        fail "loop: two runs differ: '$(ep_all lp.jsonl epoch_s)' '$(ep_all lp.jsonl loss)' against '$(ep_all lp2.jsonl epoch_s)' '$(ep_all lp2.jsonl loss)'"
    grep -q "in its rank's loop" lp.out || fail "loop: the inhad line does not say so: $(grep '^inhad' lp.out)"
fi

# ---- the threshold: --soft-sync 2, --inhad-threshold 1; --staleness-lr ----
run ss2 5 "${I[@]}" --epochs 1 --soft-sync 2 &&
    awk -v u="$(ps_val ss2.jsonl updates)" -v g="$(ps_val ss2.jsonl grads_per_update)" \
        'BEGIN { exit !(u == 32 && g == 2) }' ||
    fail "--soft-sync 2: updates '$(ps_val ss2.jsonl updates)' (32), gradients per update '$(ps_val ss2.jsonl grads_per_update)' (2)"
run th1 5 "${I[@]}" --epochs 1 --inhad-threshold 1 &&
    run th1off 5 "${I[@]}" --epochs 1 --inhad-threshold 1 --staleness-lr off && {
    awk -v u="$(ps_val th1.jsonl updates)" -v g="$(ps_val th1.jsonl grads_per_update)" \
        -v m="$(ps_val th1.jsonl staleness_mean)" -v s="$(ps_val th1.jsonl lr_scale_mean)" \
        'BEGIN { exit !(u == 64 && g == 1 && m > 1 && s < 1 && s > 0) }' ||
        fail "--inhad-threshold 1: updates '$(ps_val th1.jsonl updates)' (64), gradients per update '$(ps_val th1.jsonl grads_per_update)' (1), staleness mean '$(ps_val th1.jsonl staleness_mean)' (> 1), lr scale '$(ps_val th1.jsonl lr_scale_mean)' (< 1)"
    [ "$(ps_val th1off.jsonl lr_scale_mean)" = 1 ] &&
        [ "$(ps_val th1off.jsonl updates)" = "$(ps_val th1.jsonl updates)" ] ||
        fail "--staleness-lr off: lr scale '$(ps_val th1off.jsonl lr_scale_mean)' (1), updates '$(ps_val th1off.jsonl updates)' ('$(ps_val th1.jsonl updates)')"
    [ "$(ps_val th1off.jsonl staleness_mean)" = "$(ps_val th1.jsonl staleness_mean)" ] ||
        fail "--staleness-lr off changed the staleness: '$(ps_val th1off.jsonl staleness_mean)' against '$(ps_val th1.jsonl staleness_mean)'"
}

# ---- a slow worker ----
run slow 5 "${I[@]}" --epochs 1 --max-staleness 2 --slowdown 1,3,1,1,1 &&
    awk -v s="$(ps_arr slow.jsonl worker_steps)" 'BEGIN { k = split(s, a, ",")
        exit !(k == 4 && a[1] + a[2] + a[3] + a[4] == 64 && a[1] > a[2] && a[3] > a[2] && a[4] > a[2]) }' ||
    fail "slow worker at bound 2: batches per worker '$(ps_arr slow.jsonl worker_steps)'"

[ "$failures" -eq 0 ] || { echo "test_inhad: $failures failure(s)" >&2; exit 1; }
echo "test_inhad: bound 0 is synchronous SGD, bound 1 one-step delayed; soft-sync, threshold, staleness-lr and the aggregator loop do what they say"
