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
import math

import torch
from torchvision.models.shufflenetv2 import InvertedResidual

from torch_reference_values import backward_record, set_parameters, spread, write_reference

SHAPE = [2, 8, 6, 6]
VARIANTS = {"split": (8, 1), "strided": (16, 2)}  # out channels, stride


def main():
    x_values = spread(math.prod(SHAPE), 0.1, 2.0)
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "x": x_values, "variants": {}}
    for name, (out, stride) in VARIANTS.items():
        block = InvertedResidual(SHAPE[1], out, stride).train()
        params = list(block.parameters())
        flat = set_parameters(params)
        x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
        y = block(x)
        r = torch.tensor(spread(y.numel(), 0.7, 1.0), dtype=torch.float32).reshape(y.shape)
        recorded = backward_record(y, r, x, params)
        result["variants"][name] = {"out_channels": out, "stride": stride, "params": flat,
                                    "r": [float(v) for v in r.flatten()], **recorded}
    write_reference("shuffle", result)


if __name__ == "__main__":
    main()
