#!/usr/bin/env bash
# The shape of the code (docs/ARCHITECTURE.md): dependencies point down only, and no source
# file grows past ~600 lines. Layers, lowest first; a file may include headers of its own
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
[ $fail -eq 0 ] && echo "test_architecture: layers point down, no source file over 600 lines"
exit $fail
