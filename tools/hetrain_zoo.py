"""PyTorch twins of hetrain's model zoo (src/nn/zoo.c), defined once for every Python tool:
tools/make_fixtures.py (reference tensors under tests/fixtures), bench/torch_peer.py and
bench/torch_ddp.py (the PyTorch peer benchmarks), and whoever exports a twin to ONNX.

Run with Debian's /usr/bin/python3 (python3-torch 1.13).

    build(name, classes=10)      a fresh nn.Module ("mlp", "lenet5", "cifar-cnn", "resnet20"),
                                 parameters in torch's default initialization from the current
                                 torch RNG state, in hetrain's parameter order
    Block(cin, cout, stride)     ResNet's basic block as src/nn/resblock.c
    export_onnx(model, path)     a twin (or a name) to ONNX: opset 13, input "input", output
                                 "logits", the batch axis dynamic

Inputs are 1 x 28 x 28 (Fashion-MNIST), as hetrain's zoo is used; cifar-cnn's first dense layer
(64 * 7 * 7 inputs) assumes that size. Constructing a model draws from torch's RNG in the order
of its layers, so a twin built after torch.manual_seed(s) is the same tensor for tensor every
time: the fixtures depend on it (change the construction order and they change).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

NAMES = ("mlp", "lenet5", "cifar-cnn", "resnet20")
IN_SHAPE = (1, 28, 28)


class Block(nn.Module):
    """ResNet basic block as src/nn/resblock.c: conv-BN-ReLU-conv-BN + shortcut, ReLU, without
    conv biases; option A shortcut (x[:, :, ::s, ::s], zero channels split before and after)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.stride, self.lo, self.hi = stride, (cout - cin) // 2, cout - cin - (cout - cin) // 2

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        sc = x
        if self.stride != 1 or self.lo or self.hi:
            sc = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.lo, self.hi))
        return F.relu(y + sc)


def build(name, classes=10):
    """The twin of zoo model `name` with `classes` outputs; ValueError for another name."""
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, classes))
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                             nn.Linear(84, classes))
    if name == "cifar-cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64 * 7 * 7, 256), nn.ReLU(), nn.Dropout(0.5),
                             nn.Linear(256, classes))
    if name == "resnet20":
        layers = [nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()]
        cin = 16
        for s, w in enumerate((16, 32, 64)):
            for b in range(3):
                layers.append(Block(cin, w, 2 if (s > 0 and b == 0) else 1))
                cin = w
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
        return nn.Sequential(*layers)
    raise ValueError(f"unknown model '{name}', expected mlp, lenet5, cifar-cnn or resnet20")


def export_onnx(model, path, in_shape=IN_SHAPE, opset=13):
    """Writes `model` (an nn.Module, or a zoo name: a fresh twin from the current torch RNG) to
    the ONNX file `path` in inference form (eval mode: batch norm's running statistics, no
    dropout): opset `opset` (13), one input "input" [batch x in_shape], one output "logits"
    [batch x classes], the batch axis dynamic ("batch"). The model is left in eval mode.
    Returns path."""
    if isinstance(model, str):
        model = build(model)
    model.eval()
    example = torch.zeros(1, *in_shape)
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=opset, input_names=["input"],
                          output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          do_constant_folding=True)
    return path
