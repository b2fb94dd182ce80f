"""torchvision's ShuffleNetV2 with the halves of its channel split made tensors of their own.

PyTorch's ``x.chunk(2, dim=1)`` is a view: the branch's first convolution saves a view that keeps
the whole block input alive, where remat's model counts its ``slice`` as a copy of the half it
reads (docs/memory-model.md 10.3). This model differs only there (``x2.contiguous()``), to show
that the view is what separates ShuffleNetV2's fidelity rows from the prediction (docs/executor.md,
"PyTorch against the prediction"):

  PYTHONPATH=scripts /usr/bin/python3 scripts/torch-fidelity.py --models shufflenet_copy_halves:model \\
      --planners none,linear --report
"""
import torch
import torchvision
from torchvision.models import shufflenetv2


class CopyHalvesBlock(shufflenetv2.InvertedResidual):
    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            x2 = x2.contiguous()  # a tensor of its own: the branch's conv saves only this half
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return shufflenetv2.channel_shuffle(out, 2)


def model():
    net = torchvision.models.shufflenet_v2_x1_0()
    for stage in (net.stage2, net.stage3, net.stage4):
        for block in stage:
            block.__class__ = CopyHalvesBlock
    return net
