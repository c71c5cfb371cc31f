#!/usr/bin/env bash
# The dataset catalog through the command line (docs/DATA.md): --data synthetic with
# --synthetic-shape and --classes (train, checkpoint, eval), --data idx on a directory of small
# IDX files written here (some raw, some .gz; images of 6 x 5, labels 0..2), and the one-line
# refusals of an idx directory whose test images differ from the training images or that lacks
# a file. Env: HETRAIN (the binary). Exit status 1 if any check fails.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
# Open MPI's initialization leaks by design; under AddressSanitizer only the leak report is off
# (the unit tests check the library for leaks without MPI).
. "$(dirname "$0")/no_leaks.sh"
export LC_ALL=C
T=$(mktemp -d /tmp/het_cli_data_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# ---- synthetic of another shape and class count: train, checkpoint, eval ----
"$HETRAIN" train --model mlp --data synthetic --synthetic-shape 3x16x16 --classes 5 --epochs 1 \
    --progress off --checkpoint s.ckpt >s.out 2>s.err
rc=$?
[ $rc -eq 0 ] || fail "synthetic 3x16x16: exit $rc: $(cat s.err)"
grep -q '^hetrain: mlp on synthetic: 2048 train / 512 test samples of 3x16x16, 5 classes$' s.out ||
    fail "synthetic 3x16x16: no header line naming the shape and classes: $(head -n 2 s.out)"
grep -q '^epoch 1/1 ' s.out || fail "synthetic 3x16x16: no epoch line: $(cat s.out)"
"$HETRAIN" eval --checkpoint s.ckpt >e.out 2>e.err ||
    fail "eval of the 3x16x16 checkpoint: $(cat e.err)"
grep -q '^eval mlp on synthetic (512 test samples)' e.out || fail "eval: $(cat e.out)"

# ---- an IDX directory: train 48 images, test 24, of 6 x 5 pixels, labels i % 3 ----
# be32 N: the 4 bytes of N, big-endian, as printf escapes
be32() { printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) \
    $(($1 >> 8 & 255)) $(($1 & 255)); }
# images N H W SEED: an IDX3 file on stdout; image i of class i % 3 is bright in rows of its
# class, dark elsewhere, with a little deterministic noise
images() {
    local n=$1 h=$2 w=$3 s=$4 fmt i r c v
    fmt="\\000\\000\\010\\003$(be32 "$n")$(be32 "$h")$(be32 "$w")"
    for ((i = 0; i < n; i++)); do
        for ((r = 0; r < h; r++)); do
            for ((c = 0; c < w; c++)); do
                v=$(((i * 37 + r * 11 + c * 5 + s) % 40))
                [ $((r % 3)) -eq $((i % 3)) ] && v=$((v + 200))
                fmt+=$(printf '\\%03o' "$v")
            done
        done
    done
    printf "$fmt"
}
# labels N: an IDX1 file of labels i % 3 on stdout
labels() {
    local n=$1 fmt i
    fmt="\\000\\000\\010\\001$(be32 "$n")"
    for ((i = 0; i < n; i++)); do fmt+=$(printf '\\%03o' $((i % 3))); done
    printf "$fmt"
}
D=$T/idx
mkdir -p "$D"
images 48 6 5 1 >"$D/train-images-idx3-ubyte"
labels 48 | gzip -c >"$D/train-labels-idx1-ubyte.gz"
images 24 6 5 2 | gzip -c >"$D/t10k-images-idx3-ubyte.gz"
labels 24 >"$D/t10k-labels-idx1-ubyte"
[ "$(wc -c <"$D/train-images-idx3-ubyte")" -eq $((16 + 48 * 30)) ] ||
    fail "test setup: train-images-idx3-ubyte has $(wc -c <"$D/train-images-idx3-ubyte") bytes"

"$HETRAIN" train --model mlp --data idx --data-dir "$D" --epochs 1 --batch 8 --progress off \
    >i.out 2>i.err
rc=$?
[ $rc -eq 0 ] || fail "idx: exit $rc: $(cat i.err)"
grep -q '^hetrain: mlp on idx: 48 train / 24 test samples of 1x6x5, 3 classes$' i.out ||
    fail "idx: no header line naming the shape and classes: $(head -n 2 i.out)"
grep -q '^epoch 1/1 ' i.out || fail "idx: no epoch line: $(cat i.out)"
"$HETRAIN" info --model mlp --data idx --data-dir "$D" >n.out 2>n.err ||
    fail "info on idx: $(cat n.err)"
grep -q '^model mlp: input 1x6x5, 3 classes$' n.out || fail "info: model line: $(cat n.out)"
grep -q '^dataset idx: 48 train / 24 test samples of 1x6x5, 3 classes$' n.out ||
    fail "info: dataset line: $(cat n.out)"

# expect_refusal "PATTERN" ARGS...: exit 2, one line on stderr, nothing on stdout
expect_refusal() {
    local want=$1
    shift
    "$HETRAIN" "$@" >r.out 2>r.err
    local rc=$?
    if [ $rc -ne 2 ] || [ -s r.out ] || [ "$(wc -l <r.err)" -ne 1 ] ||
        ! grep -qF -- "$want" r.err; then
        fail "hetrain $*: exit $rc (expected 2), stdout $(wc -c <r.out) bytes: $(cat r.err)"
    fi
}
# test images of 7 x 5 against training images of 6 x 5
images 24 7 5 2 | gzip -c >"$D/t10k-images-idx3-ubyte.gz"
expect_refusal "$D/t10k-images-idx3-ubyte.gz: offset 8: images of 7 x 5, expected 6 x 5 as in $D/train-images-idx3-ubyte" \
    train --model mlp --data idx --data-dir "$D" --epochs 1
rm "$D/t10k-labels-idx1-ubyte"
expect_refusal "$D/t10k-labels-idx1-ubyte.gz: No such file or directory (--data idx reads" \
    train --model mlp --data idx --data-dir "$D" --epochs 1

# --holdout N: the last N of the training samples in use are evaluated and not trained on
"$HETRAIN" train --model mlp --data synthetic --train-limit 1000 --holdout 250 --epochs 1 \
    --metrics "$D/h.jsonl" --progress off >"$D/h.out" 2>&1 || fail "--holdout exited $?: $(tail -2 "$D/h.out")"
grep -q '^holdout: training on samples 0-749, test_loss and test_acc on the 250 after them (not the test set)$' "$D/h.out" ||
    fail "--holdout: no line saying what is held out: $(grep -m1 holdout "$D/h.out")"
grep -q '"samples":750,' "$D/h.jsonl" || fail "--holdout: trained on $(grep -o '"samples":[0-9]*' "$D/h.jsonl"), expected 750"
"$HETRAIN" train --model mlp --data synthetic --train-limit 1000 --holdout 1000 --epochs 1 >"$D/h2.out" 2>&1 &&
    fail "--holdout 1000 of 1000 samples accepted"
[ "$(grep -c '^hetrain' "$D/h2.out")" -eq 1 ] &&
    grep -q -- '--holdout 1000: the training set has 1000 samples (after --train-limit), expected fewer held out' "$D/h2.out" ||
    fail "--holdout 1000 of 1000: $(cat "$D/h2.out")"

if [ $failures -ne 0 ]; then
    echo "test_cli_data: $failures failed" >&2
    exit 1
fi
echo "test_cli_data: all passed"
