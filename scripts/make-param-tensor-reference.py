#!/usr/bin/env python3
"""The parameter tensors of torchvision's models in the order parameters() visits them, for
tests/memory/param_tensors_test.cpp: what PyTorch's single-tensor optimizer loop allocates its
temporaries for, tensor by tensor (docs/memory-model.md 11.3). Writes tests/data/param_tensors.json:
{"model": [numel, ...], ...}.
Run: /usr/bin/python3 scripts/make-param-tensor-reference.py
"""
import json
import os

import torchvision

MODELS = ["resnet18", "resnet50", "vgg11_bn", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "swin_t",
          "vit_b_16", "regnet_y_400mf", "shufflenet_v2_x1_0"]
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "param_tensors.json")


def main():
    reference = {}
    for name in MODELS:
        model = getattr(torchvision.models, name)(weights=None)
        reference[name] = [p.numel() for p in model.parameters()]
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"source": "torchvision " + torchvision.__version__ + ", scripts/make-param-tensor-reference.py",
                   "models": reference}, f, indent=0)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
