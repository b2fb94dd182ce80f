#!/usr/bin/env python3
"""How far PyTorch's own bf16 autocast gradients lie from float32's, layer by layer, for the
ResNet-like chain of tests/exec/mixed_precision_run_test.cpp (batch 4, 32x32): the reference for
that test's tolerance (docs/executor.md, bf16-mixed). Run: /usr/bin/python3 scripts/torch-autocast-gradients.py
"""
import torch, torch.nn as nn
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(3,16,7,2,3,bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3,2,1),
    nn.Conv2d(16,32,3,1,1,bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32,32,3,2,1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.AvgPool2d(2,1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32,10))
x = torch.rand(4,3,32,32)*2-1; y = torch.randint(0,10,(4,))
def grads(auto):
    m.zero_grad()
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=auto):
        out = m(x)
    loss = nn.functional.cross_entropy(out.float(), y); loss.backward()
    return [p.grad.clone() for p in m.parameters()]
g32 = grads(False); g16 = grads(True)
names = [n for n,_ in m.named_parameters()]
for n,a,b in zip(names,g32,g16): print(n, float((b-a).norm()/a.norm()))
