"""A small CNN that uses every pointwise activation the importer reads, for the activation tests'
ONNX exports (scripts/make-activation-onnx.py) and PyTorch's measured peak against remat's prediction
(scripts/torch-fidelity.py --models activation_net:actnet, with scripts/ on PYTHONPATH)."""
import torch
from torch import nn


class ActNet(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.SiLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.Hardswish(),
            nn.Conv2d(8, 8, 1), nn.Sigmoid(),
            nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Tanh(),
            nn.Conv2d(8, 8, 1), nn.Hardsigmoid(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GELU(),
            nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Sequential(nn.Linear(16, 12), nn.GELU(), nn.Linear(12, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def actnet():
    """The factory scripts/torch-fidelity.py's --models takes (module:factory)."""
    return ActNet()
