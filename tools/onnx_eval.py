#!/usr/bin/python3
"""A small numpy evaluator of ONNX inference graphs, independent of hetrain and of PyTorch: it
checks what hetrain exports outside hetrain (run with Debian's python3-onnx and python3-numpy).

    /usr/bin/python3 tools/onnx_eval.py MODEL.onnx --data DIR [--limit N]
        the test accuracy on an IDX directory (t10k-images-idx3-ubyte[.gz], t10k-labels...),
        normalized with the training images' mean and std as hetrain does
    /usr/bin/python3 tools/onnx_eval.py MODEL.onnx --inputs X.npy --logits L.npy [--tol 1e-5]
        the graph's logits on X against L: exit 1 if max |a - b| > tol * max(1, |b|)

Both first run onnx.checker.check_model(full_check=True). Operators: Conv, BatchNormalization,
Relu, MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape, Gemm, MatMul, Add, Slice, Pad,
Constant, Identity, Dropout: what hetrain writes and what torch.onnx.export writes for the same
networks.
"""
import argparse
import gzip
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def conv(x, w, b, a):
    n, c, h, wd = x.shape
    oc, ic, kh, kw = w.shape
    if a.get("group", 1) != 1:
        raise SystemExit(f"Conv: group {a['group']} not supported")
    pads = a.get("pads", [0, 0, 0, 0])
    s = a.get("strides", [1, 1])
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - kh) // s[0] + 1
    ow = (xp.shape[3] - kw) // s[1] + 1
    out = np.zeros((n, oc, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + s[0] * oh:s[0], j:j + s[1] * ow:s[1]]  # n, ic, oh, ow
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def pool(x, a, kind):
    k = a["kernel_shape"]
    s = a.get("strides", k)
    if any(a.get("pads", [0, 0, 0, 0])):
        raise SystemExit(f"{kind}: padding not supported")
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    win = np.stack([x[:, :, i:i + s[0] * oh:s[0], j:j + s[1] * ow:s[1]]
                    for i in range(k[0]) for j in range(k[1])])
    return win.max(0) if kind == "MaxPool" else win.mean(0)


def run(model, x):
    g = model.graph
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) if t.data_type == 1
           else numpy_helper.to_array(t) for t in g.initializer}
    inputs = [i.name for i in g.input if i.name not in env]
    env[inputs[0]] = x.astype(np.float64)
    for node in g.node:
        a, i = attrs(node), [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Conv":
            y = conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif op == "BatchNormalization":
            sc, bi, mu, var = i[1:5]
            eps = a.get("epsilon", 1e-5)
            sh = (1, -1) + (1,) * (i[0].ndim - 2)
            y = (i[0] - mu.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * sc.reshape(sh) + bi.reshape(sh)
        elif op == "Relu":
            y = np.maximum(i[0], 0)
        elif op in ("MaxPool", "AveragePool"):
            y = pool(i[0], a, op)
        elif op == "GlobalAveragePool":
            y = i[0].mean(axis=(2, 3), keepdims=True)
        elif op == "Flatten":
            ax = a.get("axis", 1)
            y = i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)
        elif op == "Reshape":
            shape = [d if d != 0 else i[0].shape[k] for k, d in enumerate(i[1].astype(np.int64))]
            y = i[0].reshape(shape)
        elif op == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            y = a.get("alpha", 1.0) * A @ B
            if len(i) > 2 and i[2] is not None:
                y = y + a.get("beta", 1.0) * i[2]
        elif op == "MatMul":
            y = i[0] @ i[1]
        elif op == "Add":
            y = i[0] + i[1]
        elif op == "Slice":
            starts, ends = i[1].astype(np.int64), i[2].astype(np.int64)
            axes = i[3].astype(np.int64) if len(i) > 3 and i[3] is not None else range(len(starts))
            steps = i[4].astype(np.int64) if len(i) > 4 and i[4] is not None else [1] * len(starts)
            sl = [slice(None)] * i[0].ndim
            for st, en, ax, sp in zip(starts, ends, axes, steps):
                sl[int(ax)] = slice(int(st), int(min(en, 2**62)), int(sp))
            y = i[0][tuple(sl)]
        elif op == "Pad":
            p = i[1].astype(np.int64)
            r = len(p) // 2
            val = float(i[2]) if len(i) > 2 and i[2] is not None and i[2].size else 0.0
            if a.get("mode", b"constant") not in (b"constant", "constant"):
                raise SystemExit(f"Pad: mode {a['mode']} not supported")
            y = np.pad(i[0], [(int(p[k]), int(p[k + r])) for k in range(r)], constant_values=val)
        elif op == "Constant":
            y = numpy_helper.to_array(a["value"]) if "value" in a else np.array(a["value_float"])
        elif op in ("Identity", "Dropout"):
            y = i[0]
        else:
            raise SystemExit(f"node '{node.name}': operator {op} not supported by this evaluator")
        env[node.output[0]] = y
    return env[g.output[0].name]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        h, w = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, n * h * w, 16).reshape(n, 1, h, w)
    return np.frombuffer(data, np.uint8, n, 8)


def find(d, base):
    for name in (base + ".gz", base):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise SystemExit(f"{d}: no {base}[.gz]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--data")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--inputs")
    ap.add_argument("--logits")
    ap.add_argument("--tol", type=float, default=1e-5)
    o = ap.parse_args()
    model = onnx.load(o.model)
    onnx.checker.check_model(model, full_check=True)
    print(f"{o.model}: onnx checker: ok ({len(model.graph.node)} nodes, opset "
          f"{model.opset_import[0].version})")
    if o.inputs:
        x = np.load(o.inputs)
        got, want = run(model, x), np.load(o.logits).astype(np.float64)
        err = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
        print(f"logits: max relative difference {err:.3g} (tolerance {o.tol:g})")
        return 0 if err <= o.tol else 1
    tr = read_idx(find(o.data, "train-images-idx3-ubyte"))
    s, ss, cnt = tr.astype(np.uint64).sum(), (tr.astype(np.uint64) ** 2).sum(), float(tr.size)
    mean = s / cnt / 255.0
    std = np.sqrt(ss / cnt / (255.0 * 255.0) - mean * mean)
    lut = (np.arange(256) / 255.0 - float(np.float32(mean))) / float(np.float32(std))
    x = read_idx(find(o.data, "t10k-images-idx3-ubyte"))
    y = read_idx(find(o.data, "t10k-labels-idx1-ubyte"))
    if o.limit:
        x, y = x[:o.limit], y[:o.limit]
    correct = 0
    for k in range(0, len(y), 500):
        correct += int((run(model, lut[x[k:k + 500]]).argmax(1) == y[k:k + 500]).sum())
    print(f"test accuracy {correct / len(y):.4f} ({correct} of {len(y)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
