#!/usr/bin/env bash
# make install: the library, headers and pkg-config file install into a prefix, and a program
# built only from them (examples/train_mlp.c, compiled with pkg-config's flags) trains and passes.
set -euo pipefail
: "${HET_BUILD_DIR:?}" "${HET_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$HET_BUILD_DIR" --prefix "$tmp/prefix" >/dev/null
for f in lib/libhetrain.a lib/pkgconfig/hetrain.pc include/hetrain.h include/hetrain/nn.h bin/hetrain; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs hetrain)
# a sanitized build (make test-asan) installs an instrumented library: link its runtime too
if nm "$tmp/prefix/lib/libhetrain.a" 2>/dev/null | grep -c " U __asan_init" >/dev/null; then
  flags="-fsanitize=address,undefined $flags"
fi
# shellcheck disable=SC2086
cc -std=c11 -O2 -o "$tmp/train_mlp" "$HET_SOURCE_DIR/examples/train_mlp.c" $flags
"$tmp/train_mlp"
echo "install: ok"
