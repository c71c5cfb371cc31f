#!/usr/bin/python3
"""Writes the PyTorch reference fixtures under tests/fixtures/ (run with Debian's python3-torch):

    /usr/bin/python3 tools/make_fixtures.py [OUTDIR]      # default: tests/fixtures

The models are the zoo's PyTorch twins of tools/hetrain_zoo.py (shared with bench/torch_peer.py).

Files
  ref_mlp.bin, ref_lenet5.bin, ref_resblock.bin   model reference (tests/test_reference.c;
  resblock: a stem and two ResNet basic blocks, stride 1 and 2 with the option-A shortcut)
  optim_ref.bin                 optimizer steps and lr schedules (read by tests/test_optim.c)

Format (all little-endian; read by tests/fixtures/fixture.h):
  header   u32 magic 0x58494648 ("HFIX"), u32 version 1, u32 n_entries
  entry    char name[32] (NUL-padded, NUL-terminated), u32 dtype (0 = float32, 1 = int32),
           u32 count, then count * 4 bytes of data
  trailer  u32 zlib crc32 of every byte before it
The file ends exactly after the trailer.

Model entries (batch B = 8 of 1x28x28, 10 classes):
  params  f32[P]    initial parameters, PyTorch parameter order (each layer: weight, bias)
  x       f32[B*784] inputs (torch.manual_seed(0), randn), NCHW
  y       i32[B]    labels
  logits  f32[B*10] logits of the initial model
  loss    f32[1]    mean cross-entropy of the initial model
  grads   f32[P]    gradients of the mean loss, same order as params
  losses  f32[10]   loss before each of 10 SGD steps (lr 0.05, momentum 0.9) on the same batch
  sgd     f32[2]    lr, momentum
The model is created in float32 (torch's default init, seed 1 + model index), then every
computation (forward, backward, the 10 SGD steps) runs in float64 from those float32 values, so
the stored numbers are float32 roundings of (near) exact results: any difference the C test sees
is hetrain's own float32 error.

Optimizer entries, per case C (float32 throughout, as torch.optim runs on float32 tensors):
  C.cfg    f32[9]   kind (0 SGD, 1 Adam), lr, momentum, dampening, nesterov, weight_decay,
                    beta1, beta2, eps
  C.p0     f32[N]   initial parameters
  C.g      f32[T*N] gradient fed at each step (row t for step t+1)
  C.p      f32[T*N] parameters after each step
Schedule entries:
  step.lr      f32[E]  StepLR(step_size=3, gamma=0.5), base 0.1, lr of epochs 0..E-1
  cosine.lr    f32[S]  CosineAnnealingLR(T_max=S, eta_min=0.001) stepped per step, base 0.1
  plateau.m    f32[E]  metrics fed to ReduceLROnPlateau(mode min, factor 0.5, patience 2,
                       threshold 0.01, threshold_mode rel), base 0.1
  plateau.lr   f32[E]  lr after each epoch's step(metric)
"""
import os
import struct
import sys
import zlib

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetrain_zoo  # noqa: E402  (the zoo's PyTorch twins, defined once)

MAGIC = 0x58494648
VERSION = 1
F32, I32 = 0, 1


def write_fixture(path, entries):
    out = bytearray(struct.pack("<III", MAGIC, VERSION, len(entries)))
    for name, t in entries:
        t = torch.as_tensor(t).detach().flatten()
        if t.dtype.is_floating_point:
            dtype, data = F32, t.to(torch.float32).numpy().astype("<f4").tobytes()
        else:
            dtype, data = I32, t.to(torch.int32).numpy().astype("<i4").tobytes()
        nb = name.encode()
        assert len(nb) < 32, name
        out += nb.ljust(32, b"\0") + struct.pack("<II", dtype, t.numel()) + data
    out += struct.pack("<I", zlib.crc32(out) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(out)
    print(f"{path}: {len(entries)} entries, {len(out)} bytes")


def make_model(name):
    if name == "resblock":  # tests/test_reference.c builds the same layers (not a zoo model)
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                             hetrain_zoo.Block(16, 16, 1), hetrain_zoo.Block(16, 32, 2),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return hetrain_zoo.build(name)


def flat(ts):
    return torch.cat([t.detach().flatten() for t in ts])


def model_fixture(outdir, index, name, batch=8, steps=10, lr=0.05, momentum=0.9):
    torch.manual_seed(0)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    torch.manual_seed(1 + index)
    model = make_model(name)                       # float32 torch default init
    params32 = flat(model.parameters()).clone()
    model = model.double()
    xd = x.double()
    lossf = nn.CrossEntropyLoss()                  # mean over the batch

    logits = model(xd)
    loss = lossf(logits, y)
    model.zero_grad()
    loss.backward()
    grads = flat(p.grad for p in model.parameters())

    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        step_loss = lossf(model(xd), y)
        step_loss.backward()
        opt.step()
        losses.append(step_loss.item())

    write_fixture(os.path.join(outdir, f"ref_{name}.bin"), [
        ("params", params32), ("x", x), ("y", y), ("logits", logits), ("loss", loss.reshape(1)),
        ("grads", grads), ("losses", torch.tensor(losses, dtype=torch.float64)),
        ("sgd", torch.tensor([lr, momentum])),
    ])


def optim_case(name, kind, lr, momentum=0.0, dampening=0.0, nesterov=False, wd=0.0,
               betas=(0.9, 0.999), eps=1e-8, n=16, steps=5):
    g = torch.Generator().manual_seed(len(name) * 7919 + n)
    p = torch.randn(n, generator=g).requires_grad_(True)
    p0 = p.detach().clone()
    if kind == 0:
        opt = torch.optim.SGD([p], lr=lr, momentum=momentum, dampening=dampening,
                              nesterov=nesterov, weight_decay=wd)
    else:
        opt = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    grads, after = [], []
    for _ in range(steps):
        gr = torch.randn(n, generator=g)
        p.grad = gr.clone()
        opt.step()
        grads.append(gr)
        after.append(p.detach().clone())
    cfg = torch.tensor([kind, lr, momentum, dampening, float(nesterov), wd, betas[0], betas[1],
                        eps], dtype=torch.float64)
    return [(name + ".cfg", cfg), (name + ".p0", p0), (name + ".g", torch.stack(grads)),
            (name + ".p", torch.stack(after))]


def optim_fixture(outdir):
    entries = []
    entries += optim_case("sgd", 0, lr=0.1)
    entries += optim_case("sgd_mom", 0, lr=0.1, momentum=0.9, dampening=0.1, wd=0.01)
    entries += optim_case("sgd_nesterov", 0, lr=0.05, momentum=0.9, nesterov=True, wd=1e-3)
    entries += optim_case("adam", 1, lr=1e-3)
    entries += optim_case("adam_wd", 1, lr=0.01, betas=(0.8, 0.99), eps=1e-6, wd=0.1)

    def sched_opt():
        return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)

    opt = sched_opt()
    sch = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    lrs = []
    for _ in range(10):                   # lr used during epoch e, then the epoch-end step
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    entries.append(("step.lr", torch.tensor(lrs, dtype=torch.float64)))

    opt = sched_opt()
    total = 4 * 5                         # 4 epochs x 5 steps per epoch
    sch = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=0.001)
    lrs = []
    for _ in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    entries.append(("cosine.lr", torch.tensor(lrs, dtype=torch.float64)))

    opt = sched_opt()
    sch = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2,
                                                     threshold=0.01, threshold_mode="rel")
    metrics = [1.0, 0.9, 0.895, 0.9, 0.893, 0.85, 0.849, 0.848, 0.847, 0.846, 0.84, 0.8, 0.81,
               0.82, 0.83, 0.84, 0.85, 0.86]
    lrs = []
    for m in metrics:
        opt.step()
        sch.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    entries.append(("plateau.m", torch.tensor(metrics, dtype=torch.float64)))
    entries.append(("plateau.lr", torch.tensor(lrs, dtype=torch.float64)))
    write_fixture(os.path.join(outdir, "optim_ref.bin"), entries)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    for i, name in enumerate(["mlp", "lenet5", "resblock"]):
        model_fixture(outdir, i, name)
    optim_fixture(outdir)


if __name__ == "__main__":
    main()
