"""The transformers of scripts/torch-fidelity.py (issue 23): what differs from a torchvision CNN.

- ``gpt_small``: scripts/make-transformer-onnx.py's nanoGPT-style GPT (4 pre-norm layers, d 256,
  4 or 8 heads, position table 128, vocabulary 1,000, tied LM head, cross entropy in the model), fed
  token ids [batch, sequence]. The model computes the loss itself and the logits die inside the
  step, as remat's ``lm_head`` counts them (docs/memory-model.md 12.2); the targets are a buffer, so
  fx traces one input and the recorded step's output is the loss.
- ``vit_b_16``: torchvision's ``vit_b_16`` (12 layers, d 768, 12 heads, patch 16) at the fidelity
  run's image size (``image_size=R``, R a multiple of 16: 224 is the model's own, 64 gives 17 tokens).

Both are exported by make-transformer-onnx.py's ``export`` (opset 17, training mode, no weights),
imported with ``remat import`` (``--dim sequence=S`` for the GPT) and planned with
``--attention math``: PyTorch 1.13 has no scaled_dot_product_attention, so the exported graph and
the model trained here compute the math form (memory-model.md 12.1, 12.3).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch
import torch.fx
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("make_transformer_onnx", os.path.join(HERE, "make-transformer-onnx.py"))
make_onnx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_onnx)

NAMES = ("gpt_small", "vit_b_16")
GPT = {"layers": 4, "width": 256, "positions": 128, "vocab": 1000}  # the GPT; heads from --heads
PLAN_ARGS = ["--attention", "math"]  # the graph's own attention (1.13: no SDPA)


def positions(idx):
    """nanoGPT's position ids, one op for fx (torch.arange of a traced size does not trace)."""
    return torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)


torch.fx.wrap("positions")


class GptStep(make_onnx.Gpt):
    """make-transformer-onnx.py's GPT (the same modules) with its targets as a buffer: forward(idx)
    returns the loss. Its forward is Gpt.forward with the position ids made by ``positions``."""

    def __init__(self, heads: int, p: float = 0.0):
        super().__init__(GPT["layers"], GPT["width"], heads, GPT["positions"], GPT["vocab"], p)
        self.register_buffer("targets", torch.zeros(1, 1, dtype=torch.long))

    def forward(self, idx):  # noqa: D401 (nn.Module's signature)
        t = self.transformer
        x = t.drop(t.wte(idx) + t.wpe(positions(idx)))
        for block in t.h:
            x = block(x)
        logits = self.lm_head(t.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), self.targets.view(-1))


@dataclass
class Case:
    """One model as the fidelity run trains and imports it."""

    model: torch.nn.Module
    x: torch.Tensor  # the input: token ids or images
    labels: torch.Tensor  # what record_step's loss reads (unused by the GPT, whose output is its loss)
    loss_fn: Optional[Callable] = None  # None: cross entropy of the output and the labels
    import_args: List[str] = field(default_factory=list)  # beyond --batch
    plan_args: List[str] = field(default_factory=list)  # every remat command on the chain
    shape: str = ""  # the input's size in the row's key: "128x128", "sequence 128"
    export: Optional[Callable[[str], None]] = None  # writes the ONNX file; None: remat_cli.export_onnx


def _loss_is_output(output, labels):
    return output


def build(name: str, batch: int, resolution: int, sequence: int, heads: int, device) -> Case:
    torch.manual_seed(0)
    if name == "gpt_small":
        return _gpt(batch, sequence, heads, device)
    if name == "vit_b_16":
        return _vit(batch, resolution, device)
    raise ValueError(f"model '{name}': not one of {', '.join(NAMES)}")


def _gpt(batch: int, sequence: int, heads: int, device) -> Case:
    if not 1 <= sequence <= GPT["positions"]:
        raise ValueError(f"gpt_small: --sequence {sequence} is outside its position table (1 to {GPT['positions']})")
    model = GptStep(heads).train().to(device)
    ids = torch.randint(0, GPT["vocab"], (batch, sequence), device=device)
    model.targets = torch.randint(0, GPT["vocab"], (batch, sequence), device=device)

    def export(path: str) -> None:  # the two-input model of make-transformer-onnx.py: the same modules
        plain = make_onnx.Gpt(GPT["layers"], GPT["width"], heads, GPT["positions"], GPT["vocab"], 0.0).train()
        axes = {"idx": {0: "batch", 1: "sequence"}, "targets": {0: "batch", 1: "sequence"}}
        make_onnx.export(plain, (ids.cpu(), model.targets.cpu()), path, 17, ["idx", "targets"], axes)

    labels = torch.zeros(batch, dtype=torch.long, device=device)
    return Case(model, ids, labels, _loss_is_output, ["--dim", f"sequence={sequence}"], list(PLAN_ARGS),
                f"sequence {sequence}, {heads} heads", export)


def _vit(batch: int, resolution: int, device) -> Case:
    import torchvision

    if resolution % 16:
        raise ValueError(f"vit_b_16: --resolution {resolution} is not a multiple of its patch, 16")
    model = torchvision.models.vit_b_16(image_size=resolution).train().to(device)
    x = torch.randn(batch, 3, resolution, resolution, device=device)

    def export(path: str) -> None:
        make_onnx.export(model, (x,), path, 17, ["images"], {"images": {0: "batch"}})

    labels = torch.zeros(batch, dtype=torch.long, device=device)
    return Case(model, x, labels, None, [], list(PLAN_ARGS), f"{resolution}x{resolution}", export)
