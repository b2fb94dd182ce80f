"""Models by name, their ONNX export in training mode, and the `remat` binary run on it."""

from __future__ import annotations

import copy
import importlib
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from typing import List, Optional, Sequence

import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_REMAT = os.path.join(REPO_ROOT, "build", "dev", "app", "cli", "remat")


class RematError(RuntimeError):
    """The remat binary is missing or failed; the message carries its own."""

# The step remat_torch measures in PyTorch: forward and backward, no optimizer, the weight gradients
# kept between steps (the remat commands default to PyTorch 2's AdamW step, docs/memory-model.md 11).
STEP = ["--optimizer", "none", "--grads", "in-place"]


def make_model(spec: str, num_classes: Optional[int] = None) -> torch.nn.Module:
    """A torchvision model by name (``resnet18``) or a user's ``package.module:factory``."""
    if ":" in spec:
        module_name, _, factory_name = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ValueError(f"model '{spec}': cannot import module '{module_name}': {error}") from error
        factory = getattr(module, factory_name, None)
        if not callable(factory):
            raise ValueError(f"model '{spec}': module '{module_name}' has no callable '{factory_name}'")
        model = factory()
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model '{spec}': {factory_name}() returned {type(model).__name__}, not a torch.nn.Module")
        return model
    import torchvision

    factory = getattr(torchvision.models, spec, None)
    if not callable(factory) or spec.startswith("_"):
        raise ValueError(f"model '{spec}': not a torchvision model name (e.g. resnet18, vgg16) nor module:factory")
    kwargs = {} if num_classes is None else {"num_classes": num_classes}
    return factory(**kwargs)


def export_onnx(model: torch.nn.Module, example_input: torch.Tensor, path: str) -> None:
    """Exports as docs/import.md says: training mode, no constant folding, no weights, symbolic batch.
    A copy is exported: the export's forward would update the model's batch-norm statistics."""
    clone = copy.deepcopy(model).train()
    _without_stochastic_depth(clone)
    kwargs = {}
    if hasattr(torch.onnx, "TrainingMode"):
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
    with warnings.catch_warnings():  # a training-mode export warns about every batch norm's counter
        warnings.simplefilter("ignore")
        _export(clone, example_input, path, kwargs)


def _without_stochastic_depth(clone: torch.nn.Module) -> None:
    """torchvision's StochasticDepth (EfficientNet's blocks, default p 0.2) draws a Bernoulli mask in
    training, which torch's ONNX export cannot write (docs/import.md: export with
    stochastic_depth_prob=0.0). The copy exported gets p = 0, the identity; the model itself keeps
    its p. What the chain leaves out is each block's [N, 1, 1, 1] mask (32 bytes at batch 8)."""
    for module in clone.modules():
        if type(module).__name__ == "StochasticDepth" and isinstance(getattr(module, "p", None), float):
            module.p = 0.0


def _export(clone, example_input, path, kwargs):
    torch.onnx.export(
        clone, example_input, path, do_constant_folding=False, export_params=False,
        input_names=["input"], output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, **kwargs,
    )


def find_remat(remat: Optional[str] = None) -> str:
    """The remat binary: ``remat`` if given (it must be there), else $REMAT, the dev build's, PATH's."""
    if remat:
        if os.path.isfile(remat) and os.access(remat, os.X_OK):
            return remat
        raise RematError(f"--remat {remat}: no such executable")
    for candidate in (os.environ.get("REMAT"), DEFAULT_REMAT, shutil.which("remat")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RematError(
        f"no remat binary: give --remat PATH or $REMAT, or build it "
        f"(cmake --preset dev && cmake --build build/dev --target remat); looked at {remat or DEFAULT_REMAT}"
    )


def run_remat(args: Sequence[str], remat: Optional[str] = None) -> dict:
    """Runs ``remat ARGS --json`` and returns its JSON output."""
    binary = find_remat(remat)
    proc = subprocess.run([binary, *args, "--json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RematError(f"{os.path.basename(binary)} {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as error:
        raise RematError(f"remat {' '.join(args)}: output is not JSON: {error}") from error


def plan_model(
    model: torch.nn.Module, example_input: torch.Tensor, planner: str, remat: Optional[str] = None,
    onnx_path: Optional[str] = None, step: Optional[List[str]] = None,
) -> dict:
    """``remat plan`` of the model's training-mode export at the example's batch: the plan object.
    ``step``: remat's step options (default STEP: forward and backward only)."""
    find_remat(remat)  # before the export, which takes a while
    with tempfile.TemporaryDirectory(prefix="remat-torch-") as folder:
        path = onnx_path or os.path.join(folder, "model.onnx")
        export_onnx(model, example_input, path)
        batch = str(example_input.shape[0])
        return run_remat(["plan", path, "--planner", planner, "--batch", batch, *(step or STEP)], remat)


def import_chain(model: torch.nn.Module, example_input: torch.Tensor, remat: Optional[str] = None) -> dict:
    """The model's chain as ``remat import`` writes it from the training-mode export (parsed)."""
    binary = find_remat(remat)
    with tempfile.TemporaryDirectory(prefix="remat-torch-") as folder:
        onnx_path = os.path.join(folder, "model.onnx")
        chain_path = os.path.join(folder, "chain.json")
        export_onnx(model, example_input, onnx_path)
        cmd = [binary, "import", onnx_path, "--batch", str(example_input.shape[0]), "--output", chain_path]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RematError(f"remat import: exit {proc.returncode}: {proc.stderr.strip()}")
        with open(chain_path, encoding="utf-8") as f:
            return json.load(f)


def simulate_names(onnx_or_chain: str, checkpoints: List[int], batch: int, remat: Optional[str] = None) -> dict:
    """``remat simulate`` of a plan given as layer indices."""
    return run_remat(
        ["simulate", onnx_or_chain, "--batch", str(batch), "--checkpoints", ",".join(map(str, checkpoints)), *STEP], remat
    )
