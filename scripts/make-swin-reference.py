#!/usr/bin/python3
"""Reference values of the Swin Transformer kinds from PyTorch, for tests/exec/swin_run_test.cpp
(issue 23).

A tiny torchvision SwinTransformer (torchvision.models.swin_transformer, 0.14): patch 4, embed_dim
32, depths [2, 2], heads [2, 4], window 4, 10 classes, stochastic depth 0 (its noise is PyTorch's
generator's, which no other program reproduces), in training mode, float32, batch 2. Two images:
- 32x32: an 8x8 map, four 4x4 windows, the second block shifted (2); stage 2 is 4x4, one window
  (torchvision then sets the shift to 0);
- 40x40: a 10x10 map padded to 12x12 (nine windows, shifted), a merging of an odd map (10 -> 5,
  padded), and a 5x5 stage padded to 8x8 (four windows, shifted).
The chain's layers are features.0 (swin_embedding), each block, features.2 (patch_merging) and
norm + head (swin_head); each layer's parameters are its modules' own, in their order. Parameters
from one spread (amplitude PARAM_SCALE, written to the file), the image spread(N*3*H*W, 0.3, 1.0),
loss cross entropy over the batch with labels [3, 7]: PyTorch's d(parameters) of every layer.
Run with Debian's PyTorch (/usr/bin/python3); rewrites tests/data/swin/torch_reference.json.
"""
import torch
from torch.nn import functional as F
from torchvision.models.swin_transformer import SwinTransformer

from torch_reference_values import spread, write_reference

# The parameters' amplitude: small enough that no softmax saturates (at torch_reference_values'
# 0.5 the scores are so large that every window's probabilities are one-hot, and the shift mask
# and the bias would change nothing a test could see).
PARAM_SCALE = 0.1


def set_parameters(params):
    """Sets params, in order, from spread(total, 0.4, PARAM_SCALE)."""
    flat = spread(sum(p.numel() for p in params), 0.4, PARAM_SCALE)
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.tensor(flat[offset:offset + p.numel()]).reshape(p.shape))
            offset += p.numel()


def tiny_swin():
    return SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           stochastic_depth_prob=0.0, num_classes=10).train()


def chain_layers(model):
    """The chain's layers, each a list of modules: embedding, blocks, merging, blocks, norm + head."""
    layers = [[model.features[0]]]
    for stage in model.features[1:]:
        if isinstance(stage, torch.nn.Sequential):
            layers.extend([[block] for block in stage])
        else:
            layers.append([stage])
    layers.append([model.norm, model.head])
    return layers


def record(size):
    torch.manual_seed(0)
    model = tiny_swin()
    groups = [[p for m in layer for p in m.parameters()] for layer in chain_layers(model)]
    assert sum(len(g) for g in groups) == len(list(model.parameters()))
    set_parameters([p for g in groups for p in g])
    image = torch.tensor(spread(2 * 3 * size * size, 0.3, 1.0), dtype=torch.float32).reshape(2, 3, size, size)
    labels = torch.tensor([3, 7])
    loss = F.cross_entropy(model(image), labels)
    loss.backward()
    return {"image": size, "labels": [3, 7], "loss": float(loss),
            "layer_params": [sum(p.numel() for p in g) for g in groups],
            "dparams": [[float(f"{v:.8g}") for p in g for v in p.grad.flatten()] for g in groups]}


def main():
    result = {"torch_version": str(torch.__version__), "param_scale": PARAM_SCALE, "models": {"image32": record(32), "image40": record(40)}}
    write_reference("swin", result)


if __name__ == "__main__":
    main()
