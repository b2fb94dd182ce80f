"""A small image MLP with LayerNorm, GELU and SiLU (conv, ReLU, adaptive pooling to 8 x 8, then
Linear-LayerNorm-GELU-Linear-LayerNorm-SiLU-Linear on the flattened features), for PyTorch's measured peak against remat's prediction
(scripts/torch-fidelity.py --models layernorm_net:lnnet, with scripts/ on PYTHONPATH)."""
import torch
from torch import nn


class LayerNormNet(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(8))
        self.mlp = nn.Sequential(nn.Linear(8 * 8 * 8, 256), nn.LayerNorm(256), nn.GELU(), nn.Linear(256, 128),
                                 nn.LayerNorm(128), nn.SiLU(), nn.Linear(128, num_classes))

    def forward(self, x):
        return self.mlp(torch.flatten(self.features(x), 1))


def lnnet():
    """The factory scripts/torch-fidelity.py's --models takes (module:factory)."""
    return LayerNormNet()
