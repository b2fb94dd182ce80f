#!/usr/bin/python3
"""Reference values of the pointwise activations from PyTorch, for tests/cpu/cpu_activations_test.cpp.

For each activation: a fixed input x ([2, 3, 4, 4], float32, NCHW order, values spread over [-6, 6]
so that every branch of the hard ones is taken), a fixed upstream gradient r, and PyTorch's y = f(x)
and dx = d(sum(y * r)) / dx. Run with Debian's PyTorch (/usr/bin/python3); rewrites
tests/data/activations/torch_reference.json.
"""
import json
import math
import pathlib

import torch

SHAPE = [2, 3, 4, 4]
ACTIVATIONS = {
    "relu": torch.nn.ReLU(),
    "relu6": torch.nn.ReLU6(),
    "sigmoid": torch.nn.Sigmoid(),
    "tanh": torch.nn.Tanh(),
    "silu": torch.nn.SiLU(),
    "hardswish": torch.nn.Hardswish(),
    "hardsigmoid": torch.nn.Hardsigmoid(),
    "gelu": torch.nn.GELU(),
}


def values(count, seed):
    # A fixed spread over [-6.3, 6.3] in a scrambled order, kept away from the kinks at -3, 0, 3 and 6
    # by construction (a step of 12.6 / 96 never lands on them), independent of torch's generator.
    step = 12.6 / count
    out = [-6.3 + (i + 0.5) * step for i in range(count)]
    perm = sorted(range(count), key=lambda i: (i * 37 + seed) % count)
    return [out[p] for p in perm]


def main():
    count = math.prod(SHAPE)
    x_values = values(count, 5)
    r_values = [math.sin(0.7 * i + 0.3) for i in range(count)]
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "x": x_values, "r": r_values, "ops": {}}
    for name, module in ACTIVATIONS.items():
        x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
        r = torch.tensor(r_values, dtype=torch.float32).reshape(SHAPE)
        y = module(x)
        (y * r).sum().backward()
        result["ops"][name] = {"y": [float(v) for v in y.detach().flatten()],
                               "dx": [float(v) for v in x.grad.flatten()]}
    out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "activations" / "torch_reference.json"
    out.write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
