#!/usr/bin/env bash
# Cost tables of the virtual clock (emul/cost.c, strategy/costs.c), one process:
# - the shipped tables (costs/*.costs, built in): --compute-cost shipped finds each zoo model's
#   on its standard input, and a model file with the very layers of a zoo model finds the same;
#   the same run twice gives the same virtual time to 17 digits;
# - a table records the network it was measured on: calibrated on a model file, the file then
#   widened (same layer count), the table is refused naming both fingerprints; a network no
#   shipped table is for is refused naming the shipped tables;
# - a table measured with one compute thread used by a run of two says so.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
T=$(mktemp -d /tmp/het_costs_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
json_num() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
V=(--data synthetic --train-limit 128 --test-limit 32 --batch 32 --epochs 1 --progress off
   --clock virtual)

for m in mlp lenet5 cifar-cnn resnet20; do
    shape=()
    case $m in cifar-cnn | resnet20) shape=(--synthetic-shape 3x32x32) ;; esac
    "$HETRAIN" train --model "$m" "${V[@]}" "${shape[@]}" --compute-cost shipped --metrics "$m.jsonl" \
        >"$m.out" 2>&1 || { fail "$m on the shipped table exited $?: $(tail -2 "$m.out")"; continue; }
    grep -q "compute costs (virtual clock): the shipped table of $m," "$m.out" ||
        fail "$m: $(grep -m1 'compute costs' "$m.out")"
done
"$HETRAIN" train --model lenet5 "${V[@]}" --compute-cost shipped --metrics again.jsonl >again.out 2>&1
[ -n "$(json_num lenet5.jsonl vtime_s)" ] && [ "$(json_num lenet5.jsonl vtime_s)" = "$(json_num again.jsonl vtime_s)" ] ||
    fail "two runs on the shipped table: $(json_num lenet5.jsonl vtime_s) / $(json_num again.jsonl vtime_s)"
# a model file with mlp's layers is mlp to the table
grep -v '^#' "${HET_SOURCE_DIR:-$(dirname "$0")/..}/models/mlp.net" >mine.net
"$HETRAIN" train --model-file mine.net "${V[@]}" --compute-cost shipped --metrics mine.jsonl >mine.out 2>&1 ||
    fail "mlp's layers as a model file on the shipped table exited $?: $(tail -2 mine.out)"
[ "$(json_num mine.jsonl vtime_s)" = "$(json_num mlp.jsonl vtime_s)" ] ||
    fail "mlp's layers as a model file: $(json_num mine.jsonl vtime_s) s, the zoo's mlp $(json_num mlp.jsonl vtime_s) s"
echo "test_cli_costs: the shipped tables of the four zoo models, found by their networks"

# a table of a model file that was edited since (finding 2 of FINDINGS-v4: times 6.5x too low)
"$HETRAIN" calibrate --model-file mine.net --data synthetic --train-limit 256 --batch 32 --clock virtual \
    --costs-out mine.costs --quiet >cal.out 2>&1 || fail "calibrate exited $?: $(cat cal.out)"
sed 's/^dense out=256$/dense out=1024/' mine.net >wide.net
"$HETRAIN" train --model-file wide.net "${V[@]}" --compute-cost calibrated:mine.costs >wide.out 2>&1 &&
    fail "a table of the network before its edit was accepted"
grep -q '^hetrain: .*mine.costs: costs of another network (.*5 layers, fingerprint [0-9a-f]*), but this run trains wide (5 layers, [0-9a-f]*)' wide.out ||
    fail "an edited model file: $(cat wide.out)"
# no shipped table for this network
"$HETRAIN" train --model-file wide.net "${V[@]}" --compute-cost shipped >none.out 2>&1 &&
    fail "a network without a shipped table was accepted"
grep -q 'compute-cost shipped: no shipped table is for this network .*shipped: cifar-cnn, lenet5, mlp, resnet20' none.out ||
    fail "no shipped table: $(cat none.out)"
# another thread count than the table's
"$HETRAIN" train --model mlp "${V[@]}" --compute-cost shipped --threads 2 >thr.out 2>&1 ||
    fail "2 threads on the shipped table exited $?: $(tail -2 thr.out)"
grep -q 'note: compute costs: the table was measured with 1 compute thread per rank, this run has 2' thr.out ||
    fail "no note on the thread count: $(grep -m1 'compute costs' thr.out)"

[ $failures -eq 0 ] || { echo "test_cli_costs: $failures failure(s)" >&2; exit 1; }
echo "test_cli_costs: all checks passed"
