#!/usr/bin/python3
"""Reference values of ShuffleNetV2 blocks from PyTorch, for tests/exec/shuffle_blocks_run_test.cpp.

torchvision.models.shufflenetv2.InvertedResidual in training mode (batch statistics), both forms:
"split" (stride 1, 8 -> 8 channels: x.chunk(2, dim=1), branch2 of the second half, concat, channel
shuffle) and "strided" (stride 2, 8 -> 16: branch1 and branch2 of the input, concat, shuffle). For
each: a fixed input x ([2, 8, 6, 6], float32, NCHW), fixed parameters (the module's parameters
flattened in order: the chain's parameter order), a fixed upstream gradient r, and PyTorch's y, dx
and d(parameters) of sum(y * r). Run with Debian's PyTorch (/usr/bin/python3); rewrites
tests/data/shuffle/torch_reference.json.
"""
import json
import math
import pathlib

import torch
from torchvision.models.shufflenetv2 import InvertedResidual

SHAPE = [2, 8, 6, 6]
VARIANTS = {"split": (8, 1), "strided": (16, 2)}  # out channels, stride


def spread(count, phase, scale):
    return [scale * math.sin(1.3 * i + phase) for i in range(count)]


def main():
    x_values = spread(math.prod(SHAPE), 0.1, 2.0)
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "x": x_values, "variants": {}}
    for name, (out, stride) in VARIANTS.items():
        block = InvertedResidual(SHAPE[1], out, stride).train()
        params = list(block.parameters())
        flat = spread(sum(p.numel() for p in params), 0.4, 0.5)
        offset = 0
        with torch.no_grad():
            for p in params:
                p.copy_(torch.tensor(flat[offset:offset + p.numel()]).reshape(p.shape))
                offset += p.numel()
        x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
        y = block(x)
        r = torch.tensor(spread(y.numel(), 0.7, 1.0), dtype=torch.float32).reshape(y.shape)
        (y * r).sum().backward()
        result["variants"][name] = {
            "out_channels": out,
            "stride": stride,
            "params": flat,
            "r": [float(v) for v in r.flatten()],
            "y": [float(v) for v in y.detach().flatten()],
            "dx": [float(v) for v in x.grad.flatten()],
            "dparams": [float(v) for p in params for v in p.grad.flatten()],
        }
    out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "shuffle" / "torch_reference.json"
    out.write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
