#!/usr/bin/python3
"""PyTorch peer of bench_train: the same models, data, optimizer and batch order semantics.

The models are the zoo's PyTorch twins of tools/hetrain_zoo.py (shared with tools/make_fixtures.py).

Run with Debian's /usr/bin/python3 (python3-torch 1.13). Fashion-MNIST is read from the same
gzip IDX files with gzip + numpy (no torchvision), normalized (x/255 - 0.2860) / 0.3530 and held
as one preloaded float tensor: batches are index_select()s of it, no DataLoader (the fairest
setting for torch: no loader overhead). One untimed warm-up of --warmup steps is undone
(parameters restored, fresh optimizer) before the timed epochs.

Prints ONE line of key=value pairs, like bench_train (bench/run.sh parses it):
  img_per_s, train_flop (3F - F1 as bench_train counts it), gflops, rss_mb (peak RSS,
  getrusage), base_rss_mb (peak RSS after importing torch and loading the data, before the model),
  test_acc, train_loss.
OPENBLAS_NUM_THREADS must be set in the environment by the caller (torch.set_num_threads does not
set it); it is echoed as openblas_threads.
"""
import argparse
import gzip
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import hetrain_zoo  # noqa: E402  (the zoo's PyTorch twins, defined once)

MEAN, STD = 0.2860, 0.3530


def read_idx(path, magic, ndim):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    m = struct.unpack(">I", raw[:4])[0]
    if m != magic:
        sys.exit(f"{path}: offset 0: bad magic 0x{m:08x}, expected 0x{magic:08x}")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        sys.exit(f"{path}: {data.size} bytes of data, expected {int(np.prod(dims))}")
    return data.reshape(dims)


def load(data_dir, split):
    pre = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, f"{pre}-images-idx3-ubyte.gz"), 0x803, 3)
    y = read_idx(os.path.join(data_dir, f"{pre}-labels-idx1-ubyte.gz"), 0x801, 1)
    x = (torch.from_numpy(x.astype(np.float32)).div_(255.0).sub_(MEAN).div_(STD)).unsqueeze(1)
    return x.contiguous(), torch.from_numpy(y.astype(np.int64))


def build(name):
    """The zoo's twin (tools/hetrain_zoo.py); an unknown name ends the process with its line."""
    try:
        return hetrain_zoo.build(name)
    except ValueError as e:
        sys.exit(str(e))


def flops(model):
    """(F, F1) as bench_train counts them: 2 x parameters x output positions per weight layer."""
    per_layer = []

    def hook(mod, inp, out):
        n = sum(p.numel() for p in mod.parameters())
        pos = out.shape[2] * out.shape[3] if out.dim() == 4 else 1
        per_layer.append(2.0 * n * pos)

    hs = [m.register_forward_hook(hook) for m in model.modules()
          if isinstance(m, (nn.Linear, nn.Conv2d))]
    with torch.no_grad():
        model(torch.zeros(1, 1, 28, 28))
    for h in hs:
        h.remove()
    return sum(per_layer), per_layer[0]


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--limit", type=int, default=0,
                    help="train on the first N samples of each epoch's permutation and test on the "
                         "first N test images (0: all)")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', torch.bfloat16), "
                         "what a PyTorch user runs for bf16 on a CPU (fp32 master weights)")
    ap.add_argument("--channels-last", action="store_true",
                    help="the model and each batch in torch.channels_last (NHWC), the layout "
                         "oneDNN's bf16 / AMX convolutions run on without reorders")
    a = ap.parse_args()

    torch.set_num_threads(a.torch_threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data_dir, "train")
    xte, yte = load(a.data_dir, "test")
    base_rss = rss_mb()

    model = build(a.model)
    f_all, f_first = flops(model)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        xtr = xtr.contiguous(memory_format=torch.channels_last)
        xte = xte.contiguous(memory_format=torch.channels_last)
    train_flop = 3.0 * f_all - f_first
    init = {k: v.clone() for k, v in model.state_dict().items()}

    def sgd():
        return torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    def step(opt, xb, yb):
        opt.zero_grad(set_to_none=True)
        xb = xb.contiguous(memory_format=fmt)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = model(xb)
            loss = F.cross_entropy(out, yb, reduction="mean")
        loss.backward()
        opt.step()
        return loss

    # untimed warm-up, then undone
    model.train()
    opt = sgd()
    g = torch.Generator().manual_seed(a.seed + 1000)
    perm = torch.randperm(xtr.shape[0], generator=g)
    for s in range(min(a.warmup, xtr.shape[0] // a.batch)):
        idx = perm[s * a.batch:(s + 1) * a.batch]
        step(opt, xtr.index_select(0, idx), ytr.index_select(0, idx))
    model.load_state_dict(init)
    opt = sgd()

    n = xtr.shape[0]
    if a.limit > 0:
        n = min(n, a.limit)
        xte, yte = xte[:a.limit], yte[:a.limit]
    images, loss_sum = 0, 0.0
    t0 = time.perf_counter()
    for e in range(a.epochs):
        perm = torch.randperm(xtr.shape[0],
                              generator=torch.Generator().manual_seed(a.seed * 1000 + e))[:n]
        for s in range(0, n, a.batch):
            idx = perm[s:s + a.batch]
            xb, yb = xtr.index_select(0, idx), ytr.index_select(0, idx)
            loss = step(opt, xb, yb)
            loss_sum += loss.item() * idx.numel()  # .item() syncs, as a real loop logging loss
            images += idx.numel()
    secs = time.perf_counter() - t0

    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16,
                                         enabled=a.precision == "bf16"):
        for s in range(0, xte.shape[0], 1000):
            correct += (model(xte[s:s + 1000]).argmax(1) == yte[s:s + 1000]).sum().item()
    acc = correct / xte.shape[0]
    ips = images / secs
    gflops = train_flop * ips / 1e9
    print(f"precision={a.precision} channels_last={int(a.channels_last)} "
          f"impl=torch model={a.model} torch_threads={a.torch_threads} "
          f"openblas_threads={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')} "
          f"openblas_coretype={os.environ.get('OPENBLAS_CORETYPE') or 'auto'} batch={a.batch} "
          f"epochs={a.epochs} images={images} seconds={secs:.3f} img_per_s={ips:.0f} "
          f"train_flop={train_flop:.0f} gflops={gflops:.2f} rss_mb={rss_mb():.1f} "
          f"base_rss_mb={base_rss:.1f} test_acc={acc:.4f} train_loss={loss_sum / images:.4f} "
          f"torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
