"""Reference values of a block with pool branches from PyTorch, for tests/exec/pool_blocks_run_test.cpp.

GoogLeNet's Inception module in small: three branches of one input x ([2, 4, 7, 7], float32, NCHW),
concatenated along the channels: a 1x1 conv; a max pool (3x3, stride 1, padding 1, ceil_mode, as
GoogLeNet's branch4) then a 1x1 conv; an average pool (3x3, stride 1, padding 1, count_include_pad, as
Inception-v3's branch_pool) then a 1x1 conv. The input's gradient adds all three branches'. Fixed
parameters (the convs' weights in order: the chain's parameter order), a fixed upstream gradient r,
and PyTorch's y, dx and d(parameters) of sum(y * r). Run with Debian's PyTorch (/usr/bin/python3);
rewrites tests/data/poolblock/torch_reference.json.
"""
import math

import torch
from torch import nn

from torch_reference_values import backward_record, set_parameters, spread, write_reference

SHAPE = [2, 4, 7, 7]


class PoolBranches(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = nn.Conv2d(4, 3, 1, bias=False)
        self.b2pool = nn.MaxPool2d(3, 1, 1, ceil_mode=True)
        self.b2 = nn.Conv2d(4, 2, 1, bias=False)
        self.b3pool = nn.AvgPool2d(3, 1, 1)
        self.b3 = nn.Conv2d(4, 2, 1, bias=False)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(self.b2pool(x)), self.b3(self.b3pool(x))], 1)


def main():
    x_values = spread(math.prod(SHAPE), 0.1, 2.0)
    block = PoolBranches().train()
    params = list(block.parameters())
    flat = set_parameters(params)
    x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
    y = block(x)
    r = torch.tensor(spread(y.numel(), 0.7, 1.0), dtype=torch.float32).reshape(y.shape)
    recorded = backward_record(y, r, x, params)
    write_reference("poolblock", {"torch_version": str(torch.__version__), "shape": SHAPE, "x": x_values,
                                  "params": flat, "r": [float(v) for v in r.flatten()], **recorded})


if __name__ == "__main__":
    main()
