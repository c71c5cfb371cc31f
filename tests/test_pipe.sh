#!/usr/bin/env bash
# The pipelines end to end under real mpirun (gpipe; strategy/gpipe.c, pipe.c):
# - gpipe with K = 2 and 3 stages, both schedules (gpipe, 1f1b), micro-batches of the model's
#   chunk (16 samples), gives one process's SGD bit for bit (the stages' layer calls and the
#   order the micro-batches' gradients add up in are those of one process), with momentum,
#   on both clocks; with Adam too (its state is gathered from the stages);
# - 2 pipelines x 2 stages with one micro-batch each give 2-rank allreduce bit for bit (each
#   stage's gradients summed over its replicas);
# - 1f1b keeps min(M, K - stage) tapes (2 and 1 of 4 micro-batches on 2 stages: the stash
#   bytes 2/4 and 1/4 of gpipe's) and gives gpipe's bits;
# - resume: 1 epoch, checkpoint, resume to 2 equals 2 epochs straight;
# - the plan line, the epoch line's bubble, the metrics' "gpipe" member (cuts, bubble in
#   [0, 1], activation bytes forward = gradient bytes backward on a 2-stage pipeline, exactly
#   the samples x the cut's activation size);
# - --stages 9 cuts there (and the bits are still one process's);
# - on the shipped cost table (--compute-cost shipped) gpipe and qfb plan and charge from the
#   table: two runs give the same plan, virtual times and weights bit for bit;
# - refusals, one line each: ranks not a multiple of --pipelines, more stages than places to
#   cut, --stages with the wrong count, at a place the model cannot be cut, not ascending.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
many=1
het_mpi_np_ok 6 || { many=0; echo "test_pipe: the parts with 3 to 6 ranks skipped: more than the cores ($het_mpi_flavor busy-polls)"; }
T=$(mktemp -d /tmp/het_pipe_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
COMMON=(--model lenet5 --data synthetic --train-limit 512 --test-limit 128 --seed 3 --progress off
        --batch 32 --lr 0.05)

# run NAME P ARGS...: a run that must succeed, weights in NAME.st, output in NAME.out
run() {
    local name=$1 P=$2; shift 2
    if [ "$P" -gt 2 ] && [ $many = 0 ]; then return 1; fi
    mpi "$P" train "${COMMON[@]}" "$@" --export-safetensors "$name.st" >"$name.out" 2>&1 ||
        { fail "$name exited $?: $(tail -3 "$name.out")"; return 1; }
}
same() { # A B: bitwise equal weights
    [ -f "$1.st" ] && [ -f "$2.st" ] || return
    cmp -s "$1.st" "$2.st" || fail "$2: weights differ from $1's"
}

# ---- K stages == one process, bit for bit ----
"$HETRAIN" train "${COMMON[@]}" --epochs 2 --momentum 0.9 --export-safetensors one.st >one.out 2>&1 ||
    fail "one process exited $?: $(tail -3 one.out)"
run k2 2 --epochs 2 --momentum 0.9 --strategy gpipe --micro-batches 2 && same one k2
run k2v 2 --epochs 2 --momentum 0.9 --strategy gpipe --micro-batches 2 --clock virtual --net-bw 125M \
    --ranks-per-node 1 && same one k2v
run k2f 2 --epochs 2 --momentum 0.9 --strategy gpipe --micro-batches 2 --pipe-schedule 1f1b && same one k2f
run k3 3 --epochs 2 --momentum 0.9 --strategy gpipe --micro-batches 2 && same one k3
run k3f 3 --epochs 2 --momentum 0.9 --strategy gpipe --micro-batches 2 --pipe-schedule 1f1b && same one k3f
run k2s 2 --epochs 2 --momentum 0.9 --strategy gpipe --micro-batches 2 --stages 9 && same one k2s
[ -f k2s.out ] && { grep -q '^gpipe: 2 stages .* stage 0 layers 0-8 (.*) [0-9.]* ms; stage 1 layers 9-11 ' k2s.out ||
    fail "--stages 9: $(grep -m1 '^gpipe' k2s.out)"; }
"$HETRAIN" train "${COMMON[@]}" --epochs 2 --optimizer adam --lr 0.002 --export-safetensors adam1.st \
    >adam1.out 2>&1 || fail "adam, one process exited $?: $(tail -3 adam1.out)"
run adam2 2 --epochs 2 --optimizer adam --lr 0.002 --strategy gpipe --micro-batches 2 && same adam1 adam2
echo "test_pipe: gpipe and 1f1b on 2 and 3 stages equal one process bit for bit"

# ---- 1F1B's bound: stage k keeps min(M, K - k) tapes, the same bits as GPipe's M ----
stash() { # FILE: the last epoch's stash_bytes per stage, comma-separated
    grep '"type":"epoch"' "$1" | tail -1 | sed -n 's/.*"stash_bytes":\[\([0-9,]*\)\].*/\1/p'
}
# (the cut fixed: the stash bytes are the stages' activations, and the measured plan of two
# runs may differ with the host's load)
run g4 2 --epochs 1 --momentum 0.9 --strategy gpipe --micro-batches 4 --stages 4 --metrics g4.jsonl &&
    run f4 2 --epochs 1 --momentum 0.9 --strategy gpipe --micro-batches 4 --stages 4 \
        --pipe-schedule 1f1b --metrics f4.jsonl && same g4 f4
if [ -f g4.jsonl ] && [ -f f4.jsonl ]; then
    IFS=, read -r g0 g1 <<<"$(stash g4.jsonl)"
    IFS=, read -r f0 f1 <<<"$(stash f4.jsonl)"
    # 2 stages, 4 micro-batches: gpipe 4 tapes a stage; 1f1b 2 on stage 0, 1 on stage 1
    [ -n "$g0" ] && [ -n "$g1" ] && [ "$g0" -gt 0 ] && [ "$g1" -gt 0 ] &&
        [ "$((4 * f0))" = "$((2 * g0))" ] && [ "$((4 * f1))" = "$g1" ] ||
        fail "1f1b stash: gpipe $g0,$g1 bytes, 1f1b $f0,$f1: expected 2/4 and 1/4 of gpipe's"
    grep -q "^epoch 1/1 .* stash MB $(awk -v a="$f0" -v b="$f1" 'BEGIN { printf "%.2f/%.2f", a / 1e6, b / 1e6 }') " f4.out ||
        fail "1f1b: the epoch line's stash MB: $(grep -m1 '^epoch' f4.out)"
fi

# ---- R pipelines == allreduce over R ranks ----
run ar2 2 --epochs 2 --momentum 0.9 && run r2 4 --epochs 2 --momentum 0.9 --strategy gpipe \
    --pipelines 2 --micro-batches 1 && same ar2 r2

# ---- resume ----
run full 2 --epochs 2 --momentum 0.9 --strategy gpipe --pipe-schedule 1f1b
run half 2 --epochs 1 --momentum 0.9 --strategy gpipe --pipe-schedule 1f1b --checkpoint ck.bin
run rest 2 --epochs 2 --momentum 0.9 --strategy gpipe --pipe-schedule 1f1b --checkpoint ck.bin --resume &&
    same full rest

# ---- what it reports ----
run rep 2 --epochs 1 --strategy gpipe --micro-batches 4 --metrics rep.jsonl
if [ -f rep.out ]; then
    grep -q '^gpipe: 2 stages x 1 pipeline, 4 micro-batches of up to 8 samples: stage 0 layers 0-' rep.out ||
        fail "no plan line: $(grep -m1 gpipe rep.out)"
    grep -q '^epoch 1/1 .* | gpipe stages 0-[0-9]*/[0-9]*-[0-9]* bubble [0-9]*%/[0-9]*% stash MB' rep.out ||
        fail "no pipeline figures in the epoch line: $(grep -m1 '^epoch' rep.out)"
    j=$(grep '"type":"epoch"' rep.jsonl | tail -1 | sed -n 's/.*"gpipe":{\([^}]*\)}.*/\1/p')
    [ -n "$j" ] || fail "no gpipe member in the metrics"
    cut=$(echo "$j" | sed -n 's/.*"cuts":\[0,\([0-9]*\),[0-9]*\].*/\1/p')
    fwd=$(echo "$j" | sed -n 's/.*"bytes_fwd":\[\([0-9]*\),0\].*/\1/p')
    bwd=$(echo "$j" | sed -n 's/.*"bytes_bwd":\[0,\([0-9]*\)\].*/\1/p')
    [ -n "$fwd" ] && [ "$fwd" = "$bwd" ] || fail "bytes forward $fwd, backward $bwd: expected equal ($j)"
    # lenet5's activation at the cut, floats per sample (28x28 input: conv 6@28x28, then
    # maxpool and relu 6@14x14, conv 16@10x10; models/lenet5.net pools before its ReLU)
    case "$cut" in
        1) per=$((6 * 28 * 28)) ;;
        2|3) per=$((6 * 14 * 14)) ;;
        4) per=$((16 * 10 * 10)) ;;
        *) per= ;;
    esac
    [ -z "$per" ] || [ "$fwd" = $((512 * per * 4)) ] ||
        fail "cut $cut: $fwd bytes forward, expected 512 samples x $per floats x 4"
    echo "$j" | grep -o '"bubble":\[[^]]*\]' | tr -d '"bubble:[]' | tr ',' '\n' |
        awk '{ if ($1 < 0 || $1 > 1) bad = 1 } END { exit bad }' || fail "bubble outside [0, 1]: $j"
fi

# ---- a cost table (--compute-cost shipped): the plan and every stage's time are the table's ----
# two runs of gpipe and of qfb give the same plan (stage costs to the printed digit), virtual
# times and weights bit for bit; a stage's charged compute is the table's, not this host's
TAB=(--epochs 1 --clock virtual --compute-cost shipped --net-bw 12.5M --ranks-per-node 1
     --micro-batches 4)
vt() { grep '"type":"epoch"' "$1" | tail -1 | sed -n 's/.*"vtime_s":\([0-9.e+-]*\).*"compute_s":\[\([^]]*\)\].*/\1 \2/p'; }
for s in gpipe qfb; do
    run "tab${s}1" 2 "${TAB[@]}" --strategy $s --metrics "tab${s}1.jsonl" || continue
    run "tab${s}2" 2 "${TAB[@]}" --strategy $s --metrics "tab${s}2.jsonl" || continue
    same "tab${s}1" "tab${s}2"
    grep -q 'compute costs (virtual clock): the shipped table of lenet5' "tab${s}1.out" ||
        fail "$s: no shipped table line: $(grep -m1 costs "tab${s}1.out")"
    p1=$(grep -m1 '^gpipe: 2 stages\|^qfb: 2 stages' "tab${s}1.out")
    p2=$(grep -m1 '^gpipe: 2 stages\|^qfb: 2 stages' "tab${s}2.out")
    [ -n "$p1" ] && [ "$p1" = "$p2" ] || fail "$s: the table's plans differ: '$p1' / '$p2'"
    a=$(vt "tab${s}1.jsonl") b=$(vt "tab${s}2.jsonl")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$s: virtual times differ between two runs: '$a' / '$b'"
done
echo "test_pipe: gpipe and qfb on the shipped cost table: plan, virtual times and weights the same each run"

# ---- refusals ----
refused() { # what expected-pattern P args...
    local what=$1 pat=$2 P=$3; shift 3
    if [ "$P" -gt 2 ] && [ $many = 0 ]; then return; fi
    mpi "$P" train "${COMMON[@]}" --epochs 1 "$@" >bad.out 2>&1 && { fail "$what: accepted"; return; }
    grep -q "$pat" bad.out || fail "$what: $(grep -m1 -i error bad.out)"
}
refused "3 ranks, 2 pipelines" "3 ranks are not a multiple of --pipelines 2" 3 --strategy gpipe --pipelines 2
refused "too many stages" "at most [0-9]* stages, not 6" 6 --strategy gpipe --model mlp
refused "--stages, 2 cuts for 2 stages" "stages gives 2 cuts, 2 stages need 1" 2 --strategy gpipe --stages 3,5
refused "--stages at the end" "cannot be cut before layer 12 (12 layers" 2 --strategy gpipe --stages 12
refused "--stages descending" "is not a list of ascending integers" 2 --strategy gpipe --stages 5,3

[ $failures -eq 0 ] || { echo "test_pipe: $failures failure(s)" >&2; exit 1; }
echo "test_pipe: all checks passed"
