#!/usr/bin/env bash
# `hetrain train --init-from FILE.safetensors` end to end, on the synthetic dataset. A trained
# mlp's weights, exported, start a run whose learning rate (1e-30) leaves them as they are: its
# first epoch must show the trained model's test loss and accuracy exactly, where the same run
# without --init-from is at chance; on 2 ranks under every strategy too (a rank that did not get
# the weights pulls the training loss up). A file of another network fails with one line naming
# the tensor and both shapes (also on 2 ranks, without a hang); a resumed run takes the
# checkpoint's weights, not the file's; eval and export take the file too (export writes the
# same bytes back). With Debian's python3-torch: a PyTorch state_dict saved by
# docs/SAFETENSORS.md's plain-Python writer, under its own names ("net.0.weight" and a
# ResNet-20's "3.bn1.num_batches_tracked"), is read to the last bit of every tensor.
# Env: HETRAIN (the binary). Exit status 1 if any check fails.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
T=$(mktemp -d /tmp/het_cli_init_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }
# "test_loss X test_acc Y" of the last epoch line of a run's output
result() { sed -n 's/^epoch .*\(test_loss [0-9.]* test_acc [0-9.]*\).*/\1/p' "$1" | tail -n 1; }
# the training loss of the last epoch line
train_loss() { sed -n 's/^epoch [0-9/]* loss \([0-9.]*\) .*/\1/p' "$1" | tail -n 1; }

COMMON=(--model mlp --data synthetic --train-limit 512 --test-limit 256 --seed 3 --progress off)
FROZEN=(--epochs 1 --lr 1e-30 --momentum 0) # a step changes no weight: w - 1e-30 * g == w

# ---- the trained weights ----
"$HETRAIN" train "${COMMON[@]}" --epochs 2 --export-safetensors a.st >a.out 2>a.err ||
    fail "training exited $?: $(cat a.err)"
want=$(result a.out)
acc=${want##* }
gt "${acc:-0}" 0.8 || fail "trained accuracy '$acc', expected > 0.8: $(cat a.out)"

# ---- one process: the run starts from the file ----
"$HETRAIN" train "${COMMON[@]}" "${FROZEN[@]}" --init-from a.st >i.out 2>i.err ||
    fail "--init-from exited $?: $(cat i.err)"
[ -s i.err ] && fail "--init-from wrote to stderr: $(cat i.err)"
grep -qx 'init: 6 tensors from a.st' i.out ||
    fail "no 'init: 6 tensors from a.st' line: $(cat i.out)"
[ "$(result i.out)" = "$want" ] ||
    fail "--init-from: '$(result i.out)', expected the trained '$want'"
gt 0.05 "$(train_loss i.out)" ||
    fail "--init-from: training loss $(train_loss i.out), expected < 0.05"
"$HETRAIN" train "${COMMON[@]}" "${FROZEN[@]}" >n.out 2>&1 ||
    fail "plain run exited $?: $(cat n.out)"
loss=$(result n.out)
loss=${loss#test_loss }
gt "${loss%% *}" 1.5 || fail "without --init-from: '$(result n.out)', expected chance (loss > 1.5)"
grep -q '^init:' n.out && fail "an init line without --init-from"
# eval and export take the file's weights too: the same test result, the same bytes back
"$HETRAIN" eval --model mlp --data synthetic --test-limit 256 --init-from a.st >e.out 2>e.err ||
    fail "eval --init-from exited $?: $(cat e.err)"
grep -q "$want" e.out || fail "eval --init-from: '$(cat e.out)', expected '$want'"
"$HETRAIN" export --model mlp --data synthetic --init-from a.st --export-safetensors b.st \
    >/dev/null 2>e.err || fail "export --init-from exited $?: $(cat e.err)"
cmp -s a.st b.st || fail "export --init-from a.st wrote other bytes than a.st"

# ---- another network's file: one line naming the tensor and both shapes, before training ----
"$HETRAIN" train --model lenet5 --data synthetic --train-limit 64 --test-limit 64 --epochs 1 \
    --progress off --quiet --export-safetensors l.st >/dev/null 2>&1 || fail "lenet5 export"
msg="l.st: offset 9: tensor 'layers.0.weight': shape \[6, 1, 5, 5\], expected \[256, 784\]"
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --init-from l.st >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <e.txt)" -eq 1 ] && grep -q "$msg" e.txt && ! grep -q '^epoch' o.txt ||
    fail "lenet5 file into mlp: rc $rc, stdout $(wc -l <o.txt) lines, stderr '$(cat e.txt)'"
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --init-from missing.st >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && grep -q "missing.st: cannot open" e.txt ||
    fail "missing file: rc $rc, stderr '$(cat e.txt)'"
head -c 1000 a.st >t.st
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --init-from t.st >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && grep -q "t.st: offset [0-9]*: .*(a truncated file?)" e.txt ||
    fail "truncated file: rc $rc, stderr '$(cat e.txt)'"

# ---- a resumed run takes the checkpoint's weights: as a straight run, no init line ----
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --checkpoint r.ckpt --quiet >/dev/null 2>&1 ||
    fail "checkpoint for resume"
"$HETRAIN" train "${COMMON[@]}" --epochs 2 --resume --checkpoint r.ckpt --init-from l.st \
    >r.out 2>r.err || fail "resume with --init-from exited $?: $(cat r.err)"
[ "$(result r.out)" = "$want" ] && ! grep -q '^init:' r.out ||
    fail "resume with --init-from: '$(result r.out)', expected the straight run's '$want'"

# ---- 2 ranks, every strategy: each rank starts from rank 0's file ----
if ! het_mpi_found; then
    echo "note: $HET_MPIEXEC not found: the 2-rank checks are skipped"
elif ! het_mpi_np_ok 2; then
    echo "note: 2 ranks need 2 cores under MPICH: the 2-rank checks are skipped"
else
    for s in allreduce hgc daso asp inhad gpipe qfb; do
        HET_MPI_TIMEOUT=90 het_mpirun 2 "$HETRAIN" train "${COMMON[@]}" "${FROZEN[@]}" \
            --strategy $s --init-from a.st >m.out 2>m.err
        rc=$?
        [ $rc -eq 0 ] && [ "$(grep -c '^init: 6 tensors from a.st$' m.out)" -eq 1 ] &&
            [ "$(result m.out)" = "$want" ] && gt 0.05 "$(train_loss m.out)" ||
            fail "2 ranks, $s: rc $rc, '$(result m.out)' (expected '$want'), training loss" \
                 "$(train_loss m.out): $(cat m.out m.err | tail -n 5)"
    done
    HET_MPI_TIMEOUT=60 het_mpirun 2 "$HETRAIN" train "${COMMON[@]}" --epochs 1 --init-from l.st \
        >o.txt 2>e.txt
    rc=$?
    [ $rc -eq 1 ] && [ "$(grep -c '^hetrain' e.txt)" -eq 1 ] && grep -q "$msg" e.txt ||
        fail "2 ranks, lenet5 file into mlp: rc $rc, stderr '$(cat e.txt)'"
fi

# ---- a PyTorch state_dict written by plain Python (docs/SAFETENSORS.md) ----
PY=/usr/bin/python3
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
    echo "note: $PY has no torch / numpy: the PyTorch checks are skipped"
else
    cat >st.py <<'EOF'
import json, struct, sys
import numpy as np
import torch

def save_safetensors(state_dict, path):
    """A state_dict as safetensors: u64 header length, JSON header, the tensors' bytes."""
    kinds = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name, t in state_dict.items():
        a = t.detach().cpu().contiguous().numpy()
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": kinds[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def load_safetensors(path):
    """hetrain's file (F32 only) as a dict of torch tensors."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        a = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4, offset=8 + n + begin)
        out[name] = torch.from_numpy(a.reshape(e["shape"]).copy())
    return out

class MLP(torch.nn.Module):  # hetrain's mlp: its state_dict names are "net.<i>.weight"
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                       torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                       torch.nn.Linear(128, 10))

class Block(torch.nn.Module):  # hetrain's resblock: conv1, bn1, conv2, bn2 (option A shortcut)
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)

class Pool(torch.nn.Module):  # global average pool and flatten: one layer, as hetrain's avgpool
    def forward(self, x):
        return x.mean((2, 3))

def resnet20():  # on 1x28x28 images; indices as hetrain's: 0 conv, 1 bn, 2 relu, 3-11 blocks,
    # 12 pool, 13 fc
    blocks = [Block(cin, cout, stride) for cin, cout, stride in
              [(16, 16, 1), (16, 16, 1), (16, 16, 1), (16, 32, 2), (32, 32, 1), (32, 32, 1),
               (32, 64, 2), (64, 64, 1), (64, 64, 1)]]
    return torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, 1, 1), torch.nn.BatchNorm2d(16),
                               torch.nn.ReLU(), *blocks, Pool(), torch.nn.Linear(64, 10))

if sys.argv[1] == "mlp":  # hetrain's trained weights into PyTorch and back, renamed
    m = MLP()
    sd = load_safetensors(sys.argv[2])
    m.load_state_dict({"net." + k[len("layers."):]: v for k, v in sd.items()})
    save_safetensors(m.state_dict(), sys.argv[3])
elif sys.argv[1] == "same":  # PyTorch's tensors (argv 2) equal hetrain's export (argv 3)?
    ours = load_safetensors(sys.argv[3])
    theirs = {k: v for k, v in torch.load(sys.argv[2]).items() if "num_batches" not in k}
    bad = [k for k, v in theirs.items() if not torch.equal(v.float(), ours.get("layers." + k))]
    if bad or len(ours) != len(theirs):
        sys.exit("differ: %s; %d tensors in hetrain's export, %d in PyTorch's"
                 % (bad[:3], len(ours), len(theirs)))
else:  # a fresh PyTorch ResNet-20 with running statistics of its own
    torch.manual_seed(0)
    m = resnet20()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-1, 1)
            mod.running_var.uniform_(0.5, 2)
    save_safetensors(m.state_dict(), sys.argv[2])
    torch.save(m.state_dict(), sys.argv[2] + ".pt")
    print(sum(1 for k in m.state_dict() if not k.endswith("num_batches_tracked")))
EOF
    "$PY" st.py mlp a.st torch.st 2>py.err || fail "python mlp: $(cat py.err)"
    grep -q '"net.0.weight":{"dtype":"F32","shape":\[256,784\]' torch.st ||
        fail "torch.st does not name net.0.weight: $(head -c 200 torch.st)"
    "$HETRAIN" train "${COMMON[@]}" "${FROZEN[@]}" --init-from torch.st >p.out 2>p.err ||
        fail "--init-from torch.st exited $?: $(cat p.err)"
    [ "$(result p.out)" = "$want" ] ||
        fail "PyTorch's copy: '$(result p.out)', expected the trained '$want'"
    n=$("$PY" st.py resnet20 res.st 2>py.err) || fail "python resnet20: $(cat py.err)"
    grep -q '"3.bn1.num_batches_tracked":{"dtype":"I64","shape":\[\]' res.st ||
        fail "res.st lacks PyTorch's num_batches_tracked: $(head -c 300 res.st)"
    "$HETRAIN" train --model resnet20 --data synthetic --train-limit 32 \
        --test-limit 32 --batch 32 --epochs 1 --progress off --init-from res.st >p.out 2>p.err
    rc=$?
    [ $rc -eq 0 ] && grep -qx "init: $n tensors from res.st" p.out ||
        fail "--init-from a PyTorch ResNet-20 ($n tensors): rc $rc, $(grep '^init' p.out)" \
             "$(cat p.err)"
    # the values, batch-norm statistics included: hetrain's export of what it read
    "$HETRAIN" export --model resnet20 --data synthetic --init-from res.st \
        --export-safetensors back.st >/dev/null 2>p.err || fail "export of res.st: $(cat p.err)"
    "$PY" st.py same res.st.pt back.st 2>py.err ||
        fail "PyTorch's ResNet-20 and hetrain's export of it: $(cat py.err)"
fi

[ $failures -eq 0 ] && echo "test_cli_init: all checks passed"
[ $failures -eq 0 ]
