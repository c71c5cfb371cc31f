#!/usr/bin/env bash
# --precision bf16 on the command line: the startup line names the kernels (oneDNN's bf16
# convolutions on a CPU with AMX or AVX512-BF16 where --bf16-kernels auto takes them, the
# portable path elsewhere; HET_BF16_CPU and HET_BF16_RATIO make it say what it says on another
# CPU; auto's portable choice trains what --bf16-kernels portable trains), a bf16 run within a
# stated bound of the fp32 run, bitwise reproducible for a seed, resume bitwise equal to the
# straight run (checkpoint bytes; checkpoints hold fp32 master weights), the config file key,
# eval of a bf16 checkpoint, refusals; under mpirun: a 2-rank bf16 run within rounding of the
# 1-rank run after 3 epochs (loss within 0.02, test accuracy within 0.03: the runs differ by
# the bf16 wire's rounding of each step's gradient sum, which 48 steps carry on), its gradients on a
# bf16 wire (half the bytes of the fp32 run's all-reduce); on oneDNN's bf16 kernels, cifar-cnn's
# activations between convolutions stay bf16, with the weights of fp32 edges.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
T=$(mktemp -d /tmp/het_cli_bf16_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }
field() { sed -n "s/^epoch $2\/$2.* $3 \([0-9.]*\) .*/\1/p" "$1"; }
COMMON=(--model lenet5 --data synthetic --train-limit 1024 --test-limit 256 --seed 5 --progress off)

# ---- one process: the startup line, fp32 against bf16 ----
"$HETRAIN" train "${COMMON[@]}" --epochs 3 >f.out 2>&1 || fail "fp32 run: $(cat f.out)"
"$HETRAIN" train "${COMMON[@]}" --epochs 3 --precision bf16 --checkpoint b.ckpt >b.out 2>&1 ||
    fail "bf16 run: $(cat b.out)"
grep -q '^precision: ' f.out && fail "an fp32 run printed a precision line: $(grep '^precision' f.out)"
# the kernels: oneDNN's bf16 convolutions and matmuls where this CPU has AMX or AVX512-BF16 (and
# oneDNN is built in) and --bf16-kernels auto takes them (AMX, or a bf16 dot product at 0.75x
# the fp32 multiply rate or more: HET_BF16_RATIO stands for the measurement), else the portable
# path; --bf16-kernels onednn / portable whatever the rate
# (the line's parentheses as '.', so that the pattern means the same to grep and grep -E)
ONL="^precision: bf16 .*kernels: oneDNN's bf16 convolutions where oneDNN runs a layer .this CPU has .*. and its bf16 matmul for dense layers"
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && grep -q 'convolutions: oneDNN' b.out; then
    grep -Eq "$ONL|^precision: bf16 .*kernels: portable \(rounded operands into the fp32 kernels; this CPU has AVX512-BF16: .*; --bf16-kernels auto: this CPU's bf16 dot product runs at [0-9.]+x the fp32 multiply rate, below 0.75x" b.out ||
        fail "no kernel line naming the choice on a CPU with bf16 instructions: $(grep '^precision' b.out)"
    "$HETRAIN" train "${COMMON[@]}" --epochs 1 --precision bf16 --bf16-kernels onednn >on.out 2>&1
    grep -q "$ONL" on.out && grep -q -- '--bf16-kernels onednn)' on.out ||
        fail "--bf16-kernels onednn: $(grep '^precision' on.out)"
    # cifar-cnn's conv -> ReLU -> conv edges stay bf16 on oneDNN's kernels; the weights are
    # those of fp32 edges (HET_BF16_ACTS=fp32), bit for bit
    CC=(--model cifar-cnn --data synthetic --train-limit 96 --test-limit 32 --batch 32 --seed 5
        --progress off --epochs 1 --precision bf16 --bf16-kernels onednn)
    "$HETRAIN" train "${CC[@]}" --export-safetensors lp.st >lp.out 2>&1 &&
        HET_BF16_ACTS=fp32 "$HETRAIN" train "${CC[@]}" --export-safetensors lq.st >lq.out 2>&1 ||
        fail "cifar-cnn on oneDNN's bf16 kernels: $(tail -2 lp.out lq.out)"
    grep -q "activations stay bf16 on 2 edges between convolutions$" lp.out &&
        grep -q "activations stay bf16 on 0 edges between convolutions$" lq.out ||
        fail "the bf16 edges: $(grep -ho 'activations stay.*' lp.out lq.out)"
    # bitwise on the jit_bf16 kernels (AVX512-BF16); test_bf16 bounds the AMX case
    grep -qw amx_bf16 /proc/cpuinfo || cmp -s lp.st lq.st ||
        fail "bf16 activation edges trained other weights than fp32 edges"
    if grep -qw avx512_bf16 /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo; then
        HET_BF16_RATIO=2 "$HETRAIN" train "${COMMON[@]}" --epochs 1 --precision bf16 >r2.out 2>&1
        grep -q "$ONL" r2.out && grep -q 'runs at 2.00x the fp32 multiply rate, at least 0.75x' r2.out ||
            fail "auto with a rate of 2: $(grep '^precision' r2.out)"
        HET_BF16_RATIO=0.5 "$HETRAIN" train "${COMMON[@]}" --epochs 3 --precision bf16 --export-safetensors r05.st >r05.out 2>&1
        grep -q 'kernels: portable (rounded operands into the fp32 kernels; .*runs at 0.50x the fp32 multiply rate, below 0.75x, so oneDNN.s fp32 kernels are the faster)' r05.out ||
            fail "auto with a rate of 0.5: $(grep '^precision' r05.out)"
        "$HETRAIN" train "${COMMON[@]}" --epochs 3 --precision bf16 --bf16-kernels portable --export-safetensors port.st >port.out 2>&1
        grep -q 'kernels: portable (rounded operands into the fp32 kernels; .*; --bf16-kernels portable)' port.out ||
            fail "--bf16-kernels portable: $(grep '^precision' port.out)"
        cmp -s r05.st port.st || fail "auto's portable choice and --bf16-kernels portable trained different weights"
    fi
else
    grep -q '^precision: bf16 .*kernels: portable (for correctness, not speed)' b.out ||
        fail "no kernel line in the bf16 run: $(head -4 b.out)"
fi
grep -q 'precision=bf16' b.out || fail "the config echo lacks precision=bf16"
HET_BF16_CPU=none "$HETRAIN" train "${COMMON[@]}" --epochs 1 --precision bf16 >none.out 2>&1
grep -q '^precision: bf16 .*kernels: portable (for correctness, not speed): this CPU has neither AMX nor AVX512-BF16' none.out ||
    fail "the line without bf16 instructions: $(grep '^precision' none.out)"
HET_BF16_CPU=amx "$HETRAIN" train "${COMMON[@]}" --epochs 1 --precision bf16 >amx.out 2>&1
grep -Eq "^precision: bf16 .*(oneDNN's bf16 convolutions where oneDNN runs a layer \(this CPU has AMX|portable .*this CPU has AMX; oneDNN .* has no bf16 convolution)" amx.out ||
    fail "the AMX line: $(grep '^precision' amx.out)"
lf=$(field f.out 3 loss) lb=$(field b.out 3 loss)
af=$(field f.out 3 test_acc) ab=$(field b.out 3 test_acc)
echo "fp32: loss $lf test_acc $af; bf16: loss $lb test_acc $ab"
close "$lf" "$lb" 0.05 || fail "bf16 loss $lb not within 0.05 of fp32's $lf"
close "$af" "$ab" 0.03 || fail "bf16 test accuracy $ab not within 0.03 of fp32's $af"

# ---- bitwise reproducible; resume equals the straight run ----
"$HETRAIN" train "${COMMON[@]}" --epochs 3 --precision bf16 --checkpoint b2.ckpt >b2.out 2>&1 ||
    fail "bf16 run 2: $(cat b2.out)"
cmp -s b.ckpt b2.ckpt || fail "two bf16 runs with one seed wrote different checkpoints"
"$HETRAIN" train "${COMMON[@]}" --epochs 2 --precision bf16 --checkpoint r.ckpt >r1.out 2>&1 ||
    fail "resume part 1: $(cat r1.out)"
"$HETRAIN" train "${COMMON[@]}" --epochs 3 --checkpoint r.ckpt --resume >r2.out 2>&1 ||
    fail "resume part 2: $(cat r2.out)"
grep -q '^precision: bf16' r2.out || fail "the resumed run is not bf16 (the checkpoint's setting)"
cmp -s b.ckpt r.ckpt || fail "a resumed bf16 run's checkpoint differs from the straight run's"
"$HETRAIN" train "${COMMON[@]}" --epochs 3 --threads 2 --precision bf16 --checkpoint t1.ckpt >t1.out 2>&1 &&
    "$HETRAIN" train "${COMMON[@]}" --epochs 3 --threads 2 --precision bf16 --checkpoint t2.ckpt >t2.out 2>&1 ||
    fail "2-thread bf16 runs: $(cat t1.out t2.out)"
cmp -s t1.ckpt t2.ckpt || fail "two 2-thread bf16 runs differ"

# ---- config file, eval of the bf16 checkpoint ----
printf 'precision = bf16\n' >p.cfg
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --config p.cfg >c.out 2>&1 || fail "config run: $(cat c.out)"
grep -q '^precision: bf16' c.out || fail "precision = bf16 in a config file not taken"
"$HETRAIN" eval --checkpoint b.ckpt --test-limit 256 >e.out 2>&1 || fail "eval: $(cat e.out)"
ae=$(sed -n 's/.*test_acc \([0-9.]*\).*/\1/p' e.out)
[ -n "$ae" ] && [ "$ae" = "$ab" ] || fail "eval of the bf16 checkpoint: test_acc '$ae', training said '$ab'"

# ---- refusals: one line, exit 2 ----
"$HETRAIN" train "${COMMON[@]}" --precision bf16 --bf16-kernels amx >k.out 2>k.err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <k.err)" -eq 1 ] && grep -q "bf16-kernels.*amx" k.err ||
    fail "--bf16-kernels amx: rc $rc, stderr $(cat k.err)"
"$HETRAIN" train "${COMMON[@]}" --precision bf32 >x.out 2>x.err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <x.err)" -eq 1 ] && grep -q "precision.*bf32.*expected fp32 or bf16" x.err ||
    fail "--precision bf32: rc $rc, stderr $(cat x.err)"

# ---- 2 ranks under mpirun: within rounding of 1 rank; gradients as bf16 on the wire ----
if het_mpi_found; then
    mpi() { local P=$1; shift; HET_MPI_TIMEOUT=90 het_mpirun "$P" "$HETRAIN" "$@"; }
    mpi 2 train "${COMMON[@]}" --epochs 3 --precision bf16 --metrics m16.jsonl >m16.out 2>&1 ||
        fail "2-rank bf16 run: $(cat m16.out)"
    mpi 2 train "${COMMON[@]}" --epochs 3 --metrics m32.jsonl >m32.out 2>&1 ||
        fail "2-rank fp32 run: $(cat m32.out)"
    grep -q '^ranks: 2 ranks.*all-reduce flat, gradients as bf16 summed in fp32' m16.out ||
        fail "the 2-rank bf16 run's ranks line: $(grep '^ranks' m16.out)"
    l2=$(field m16.out 3 loss) a2=$(field m16.out 3 test_acc)
    echo "2 ranks bf16: loss $l2 test_acc $a2 (1 rank: $lb $ab)"
    close "$l2" "$lb" 0.02 || fail "2-rank bf16 loss $l2 not within 0.02 of 1 rank's $lb"
    close "$a2" "$ab" 0.03 || fail "2-rank bf16 test accuracy $a2 not within 0.03 of 1 rank's $ab"
    # bytes of rank 0 in the last epoch: bf16 gradients are half of fp32's (plus the fp32 figures)
    b16=$(grep '"epoch"' m16.jsonl | tail -1 | sed -n 's/.*"bytes_node":\[\([0-9]*\),.*/\1/p')
    b32=$(grep '"epoch"' m32.jsonl | tail -1 | sed -n 's/.*"bytes_node":\[\([0-9]*\),.*/\1/p')
    echo "all-reduce bytes of rank 0, epoch 3: bf16 $b16, fp32 $b32"
    awk -v a="${b16:-0}" -v b="${b32:-0}" 'BEGIN { exit !(b > 0 && a / b > 0.45 && a / b < 0.56) }' ||
        fail "bf16 all-reduce bytes $b16 are not about half of fp32's $b32"
    # the pipelines in bf16 (2 stages): near the fp32 run, reproducible, a resume bitwise
    for s in gpipe qfb; do
        # the cut fixed: the measured plan moves with the host's load, and the checkpoints
        # compared below hold the cuts
        P=(--strategy $s --micro-batches 4 --stages 4)
        mpi 2 train "${COMMON[@]}" "${P[@]}" --epochs 3 >p32.out 2>&1 || fail "$s fp32: $(tail -3 p32.out)"
        mpi 2 train "${COMMON[@]}" "${P[@]}" --epochs 3 --precision bf16 --checkpoint p1.ckpt \
            >p16.out 2>&1 || fail "$s bf16: $(tail -3 p16.out)"
        mpi 2 train "${COMMON[@]}" "${P[@]}" --epochs 3 --precision bf16 --checkpoint p2.ckpt \
            >p16b.out 2>&1 || fail "$s bf16, again: $(tail -3 p16b.out)"
        mpi 2 train "${COMMON[@]}" "${P[@]}" --epochs 2 --precision bf16 --checkpoint pr.ckpt \
            >pr1.out 2>&1 && mpi 2 train "${COMMON[@]}" "${P[@]}" --epochs 3 --checkpoint pr.ckpt \
            --resume >pr2.out 2>&1 || fail "$s bf16 resume: $(tail -3 pr1.out pr2.out)"
        grep -q '^precision: bf16' p16.out || fail "$s: no bf16 line: $(grep '^precision' p16.out)"
        lf=$(field p32.out 3 loss) l16=$(field p16.out 3 loss)
        echo "$s 2 stages: loss fp32 $lf, bf16 $l16"
        close "$lf" "$l16" 0.05 || fail "$s bf16 loss $l16 not within 0.05 of fp32's $lf"
        cmp -s p1.ckpt p2.ckpt || fail "$s: two bf16 runs with one seed differ"
        cmp -s p1.ckpt pr.ckpt || fail "$s: a resumed bf16 run differs from the straight run"
        [ "$l16" != "$lf" ] || fail "$s: the bf16 loss is fp32's to the digit: not bf16?"
    done
else
    echo "skipped the 2-rank part: $HET_MPIEXEC not found"
fi
[ $failures -eq 0 ] && echo "test_cli_bf16: all passed"
exit $((failures > 0))
