#!/usr/bin/python3
"""Reference values of ConvNeXt's pieces from PyTorch, for tests/exec/convnext_run_test.cpp (issue 22).

torchvision's CNBlock(8) (dwconv 7x7, permute, LayerNorm, Linear, GELU, Linear, permute back,
layer_scale * x, StochasticDepth with p = 0, + input) and LayerNorm2d(8) (permute, layer_norm,
permute back), in training mode. For each: a fixed input x ([2, 8, 5, 5], float32, NCHW), fixed
parameters (the chain's parameter order: the block's Sequential's parameters in order, then
layer_scale, which torch lists first), a fixed upstream gradient r, and PyTorch's y, dx and
d(parameters) of sum(y * r). Run with Debian's PyTorch (/usr/bin/python3); rewrites
tests/data/convnext/torch_reference.json.
"""
import math

import torch
from torchvision.models.convnext import CNBlock, LayerNorm2d

from torch_reference_values import backward_record, set_parameters, spread, write_reference

SHAPE = [2, 8, 5, 5]


def record(module, params, x_values):
    flat = set_parameters(params)
    x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
    y = module(x)
    r = torch.tensor(spread(y.numel(), 0.7, 1.0), dtype=torch.float32).reshape(y.shape)
    return {"params": flat, "r": [float(v) for v in r.flatten()], **backward_record(y, r, x, params)}


def main():
    x_values = spread(math.prod(SHAPE), 0.1, 2.0)
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "x": x_values, "variants": {}}
    block = CNBlock(SHAPE[1], layer_scale=1e-6, stochastic_depth_prob=0.0).train()
    result["variants"]["cnblock"] = record(block, list(block.block.parameters()) + [block.layer_scale], x_values)
    norm = LayerNorm2d(SHAPE[1], eps=1e-6).train()
    result["variants"]["layernorm2d"] = record(norm, list(norm.parameters()), x_values)
    write_reference("convnext", result)


if __name__ == "__main__":
    main()
