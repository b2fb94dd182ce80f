#!/usr/bin/python3
"""Reference values of blocks with broadcasting Add, Sub and Div from PyTorch (issue 22), for
tests/exec/broadcast_arith_run_test.cpp.

Each variant is a small block on a fixed input x ([2, 8, 5, 5], float32, NCHW) whose pooled mean
m = x.mean((2, 3), keepdim=True) ([2, 8, 1, 1]) broadcasts against [2, 8, 5, 5] tensors, on either
side of the op:
  add: a = x + m;            y = m + a                       (the second operand broadcast, then the first)
  sub: d = x - m;            y = m - d                       (x - mean, then mean minus that)
  div: s = sigmoid(m);       q = x / s;  t = tanh(q);  y = s / sigmoid(t)
                             (a broadcast divisor, then a broadcast dividend over a full divisor)
A fixed upstream gradient r; PyTorch's y and dx of sum(y * r). No parameters. Run with Debian's
PyTorch (/usr/bin/python3); rewrites tests/data/broadcast_arith/torch_reference.json.
"""
import math

import torch

from torch_reference_values import spread, write_reference

SHAPE = [2, 8, 5, 5]


def add(x):
    m = x.mean((2, 3), keepdim=True)
    return m + (x + m)


def sub(x):
    m = x.mean((2, 3), keepdim=True)
    return m - (x - m)


def div(x):
    s = torch.sigmoid(x.mean((2, 3), keepdim=True))
    t = torch.tanh(x / s)
    return s / torch.sigmoid(t)


def main():
    count = math.prod(SHAPE)
    x_values = spread(count, 0.1, 2.0)
    r_values = spread(count, 0.7, 1.0)
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "x": x_values, "r": r_values, "variants": {}}
    for name, f in (("add", add), ("sub", sub), ("div", div)):
        x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
        r = torch.tensor(r_values, dtype=torch.float32).reshape(SHAPE)
        y = f(x)
        (y * r).sum().backward()
        result["variants"][name] = {"y": [float(v) for v in y.detach().flatten()],
                                    "dx": [float(v) for v in x.grad.flatten()]}
    write_reference("broadcast_arith", result)


if __name__ == "__main__":
    main()
