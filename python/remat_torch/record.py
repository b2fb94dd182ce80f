"""record_step: one training step under PyTorch's memory recording, written as a memory snapshot.

The file is the dict of PyTorch 2.x's ``torch.cuda.memory._snapshot()`` plus a ``"remat"`` key
(docs/pytorch.md, "Recordings"; the contract with remat's reader is docs/formats.md's).

- CPU: the profiler's allocation events (``profile_memory=True``): every allocation and free of
  PyTorch's CPU allocator with its address and size, inside the op that made it, so the peak inside
  an op is seen. They become "alloc" / "free_completed" entries of ``device_traces[0]``, whose frames
  name the ops (innermost first) and, as ``filename``, the module that ran them.
- CUDA, PyTorch >= 2.0: the caching allocator's own history (``_record_memory_history``), the
  snapshot as PyTorch takes it. CUDA on older PyTorch: the profiler's events, as on the CPU.

The trace holds only what the step allocates: its running sum is the step's dynamic bytes, and
``static_bytes`` (weights, gradients already allocated, buffers, the batch) is reported apart.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import memory_trace

FORMAT = "remat-torch-recording/1"
_MODULE_RANGE = "remat_module::"
_PHASE_RANGES = ("remat::forward", "remat::backward", "remat::step_end")


def _version_tuple() -> Tuple[int, int]:
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def _storage_bytes(tensors) -> int:
    seen = {}
    for t in tensors:
        if t is None or t.device.type == "meta":
            continue
        storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        nbytes = storage.nbytes() if hasattr(storage, "nbytes") else storage.size() * t.element_size()
        seen[(t.device.type, storage.data_ptr())] = nbytes
    return sum(seen.values())


def _module_paths(model: torch.nn.Module) -> Dict[int, str]:
    """Leaf modules and their paths in the user's model (an applied plan's segments.N. prefix dropped)."""
    from .apply import CheckpointedModel

    paths = {}
    for name, module in model.named_modules():
        if any(True for _ in module.children()):
            continue
        if isinstance(model, CheckpointedModel) and name.startswith("segments."):
            name = name.split(".", 2)[2] if name.count(".") >= 2 else name
        paths.setdefault(id(module), getattr(module, "_remat_path", name))
    return paths


def _range_enter(name: str):
    """Opens a profiler range without allocating (record_function's handle would be a tensor on 1.13)."""
    ops = torch.ops.profiler
    if hasattr(ops, "_record_function_enter_new"):
        return ("new", ops._record_function_enter_new(name, None))
    return ("old", ops._record_function_enter(name, None))


def _range_exit(handle) -> None:
    kind, h = handle
    if kind == "new":
        torch.ops.profiler._record_function_exit._RecordFunction(h)
    else:
        torch.ops.profiler._record_function_exit(h)


class _ModuleRanges:
    """Forward hooks that open a profiler range named after each leaf module while it runs."""

    def __init__(self, model: torch.nn.Module):
        self.paths = _module_paths(model)
        self.stack: List[object] = []
        self.handles = []
        for module in model.modules():
            if id(module) in self.paths:
                self.handles.append(module.register_forward_pre_hook(self._enter))
                self.handles.append(module.register_forward_hook(self._exit))

    def _enter(self, module, args):
        self.stack.append(_range_enter(_MODULE_RANGE + self.paths[id(module)]))

    def _exit(self, module, args, output):
        if self.stack:
            _range_exit(self.stack.pop())

    def remove(self):
        for h in self.handles:
            h.remove()


def _default_loss(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, labels)


def record_step(
    model: torch.nn.Module,
    batch,
    out: Optional[str] = None,
    *,
    labels: Optional[torch.Tensor] = None,
    loss_fn: Callable = _default_loss,
    grads: str = "none",
    model_name: Optional[str] = None,
    plan: Optional[Sequence[str]] = None,
    optimizer: Optional[torch.optim.Optimizer] = None,
) -> dict:
    """Runs one training step (forward, loss, backward) of ``model`` on ``batch`` under memory recording.

    ``batch``: the input tensor, or (input, labels). Labels default to class 0 for every sample
    (cross entropy over the model's output). ``grads``: "none" sets every parameter's gradient to
    None first (``zero_grad(set_to_none=True)``, PyTorch 2's default), so the backward allocates
    them; "zero" allocates them as zeros before the step (static), or zeroes them in place where
    they exist. ``optimizer``: a torch.optim optimizer over the model's parameters; the step then
    ends as a training loop's does, in ``optimizer.step()`` and, with grads="none",
    ``optimizer.zero_grad(set_to_none=True)`` (the gradients freed inside the recording), with the
    output and the loss held through both as the loop's variables hold them. Its state (the
    moments) is static: run one step with it first, so that the recording is a steady-state step
    (docs/pytorch.md, "The whole step"). Returns the snapshot dict and, with ``out``, writes it:
    JSON for ``*.json``, else pickle (protocol 4), atomically.
    """
    x, labels = _split_batch(batch, labels)
    if grads not in ("none", "zero"):
        raise ValueError(f"grads must be 'none' or 'zero', not {grads!r}")
    for p in model.parameters():
        if grads == "none":
            p.grad = None
        elif p.grad is not None:
            p.grad.zero_()
        elif p.requires_grad:
            p.grad = torch.zeros_like(p)
    static = [*model.parameters(), *model.buffers(), x, labels, *_state_tensors(optimizer)]
    static += [p.grad for p in model.parameters() if p.grad is not None]
    static_bytes = _storage_bytes(static)
    device = x.device
    v = _version_tuple()
    step = _StepEnd(optimizer, grads == "none")
    if device.type == "cuda" and v >= (2, 0):
        snapshot = _record_cuda(model, x, labels, loss_fn, device, v, step)
    else:
        snapshot = _record_profiler(model, x, labels, loss_fn, device, step)
    device_name = "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"
    snapshot["remat"].update(
        {
            "format": FORMAT,
            "device": device_name,
            "torch_version": str(torch.__version__),  # TorchVersion pickles as a class: remat refuses that
            "model": model_name or type(model).__name__,
            "plan": list(plan) if plan is not None else getattr(model, "plan_names", None),
            "batch": int(x.shape[0]),
            "static_bytes": int(static_bytes),
            "grads": grads,
        }
    )
    if optimizer is not None and step.options(grads) is not None:
        snapshot["remat"]["step"] = step.options(grads)
    trace = snapshot["device_traces"][0 if device.type == "cpu" else (device.index or 0)]
    summary = memory_trace.summarize(trace, snapshot["remat"]["phases"])
    snapshot["remat"]["persistent_bytes"] = summary.persistent_bytes
    snapshot["remat"]["activation_peak_bytes"] = summary.activation_peak_bytes
    if out is not None:
        write_snapshot(snapshot, out)
    return snapshot


def _split_batch(batch, labels):
    if isinstance(batch, (tuple, list)):
        x, labels = batch[0], batch[1] if len(batch) > 1 else labels
    else:
        x = batch
    if labels is None:
        labels = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
    return x, labels


def _state_tensors(optimizer) -> List[torch.Tensor]:
    if optimizer is None:
        return []
    return [t for state in optimizer.state.values() for t in state.values() if isinstance(t, torch.Tensor)]


class _StepEnd:
    """What ends the recorded step after the backward pass: nothing, or the optimizer's step and
    ``zero_grad(set_to_none=True)``; and the step options remat names it by (memory-model.md 11)."""

    def __init__(self, optimizer, set_to_none: bool):
        self.optimizer = optimizer
        self.set_to_none = set_to_none

    def run(self, mark: Callable[[str], None]) -> None:
        if self.optimizer is None:
            return
        self.optimizer.step()
        mark("optimizer_end")
        if self.set_to_none:
            self.optimizer.zero_grad(set_to_none=True)

    def options(self, grads: str) -> Optional[dict]:
        o = self.optimizer
        defaults = o.defaults
        if isinstance(o, torch.optim.SGD) and defaults.get("momentum", 0) in (0, 0.9):
            name = "momentum" if defaults.get("momentum", 0) else "sgd"
        elif type(o) in (torch.optim.Adam, torch.optim.AdamW):
            name = type(o).__name__.lower()
        else:
            return None  # remat has no name for it
        return {"optimizer": name, "foreach": bool(defaults.get("foreach")),
                "grads": "on-backward" if grads == "none" else "static", "precision": "fp32"}


def _step(model, x, labels, loss_fn, mark: Callable[[str], None], end: Optional[_StepEnd] = None) -> None:
    # References end here, so the output, the loss and every saved tensor are freed inside the step;
    # with an optimizer they are held through its step, as a loop's variables are.
    mark("forward_begin")
    output = model(x)
    mark("forward_end")
    loss = loss_fn(output, labels)
    loss.backward()
    mark("backward_end")
    if end is not None:
        end.run(mark)
    del output, loss
    mark("step_end")


def _record_profiler(model, x, labels, loss_fn, device, end: Optional[_StepEnd] = None) -> dict:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    ranges = _ModuleRanges(model)

    def mark(name: str) -> None:
        # An empty profiler range: its start time places the phase among the allocation events.
        _range_exit(_range_enter("remat::" + name))

    try:
        with profile(activities=activities, profile_memory=True) as prof:
            _step(model, x, labels, loss_fn, mark, end)
    finally:
        ranges.remove()
    trace, phase_times, counter_peak = memory_trace.from_profiler(prof, device)
    phases = [
        {"name": name, "trace_index": int(memory_trace.index_at(trace, t))} for name, t in phase_times
    ]
    between_ops = memory_trace.tensor_peak(trace)
    for entry in trace:
        entry.pop("_ns", None)
        entry.pop("_op", None)
    device_traces = [[] for _ in range((device.index or 0) + 1)] if device.type == "cuda" else [[]]
    device_traces[0 if device.type == "cpu" else (device.index or 0)] = trace
    remat = {"phases": phases, "torch_counter_peak_bytes": int(counter_peak), "between_ops_peak_bytes": int(between_ops)}
    return {"segments": [], "device_traces": device_traces, "remat": remat}


def _record_cuda(model, x, labels, loss_fn, device, v, end: Optional[_StepEnd] = None) -> dict:
    mem = torch.cuda.memory
    torch.cuda.synchronize(device)
    if v >= (2, 1):
        mem._record_memory_history(enabled="all", context="all", stacks="python", max_entries=10_000_000)
    else:
        mem._record_memory_history(True, trace_alloc_max_entries=10_000_000, trace_alloc_record_context=True)
    index = device.index or 0
    phases = []

    def mark(name: str) -> None:
        torch.cuda.synchronize(device)
        phases.append({"name": name, "trace_index": len(mem._snapshot()["device_traces"][index])})

    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    try:
        _step(model, x, labels, loss_fn, mark, end)
        torch.cuda.synchronize(device)
        snapshot = mem._snapshot()
    finally:
        if v >= (2, 1):
            mem._record_memory_history(enabled=None)
        else:
            mem._record_memory_history(False)
    snapshot = dict(snapshot)
    snapshot["remat"] = {
        "phases": phases,
        "torch_counter_peak_bytes": int(torch.cuda.max_memory_allocated(device) - base),
    }
    return snapshot


def write_snapshot(snapshot: dict, path: str) -> None:
    """Writes ``snapshot`` to ``path`` atomically: JSON for ``*.json``, pickle protocol 4 otherwise."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".remat-recording-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            if path.endswith(".json"):
                f.write(json.dumps(snapshot).encode("utf-8"))
            else:
                pickle.dump(snapshot, f, protocol=4)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_snapshot(path: str) -> dict:
    """Reads a recording back (JSON, or pickle: only files you wrote yourself; pickle runs code)."""
    with open(path, "rb") as f:
        head = f.read(1)
        f.seek(0)
        if head == b"\x80":
            return pickle.load(f)
        return json.loads(f.read().decode("utf-8"))
