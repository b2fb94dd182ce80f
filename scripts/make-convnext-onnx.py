#!/usr/bin/python3
"""Small ConvNeXt exports for tests/input/onnx_convnext_test.cpp (issue 22).

torchvision's ConvNeXt class with a tiny block_setting (8 then 16 channels, 1 and 2 CNBlocks), 5
classes, no weights downloaded, stochastic_depth_prob=0.0 (torch writes StochasticDepth's training
mask as a random op; with probability 0 it is the identity, docs/import.md), exported in training
mode at batch 2, 64x64, at opset 17 (LayerNormalization) and 13 (its ReduceMean/Sub/Pow/Sqrt/Div
decomposition); and convnext_tiny itself without its weights (export_params=False). Writes tests/data/onnx/convnext/*.onnx and models.json with torch's parameter count.
Run with Debian's PyTorch: /usr/bin/python3 scripts/make-convnext-onnx.py
"""
import json
import os

import torch
from torchvision.models.convnext import CNBlockConfig, ConvNeXt, convnext_tiny

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "onnx", "convnext")


def model():
    torch.manual_seed(0)
    settings = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, None, 2)]
    return ConvNeXt(settings, stochastic_depth_prob=0.0, num_classes=5).train()


def main():
    os.makedirs(OUT, exist_ok=True)
    entries = []
    for opset in (13, 17):
        net = model()
        name = f"convnext_small_train_op{opset}.onnx"
        torch.onnx.export(net, torch.randn(2, 3, 64, 64), os.path.join(OUT, name), opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input"], output_names=["logits"])
        entries.append({"file": name, "opset": opset, "batch": 2, "resolution": 64,
                        "block_setting": [[8, 16, 1], [16, None, 2]], "num_classes": 5,
                        "torch_parameters": sum(p.numel() for p in net.parameters())})
    # ConvNeXt-Tiny itself, graph only (export_params=False: its 28.6M weights are graph inputs), to
    # compare with the zoo's convnext_tiny layer for layer.
    tiny = convnext_tiny(stochastic_depth_prob=0.0).train()
    name = "convnext_tiny_train_op17_noweights.onnx"
    torch.onnx.export(tiny, torch.randn(2, 3, 64, 64), os.path.join(OUT, name), opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, export_params=False,
                      input_names=["input"], output_names=["logits"])
    entries.append({"file": name, "zoo": "convnext_tiny", "opset": 17, "batch": 2, "resolution": 64,
                    "torch_parameters": sum(p.numel() for p in tiny.parameters())})
    manifest = {"generated_by": "scripts/make-convnext-onnx.py", "torch": torch.__version__, "models": entries}
    with open(os.path.join(OUT, "models.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
