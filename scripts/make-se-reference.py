#!/usr/bin/python3
"""Reference values of Squeeze-and-Excitation blocks from PyTorch, for tests/exec/se_blocks_run_test.cpp.

torchvision.ops.SqueezeExcitation as EfficientNet (SiLU, Sigmoid) and MobileNetV3 (ReLU, Hardsigmoid)
build it: global average pooling, 1x1 conv with bias, activation, 1x1 conv with bias, scale
activation, scale * x. For each: a fixed input x ([2, 8, 5, 5], float32, NCHW), fixed parameters
(fc1.weight, fc1.bias, fc2.weight, fc2.bias, flattened in that order: the chain's parameter order),
a fixed upstream gradient r, and PyTorch's y, dx and d(parameters) of sum(y * r). Run with Debian's
PyTorch (/usr/bin/python3); rewrites tests/data/se/torch_reference.json.
"""
import math

import torch
from torchvision.ops import SqueezeExcitation

from torch_reference_values import backward_record, set_parameters, spread, write_reference

SHAPE = [2, 8, 5, 5]
SQUEEZE = 4
VARIANTS = {
    "efficientnet": (torch.nn.SiLU, torch.nn.Sigmoid),
    "mobilenet_v3": (torch.nn.ReLU, torch.nn.Hardsigmoid),
}


def main():
    count = math.prod(SHAPE)
    x_values = spread(count, 0.1, 2.0)
    r_values = spread(count, 0.7, 1.0)
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "squeeze": SQUEEZE, "x": x_values,
              "r": r_values, "variants": {}}
    for name, (activation, scale_activation) in VARIANTS.items():
        se = SqueezeExcitation(SHAPE[1], SQUEEZE, activation=activation, scale_activation=scale_activation)
        params = [se.fc1.weight, se.fc1.bias, se.fc2.weight, se.fc2.bias]
        flat = set_parameters(params)
        x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
        r = torch.tensor(r_values, dtype=torch.float32).reshape(SHAPE)
        y = se(x)
        result["variants"][name] = {"params": flat, **backward_record(y, r, x, params)}
    write_reference("se", result)


if __name__ == "__main__":
    main()
