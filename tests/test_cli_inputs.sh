#!/usr/bin/env bash
# Hostile inputs on the newer surfaces (shared FINDINGS-v4): every reader opens its file
# through one helper (src/core/infile.c), so a FIFO, a device or a directory is refused with
# one line naming it before anything blocks on it (model files, ONNX, safetensors, cost
# tables, config, speeds, IDX, CIFAR, checkpoints; on 2 ranks too, all of them exiting); a
# model file too large for memory is refused naming its line and the bytes (#3); a
# safetensors file with a NaN is refused on reading, naming the tensor and offset (#4); an
# ONNX network made for other inputs is refused in one line (#5); calibrate --costs-out runs
# on 2 ranks (#6); SIGTERM during an export removes its temp file and names it (#7); an IDX
# label file whose header disagrees with the images is refused from the headers, before its
# payload (#8); a resume with other --stages is refused, and one under a new strategy is not
# blocked by the checkpoint's options of its old one (#9). Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
export LC_ALL=C
. "$(dirname "$0")/mpi.sh"
T=$(mktemp -d /tmp/het_cli_inputs_XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
S=(--data synthetic --epochs 1 --progress off --train-limit 64 --test-limit 32)

# refused NAME PATTERN CMD...: CMD (killed after 30 s: a reader that blocks fails here) must
# exit non-zero, not by the timeout, with exactly one line on stderr matching PATTERN
refused() {
    local name=$1 pat=$2 rc
    shift 2
    timeout -k 5 30 "$@" >"$name.out" 2>"$name.err"
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        fail "$name: still running after 30 s (blocked on its input?)"
        return
    fi
    [ $rc -ne 0 ] || fail "$name: exit 0, expected a refusal"
    [ "$(wc -l <"$name.err")" -eq 1 ] || fail "$name: expected one line on stderr: $(cat "$name.err")"
    grep -q -- "$pat" "$name.err" || fail "$name: stderr '$(cat "$name.err")' lacks '$pat'"
}

# ---- #1 and the shared opening: what is not a regular file, for every reader ----
mkfifo fifo
mkdir folder
NRF="fifo: not a regular file (a FIFO), expected"
refused model-fifo "$NRF a model file" "$HETRAIN" train --model-file fifo "${S[@]}"
refused info-fifo "$NRF a model file" "$HETRAIN" info --model-file fifo --data synthetic
refused model-zero "/dev/zero: not a regular file (a character device)" \
    "$HETRAIN" train --model-file /dev/zero "${S[@]}"
refused init-fifo "$NRF a safetensors file" "$HETRAIN" train --model mlp --init-from fifo "${S[@]}"
refused init-folder "folder: is a directory" "$HETRAIN" train --model mlp --init-from folder "${S[@]}"
refused costs-fifo "$NRF a cost table" "$HETRAIN" train --model mlp --clock virtual \
    --compute-cost calibrated:fifo "${S[@]}"
refused config-fifo "$NRF a config file" "$HETRAIN" train --config fifo
refused ckpt-fifo "$NRF a checkpoint file" "$HETRAIN" eval --checkpoint fifo
refused resume-fifo "$NRF a checkpoint file" "$HETRAIN" train --model mlp --checkpoint fifo \
    --resume "${S[@]}"
# data files: an IDX directory and a CIFAR-10 one, one file of each a FIFO
be32() { printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) \
    $(($1 >> 8 & 255)) $(($1 & 255)); }
labels() { # labels N: an IDX1 file of labels i % 3
    local fmt i
    fmt="\\000\\000\\010\\001$(be32 "$1")"
    for ((i = 0; i < $1; i++)); do fmt+=$(printf '\\%03o' $((i % 3))); done
    printf "$fmt"
}
images() { # images N: an IDX3 file of N images of 6 x 5 random pixels
    printf "\\000\\000\\010\\003$(be32 "$1")$(be32 6)$(be32 5)"
    head -c $(($1 * 30)) /dev/urandom
}
mkdir idx
images 48 >idx/train-images-idx3-ubyte
labels 48 >idx/train-labels-idx1-ubyte
images 24 >idx/t10k-images-idx3-ubyte
mkfifo idx/t10k-labels-idx1-ubyte
refused idx-fifo "idx/t10k-labels-idx1-ubyte: not a regular file (a FIFO)" \
    "$HETRAIN" train --model mlp --data idx --data-dir idx --epochs 1 --progress off
mkdir cifar
mkfifo cifar/data_batch_1.bin
for f in data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin; do
    head -c 3073 /dev/zero >"cifar/$f"
done
refused cifar-fifo "cifar/data_batch_1.bin: not a regular file (a FIFO)" \
    "$HETRAIN" train --model mlp --data cifar10 --data-dir cifar --epochs 1 --progress off
if het_mpi_found; then
    # 2 ranks: both stop, one line, no hang; hgc's speeds file on its ranks
    for k in model speeds; do
        opt=(--model-file fifo)
        [ $k = speeds ] && opt=(--model mlp --strategy hgc --speeds-file fifo)
        HET_MPI_TIMEOUT=60 het_mpirun 2 "$HETRAIN" train "${opt[@]}" "${S[@]}" >mp.out 2>mp.err
        rc=$?
        [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "2 ranks, $k FIFO: exit $rc: $(cat mp.err)"
        [ "$(grep -c '^hetrain' mp.err)" -eq 1 ] && grep -q "^hetrain.*$NRF" mp.err ||
            fail "2 ranks, $k FIFO: expected one line naming it: $(cat mp.err)"
    done
fi

# ---- #3: a model file asking for more memory than there is: its line and the bytes ----
printf 'dense out=1048576\ndense out=1048576\n' >big.net
refused big-model "^hetrain: big.net: line 2: dense out=1048576 on input 1048576x1x1: the model \
needs [0-9.]* TB ([0-9]* bytes)" "$HETRAIN" train --model-file big.net "${S[@]}"

# ---- #4: a NaN in --init-from: refused on reading, with the tensor and its offset ----
MODELS=${HET_SOURCE_DIR:-$(dirname "$0")/..}/models
"$HETRAIN" export --model-file "$MODELS/mlp.net" --data synthetic --export-safetensors w.st \
    >/dev/null 2>x.err ||
    fail "export safetensors: $(cat x.err)"
if [ -s w.st ]; then
    hlen=$(od -An -t u8 -N 8 w.st | tr -d ' ')
    printf '\000\000\300\177' | dd of=w.st bs=1 seek=$((8 + hlen + 8)) conv=notrunc 2>/dev/null
    refused init-nan "^hetrain: w.st: offset $((8 + hlen + 8)): tensor '[a-z0-9.]*': element 2 \
is NaN, expected finite weights" "$HETRAIN" train --model mlp --init-from w.st "${S[@]}"
    refused eval-nan "w.st: offset $((8 + hlen + 8)): .* is NaN" \
        "$HETRAIN" eval --model mlp --data synthetic --init-from w.st
fi

# ---- #5: an ONNX network made for other inputs, in one line ----
"$HETRAIN" export --model-file "$MODELS/lenet5.net" --data synthetic --synthetic-shape 3x32x32 \
    --export-onnx c32.onnx >/dev/null 2>x.err || fail "export onnx: $(cat x.err)"
refused onnx-input "c32.onnx: the graph's input is 3x32x32 a sample, expected the data's \
1x28x28" "$HETRAIN" train --model-file c32.onnx "${S[@]}"

# ---- #7: SIGTERM during an export: the temp file removed, the export named ----
printf 'dense out=32768\nrelu\ndense out=classes\n' >wide.net
"$HETRAIN" export --model-file wide.net --data synthetic --export-onnx w.onnx >e.out 2>e.err &
pid=$!
pids+=("$pid")
for _ in $(seq 1500); do [ -e w.onnx.tmp ] && break; sleep 0.02; done
if [ -e w.onnx.tmp ]; then
    kill -s TERM "$pid"
    wait "$pid"
    rc=$?
    if [ $rc -eq 143 ]; then
        grep -qx "hetrain: interrupted (ONNX export w.onnx not written)" e.err ||
            fail "SIGTERM in an export: message '$(cat e.err)'"
        [ -e w.onnx.tmp ] && fail "SIGTERM in an export: w.onnx.tmp left behind"
        [ -e w.onnx ] && fail "SIGTERM in an export: w.onnx written"
    else # the write ended first: then it is whole
        [ $rc -eq 0 ] && [ -s w.onnx ] && [ ! -e w.onnx.tmp ] ||
            fail "export ended with $rc before the signal: $(cat e.err)"
    fi
else
    wait "$pid"
    echo "test_cli_inputs: the export ended before its temp file was seen (not checked)"
fi

# ---- #8: the label header against the images' before any payload ----
mkdir bomb
cp idx/train-images-idx3-ubyte idx/t10k-images-idx3-ubyte bomb/
labels 24 >bomb/t10k-labels-idx1-ubyte
# 2^31 - 1 labels announced, 16 MiB of them present: the old reader inflated them first
{ printf "\\000\\000\\010\\001$(be32 2147483647)"; head -c 16777216 /dev/zero; } | gzip -1 \
    >bomb/train-labels-idx1-ubyte.gz
refused idx-header "bomb/train-labels-idx1-ubyte.gz: offset 4: 2147483647 labels, expected 48 \
to match the images in bomb/train-images-idx3-ubyte" \
    "$HETRAIN" train --model mlp --data idx --data-dir bomb --epochs 1 --progress off

# a CIFAR-10 .gz of 100001 records (300 MB inflated from 300 kB): refused at the bound
rm cifar/data_batch_1.bin
head -c $((100001 * 3073)) /dev/zero | gzip -1 >cifar/data_batch_1.bin
refused cifar-bomb "cifar/data_batch_1.bin: offset 307300000: record 100001, expected at \
most 100000 records a file" \
    "$HETRAIN" train --model mlp --data cifar10 --data-dir cifar --epochs 1 --progress off

if het_mpi_found; then
    # ---- #6: calibrate --costs-out on 2 ranks writes the table, which a run then reads ----
    het_mpirun 2 "$HETRAIN" calibrate --model mlp --data synthetic --train-limit 256 \
        --clock virtual --costs-out c2.txt >cal.out 2>cal.err ||
        fail "calibrate --costs-out on 2 ranks: $(grep hetrain cal.err)"
    grep -q '^hetrain-costs ' c2.txt 2>/dev/null || fail "calibrate on 2 ranks: no table"
    het_mpirun 2 "$HETRAIN" train --model mlp --clock virtual --compute-cost calibrated:c2.txt \
        "${S[@]}" >cr.out 2>cr.err || fail "a run on the 2-rank table: $(grep hetrain cr.err)"

    # ---- #9: a resume keeps its stages; a new strategy is not bound by the old one's ----
    het_mpirun 2 "$HETRAIN" train --model lenet5 --strategy qfb --stages 4 --checkpoint q.ckpt \
        "${S[@]}" >q.out 2>q.err || fail "qfb --stages 4: $(grep hetrain q.err)"
    het_mpirun 2 "$HETRAIN" train --model lenet5 --strategy qfb --stages 6 --checkpoint q.ckpt \
        --resume "${S[@]}" --epochs 2 >q2.out 2>q2.err
    rc=$?
    [ $rc -eq 2 ] || fail "resume with other --stages: exit $rc, expected 2: $(grep hetrain q2.err)"
    [ "$(grep -c '^hetrain' q2.err)" -eq 1 ] && grep -q "^hetrain train: --stages 6: the \
checkpoint q.ckpt continues qfb with the stage cuts it saved (trained with --stages 4); resume \
without --stages$" q2.err || fail "resume with other --stages: $(cat q2.err)"
    grep -q '^epoch 2/2' q2.out && fail "resume with other --stages trained anyway"
    het_mpirun 2 "$HETRAIN" train --model lenet5 --strategy qfb --stages 4 --checkpoint q.ckpt \
        --resume "${S[@]}" --epochs 2 >q3.out 2>q3.err ||
        fail "resume with the same --stages: $(grep hetrain q3.err)"
    het_mpirun 2 "$HETRAIN" train --model mlp --strategy asp --max-staleness 3 \
        --checkpoint a.ckpt "${S[@]}" >a.out 2>a.err || fail "asp: $(grep hetrain a.err)"
    for s in allreduce hgc; do
        cp a.ckpt "a-$s.ckpt"
        het_mpirun 2 "$HETRAIN" train --strategy $s --checkpoint "a-$s.ckpt" --resume \
            --epochs 2 --progress off >r.out 2>r.err ||
            fail "resume of asp as $s: $(grep hetrain r.err)"
        grep -q "^resumed from a-$s.ckpt after epoch 1 " r.out && grep -q '^epoch 2/2' r.out ||
            fail "resume of asp as $s: $(cat r.out)"
    done
    "$HETRAIN" train --checkpoint a.ckpt --resume --epochs 3 --strategy allreduce \
        --max-staleness 2 --progress off >/dev/null 2>r2.err
    [ $? -eq 2 ] && grep -q "max-staleness: an option of --strategy asp or inhad, not of \
allreduce" r2.err || fail "an option of asp given now to allreduce: $(cat r2.err)"
fi

[ $failures -eq 0 ] && echo "test_cli_inputs: all checks passed"
exit $((failures > 0))
