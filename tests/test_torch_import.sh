#!/usr/bin/env bash
# A network trained in PyTorch, brought to hetrain and taken back out, as docs/ONNX.md tells a
# user to (the fixture is tests/fixtures/torch_lenet5.*, made by tools/make_torch_lenet5.py):
#  - imported from ONNX (network and weights) and from its safetensors state_dict (with the same
#    network written as a model file), hetrain's test accuracy equals PyTorch's to 0.1 point;
#  - trained from the ONNX file on 4 MPI ranks with every strategy, on IDX data read with
#    --data idx, exported with --export-onnx: the exported file, evaluated by hetrain, gives the
#    run's own final test accuracy (the export holds the trained weights), and is a network
#    hetrain reads back.
# Env: HETRAIN, HET_SOURCE_DIR. Needs the Fashion-MNIST test set
# (/usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist). Exit 1 if a check fails.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
SRC=${HET_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$SRC/tests/mpi.sh"
. "$(dirname "$0")/no_leaks.sh"
export LC_ALL=C
F=$SRC/tests/fixtures
DATA=${HET_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d /tmp/het_torch_import_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

want=$(sed -n 's/.* accuracy \([0-9.]*\)$/\1/p' "$F/torch_lenet5.txt")
[ -n "$want" ] || { echo "FAIL: no accuracy in $F/torch_lenet5.txt" >&2; exit 1; }
acc_of() { sed -n 's/.* test_acc \([0-9.]*\)$/\1/p' "$1"; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= t) }'; }

# ---- import: ONNX, and safetensors onto the same network as a model file ----
"$HETRAIN" eval --model-file "$F/torch_lenet5.onnx" --data fashion-mnist --data-dir "$DATA" \
    >onnx.out 2>onnx.err || fail "eval of the ONNX import: $(cat onnx.err)"
close "$(acc_of onnx.out)" "$want" 0.001 ||
    fail "ONNX import: test accuracy $(acc_of onnx.out), PyTorch's $want: $(cat onnx.out)"
"$HETRAIN" eval --model-file "$F/torch_lenet5.net" --init-from "$F/torch_lenet5.safetensors" \
    --data fashion-mnist --data-dir "$DATA" >st.out 2>st.err ||
    fail "eval of the safetensors import: $(cat st.err)"
close "$(acc_of st.out)" "$want" 0.001 ||
    fail "safetensors import: test accuracy $(acc_of st.out), PyTorch's $want: $(cat st.out)"
# without the weights the same network is at chance: the check above can fail
"$HETRAIN" eval --model-file "$F/torch_lenet5.net" --init-from /dev/null --data fashion-mnist \
    --data-dir "$DATA" >none.out 2>none.err && fail "--init-from /dev/null was accepted"

# ---- 4 ranks, every strategy, IDX data, back out as ONNX ----
if ! het_mpi_found || ! het_mpi_np_ok 4; then
    echo "test_torch_import: 4 ranks not possible here; the multi-rank part skipped"
else
    for s in allreduce hgc asp inhad daso gpipe qfb; do
        het_mpirun 4 "$HETRAIN" train --model-file "$F/torch_lenet5.onnx" --data idx \
            --data-dir "$DATA" --train-limit 512 --test-limit 500 --batch 32 --epochs 1 \
            --lr 0.01 --strategy "$s" --progress off --export-onnx "$s.onnx" \
            --checkpoint "$s.ckpt" >"$s.out" 2>"$s.err" ||
            { fail "$s: 4 ranks: $(tail -n 3 "$s.err")"; continue; }
        trained=$(sed -n 's/^epoch 1\/1 .* test_acc \([0-9.]*\).*/\1/p' "$s.out" | tail -n 1)
        [ -s "$s.onnx" ] || { fail "$s: no $s.onnx"; continue; }
        "$HETRAIN" eval --model-file "$s.onnx" --data idx --data-dir "$DATA" --test-limit 500 \
            >"$s.eval" 2>"$s.eval.err" || { fail "$s: eval of its export: $(cat "$s.eval.err")"; continue; }
        close "$(acc_of "$s.eval")" "$trained" 0.0005 ||
            fail "$s: its export evaluates to $(acc_of "$s.eval"), the run ended at '$trained'"
        # the same model from the run's checkpoint, as `hetrain export --onnx` writes it
        "$HETRAIN" export --checkpoint "$s.ckpt" --onnx "$s.ck.onnx" --quiet 2>"$s.ck.err" ||
            { fail "$s: export --onnx: $(cat "$s.ck.err")"; continue; }
        cmp -s "$s.onnx" "$s.ck.onnx" || fail "$s: export --onnx of the checkpoint differs from --export-onnx"
    done
fi

[ $failures -eq 0 ] && echo "test_torch_import: PyTorch's accuracy $want through ONNX and safetensors; every strategy's export evaluates to its run" 
exit $((failures > 0))
