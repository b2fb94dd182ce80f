"""apply_plan: a model cut at a plan's checkpoints, each segment but the last under checkpointing.

The model is traced with torch.fx (layer_map.trace), the checkpoint layers' output nodes are found
(layer_map, the one place that maps chain layers to nodes), and the graph is split after each of
them. Segment j reads exactly one tensor, x(c_j), and returns x(c_(j+1)). Every segment but the last
runs under non-reentrant torch.utils.checkpoint: during the forward pass it keeps only its input
(the checkpoint) and drops what its ops save; the backward pass recomputes it. The last segment runs
plainly and keeps what its ops save, as remat's memory model says (docs/memory-model.md, 2.1-2.4).
"""

from __future__ import annotations

import contextlib
import copy
import operator
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.utils.checkpoint as torch_checkpoint

from . import layer_map
from .plan import PlanLike, checkpoint_names


class CheckpointedModel(torch.nn.Module):
    """The applied plan: ``segments`` run in order, each reading the one tensor the one before wrote;
    ``checkpointed[i]`` says whether segment i runs under torch.utils.checkpoint.

    A chain segment (c_j, c_(j+1)) is one or two of these (see _pieces). Parameters are the original
    model's (the segments hold its submodules), so an optimizer over either module's parameters
    trains both.
    """

    def __init__(self, pieces: List[Tuple[fx.GraphModule, bool]], plan_names: List[str], cut_nodes: List[str]):
        super().__init__()
        self.segments = torch.nn.ModuleList([p for p, _ in pieces])
        self.checkpointed = [c for _, c in pieces]
        self.plan_names = plan_names  # the chain layers kept, in order
        self.cut_nodes = cut_nodes  # the fx nodes whose outputs they are

    def forward(self, x):
        for segment, checkpointed in zip(self.segments, self.checkpointed):
            if checkpointed:
                # The input travels in the run, not as checkpoint's argument: torch 1.13's
                # non-reentrant checkpoint closes over its arguments until the segment's last saved
                # tensor is released, which would hold x(c) through the segment's whole backward.
                run = _SegmentRun(segment, x)
                x = None
                x = torch_checkpoint.checkpoint(run, use_reentrant=False)
            elif getattr(segment, "boxed", False):
                # The segment takes its input out of the list: no frame here holds x(c) while the
                # segment runs, so x(c) is freed after its last reader, as the model frees it.
                box = [x]
                x = None
                x = segment(box)
            else:
                x = segment(x)
        return x


class _SegmentRun:
    """One forward of a checkpointed segment: the first call is the forward pass, later calls recompute.

    It holds the segment's input, the checkpoint x(c), from the forward pass to the recompute, and
    lets go of it when the recompute takes it: from then on x(c) lives as long as what the
    recomputed ops save of it (a convolution's input, a chunk's view), and is freed after its last
    reader, as memory-model.md 3.1 says. Passed as checkpoint's argument instead, x(c) would be held
    by the checkpoint's unpack hook until the last saved tensor of the segment is released, the end
    of the segment's backward, even when no backward op reads it (a channel shuffle or a ReLU first
    after the cut).

    A recompute runs the segment's batch norms again in training mode; they must not update their
    running statistics a second time, or the model would not train like the original.
    """

    def __init__(self, segment: fx.GraphModule, x: torch.Tensor):
        self.segment = segment
        self.input: Optional[torch.Tensor] = x
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls == 1:
            return self.segment([self.input])  # boxed (_pieces): the run keeps x(c) for the recompute
        if self.input is None:
            raise RuntimeError("a checkpointed segment is recomputed a second time (backward with retain_graph?); "
                               "apply_plan's segments recompute once per forward")
        box = [self.input]
        self.input = None
        with _frozen_batchnorm_statistics(self.segment):
            return self.segment(box)


@contextlib.contextmanager
def _frozen_batchnorm_statistics(module: torch.nn.Module) -> Iterator[None]:
    # momentum 0 leaves the running mean and variance exactly as they are (1 * r + 0 * batch);
    # the counter the forward adds 1 to is put back. A cumulative average (momentum None) reads the
    # counter, so those statistics are saved and restored instead.
    saved = []
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats:
            if m.momentum is None:
                saved.append((m, None, m.running_mean.clone(), m.running_var.clone()))
            else:
                saved.append((m, m.momentum, None, None))
                m.momentum = 0.0
    try:
        yield
    finally:
        with torch.no_grad():
            for m, momentum, mean, var in saved:
                if mean is None:
                    m.momentum = momentum
                else:
                    m.running_mean.copy_(mean)
                    m.running_var.copy_(var)
                if m.num_batches_tracked is not None:
                    m.num_batches_tracked.sub_(1)


def apply_plan(
    model: torch.nn.Module,
    plan: PlanLike,
    example_input: Optional[torch.Tensor] = None,
    layers: Optional[Sequence[str]] = None,
) -> CheckpointedModel:
    """Returns ``model`` running under ``plan``: exactly the plan's checkpoints kept.

    ``plan``: chain layer names (``checkpoint_names`` of ``remat plan --json``), 1-based layer
    indices with ``layers`` (the chain's layer names or a remat-chain/1 file), the plan object
    itself or a path to it; None or [] stores everything. ``example_input``, when given, is run
    through the model and the applied one without gradients to check that both give the same output
    shape. A model fx cannot trace raises layer_map.TraceError naming the module.
    """
    from .plan import chain_layer_names

    names = checkpoint_names(plan, chain_layer_names(layers) if layers is not None else None)
    gm = layer_map.trace(model)
    pairs = layer_map.layer_output_nodes(gm, names)  # in graph order
    cuts = [node for node, _ in pairs]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        raise layer_map.LayerMapError(
            f"the traced model has {len(placeholders)} inputs ({', '.join(p.name for p in placeholders)}); "
            "a chain follows one input"
        )
    pieces = _split(gm, cuts, [name for _, name in pairs])
    applied = CheckpointedModel(pieces, [name for _, name in pairs], [n.name for n, _ in pairs])
    applied.train(model.training)
    if example_input is not None:
        _check_shapes(model, applied, example_input)
    return applied


def _split(gm: fx.GraphModule, cuts: List[fx.Node], names: List[str]) -> List[Tuple[fx.GraphModule, bool]]:
    nodes = list(gm.graph.nodes)
    bounds = [nodes.index(c) for c in cuts]
    pieces = []
    start = 0
    entry: Optional[fx.Node] = None  # the node whose value the segment reads (None: the input)
    for j, end in enumerate(bounds + [len(nodes) - 1]):
        body = nodes[start : end + 1]
        if j == len(bounds):  # the last segment: never recomputed
            pieces.append((_segment(gm, body, entry, None, j > 0, boxed=j > 0), False))
        else:
            pieces += _pieces(gm, body, entry, j > 0, names[j])
        entry = nodes[end]
        start = end + 1
    return pieces


_VIEWS = {"flatten", "view", "reshape"}
# Layers with extras e(l) > 0 (memory-model.md 5.1): a batch norm's statistics, a dropout's mask and a
# max pooling's int64 indices, which PyTorch saves beside the input (MaxPool2DWithIndicesBackward0).
_WITH_EXTRAS = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.modules.dropout._DropoutNd,
                torch.nn.modules.pooling._MaxPoolNd)


def _computing(gm: fx.GraphModule, body: List[fx.Node]) -> List[fx.Node]:
    """The nodes that compute (views such as torch.flatten are folded, as remat folds them)."""
    out = []
    for n in body:
        if n.op not in ("call_module", "call_function", "call_method"):
            continue
        if getattr(n.target, "__name__", n.target) in _VIEWS:
            continue
        out.append(n)
    return out


def _is_relu(gm: fx.GraphModule, n: fx.Node) -> bool:
    if n.op == "call_module":
        return type(gm.get_submodule(str(n.target))) is torch.nn.ReLU
    if n.op == "call_function":
        return n.target in (torch.relu, torch.nn.functional.relu)
    return n.op == "call_method" and n.target in ("relu", "relu_")


def _pieces(gm: fx.GraphModule, body: List[fx.Node], entry, after_cut: bool, end_layer: str):
    """A recomputed chain segment as PyTorch runs it. remat's model (memory-model.md 2.4) recomputes
    the layers before the segment's end c and never c itself: x(c) is the checkpoint. PyTorch's
    checkpoint reruns the whole function, and keeps a second x(c) when c's backward saves its output.

    - A segment of one layer without extras (a conv, a ReLU, an average pooling, a linear layer: no R
      op, no RE op in the model) runs plainly: nothing to recompute, and a checkpoint would keep its input
      even where the model frees it (a dead checkpoint, memory-model.md 3.4).
    - A segment whose end c is a ReLU layer of the chain (conv-ReLU, ResNet's stem) runs the ReLU
      plainly after the checkpointed rest: the ReLU saves only its output, the checkpoint itself, and
      c has no extras, so the model has no RE(c) and B(c) reads the checkpoint.
    - Anything else (a batch norm, dropout or max pooling alone: the model's RE(c), which recomputes
      the statistics, the mask or the indices from x(c-1); a block, a ResNet block's final ReLU
      included): checkpointed whole. Run plainly, a max pooling would keep its indices through the
      forward pass, which the plan does not. A block's final ReLU under the checkpoint saves the
      recomputed output, which is what the model's RE(c) writes for B(c) (memory-model.md 2.3);
      run outside, its backward would come before the recompute, an order the model has no op for.
    """
    exit_node = body[-1]
    computing = _computing(gm, body)
    if len(computing) == 1 and not _has_extras(gm, computing[0]):
        return [(_segment(gm, body, entry, exit_node, after_cut, boxed=entry is not None), False)]
    relu_layer = exit_node.meta.get(layer_map.NAME_KEY) == end_layer  # the ReLU is the chain layer c
    if len(computing) > 1 and computing[-1] is exit_node and relu_layer and _is_relu(gm, exit_node):
        inner = exit_node.all_input_nodes
        if len(inner) == 1 and inner[0] in body and not _read_after(body, inner[0], exit_node):
            head = body[: body.index(exit_node)]
            return [
                (_segment(gm, head, entry, inner[0], after_cut, boxed=True), True),
                (_segment(gm, [exit_node], inner[0], exit_node, False, boxed=True), False),  # in place, as written
            ]
    return [(_segment(gm, body, entry, exit_node, after_cut, boxed=True), True)]


def _has_extras(gm: fx.GraphModule, n: fx.Node) -> bool:
    if n.op == "call_module":
        return isinstance(gm.get_submodule(str(n.target)), _WITH_EXTRAS)
    name = str(getattr(n.target, "__name__", n.target))
    return "dropout" in name or "batch_norm" in name or "max_pool" in name


def _read_after(body: List[fx.Node], value: fx.Node, reader: fx.Node) -> bool:
    """Whether a node of ``body`` other than ``reader`` reads ``value`` (then it cannot be the cut)."""
    return any(u is not reader for u in value.users)


def _segment(gm: fx.GraphModule, body: List[fx.Node], entry: Optional[fx.Node], exit_node, after_cut: bool,
             boxed: bool = False):
    """A GraphModule of ``body``: reads ``entry``'s value (the input when None), returns ``exit_node``'s
    (the model's output when None). A boxed one takes its input as a one-item list it empties."""
    graph = fx.Graph()
    env = {}
    if boxed:
        x = graph.call_method("pop", (graph.placeholder("box"),))
    else:
        x = graph.placeholder("x")
    if entry is not None:
        env[entry] = x

    def value_of(n: fx.Node):
        if n not in env:
            if n.op != "get_attr":  # layer_map.check_cut proved every other value is in env
                raise layer_map.LayerMapError(f"node '{n.name}' is read across a cut")
            env[n] = graph.get_attr(n.target)
        return env[n]

    for n in body:
        if n.op == "placeholder":
            env[n] = x
        elif n.op == "output":
            graph.output(fx.map_arg(n.args[0], value_of))
        else:
            env[n] = graph.node_copy(n, value_of)
    if exit_node is not None:
        graph.output(env[exit_node])
    segment = fx.GraphModule(gm, graph, f"Segment{len(body)}")
    segment.boxed = boxed
    if after_cut:
        _no_inplace_on_input(segment, x.name)
    return segment


_INPLACE_METHODS = {"relu_", "add_", "mul_", "clamp_", "clamp_min_", "hardtanh_", "sigmoid_", "tanh_"}


def _no_inplace_on_input(segment: fx.GraphModule, input_name: str) -> None:
    """A segment must not write its input, the checkpoint, in place: torchvision's ReLU(inplace=True)
    right after a cut would overwrite x(c), which the plan keeps and the recompute reads. Such an op
    runs out of place here, as remat's model counts it (its output a tensor of its own)."""
    x = next(n for n in segment.graph.nodes if n.name == input_name)
    changed = False
    for user in list(x.users):
        if user.op == "call_module":
            module = segment.get_submodule(str(user.target))
            if getattr(module, "inplace", False):
                plain = copy.copy(module)
                plain.inplace = False
                plain._remat_path = str(user.target)  # the module path recordings name it by
                name = str(user.target).replace(".", "_") + "_out_of_place"
                segment.add_submodule(name, plain)
                user.target = name
                changed = True
        elif user.op == "call_function" and user.kwargs.get("inplace"):
            user.kwargs = {**user.kwargs, "inplace": False}
            changed = True
        elif user.op == "call_method" and user.target in _INPLACE_METHODS and user.args and user.args[0] is x:
            user.target = str(user.target)[:-1]
            changed = True
        elif user.op == "call_function" and user.target is operator.iadd and user.args and user.args[0] is x:
            user.target = operator.add  # `x += y` on the checkpoint: a new tensor instead
            changed = True
    if changed:
        segment.recompile()


def _check_shapes(model: torch.nn.Module, applied: CheckpointedModel, example_input: torch.Tensor) -> None:
    states = [m.training for m in model.modules()]
    model.eval()  # no running statistics updated, no dropout drawn
    try:
        with torch.no_grad():
            want = model(example_input)
            got = applied(example_input)
    finally:
        for m, training in zip(model.modules(), states):
            m.training = training
    if isinstance(want, torch.Tensor) and (not isinstance(got, torch.Tensor) or got.shape != want.shape):
        raise layer_map.LayerMapError(
            f"the applied plan's output {getattr(got, 'shape', type(got))} differs from the model's {tuple(want.shape)}"
        )
