"""Reference values of non-square convolutions from PyTorch, for tests/exec/nonsquare_conv_run_test.cpp.

"block": Inception-v3's factorised convolutions in small, four branches of one input x ([2, 4, 9, 9],
float32, NCHW) concatenated along the channels: a 1x1 conv; a 1x1 conv, a 1x7 conv (padding (0, 3))
and a 7x1 conv (padding (3, 0)), as InceptionC's branch7x7; an average pool (3x3, stride 1, padding 1)
then a 1x1 conv, as branch_pool; a 1x1 conv whose output a 1x3 conv (padding (0, 1)) and a 3x1 conv
(padding (1, 0)) both read, concatenated, as InceptionE's branch3x3 (a concat inside the concat).
"conv": one conv2d layer with a 2x3 kernel, stride (2, 1), padding (1, 0) and a bias, on [2, 3, 7, 8]
(every per-axis field differs between height and width).
Fixed parameters (in the chain's parameter order), a fixed upstream gradient r, and PyTorch's y, dx
and d(parameters) of sum(y * r). Run with Debian's PyTorch (/usr/bin/python3); rewrites
tests/data/nonsquare/torch_reference.json.
"""
import math

import torch
from torch import nn

from torch_reference_values import backward_record, set_parameters, spread, write_reference

BLOCK_SHAPE = [2, 4, 9, 9]
CONV_SHAPE = [2, 3, 7, 8]


class Factorised(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = nn.Conv2d(4, 2, 1, bias=False)
        self.b7_1 = nn.Conv2d(4, 3, 1, bias=False)
        self.b7_2 = nn.Conv2d(3, 3, (1, 7), padding=(0, 3), bias=False)
        self.b7_3 = nn.Conv2d(3, 2, (7, 1), padding=(3, 0), bias=False)
        self.pool = nn.AvgPool2d(3, 1, 1)
        self.bp = nn.Conv2d(4, 2, 1, bias=False)
        self.b3_1 = nn.Conv2d(4, 3, 1, bias=False)
        self.b3_2a = nn.Conv2d(3, 2, (1, 3), padding=(0, 1), bias=False)
        self.b3_2b = nn.Conv2d(3, 2, (3, 1), padding=(1, 0), bias=False)

    def forward(self, x):
        b7 = self.b7_3(self.b7_2(self.b7_1(x)))
        bp = self.bp(self.pool(x))
        t = self.b3_1(x)
        b3 = torch.cat([self.b3_2a(t), self.b3_2b(t)], 1)
        return torch.cat([self.b1(x), b7, bp, b3], 1)


def record(module, shape):
    x_values = spread(math.prod(shape), 0.1, 2.0)
    params = list(module.parameters())
    flat = set_parameters(params)
    x = torch.tensor(x_values, dtype=torch.float32).reshape(shape).requires_grad_(True)
    y = module(x)
    r = torch.tensor(spread(y.numel(), 0.7, 1.0), dtype=torch.float32).reshape(y.shape)
    recorded = backward_record(y, r, x, params)
    return {"shape": shape, "output_shape": list(y.shape), "x": x_values, "params": flat,
            "r": [float(v) for v in r.flatten()], **recorded}


def main():
    torch.manual_seed(0)
    block = record(Factorised().train(), BLOCK_SHAPE)
    conv = record(nn.Conv2d(3, 4, (2, 3), stride=(2, 1), padding=(1, 0), bias=True), CONV_SHAPE)
    write_reference("nonsquare", {"torch_version": str(torch.__version__), "block": block, "conv": conv})


if __name__ == "__main__":
    main()
