#!/usr/bin/env bash
# The shape of the code (docs/ARCHITECTURE.md): dependencies point down only, the model files
# live in one room, and no source file grows past ~600 lines. Layers, lowest first; a file may include headers of its own
# layer and of layers below it. Public headers are mapped to the layer that implements them.
set -u
cd "${HET_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
order="core tensor optim nn data emul comm model_io batch hetero strategy train cli"
level() { # level of a folder or public header name
    local i=0
    for l in $order; do [ "$l" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done
    case "$1" in ckpt) level core ;; config) level optim ;; codec) level tensor ;; netfile) level model_io ;; *) echo -1 ;; esac
}
fail=0
for f in src/*/*.[ch] include/hetrain/*.h; do
    case "$f" in
    include/*) base=$(basename "$f" .h); from=$(level "$base") ;;
    *) from=$(level "$(basename "$(dirname "$f")")") ;;
    esac
    [ "$from" -ge 0 ] || { echo "FAIL: $f: unknown layer" >&2; fail=1; continue; }
    for inc in $(grep -o '#include "[a-z]*/[a-z_]*\.h"' "$f" | sed 's/#include "//; s/"//'); do
        dir=${inc%%/*}
        name=$(basename "$inc" .h)
        if [ "$dir" = hetrain ]; then to=$(level "$name"); else to=$(level "$dir"); fi
        if [ "$to" -lt 0 ] || [ "$to" -gt "$from" ]; then
            echo "FAIL: $f includes $inc, a layer above it (or unknown)" >&2
            fail=1
        fi
    done
done
for f in src/*/*.c; do
    n=$(wc -l <"$f")
    if [ "$n" -gt 620 ]; then echo "FAIL: $f has $n lines (at most ~600)" >&2; fail=1; fi
done
# Model files have one room (src/model_io/): the text format, ONNX and safetensors, and the one
# table of tensor names; no reader or writer of them elsewhere, and ONNX's protobuf code seen
# only there. Inside it the ONNX reader's files form a line (onnx_io, onnx_const, onnx_read):
# onnx_io uses nothing of the folding.
[ -d src/model_io ] || { echo "FAIL: src/model_io (the model files) missing" >&2; fail=1; }
for f in netfile.c onnx_read.c onnx_write.c onnx_const.c onnx_io.c safetensors.c \
         safetensors_read.c tensor_names.c; do
    [ -f "src/model_io/$f" ] || { echo "FAIL: src/model_io/$f missing" >&2; fail=1; }
done
for f in $(ls src/*/*.[ch] | grep -v '^src/model_io/'); do
    case "$(basename "$f")" in
    netfile.c | onnx_* | safetensors* | tensor_names.*)
        echo "FAIL: $f: model-file code outside src/model_io" >&2; fail=1 ;;
    esac
    if grep -q '#include "onnx/onnx.pb-c.h"' "$f"; then
        echo "FAIL: $f includes ONNX's protobuf code outside src/model_io" >&2; fail=1
    fi
done
if grep -q '#include "model_io/onnx_const.h"' src/model_io/onnx_io.[ch]; then
    echo "FAIL: onnx_io includes onnx_const.h: a circle between the ONNX reader's files" >&2; fail=1
fi
# Strategies reach MPI through comm only (charged to the clock or set aside by one rule, and
# watched by the stall inspector): no MPI call in src/strategy/ but the abort of a failure
# injection (--fail-at: the process dies as a crashed node would).
bad=$(grep -n 'MPI_[A-Z][a-z_]*(' src/strategy/*.c | grep -v 'MPI_Abort(')
if [ -n "$bad" ]; then echo "FAIL: MPI called outside src/comm: $bad" >&2; fail=1; fi
[ $fail -eq 0 ] && echo "test_architecture: layers point down, model files in src/model_io, no source file over 600 lines, strategies reach MPI through comm"
exit $fail
