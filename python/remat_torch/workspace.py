"""profile_workspaces: PyTorch's own in-op scratch, per chain layer, as the chain's wf / wb.

remat's memory model gives each layer a forward workspace wf (scratch of F, R and RE) and a backward
workspace wb (scratch of B) that exist only while the op runs (docs/memory-model.md, 2.3 and 5.1).
Inference gives 0; a device's kernels take more, which is measured. Here it is measured for PyTorch:
one training step of the model, every allocation and free read from the profiler's memory events,
each attributed to the chain layer whose forward or backward made it:

- forward: the model is traced with torch.fx (layer_map, the one place that maps layers to nodes)
  and each run of nodes that belong to one chain layer runs inside a profiler range named after
  the layer;
- backward: an autograd node's evaluation carries the sequence number of the forward op that made
  the node, so it belongs to the layer whose range that op ran in.

A layer's op (its forward, or its backward) holds, at each instant, the bytes it allocated and has
not freed, less the bytes of older tensors it freed (a backward releases what its forward saved
and the gradient it was given). Its scratch is the most of that over the op, less what the op
leaves allocated (its output, what it saves, the input gradient): wf = max(0, peak - kept), and
the model's footprint of the op (bytes alive before + what it writes + the workspace) is then
PyTorch's peak inside it. Parameter gradients (allocated by the backward and kept: static in the
model) count nowhere, unless the chain is planned with --grads on-backward or static, where the model
holds what B(l) writes on top of wb (``gradients_on_backward``, ``fresh_gradients``).

wf is the forward's scratch when it keeps what autograd saves (F in keep mode, R, RE). The model
has one wf for both modes of a forward (keep: a + e + wf, discard: a + wf), while PyTorch computes
the saved tensors in a discarding forward too and frees them as it goes (a max pooling's indices, a
block's inner tensors): its discard-mode scratch is measured as well (``fwd_discard_bytes``, a
forward under saved_tensors_hooks that drop everything, as torch.utils.checkpoint's) and reported,
not written: taking it as wf would overstate every keep-mode forward and recompute by up to e(l)
(docs/memory-model.md 10.4).

A composite block (a ResNet block, an inverted residual) is one chain layer, so its measured wf and
wb replace the block's arenas: PyTorch runs the block's ReLUs and add in place, which the arenas
(laid out for out-of-place inner ops) do not.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.nn.functional as F

from . import layer_map
from .plan import chain_layer_names
from .record import _range_enter, _range_exit

LAYER_RANGE = "remat_layer::"
_EVALUATE = "autograd::engine::evaluate_function"
_ACCUMULATE = "AccumulateGrad"


@dataclass
class LayerWorkspace:
    """One chain layer's measured scratch in bytes, and the op (innermost) at its peak."""

    fwd_bytes: int = 0  # wf: the forward's scratch when it keeps what autograd saves
    bwd_bytes: int = 0  # wb
    fwd_at: str = ""
    bwd_at: str = ""
    fwd_discard_bytes: int = 0  # the forward's scratch when nothing is saved (under a checkpoint): reported


@dataclass
class WorkspaceProfile:
    layers: Dict[str, LayerWorkspace] = field(default_factory=dict)  # by chain layer name
    torch_version: str = ""
    threads: int = 0
    unmapped_nodes: List[str] = field(default_factory=list)  # fx nodes that belong to no chain layer


def layer_of(node_name: str, layer_names: Sequence[str]) -> Optional[str]:
    """The chain layer an fx node (by its remat name) belongs to: the layer of that name, or the
    longest layer name it lies inside (``layer1.0`` holds ``layer1.0.conv1``)."""
    if node_name in layer_names:
        return node_name
    inside = [n for n in layer_names if node_name.startswith(n + ".")]
    return max(inside, key=len) if inside else None


def _enter(name: str):
    return _range_enter(LAYER_RANGE + name)


def _exit(value, handle):
    _range_exit(handle)
    return value


def instrument(model: torch.nn.Module, layer_names: Sequence[str]) -> Tuple[fx.GraphModule, List[str]]:
    """``model`` traced, each run of nodes of one chain layer inside a profiler range named after it.
    Returns the module and the computing nodes that belong to no layer."""
    gm = layer_map.trace(model)
    graph = gm.graph
    unmapped = []
    runs: List[Tuple[str, List[fx.Node]]] = []
    joined = [n for n in layer_names if "+" in n]
    joined_of = {}  # node -> its joined layer (names first: ``encoder.ln`` is called in ``encoder``)
    for layer in joined:
        for node in layer_map.joined_layer_nodes(gm, layer):
            if node.meta.get(layer_map.NAME_KEY) in layer_map.joined_parts(layer) or node not in joined_of:
                joined_of[node] = layer
    pending: List[fx.Node] = []  # ops outside every module (a transformer's root ops): the next layer's
    for node in list(graph.nodes):
        name = node.meta.get(layer_map.NAME_KEY)
        if not name:
            continue
        layer = layer_of(name, layer_names) or joined_of.get(node)
        if layer is None:
            unmapped.append(name)
            if joined and node.meta.get(layer_map.SCOPE_KEY, "") == "":
                pending.append(node)
            continue
        for op in pending + [node]:
            _add_to_runs(runs, layer, op)
        pending = []
    for op in pending if runs else []:  # after the last layer's ops (the loss in the model): the last layer's
        _add_to_runs(runs, runs[-1][0], op)
    for layer, nodes in runs:
        with graph.inserting_before(nodes[0]):
            handle = graph.call_function(_enter, (layer,))
        last = nodes[-1]
        with graph.inserting_after(last):
            closed = graph.call_function(_exit, (last, handle))
        # Every reader of the run's last value reads it through _exit, so the range ends before them.
        last.replace_all_uses_with(closed, delete_user_cb=lambda user: user is not closed)
    graph.lint()
    gm.recompile()
    return gm, unmapped


def _add_to_runs(runs: List[Tuple[str, List[fx.Node]]], layer: str, node: fx.Node) -> None:
    if runs and runs[-1][0] == layer and runs[-1][1][-1].next is node:
        runs[-1][1].append(node)
    else:
        runs.append((layer, [node]))


def _default_loss(output, labels):
    return F.cross_entropy(output, labels)


def profile_workspaces(
    model: torch.nn.Module,
    example_input: torch.Tensor,
    chain,
    labels: Optional[torch.Tensor] = None,
    loss_fn: Callable = _default_loss,
    gradients_on_backward: bool = False,
    fresh_gradients: bool = False,
) -> WorkspaceProfile:
    """PyTorch's scratch of each chain layer's forward and backward on ``example_input``'s device.

    ``chain``: the chain's layer names, or a remat-chain/1 file (path or parsed) whose layers are
    named as remat's ONNX import names them. The model is copied (its batch-norm statistics and
    gradients stay as they are); one unprofiled step runs first (oneDNN's caches).

    ``gradients_on_backward``: for a chain planned with ``--grads on-backward``, whose B(l) writes
    the layer's weight gradients itself (memory-model.md 11.2). The gradients a layer's backward
    makes (kept as ``.grad``) then count toward its peak and come off it as B(l)'s outputs, like
    d(l-1): a convolution whose scratch peaks before it allocates its weight gradient (PyTorch's
    oneDNN backward on CPUs without AVX-512) gets that scratch less the gradient, not all of it.
    Otherwise they are left out, as the static gradients they are in the other modes.

    ``fresh_gradients``: for a chain planned with ``--grads static`` (memory-model.md 11.2). The
    profiled step runs with every ``.grad`` allocated (``zero_grad(set_to_none=False)``), as the
    user's loop does, so each backward node allocates its weight gradients afresh and
    ``AccumulateGrad`` adds them in and frees them, before the next node of the layer runs. That
    free counts for the layer that made them (a block's next convolution starts from the right
    base), and the layer's largest node's fresh gradients come off its peak, because the model
    holds that fresh gradient on top of wb: a convolution whose scratch is freed before it
    allocates its weight gradient (PyTorch's oneDNN backward) gets that scratch less the gradient."""
    if gradients_on_backward and fresh_gradients:
        raise ValueError("profile_workspaces: gradients_on_backward and fresh_gradients are two --grads modes; pick one")
    names = chain_layer_names(chain)
    work = copy.deepcopy(model).train()
    gm, unmapped = instrument(work, names)
    if labels is None:
        labels = torch.zeros(example_input.shape[0], dtype=torch.long, device=example_input.device)

    def step():
        loss_fn(gm(example_input), labels).backward()

    step()
    gm.zero_grad(set_to_none=not fresh_gradients)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as keep:
        step()
    gm.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as discard:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: None, lambda p: None):
            out = gm(example_input)
            del out
    result = WorkspaceProfile(torch_version=str(torch.__version__), threads=torch.get_num_threads(),
                              unmapped_nodes=unmapped)
    for name in names:
        result.layers[name] = LayerWorkspace()
    for (phase, layer), (scratch, at) in op_scratch(keep, example_input.device, gradients_on_backward,
                                                   fresh_gradients).items():
        w = result.layers.setdefault(layer, LayerWorkspace())
        if phase == "F":
            w.fwd_bytes, w.fwd_at = scratch, at if scratch else ""
        else:
            w.bwd_bytes, w.bwd_at = scratch, at if scratch else ""
    for (phase, layer), (scratch, _) in op_scratch(discard, example_input.device).items():
        if phase == "F":
            result.layers.setdefault(layer, LayerWorkspace()).fwd_discard_bytes = scratch
    return result


def _events(prof, device):
    """(start ns, ptr, signed bytes, ancestors innermost first) of every allocation event, by time,
    and the chain layer of each forward sequence number (the op that made an autograd node)."""
    from .memory_trace import _device_matches, _is_allocation, _walk

    allocations = []
    seq_events = []
    for event, ancestors in _walk(prof.profiler.kineto_results.experimental_event_tree()):
        if _is_allocation(event):
            if _device_matches(event.extra_fields, device):
                allocations.append((event.start_time_ns, int(event.extra_fields.ptr),
                                    int(event.extra_fields.alloc_size), ancestors))
            continue
        seq = getattr(event.extra_fields, "sequence_number", -1)
        if seq is None or seq < 0 or event.name.startswith(("autograd::", LAYER_RANGE)) or "Backward" in event.name:
            continue
        if any(a.name.startswith(_EVALUATE) for a in ancestors):
            continue
        layer = next((a.name[len(LAYER_RANGE):] for a in ancestors if a.name.startswith(LAYER_RANGE)), None)
        if layer is not None:
            seq_events.append((event.start_time_ns, seq, layer))
    allocations.sort(key=lambda a: a[0])
    # The op that makes a node records the sequence number it takes; an op before it in the same
    # forward that makes none records the same (the next) number. The last one to record it made it.
    layer_of_seq = {seq: layer for _, seq, layer in sorted(seq_events, key=lambda s: s[0])}
    return allocations, layer_of_seq


def _group(ancestors, layer_of_seq) -> Optional[Tuple[str, str]]:
    for a in ancestors:  # innermost first
        if a.name.startswith(_EVALUATE):
            seq = getattr(a.extra_fields, "sequence_number", -1)
            layer = layer_of_seq.get(seq)
            return ("B", layer) if layer is not None else None
        if a.name.startswith(LAYER_RANGE):
            return ("F", a.name[len(LAYER_RANGE):])
    return None


def _node(ancestors) -> Optional[int]:
    """The sequence number of the innermost autograd node evaluating (None in a forward)."""
    for a in ancestors:
        if a.name.startswith(_EVALUATE):
            return getattr(a.extra_fields, "sequence_number", -1)
    return None


def _accumulating(ancestors) -> bool:
    """Inside AccumulateGrad: adding a fresh weight gradient into ``.grad`` (static gradients)."""
    return any(a.name.endswith(_ACCUMULATE) for a in ancestors)


def op_scratch(prof, device, count_gradients: bool = False,
               fresh_gradients: bool = False) -> Dict[Tuple[str, str], Tuple[int, str]]:
    """(phase "F" or "B", layer) -> (scratch bytes, the innermost op at its peak), from one profile.
    ``count_gradients``: what is still allocated when the step ends (the parameter gradients)
    counts toward the group that made it and comes off its peak as one of its outputs.
    ``fresh_gradients``: what AccumulateGrad frees leaves the group that made it then, and the
    most one node of the group made that way (its fresh weight gradients) comes off its peak."""
    allocations, layer_of_seq = _events(prof, device)
    live: Dict[int, int] = {}
    for index, (_, ptr, size, _) in enumerate(allocations):
        if size > 0:
            live[ptr] = index
        else:
            live.pop(ptr, None)
    persistent = set(live.values())  # still allocated when the step ends: parameter gradients (static)
    older: Dict[int, int] = {}  # every allocation of the step so far that is live: ptr -> bytes
    made_by: Dict[int, Tuple[Tuple[str, str], Optional[int]]] = {}  # ptr -> (group, node) that made it
    state: Dict[Tuple[str, str], dict] = {}
    for index, (_, ptr, size, ancestors) in enumerate(allocations):
        group = _group(ancestors, layer_of_seq)
        s = state.setdefault(group, {"made": {}, "net": 0, "best": 0, "at": "", "fresh": {}}) if group else None
        if size > 0:
            if count_gradients or index not in persistent:
                older[ptr] = size
                if s is not None:
                    made_by[ptr] = (group, _node(ancestors))
                    s["made"][ptr] = size
                    s["net"] += size
                    if s["net"] > s["best"]:
                        s["best"], s["at"] = s["net"], ancestors[0].name if ancestors else "?"
            continue
        freed = older.pop(ptr, None)
        maker = made_by.pop(ptr, None)
        if freed is not None and fresh_gradients and s is None and maker and _accumulating(ancestors):
            s = state[maker[0]]
            s["fresh"][maker[1]] = s["fresh"].get(maker[1], 0) + freed
        if freed is None or s is None:
            continue
        s["made"].pop(ptr, None)
        s["net"] -= freed
    return {g: (max(0, s["best"] - sum(s["made"].values()) - max(s["fresh"].values(), default=0)), s["at"])
            for g, s in state.items()}


def write_profiled_chain(chain, profile: WorkspaceProfile, out: str) -> dict:
    """The chain (path or parsed remat-chain/1) with every profiled layer's ``fwd_workspace_bytes``
    and ``bwd_workspace_bytes`` set to PyTorch's scratch, written atomically to ``out``."""
    if isinstance(chain, str):
        with open(chain, encoding="utf-8") as f:
            chain = json.load(f)
    chain = copy.deepcopy(chain)
    for layer in chain.get("layers", []):
        w = profile.layers.get(str(layer.get("name")))
        if w is None or layer.get("kind") in ("flatten", "abstract"):
            continue
        layer["fwd_workspace_bytes"] = int(w.fwd_bytes)
        layer["bwd_workspace_bytes"] = int(w.bwd_bytes)
    chain.setdefault("name", "model")
    folder = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(prefix=".remat-chain-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_chain_text(chain))
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return chain


def _chain_text(chain: dict) -> str:
    """One layer a line, as remat writes chains (docs/formats.md 1.6)."""
    head = {k: v for k, v in chain.items() if k != "layers"}
    lines = [json.dumps(layer, sort_keys=True) for layer in chain.get("layers", [])]
    text = json.dumps(head)[:-1] + ', "layers": [\n' + ",\n".join(lines) + "\n]}\n"
    return text
