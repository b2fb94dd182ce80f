"""The training step's optimizer as remat names it (docs/memory-model.md 11): torch.optim's
optimizers for remat's --optimizer, the warm-up step that creates their state, and remat's step
options for the same step."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

# remat's --optimizer names as torch.optim builds them (PyTorch's defaults; SGD needs an lr).
OPTIMIZERS: Dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda params, foreach: torch.optim.SGD(params, lr=1e-3, foreach=foreach),
    "momentum": lambda params, foreach: torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach),
    "adam": lambda params, foreach: torch.optim.Adam(params, foreach=foreach),
    "adamw": lambda params, foreach: torch.optim.AdamW(params, foreach=foreach),
}
GRADS = ("static", "on-backward")


def make_optimizer(name: str, model: torch.nn.Module, foreach: bool) -> torch.optim.Optimizer:
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer '{name}' (valid: none, {', '.join(OPTIMIZERS)})")
    return OPTIMIZERS[name]([p for p in model.parameters() if p.requires_grad], foreach)


def warm_up(model: torch.nn.Module, x: torch.Tensor, optimizer: torch.optim.Optimizer,
            labels: Optional[torch.Tensor] = None, loss_fn: Optional[Callable] = None) -> None:
    """One training step with ``optimizer``, so that its state (the moments) exists: a step recorded
    after it is a loop's steady state (memory-model.md 11.1). The gradients are set to None after."""
    if labels is None:
        labels = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
    (loss_fn or F.cross_entropy)(model(x), labels).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def remat_step_args(optimizer: str, foreach: bool, grads: str, precision: str = "fp32") -> List[str]:
    """remat's options for that step (every chain command takes them)."""
    if grads not in (*GRADS, "in-place"):  # in-place: remat's paper model, which no PyTorch loop runs
        raise ValueError(f"unknown gradient mode '{grads}' (valid: {', '.join(GRADS)}, in-place)")
    step = ["--optimizer", optimizer, "--foreach", "on" if foreach else "off", "--grads", grads]
    return step + (["--precision", precision] if precision != "fp32" else [])


class Autocast(torch.nn.Module):
    """``model`` under ``torch.autocast`` (bf16-mixed: the forward pass in autocast's dtypes, the
    float32 master weights the optimizer updates); its output is cast to float32 for the loss, as
    autocast's fp32 list runs cross_entropy (memory-model.md 11.7)."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.model = model
        self.dtype = dtype

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=self.dtype):
            out = self.model(x)
        return out.float()
