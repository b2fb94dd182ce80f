#!/usr/bin/env python3
"""How far PyTorch's own bf16 autocast gradients lie from float32's, layer by layer, for the chains
of tests/exec/mixed_precision_run_test.cpp: the ResNet-like chain (batch 4, 32x32) and, with
--residual, the small ResNet of residual blocks, or with --mobile, the small MobileNetV2 of
inverted residuals, relu6 and hardsigmoid (batch 2, 16x16; five seeds, since at that batch the
batch norms' backward cancels most bits and the spread is wide): the reference for that test's
tolerances (docs/executor.md, bf16-mixed). With --gpt (the small GPT of torch-transformer-memory.py
at batch 2, sequence 32) or --vit (a small torchvision ViT, 32x32, patch 8, batch 2): the reference
for the bf16-mixed transformer kernels (docs/memory-model.md 12.10), one line per seed.
With --gpt --remat-init the GPT starts from the executor's initial values (tables uniform in [-1, 1),
linears Kaiming-uniform, bound sqrt(6 / fan-in)): tests/exec/transformer_half_run_test.cpp's reference.
Run: /usr/bin/python3 scripts/torch-autocast-gradients.py [--residual | --mobile | --gpt [--remat-init] | --vit]
"""
import collections
import sys

import torch
import torch.nn as nn
from torchvision.models.resnet import BasicBlock, Bottleneck

torch.manual_seed(0)


def down(i, o, s):
    return nn.Sequential(nn.Conv2d(i, o, 1, s, bias=False), nn.BatchNorm2d(o))


def _gpt():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch-transformer-memory.py")
    spec = importlib.util.spec_from_file_location("torch_transformer_memory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GPT(1000, 32, 256, 4, 4, 0.0)


TOKENS = "--gpt" in sys.argv
if TOKENS:
    m = _gpt()
    if "--remat-init" in sys.argv:  # core/src/exec/initial_values.cpp's init (tests/exec/transformer_half_run_test.cpp)
        with torch.no_grad():
            m.wte.weight.uniform_(-1, 1)
            m.wpe.weight.uniform_(-1, 1)
            for lin in m.modules():
                if isinstance(lin, nn.Linear) and lin.bias is not None:
                    lin.weight.uniform_(-(6.0 / lin.in_features) ** 0.5, (6.0 / lin.in_features) ** 0.5)
                    lin.bias.uniform_(-lin.in_features ** -0.5, lin.in_features ** -0.5)
    batch, resolution, trials = 2, 32, 3
elif "--vit" in sys.argv:
    import torchvision

    m = torchvision.models.VisionTransformer(32, 8, 4, 3, 192, 768, num_classes=10)
    nn.init.normal_(m.heads.head.weight, std=0.02)  # torchvision's zeros would leave every other gradient 0
    batch, resolution, trials = 2, 32, 3
elif "--mobile" in sys.argv:
    from torchvision.models.mobilenetv2 import InvertedResidual

    # PyTorch 1.13 has no bfloat16 hardtanh_backward on the CPU ("hardshrink_backward_cpu" not
    # implemented for 'BFloat16'): relu6 and hardsigmoid as clamps, the same values and, but at the
    # bounds themselves, the same gradients.
    nn.ReLU6.forward = lambda self, x: torch.clamp(x, 0, 6)

    class HardSigmoid(nn.Module):
        def forward(self, x):
            return torch.clamp(x + 3, 0, 6) / 6

    m = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(), InvertedResidual(8, 8, 1, 2),
                      InvertedResidual(8, 16, 2, 2), HardSigmoid(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(16, 10))
    batch, resolution, trials = 2, 16, 5
elif "--residual" in sys.argv:
    m = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                      BasicBlock(8, 8), BasicBlock(8, 16, 2, down(8, 16, 2)), Bottleneck(16, 8, 2, down(16, 32, 2)),
                      Bottleneck(32, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    batch, resolution, trials = 2, 16, 5
else:
    m = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                      nn.Conv2d(16, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, 2, 1),
                      nn.BatchNorm2d(32), nn.ReLU(), nn.AvgPool2d(2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(32, 10))
    batch, resolution, trials = 4, 32, 1


def grads(x, y, auto):
    m.zero_grad()
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=auto):
        out = m(x)
    loss = nn.functional.cross_entropy(out.float(), y)
    loss.backward()
    return [p.grad.clone() for p in m.parameters()]


def layer_of(name):
    """One chain layer per top-level module; a ModuleList's (GPT's h, ViT's encoder.layers) per item."""
    parts = name.split('.')
    if parts[0] == 'h':
        return '.'.join(parts[:2])
    if parts[:2] == ['encoder', 'layers']:
        return parts[2]
    return parts[0]


for _ in range(trials):
    if TOKENS:
        x = torch.randint(0, 1000, (batch, resolution))
        y = torch.randint(0, 1000, (batch * resolution,))
    else:
        x = torch.rand(batch, 3, resolution, resolution) * 2 - 1
        y = torch.randint(0, 10, (batch,))
    g32, g16 = grads(x, y, False), grads(x, y, True)
    layers = collections.OrderedDict()  # one chain layer per top-level module (a block's parameters together)
    for (name, _), a, b in zip(m.named_parameters(), g32, g16):
        d, n = layers.get(layer_of(name), (0.0, 0.0))
        layers[layer_of(name)] = (d + float(((b - a) ** 2).sum()), n + float((a ** 2).sum()))
    print(' '.join(f"{k}: {(d / n) ** 0.5:.3f}" for k, (d, n) in layers.items()))
