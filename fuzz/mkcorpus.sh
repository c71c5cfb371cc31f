#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: small valid files and
# a few invalid ones (the committed seeds were made by this script; run it again only to change
# them). A real checkpoint comes from `hetrain train`; its config and meta sections are copied
# into small containers (CRC-32 from gzip's trailer, the same polynomial as zlib's crc32).
# Usage: bash fuzz/mkcorpus.sh BUILD_DIR (a normal build, for build/hetrain)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
H=$(cd "${1:?usage: mkcorpus.sh BUILD_DIR}" && pwd)/hetrain
C=$here/corpus
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$C"/{idx,cifar,config,ckpt,speeds,codec,netfile}
# u32be / u64le as printf escapes
be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
le64() { local i s=""; for i in 0 1 2 3 4 5 6 7; do s+=$(printf '\\x%02x' $(($1 >> (8 * i) & 255))); done; printf '%s' "$s"; }

# ---- idx: the first byte picks the file (0 images, 1 labels); see fuzz_idx.c ----
{ printf '\x00'; printf "\\x00\\x00\\x08\\x03$(be32 2)$(be32 2)$(be32 3)"; printf '\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c'; } >"$C/idx/images-ok"
{ printf '\x01'; printf "\\x00\\x00\\x08\\x01$(be32 2)"; printf '\x03\x07'; } >"$C/idx/labels-ok"
{ printf '\x00'; tail -c +2 "$C/idx/images-ok" | gzip -9n; } >"$C/idx/images-ok-gz"
{ printf '\x01'; tail -c +2 "$C/idx/labels-ok" | gzip -9n; } >"$C/idx/labels-ok-gz"
{ printf '\x00'; printf "\\x00\\x00\\x08\\x03$(be32 2)$(be32 2)$(be32 3)"; printf '\x01\x02\x03'; } >"$C/idx/images-short"
{ printf '\x01'; printf "\\x00\\x00\\x08\\x01$(be32 2)"; printf '\x03\x0c\x00'; } >"$C/idx/labels-bad-trailing"
{ printf '\x00'; printf "\\x00\\x00\\x08\\x03$(be32 4294967295)$(be32 65536)$(be32 65536)"; } >"$C/idx/images-huge"
{ printf '\x00'; { tail -c +2 "$C/idx/images-ok"; } | gzip -9n; printf 'x' | gzip -9n; } >"$C/idx/images-two-members"

# ---- cifar: records of 1 label byte + 3072 pixels ----
rec() { printf "\\x$(printf %02x "$1")"; head -c 3072 /dev/zero | tr '\0' "\\$(printf %03o "$2")"; }
rec 3 17 >"$C/cifar/one"
{ rec 0 1; rec 9 200; } | gzip -9n >"$C/cifar/two-gz"
rec 10 5 >"$C/cifar/bad-label"
{ rec 1 2; head -c 100 /dev/zero; } >"$C/cifar/ragged"

# ---- speeds files: the first byte is the room for speeds (ranks); see fuzz_speeds.c ----
printf '\x02# hetrain calibrate: lenet5 on fashion-mnist, batch 64, 2 ranks, slowdown 1,2\n0.666667\n0.333333\n' >"$C/speeds/two"
printf '\x03 0.5 \n\n# comment\n0.25\t# trailing\n0.25\r\n' >"$C/speeds/three-blanks"
printf '\x01fast\n' >"$C/speeds/bad-word"
printf '\x020.5\n0\n' >"$C/speeds/zero"
printf '\x04\n\n# only comments\n' >"$C/speeds/empty"
printf '\x02 1e999\n-2\nnan\n' >"$C/speeds/out-of-range"
printf '\x05%0300d\n' 1 >"$C/speeds/long-line"
printf '\x030.4,0.4,0.2\n' >"$C/speeds/list"

# ---- config files ----
printf 'model = lenet5\ndata synthetic\n# a comment\nepochs=2  # trailing comment\nlr = 0.01\nnesterov\nmomentum = 0.9\nnet-bw 100M\nslowdown-at 2:0:3\nslowdown_at = 3:0:1\n' >"$C/config/ok"
printf 'batch = 32\nbatch = 16\n' >"$C/config/dup"
printf 'lr = fast\nwarp = 9\n' >"$C/config/bad"
printf 'schedule cosine\nwarmup-epochs 0.5\nstrategy hgc\nspeeds 0.5,0.25,0.25\ndaso-wire fp16\nseed 18446744073709551615\n' >"$C/config/many"

# ---- checkpoints: the first byte 1 = fix the CRC up before reading (fuzz_ckpt.c) ----
(cd "$w" && "$H" train --model mlp --data synthetic --train-limit 64 --test-limit 64 --epochs 1 \
    --progress off --quiet --checkpoint real.ckpt)
sec_len() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
# section TAG FILE: the section's bytes (tag, length, data) copied from the real checkpoint
section() {
    local off=16 tag len
    while :; do
        tag=$(dd if="$w/real.ckpt" bs=1 skip=$off count=16 2>/dev/null | tr -d '\0')
        len=$(sec_len "$w/real.ckpt" $((off + 16)))
        if [ "$tag" = "$1" ]; then
            dd if="$w/real.ckpt" bs=1 skip=$off count=$((24 + len)) 2>/dev/null
            return
        fi
        off=$((off + 24 + len))
    done
}
# container FILE SECTIONS...: magic, version, the sections, the end section with the CRC
container() {
    local out=$1; shift
    { printf 'HETCKPT1\x01\x00\x00\x00\x00\x00\x00\x00'; cat "$@"
      printf 'end\0\0\0\0\0\0\0\0\0\0\0\0\0'; printf "$(le64 4)"; } >"$w/body"
    local crc
    crc=$(gzip -c "$w/body" | tail -c 8 | head -c 4 | od -An -t x1 | tr -d ' \n')
    { printf '\x00'; cat "$w/body"; printf "\\x${crc:0:2}\\x${crc:2:2}\\x${crc:4:2}\\x${crc:6:2}"; } >"$out"
}
section config >"$w/config"
section meta >"$w/meta"
{ printf 'params\0\0\0\0\0\0\0\0\0\0'; printf "$(le64 8)"; printf '\0\0\x80\x3f\0\0\0\x40'; } >"$w/params"
container "$C/ckpt/config-meta" "$w/config" "$w/meta"
container "$C/ckpt/config-meta-params" "$w/config" "$w/meta" "$w/params"
container "$C/ckpt/empty" /dev/null
{ printf '\x01'; tail -c +2 "$C/ckpt/config-meta"; } >"$C/ckpt/config-meta-fixcrc"
printf '\x00HETCKPT1\x02\x00\x00\x00\x00\x00\x00\x00' >"$C/ckpt/version-2"
printf '\x00NOTACKPT' >"$C/ckpt/bad-magic"
ls -l "$C"/*

# ---- codec: the first byte picks the decoder (bit 0 gc, bit 1 add), the next two the count - 1;
# the rest a message (tensor/codec.c wire forms); see fuzz_codec.c ----
printf '\x01\x3f\x00\x47\x01\x00\x00\x40\x00\x00\x00\x03\x00\x00\x00\x0a\xd7\x23\x3c\x0a\x00\x00\x00\x03\x00\x00\x00\x3f\x00\x00\x00\x01\x02\x03' >"$C/codec/gc-bad-order"
printf '\x01\x07\x00\x47\x01\x00\x00\x08\x00\x00\x00\x08\x00\x00\x00\xcd\xcc\xcc\x3d\x01\x02\x03\x04\xfc\xfd\xfe\xff' >"$C/codec/gc-dense-ok"
printf '\x01\x1f\x00\x47\x04\x00\x00\x20\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x06\x00\x00\x00\x00\x00\xc0\x3f\x00\x00\x20\xc0' >"$C/codec/gc-f32-ok"
printf '\x03\x3f\x00\x47\x01\x00\x00\x40\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x3f\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff' >"$C/codec/gc-sparse-add"
printf '\x01\x3f\x00\x47\x01\x00\x00\x40\x00\x00\x00\x03\x00\x00\x00\x0a\xd7\x23\x3c\x03\x00\x00\x00\x0a\x00\x00\x00\x3f\x00\x00\x00\x7f\x81\x05' >"$C/codec/gc-sparse-ok"
printf '\x00\x03\x00\x51\x01\x00\x00\x04\x00\x00\x00\x00\x00\x80\xbf\x81\x80\x00\x3c\x00\xff\x80\x07' >"$C/codec/q8-ok"
printf '\x00\x03\x00\x51\x01\x00\x00\x04\x00\x00\x00\x00\x00\x80\xbf\x81\x80\x00\x3c\x00\xff' >"$C/codec/q8-short"

# ---- onnx: test_onnx's tiny models as hetrain exports them and two of its broken files; with
# Debian's python3-torch, torch.onnx.export of a tiny option-A ResNet (its F.pad is a constant
# sub-graph the reader folds), in PRESERVE mode, in TRAINING mode (bool constants, Dropout) and
# pooled and flattened as akamaster's resnet20 does (view: F.avg_pool2d's zero Pad, x.view(x.size(0), -1)) ----
mkdir -p "$C/onnx" "$w/onnx"
HET_ONNX_OUT="$w/onnx" "$(dirname "$H")/test_onnx" >/dev/null
cp "$w"/onnx/{tiny-cnn,tiny-res,sigmoid,huge-length}.onnx "$C/onnx/"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    for mode in PRESERVE TRAINING VIEW; do
        /usr/bin/python3 - "$C/onnx/torch-tiny-res-${mode,,}.onnx" "$mode" 2>/dev/null <<'PY'
import sys, torch, torch.nn as nn, torch.nn.functional as F
class Block(nn.Module):
    def __init__(s, i, o, st):
        super().__init__()
        s.conv1, s.bn1 = nn.Conv2d(i, o, 3, st, 1, bias=False), nn.BatchNorm2d(o)
        s.conv2, s.bn2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)
        s.short, s.p = st != 1 or i != o, (o - i) // 2
    def forward(s, x):
        y = s.bn2(s.conv2(F.relu(s.bn1(s.conv1(x)))))
        return F.relu(y + (F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, s.p, s.p)) if s.short else x))
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.c, s.b, s.b1, s.b2 = nn.Conv2d(1, 2, 3, 1, 1), nn.BatchNorm2d(2), Block(2, 2, 1), Block(2, 4, 2)
        s.d, s.fc = nn.Dropout(0.5), nn.Linear(4, 3)
    def forward(s, x):
        x = s.b2(s.b1(F.relu(s.b(s.c(x)))))
        if sys.argv[2] == "VIEW":
            x = F.avg_pool2d(x, int(x.size()[3]))
            return s.fc(x.view(x.size(0), -1))
        return s.fc(s.d(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))
torch.manual_seed(0)
mode = "PRESERVE" if sys.argv[2] == "VIEW" else sys.argv[2]
torch.onnx.export(Net().eval(), torch.randn(1, 1, 4, 4), sys.argv[1], opset_version=13,
                  training=getattr(torch.onnx.TrainingMode, mode), input_names=["input"],
                  output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
PY
    done
fi
ls -l "$C/onnx"

# ---- safetensors: fuzz_safetensors.c's tiny model as hetrain exports it, and variants: PyTorch's
# names (no prefix, num_batches_tracked, F16 / BF16 / F64 tensors), truncated, a huge header
# length, bad JSON, overlapping offsets ----
mkdir -p "$C/safetensors"
printf 'conv out=2 k=3 stride=1 pad=1\nbatchnorm momentum=0.1 eps=1e-5\nrelu\nresblock out=2 stride=1\nflatten\ndense out=classes\n' >"$w/tiny.net"
"$H" export --model-file "$w/tiny.net" --data synthetic --synthetic-shape 1x4x4 --classes 3 \
    --export-safetensors "$C/safetensors/ok" --quiet
python3 - "$C/safetensors" <<'PY'
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/ok", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr, data = json.loads(raw[8:8 + n]), raw[8 + n:]
def write(name, header, blob):
    h = json.dumps(header, separators=(",", ":")).encode()
    open(d + "/" + name, "wb").write(struct.pack("<Q", len(h)) + h + blob)
torch, blob = {}, b""
for k, e in hdr.items():
    if k == "__metadata__":
        continue
    b, end = e["data_offsets"]
    v = data[b:end]
    dt = {"layers.0.bias": "F16", "layers.5.bias": "BF16", "layers.1.weight": "F64"}.get(k, "F32")
    if dt != "F32":
        f = struct.unpack("<%df" % (len(v) // 4), v)
        v = struct.pack("<%de" % len(f), *f) if dt == "F16" else struct.pack("<%dd" % len(f), *f) \
            if dt == "F64" else b"".join(struct.pack("<f", x)[2:] for x in f)
    torch[k[len("layers."):]] = {"dtype": dt, "shape": e["shape"],
                                 "data_offsets": [len(blob), len(blob) + len(v)]}
    blob += v
for k in ("1.num_batches_tracked", "3.bn1.num_batches_tracked", "3.bn2.num_batches_tracked"):
    torch[k] = {"dtype": "I64", "shape": [], "data_offsets": [len(blob), len(blob) + 8]}
    blob += struct.pack("<q", 7)
write("torch-names", torch, blob)
open(d + "/truncated", "wb").write(raw[:-12])
open(d + "/huge-length", "wb").write(b"\xff" * 8 + b"{}")
open(d + "/bad-json", "wb").write(raw.replace(b'"layers.0.weight":', b'"layers.0.weight";', 1))
hdr["layers.0.bias"]["data_offsets"] = [0, 8]
write("overlap", hdr, data)
PY
ls -l "$C/safetensors"

# ---- netfile: the zoo's model files, a tiny residual network, and invalid ones (an unknown
# layer, a bad argument, a shape that does not fit, a control byte, an over-long line) ----
mkdir -p "$C/netfile"
cp "$here"/../models/*.net "$C/netfile/"
cp "$w/tiny.net" "$C/netfile/tiny.net"
printf 'conv out=8 k=3\nsoftplus\ndense out=classes\n' >"$C/netfile/unknown-layer"
printf 'conv out=8 k=three pad=1\nflatten\ndense out=classes\n' >"$C/netfile/bad-arg"
printf 'conv out=8 k=40\nflatten\ndense out=classes\n' >"$C/netfile/too-big-kernel"
printf 'dense out=10\x01\n' >"$C/netfile/control-byte"
{ printf 'dense out=10 # '; head -c 5000 /dev/zero | tr '\0' x; printf '\n'; } >"$C/netfile/long-line"
ls -l "$C/netfile"
