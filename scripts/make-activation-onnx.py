#!/usr/bin/python3
"""Small training-mode torch exports that use every pointwise activation, for
tests/input/onnx_activations_test.cpp: Sigmoid, Tanh, HardSigmoid and HardSwish as ONNX ops, SiLU as
the Sigmoid-Mul pair and GELU as the Div-Erf-Add-Mul-Mul pattern torch 1.13's exporter writes.

Run with Debian's PyTorch (/usr/bin/python3); rewrites tests/data/onnx/activations/ (the .onnx
files, without weights, and manifest.json with torch's parameter counts and the chain kinds
expected, layer by layer).
"""
import json
import pathlib
import warnings

import torch

from activation_net import ActNet  # beside this script

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "onnx" / "activations"


KINDS = ["conv2d", "batchnorm", "silu", "conv2d", "hardswish", "conv2d", "sigmoid", "conv2d", "tanh", "conv2d",
         "hardsigmoid", "conv2d", "gelu", "adaptive_avgpool", "linear", "gelu", "linear"]
EXPORTS = [("activations_train_op13.onnx", 13, 2), ("activations_train_op17_dynamic.onnx", 17, None)]


def main():
    DATA.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, opset, batch in EXPORTS:
        torch.manual_seed(0)
        model = ActNet().train()
        dynamic = None if batch else {"input": {0: "batch"}, "logits": {0: "batch"}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, torch.randn(batch or 2, 3, 16, 16), str(DATA / name), opset_version=opset,
                              export_params=False, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=["input"], output_names=["logits"],
                              dynamic_axes=dynamic)
        manifest.append({"file": name, "opset": opset, "batch": batch, "resolution": 16,
                         "torch_parameters": sum(p.numel() for p in model.parameters()), "kinds": KINDS})
        print(f"wrote {DATA / name}")
    with open(DATA / "manifest.json", "w") as f:
        json.dump({"generated_by": "scripts/make-activation-onnx.py", "torch": torch.__version__,
                   "models": manifest}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
