#!/usr/bin/python3
"""Trains a LeNet-5 in PyTorch on Fashion-MNIST and writes it the ways a user brings a network to
hetrain (run with Debian's python3-torch and python3-onnx; a few minutes on 2 cores):

    /usr/bin/python3 tools/make_torch_lenet5.py [OUTDIR] [DATADIR]
        # default OUTDIR tests/fixtures, DATADIR /usr/share/datasets/fashion-mnist

Files (the fixture of tests/test_torch_import.sh):
  torch_lenet5.onnx         torch.onnx.export of the trained network (opset 13, input "input"
                            [N, 1, 28, 28], output "logits", eval mode)
  torch_lenet5.safetensors  its state_dict as safetensors (names "0.weight", "0.bias", ... of the
                            nn.Sequential; written here with json + numpy: the safetensors
                            package is not in Debian)
  torch_lenet5.net          the same network in hetrain's text format (for --init-from)
  torch_lenet5.txt          "correct N accuracy A" of PyTorch on the whole test set

The images are normalized as hetrain normalizes them: x = (byte/255 - mean) / std with the mean
and standard deviation of the training images (src/data/dataset.c het_dataset_compute_stats),
so that hetrain evaluating the imported network sees PyTorch's inputs.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        h, w = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, n * h * w, 16).reshape(n, 1, h, w)
    return np.frombuffer(data, np.uint8, n, 8)


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


NET_TEXT = """# A LeNet-5 trained in PyTorch (tools/make_torch_lenet5.py): conv-ReLU-pool order, the
# layers of its nn.Sequential one for one, so that its state_dict names (0.weight, 3.weight, ...)
# are hetrain's layer indices.
conv out=6 k=5 stride=1 pad=2
relu
maxpool k=2 stride=2
conv out=16 k=5 stride=1 pad=0
relu
maxpool k=2 stride=2
flatten
dense out=120
relu
dense out=84
relu
dense out=classes
"""


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy().astype("<f4"))
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "fixtures")
    data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    torch.manual_seed(0)
    torch.set_num_threads(2)
    xtr = read_idx(os.path.join(data, "train-images-idx3-ubyte.gz"))
    ytr = read_idx(os.path.join(data, "train-labels-idx1-ubyte.gz"))
    xte = read_idx(os.path.join(data, "t10k-images-idx3-ubyte.gz"))
    yte = read_idx(os.path.join(data, "t10k-labels-idx1-ubyte.gz"))
    # hetrain's statistics: exact integer sums, then float32 mean and std
    s = xtr.astype(np.uint64).sum()
    ss = (xtr.astype(np.uint64) ** 2).sum()
    cnt = float(xtr.size)
    mean = s / cnt / 255.0
    var = ss / cnt / (255.0 * 255.0) - mean * mean
    mean32, std32 = np.float32(mean), np.float32(np.sqrt(var))
    lut = ((np.arange(256) / 255.0 - float(mean32)) / float(std32)).astype(np.float32)
    xtr_f, xte_f = torch.from_numpy(lut[xtr]), torch.from_numpy(lut[xte])
    ytr_t, yte_t = torch.from_numpy(ytr.astype(np.int64)), torch.from_numpy(yte.astype(np.int64))

    net = lenet5()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(2):
        perm = torch.randperm(len(ytr_t))
        net.train()
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = loss_fn(net(xtr_f[idx]), ytr_t[idx])
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        correct = int((net(xte_f).argmax(1) == yte_t).sum())
    acc = correct / len(yte_t)
    print(f"PyTorch LeNet-5, 2 epochs: test accuracy {acc:.4f} ({correct} of {len(yte_t)})")

    os.makedirs(out, exist_ok=True)
    torch.onnx.export(net, xte_f[:1], os.path.join(out, "torch_lenet5.onnx"), opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    write_safetensors(os.path.join(out, "torch_lenet5.safetensors"), net.state_dict())
    with open(os.path.join(out, "torch_lenet5.net"), "w") as f:
        f.write(NET_TEXT)
    with open(os.path.join(out, "torch_lenet5.txt"), "w") as f:
        f.write(f"correct {correct} accuracy {acc:.4f}\n")


if __name__ == "__main__":
    main()
