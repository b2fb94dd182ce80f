"""The one place that maps remat's chain layers to the nodes of a torch.fx graph.

remat names an imported layer after the module scope torch's ONNX export gives its node
(docs/import.md, "Names"; core/src/input/onnx/onnx_graph.cpp, scopedNameOf):

- a node inside a module is named by the module's qualified path: ``features.0``, ``layer3.5.conv1``;
  the k-th call (k >= 1) of a module that runs more than once gets ``_k`` on its last segment
  (torchvision's BasicBlock calls ``relu`` twice: ``layer1.0.relu`` and ``layer1.0.relu_1``);
- a merge (Add, Concat, Sum) is named after the module whose forward() calls it plus the op:
  ``layer1.0.add``;
- an op outside any module is named by its ONNX op type, lower case: ``flatten``,
  ``globalaveragepool`` (again ``_k`` for the k-th one);
- a multi-branch block is named after the module all its ops share (``layer1.0``).

Here every fx node gets the same name (``node.meta["remat_name"]``) from a tracer that records which
module was being traced when the node was made, and a chain layer's output is the last node (in the
graph's order) whose name is the layer's name or lies inside it (``layer1.0`` holds
``layer1.0.relu_1``).
"""

from __future__ import annotations

import contextlib
import dis
import inspect
import operator
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.nn.functional as F

SCOPE_KEY = "remat_scope"  # the module being traced when the node was made, named as the export scopes it
_CALLEE_KEY = "remat_callee"  # a call_module node's module, named as the export scopes it
NAME_KEY = "remat_name"  # the name remat's ONNX import gives the layer this node belongs to


class TraceError(RuntimeError):
    """The model does not trace with torch.fx; the message names the module that failed."""


class LayerMapError(ValueError):
    """A plan's layer names no node of the traced model, or cannot be cut there."""


class _InplaceAddProxy(fx.Proxy):
    """fx's Proxy has no ``__iadd__``, so ``out += identity`` (torchvision's residual blocks) would be
    traced as an out-of-place add that allocates the sum: one block output more than the eager
    model holds. This one records it as ``operator.iadd``, which fx's code generator writes back as
    ``out += identity``: in place, as written."""

    def __iadd__(self, other):
        return self.tracer.create_proxy("call_function", operator.iadd, (self, other), {})

    def __iter__(self):
        """``a, b = x.chunk(2, dim=1)`` and ``n, c, h, w = x.size()`` (torchvision's ShuffleNetV2):
        fx unpacks a proxy when the caller's next instruction is UNPACK_SEQUENCE, but torch 1.13
        finds that instruction at index f_lasti // 2, which Python 3.11's inline caches make wrong
        (PyTorch 2.x looks it up by offset, as here)."""
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        if caller is not None:
            for inst in dis.get_instructions(caller.f_code):
                if inst.offset == caller.f_lasti:
                    if inst.opname == "UNPACK_SEQUENCE":
                        return (self[i] for i in range(inst.argval))
                    break
        return self.tracer.iter(self)

    def __getattr__(self, k):
        # ``n, c, h, w = x.shape`` (torchvision's VisionTransformer) unpacks an attribute proxy
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return _Attribute(self, k)


class _Attribute(fx.proxy.Attribute):
    """fx's attribute proxy (``x.shape``) with the unpacking above."""

    __iter__ = _InplaceAddProxy.__iter__


def _unqualified(path: str) -> str:
    """The name torch 1.13's exporter gives a module's scope (torch.onnx.utils'
    _unqualified_variable_name): its path from the last atom that is not a number (``transformer.h.0``
    is ``h.0``, ``encoder.layers.encoder_layer_0`` is ``encoder_layer_0``)."""
    atoms = path.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isnumeric():
            return ".".join(atoms[i:])
    return path


def _scoped(parent: Tuple[str, str], path: str) -> Tuple[str, str]:
    """(scope name, last segment) of a module called inside ``parent`` (its scope name and last
    segment), joined as remat's import joins the export's scope segments
    (core/src/input/onnx/onnx_graph.cpp, scopedNameOf): a segment that extends the one before it
    (``layer1`` then ``layer1.0``) adds only what it extends by."""
    joined, previous = parent
    segment = _unqualified(path)
    if previous and segment.startswith(previous + "."):
        return joined + segment[len(previous):], segment
    return (joined + "." + segment if joined else segment), segment


class _ScopeTracer(fx.Tracer):
    """fx's tracer, noting on every node the module being traced when the node was made, named as
    torch's exporter scopes it: the called modules' unqualified names, joined (a module's path but
    for containers that are never called: nanoGPT's ``transformer`` ModuleDict, so ``h.0``)."""

    def __init__(self) -> None:
        super().__init__()
        self._scopes: List[Tuple[str, str]] = [("", "")]  # (scope name, its last segment)

    def call_module(self, m, forward, args, kwargs):  # noqa: D401 (fx's signature)
        path = self.path_of_module(m)
        self._scopes.append(_scoped(self._scopes[-1], path) if path else ("", ""))
        try:
            return super().call_module(m, forward, args, kwargs)
        except TraceError:
            raise
        except Exception as error:  # fx raises many kinds: name the innermost module that failed
            kind = type(m).__name__
            raise TraceError(
                f"torch.fx cannot trace module '{path or '<root>'}' ({kind}): {type(error).__name__}: {error}"
            ) from error
        finally:
            self._scopes.pop()

    def proxy(self, node):
        return _InplaceAddProxy(node, self)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        """A buffer read in a traced forward is a get_attr node, as a parameter is (fx 1.13 proxies
        parameters only): nanoGPT slices its causal mask by the traced sequence, ``bias[:, :, :t, :t]``,
        which a concrete tensor cannot take."""
        if isinstance(attr_val, torch.Tensor) and not isinstance(attr_val, torch.nn.Parameter):
            for name, buffer in self.root.named_buffers():
                if buffer is attr_val:
                    if name not in parameter_proxy_cache:
                        parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
                    return parameter_proxy_cache[name]
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        node.meta[SCOPE_KEY] = self._scopes[-1][0]
        if kind == "call_module" and len(self._scopes) > 1:
            # call_module pushed the callee's scope before fx made its node: that is the node's name,
            # and the caller's is the scope the node was made in
            node.meta[_CALLEE_KEY] = self._scopes[-1][0]
            node.meta[SCOPE_KEY] = self._scopes[-2][0]
        return node


# Functions whose ops remat's import makes a chain layer of their own, named after the calling
# module plus a suffix (docs/import.md): torchvision's ShuffleNetV2 channel_shuffle(x, groups),
# ``stage2.1.channel_shuffle``. While one runs, the tracer's scope is that layer's name.
_OWN_LAYER_FUNCTIONS = (("torchvision.models.shufflenetv2", "channel_shuffle"),)
_OWN_LAYER_SUFFIXES = tuple("." + name for _, name in _OWN_LAYER_FUNCTIONS)
_FLATTEN_SUFFIX = ".flatten"


@contextlib.contextmanager
def _scoped_functions(tracer: "_ScopeTracer"):
    patched = []
    for module_name, name in _OWN_LAYER_FUNCTIONS:
        module = sys.modules.get(module_name)
        original = getattr(module, name, None) if module is not None else None
        if original is None:
            continue

        def scoped(*args, _original=original, _suffix="." + name, **kwargs):
            joined, last = tracer._scopes[-1]
            tracer._scopes.append((joined + _suffix, last + _suffix))
            try:
                return _original(*args, **kwargs)
            finally:
                tracer._scopes.pop()

        setattr(module, name, scoped)
        patched.append((module, name, original))
    try:
        yield
    finally:
        for module, name, original in patched:
            setattr(module, name, original)


def trace(model: torch.nn.Module) -> fx.GraphModule:
    """Traces ``model`` with torch.fx and names every node as remat's ONNX import would."""
    tracer = _ScopeTracer()
    try:
        with _scoped_functions(tracer):
            graph = tracer.trace(model)
    except TraceError:
        raise
    except Exception as error:
        raise TraceError(
            f"torch.fx cannot trace model {type(model).__name__} (in its own forward()): "
            f"{type(error).__name__}: {error}"
        ) from error
    gm = fx.GraphModule(tracer.root, graph, type(model).__name__)
    _name_nodes(gm)
    return gm


# fx call_function / call_method targets and the ONNX op type torch exports them as.
_FUNCTION_OPS = {
    operator.add: "Add", operator.iadd: "Add", torch.add: "Add",
    torch.cat: "Concat", torch.concat if hasattr(torch, "concat") else torch.cat: "Concat",
    torch.flatten: "Flatten", torch.relu: "Relu", F.relu: "Relu", F.relu6: "Clip",
    F.hardtanh: "Clip", torch.clamp: "Clip", torch.mean: "ReduceMean", F.dropout: "Dropout",
    F.max_pool2d: "MaxPool", F.avg_pool2d: "AveragePool", torch.sum: "ReduceSum",
    operator.mul: "Mul", torch.mul: "Mul",
    # issue 22's inner sub and div, named as their ONNX nodes (not "truediv")
    operator.sub: "Sub", torch.sub: "Sub", operator.truediv: "Div", torch.div: "Div",
}
_METHOD_OPS = {
    "add": "Add", "add_": "Add", "__add__": "Add", "flatten": "Flatten", "view": "Reshape",
    "reshape": "Reshape", "relu": "Relu", "relu_": "Relu", "mean": "ReduceMean", "clamp": "Clip",
    "clamp_": "Clip", "mul": "Mul", "sum": "ReduceSum", "sub": "Sub", "div": "Div",
}
_MERGES = {"Add", "Concat", "Sum"}


def _onnx_op(node: fx.Node) -> str:
    if node.op == "call_function":
        if node.target is F.adaptive_avg_pool2d:
            size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size")
            return "GlobalAveragePool" if size in (1, (1, 1), [1, 1]) else "AveragePool"
        return _FUNCTION_OPS.get(node.target, getattr(node.target, "__name__", str(node.target)))
    return _METHOD_OPS.get(node.target, str(node.target))


def _name_nodes(gm: fx.GraphModule) -> None:
    calls: Dict[str, int] = {}

    def numbered(name: str) -> str:
        k = calls.get(name, 0)
        calls[name] = k + 1
        return name if k == 0 else f"{name}_{k}"

    for node in gm.graph.nodes:
        scope = node.meta.get(SCOPE_KEY, "")
        if node.op == "call_module":
            node.meta[NAME_KEY] = numbered(node.meta.get(_CALLEE_KEY) or str(node.target))
        elif node.op in ("call_function", "call_method"):
            op = _onnx_op(node)
            if scope == "":
                node.meta[NAME_KEY] = numbered(op.lower())
            elif op in _MERGES:
                node.meta[NAME_KEY] = numbered(f"{scope}.{op.lower()}")
            else:
                node.meta[NAME_KEY] = scope  # an op of a module's own forward belongs to that module
        else:
            node.meta[NAME_KEY] = None  # placeholders, get_attr, output: no layer


def node_names(gm: fx.GraphModule) -> List[str]:
    """Every computing node's remat name, in graph order (for messages and tests)."""
    return [n.meta[NAME_KEY] for n in gm.graph.nodes if n.meta.get(NAME_KEY)]


def _inside(name: str, layer_name: str) -> bool:
    """Whether a node named ``name`` belongs to chain layer ``layer_name``: the layer itself, or a
    name inside it that is not a layer of its own (``stage2.1.channel_shuffle`` follows ``stage2.1``)."""
    if name == layer_name:
        return True
    if not name.startswith(layer_name + "."):
        return False
    return not any(name == layer_name + s or name.startswith(layer_name + s + ".") for s in _OWN_LAYER_SUFFIXES)


def joined_parts(layer_name: str) -> set:
    """The module scopes a layer name joined with '+' stands for (the import's name of a layer whose
    ops lie in several modules: ``wte+wpe+drop``, ``conv_proj+encoder``, ``encoder.ln+heads.head``,
    or with a common prefix ``h.0.attn+mlp``, read both ways)."""
    parts = layer_name.split("+")
    head = parts[0].rsplit(".", 1)[0] if "." in parts[0] else ""
    return set(parts) | ({head + "." + p for p in parts[1:]} if head else set())


def joined_layer_nodes(gm: fx.GraphModule, layer_name: str) -> List[fx.Node]:
    """The nodes of a layer whose name is joined with '+': the calls of its modules and the ops made
    directly in their forwards, up to the first op of a module they call that is a layer of its own
    (``conv_proj+encoder`` holds ``encoder``'s position add and dropout, not ``encoder.ln``, which
    ``encoder`` calls after its layers)."""
    parts = joined_parts(layer_name)
    nodes, deeper = [], set()
    for node in gm.graph.nodes:
        name = node.meta.get(NAME_KEY)
        if not name:
            continue
        scope = node.meta.get(SCOPE_KEY, "")
        deeper.update(p for p in parts if scope.startswith(p + "."))
        if name in parts or (scope in parts and scope not in deeper):
            nodes.append(node)
    return nodes


def _layer_nodes(gm: fx.GraphModule, layer_name: str) -> List[fx.Node]:
    if "+" in layer_name:
        return joined_layer_nodes(gm, layer_name)
    return [n for n in gm.graph.nodes if n.meta.get(NAME_KEY) and _inside(n.meta[NAME_KEY], layer_name)]


def layer_output_node(gm: fx.GraphModule, layer_name: str) -> fx.Node:
    """The node that writes chain layer ``layer_name``'s output x(l): the last of the layer's nodes.
    (A block's own forward can name nodes after the block itself, ShuffleNetV2's chunk before its
    branches: the output is still the last one, the concatenation.)"""
    nodes = _layer_nodes(gm, layer_name)
    found: Optional[fx.Node] = nodes[-1] if nodes else None
    if found is None and layer_name.endswith(_FLATTEN_SUFFIX):
        # The import writes `x.mean([2, 3])` (keepdims 0) as a pooling and a flatten layer
        # ``reducemean.flatten``; in PyTorch the mean's result is already flat: the same tensor.
        return layer_output_node(gm, layer_name[: -len(_FLATTEN_SUFFIX)])
    if found is None:
        known = sorted(set(node_names(gm)))
        shown = ", ".join(known[:40]) + (", ..." if len(known) > 40 else "")
        raise LayerMapError(
            f"layer '{layer_name}' of the plan names no node of the traced model "
            f"(its layers as remat's ONNX import names them: {shown})"
        )
    return found


def layer_output_nodes(gm: fx.GraphModule, layer_names: Sequence[str]) -> List[Tuple[fx.Node, str]]:
    """(output node, layer name) of ``layer_names`` (a plan's checkpoints), in graph order, checked to be cuts."""
    nodes = [layer_output_node(gm, name) for name in layer_names]
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    pairs = sorted(zip(nodes, layer_names), key=lambda p: order[p[0]])
    for (a, name_a), (b, name_b) in zip(pairs, pairs[1:]):
        if a is b:
            raise LayerMapError(f"layers '{name_a}' and '{name_b}' of the plan end at the same node ('{a.name}')")
    for node, name in pairs:
        check_cut(gm, node, name)
    return pairs


def check_cut(gm: fx.GraphModule, cut: fx.Node, layer_name: str) -> None:
    """A cut after ``cut`` is valid when no later node reads any value made before it but ``cut``'s."""
    before = True
    made_before = set()
    for node in gm.graph.nodes:
        if before:
            if node.op != "get_attr":  # constants are copied into every segment that reads them
                made_before.add(node)
            if node is cut:
                before = False
            continue
        for used in node.all_input_nodes:
            if used in made_before and used is not cut:
                raise LayerMapError(
                    f"cannot cut after layer '{layer_name}' (node '{cut.name}'): node '{node.name}' "
                    f"({node.meta.get(NAME_KEY) or node.op}) after it also reads '{used.name}' "
                    f"({used.meta.get(NAME_KEY) or used.op}), so one tensor does not carry everything forward there"
                )
