#!/usr/bin/env bash
# End-to-end checks of `hetrain train | eval | export | info` on the synthetic dataset: accuracy,
# metrics JSON Lines, determinism (metrics and checkpoint bytes), resume through the command
# line (bitwise equal to a straight run), --config files, eval, safetensors, runtime errors.
# Env: HETRAIN (the binary). Exit status 1 if any check fails.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
# Open MPI's initialization leaks by design; under AddressSanitizer only the leak report is off
# (the unit tests check the library for leaks without MPI).
. "$(dirname "$0")/no_leaks.sh"
T=$(mktemp -d /tmp/het_cli_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# Field value of the last metrics line: field FILE KEY
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1" | tail -n 1; }
# Metrics without what differs between equal runs: timing and memory fields
untimed() {
    sed -E -e 's/,"(samples_per_s|elapsed_s|epoch_s)":[^,}]*//g' \
        -e 's/,"(peak_rss_max|peak_rss_sum|pss_sum)":[^,}]*//g' "$1"
}
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }

COMMON=(--model mlp --data synthetic --train-limit 512 --test-limit 256 --seed 3 --progress off)

# ---- a 2-epoch run: output, accuracy, metrics, checkpoint, safetensors ----
"$HETRAIN" train "${COMMON[@]}" --epochs 2 --metrics a.jsonl --checkpoint a.ckpt \
    --export-safetensors a.safetensors >a.out 2>a.err
rc=$?
[ $rc -eq 0 ] || fail "train exited $rc: $(cat a.err)"
[ -s a.err ] && fail "train wrote to stderr: $(cat a.err)"
grep -q '^config: .*seed=3' a.out || fail "no configuration echo with the seed"
[ "$(grep -c '^epoch ' a.out)" -eq 2 ] || fail "expected 2 epoch lines: $(cat a.out)"
grep -q $'\r' a.out && fail "progress bar written although --progress off"
acc=$(sed -n 's/^epoch 2\/2 .* test_acc \([0-9.]*\) .*/\1/p' a.out)
gt "${acc:-0}" 0.8 || fail "printed final test accuracy '$acc', expected > 0.8"
[ "$(wc -l <a.jsonl)" -eq 2 ] || fail "metrics: $(wc -l <a.jsonl) lines, expected 2"
awk -v n=0 '
    { n++
      if ($0 !~ "^\\{\"type\":\"epoch\",\"epoch\":" n ",") {
          print "line " n ": bad start"; bad = 1 }
      if ($0 !~ /\}$/) { print "line " n ": no closing brace"; bad = 1 }
      split("loss train_acc test_loss test_acc lr samples_per_s elapsed_s", k, " ")
      for (i in k) if ($0 !~ "\"" k[i] "\":-?[0-9][0-9.e+-]*[,}]") {
          print "line " n ": no number for " k[i]; bad = 1 } }
    END { exit bad }' a.jsonl || fail "metrics lines malformed: $(cat a.jsonl)"
macc=$(field a.jsonl test_acc)
gt "$macc" 0.8 || fail "metrics final test_acc $macc, expected > 0.8"
[ -s a.ckpt ] && [ ! -e a.ckpt.tmp ] || fail "checkpoint missing or temporary file left"
[ "$(head -c 8 a.ckpt)" = "HETCKPT1" ] || fail "checkpoint magic"

# safetensors: u64 little-endian header length, JSON naming the tensors, then the data
hlen=$(od -An -tu8 -N8 a.safetensors | tr -d ' ')
size=$(wc -c <a.safetensors)
[ $(((8 + hlen) % 8)) -eq 0 ] && [ "$size" -eq $((8 + hlen + 4 * 235146)) ] ||
    fail "safetensors sizes: header $hlen, file $size"
json=$(tail -c +9 a.safetensors | head -c "$hlen")
case "$json" in
'{"layers.0.weight":{"dtype":"F32","shape":[256,784],"data_offsets":[0,802816]}'*) ;;
*) fail "safetensors header: ${json:0:120}" ;;
esac
for name in layers.0.bias layers.2.weight layers.2.bias layers.4.weight layers.4.bias; do
    [[ $json == *"\"$name\":{\"dtype\":\"F32\""* ]] || fail "safetensors lacks $name"
done

# ---- eval reproduces the final test loss and accuracy; export writes the same weights ----
"$HETRAIN" eval --checkpoint a.ckpt >e.out 2>e.err || fail "eval exited $?: $(cat e.err)"
want=$(sed -n 's/^epoch 2\/2 .*\(test_loss [0-9.]* test_acc [0-9.]*\).*/\1/p' a.out)
grep -q "$want" e.out || fail "eval printed '$(cat e.out)', expected '$want'"
"$HETRAIN" export --checkpoint a.ckpt --export-safetensors b.safetensors >/dev/null 2>x.err ||
    fail "export exited $?: $(cat x.err)"
cmp -s a.safetensors b.safetensors || fail "export differs from train --export-safetensors"

# ---- determinism: same seed => same metrics and checkpoint bytes (2 worker threads) ----
for r in 1 2; do
    "$HETRAIN" train "${COMMON[@]}" --epochs 1 --threads 2 --metrics d$r.jsonl \
        --checkpoint d$r.ckpt --quiet >d$r.out 2>&1 || fail "determinism run $r: $(cat d$r.out)"
done
[ -s d1.out ] && fail "--quiet printed: $(cat d1.out)"
cmp -s d1.ckpt d2.ckpt || fail "same seed, different checkpoint bytes"
[ "$(untimed d1.jsonl)" = "$(untimed d2.jsonl)" ] || fail "same seed, different metrics"
grep -q '"loss"' d1.jsonl || fail "determinism metrics empty"
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --threads 2 --seed 4 --metrics d3.jsonl --quiet ||
    fail "seed 4 run"
[ "$(untimed d1.jsonl)" != "$(untimed d3.jsonl)" ] || fail "seed 4 gave the metrics of seed 3"

# ---- resume through the command line equals the straight 2-epoch run, bit for bit ----
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --checkpoint r.ckpt --metrics r.jsonl --quiet ||
    fail "resume part 1"
"$HETRAIN" train --checkpoint r.ckpt --resume --epochs 2 --metrics r.jsonl >r.out 2>&1 ||
    fail "resume part 2: $(cat r.out)"
grep -q '^resumed from r.ckpt after epoch 1' r.out || fail "no resume line: $(cat r.out)"
cmp -s a.ckpt r.ckpt || fail "resumed checkpoint differs from the straight run's"
[ "$(untimed a.jsonl)" = "$(untimed r.jsonl)" ] || fail "resumed metrics differ: $(cat r.jsonl)"

# ---- --config: file values, comments, the command line wins ----
cat >run.conf <<'EOF'
# a config file
model = mlp
data synthetic        # "key value" works too
epochs = 3
train-limit = 256
test_limit = 128
seed = 9
progress = off
EOF
"$HETRAIN" train --config run.conf --epochs 1 --metrics c.jsonl --metrics-steps >c.out 2>c.err ||
    fail "config run: $(cat c.err)"
# 256 samples / batch 64: 4 step lines, then the epoch line
[ "$(grep -c '^{"type":"step","epoch":1,"step":[1-4],"loss":' c.jsonl)" -eq 4 ] &&
    [ "$(sed -n 5p c.jsonl | cut -c1-26)" = '{"type":"epoch","epoch":1,' ] ||
    fail "--metrics-steps lines: $(cat c.jsonl)"
grep -q '^config: model=mlp data=synthetic epochs=1 .*seed=9 .*train-limit=256 test-limit=128' \
    c.out || fail "config not applied: $(grep '^config' c.out)"
[ "$(grep -c '^epoch 1/1 ' c.out)" -eq 1 ] || fail "command line did not override the file"
printf 'model = mlp\nepochs = many\n' >bad.conf
"$HETRAIN" train --config bad.conf >o.txt 2>e.txt
rc=$?
[ $rc -eq 2 ] && [ ! -s o.txt ] && [ "$(wc -l <e.txt)" -eq 1 ] &&
    grep -q 'bad.conf:2: epochs' e.txt ||
    fail "bad config line: rc $rc, stderr '$(cat e.txt)'"

# ---- runtime failures: exit 1, one line naming the file ----
"$HETRAIN" train --data fashion-mnist --data-dir "$T/nowhere" --epochs 1 >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && grep -q "$T/nowhere/train-images" e.txt ||
    fail "bad data dir: rc $rc, stderr '$(cat e.txt)'"
cp a.ckpt flip.ckpt
printf '\x5a' | dd of=flip.ckpt bs=1 seek=5000 conv=notrunc 2>/dev/null
"$HETRAIN" eval --checkpoint flip.ckpt >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && grep -q 'flip.ckpt: offset [0-9]*: CRC-32' e.txt ||
    fail "corrupted checkpoint: rc $rc, stderr '$(cat e.txt)'"
head -c 3000 a.ckpt >short.ckpt
"$HETRAIN" eval --checkpoint short.ckpt >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] &&
    grep -q 'short.ckpt: offset 3000: .*truncated' e.txt ||
    fail "truncated checkpoint: rc $rc, stderr '$(cat e.txt)'"
# not a checkpoint at all: refused from its type or its first bytes, at once (shared FINDINGS #8)
for bad in /dev/zero "$T"; do
    timeout 20 "$HETRAIN" eval --checkpoint "$bad" >o.txt 2>e.txt
    rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && [ ! -s o.txt ] &&
        grep -q "$bad: \(not a regular file\|is a directory\)" e.txt ||
        fail "eval --checkpoint $bad: rc $rc, stderr '$(cat e.txt)'"
done
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --lr 1e6 --momentum 0 >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] &&
    grep -q '^hetrain: epoch 1 step 3: non-finite gradient in layer 4 (dense), loss nan; training diverged' e.txt ||
    fail "divergence: rc $rc, stderr '$(cat e.txt)'"
# a blow-up mid-epoch in a convolutional model: the step and the layer are named, no
# checkpoint is written; skip-step drops such steps (all of them here: the weights are huge
# after the first update), and the run still stops with the test loss
"$HETRAIN" train --model lenet5 --data synthetic --train-limit 640 --test-limit 64 \
    --progress off --epochs 1 --lr 1e30 --checkpoint nan.ckpt >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && [ ! -e nan.ckpt ] &&
    grep -q '^hetrain: epoch 1 step 2: non-finite gradient in layer 11 (dense), loss nan' e.txt ||
    fail "mid-epoch divergence: rc $rc, checkpoint $(ls nan.ckpt 2>&1), stderr '$(cat e.txt)'"
"$HETRAIN" train --model lenet5 --data synthetic --train-limit 640 --test-limit 64 \
    --progress off --epochs 1 --lr 1e30 --on-nan skip-step >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && grep -q 'config: .*on-nan=skip-step' o.txt &&
    grep -q 'training diverged: test loss nan after epoch 1' e.txt ||
    fail "skip-step with huge weights: rc $rc, stderr '$(cat e.txt)'"
# an output path equal to the checkpoint (or another output) is refused before anything is
# written, and a folder that cannot be written is found before training (shared FINDINGS #3, #4)
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --checkpoint a.ckpt --trace ./a.ckpt >o.txt 2>e.txt
rc=$?
[ $rc -eq 2 ] && grep -q "checkpoint: 'a.ckpt' is also the trace file" e.txt &&
    "$HETRAIN" eval --checkpoint a.ckpt >/dev/null 2>&1 || fail "same path: rc $rc, $(cat e.txt)"
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --export-safetensors /nonexistent-dir/w.st >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && ! grep -q '^epoch' o.txt &&
    grep -q "export-safetensors: cannot write '/nonexistent-dir/w.st'.*before training" e.txt ||
    fail "unwritable output folder: rc $rc, $(cat o.txt e.txt)"
# a blow-up in the last step of an epoch (every step is the last: one step per epoch): caught
# after the epoch, before its checkpoint replaces the good one (shared FINDINGS #2)
"$HETRAIN" train --model lenet5 --data synthetic --train-limit 64 --test-limit 64 --epochs 1 \
    --progress off --checkpoint good.ckpt --quiet >o.txt 2>&1 || fail "good checkpoint: $(cat o.txt)"
"$HETRAIN" train --resume --checkpoint good.ckpt --epochs 3 --lr 1e6 --progress off >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && grep -q 'training diverged: .*after epoch' e.txt ||
    fail "last-step divergence: rc $rc, stderr '$(cat e.txt)'"
"$HETRAIN" eval --checkpoint good.ckpt --test-limit 64 >o.txt 2>&1 &&
    grep -q 'test_loss [0-9][0-9.]* test_acc' o.txt ||
    fail "the checkpoint left by a diverged run is not finite: $(cat o.txt)"
"$HETRAIN" eval --checkpoint a.ckpt --model lenet5 >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && grep -q 'model "mlp", expected "lenet5"' e.txt && [ ! -s o.txt ] ||
    fail "model mismatch: rc $rc, stderr '$(cat e.txt)'"

# ---- info and help ----
"$HETRAIN" info --model lenet5 --data synthetic >i.out 2>&1 || fail "info exited $?"
grep -q '^parameters: 61706 ' i.out && grep -q 'conv2d .*1x28x28 .*6x28x28' i.out &&
    grep -q '^dataset synthetic: 2048 train / 512 test' i.out || fail "info: $(cat i.out)"
for h in "--help" "help" "train --help" "eval --help" "info -h" "export --help" "help train"; do
    # shellcheck disable=SC2086
    "$HETRAIN" $h >h.out 2>h.err || fail "hetrain $h exited $?"
    grep -q '^usage: hetrain' h.out && [ ! -s h.err ] || fail "hetrain $h: no usage on stdout"
done

if [ $failures -ne 0 ]; then
    echo "test_cli: $failures failed" >&2
    exit 1
fi
echo "test_cli: all passed"
