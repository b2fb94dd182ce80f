#!/usr/bin/python3
"""Training-mode torch exports of an MLP with LayerNorm, GELU and SiLU (Linear-LayerNorm-GELU-Linear-
SiLU-Linear), for tests/input/onnx_layernorm_test.cpp: at opset 13 torch 1.13 writes LayerNorm
decomposed (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) and GELU as its Erf pattern;
at opset 17 it writes LayerNormalization. Each opset with and without weights (export_params), one
of them with a symbolic batch.

Run with Debian's PyTorch (/usr/bin/python3); rewrites tests/data/onnx/layernorm/ (the .onnx files
and manifest.json with torch's parameter count and the chain kinds expected, layer by layer).
"""
import json
import pathlib
import warnings

import torch

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "onnx" / "layernorm"
FEATURES = 12
KINDS = ["linear", "layernorm", "gelu", "linear", "silu", "linear"]
# (file, opset, batch (None: symbolic), weights in the file)
EXPORTS = [("mlp_train_op13.onnx", 13, 2, False), ("mlp_train_op13_weights.onnx", 13, 2, True),
           ("mlp_train_op17.onnx", 17, 2, False), ("mlp_train_op17_weights_dynamic.onnx", 17, None, True)]


class LayerNormMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.act1 = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(32, 16)
        self.act2 = torch.nn.SiLU()
        self.fc3 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(self.act2(self.fc2(self.act1(self.norm(self.fc1(x))))))


def main():
    DATA.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, opset, batch, weights in EXPORTS:
        torch.manual_seed(0)
        model = LayerNormMlp().train()
        dynamic = None if batch else {"input": {0: "batch"}, "logits": {0: "batch"}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, torch.randn(batch or 2, FEATURES), str(DATA / name), opset_version=opset,
                              export_params=weights, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=["input"], output_names=["logits"],
                              dynamic_axes=dynamic)
        manifest.append({"file": name, "opset": opset, "batch": batch, "weights": weights, "features": FEATURES,
                         "torch_parameters": sum(p.numel() for p in model.parameters()), "kinds": KINDS})
        print(f"wrote {DATA / name}")
    with open(DATA / "manifest.json", "w") as f:
        json.dump({"generated_by": "scripts/make-layernorm-onnx.py", "torch": torch.__version__,
                   "models": manifest}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
