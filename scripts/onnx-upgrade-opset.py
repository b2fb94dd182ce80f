#!/usr/bin/python3
"""Rewrites a torch 1.13 opset-17 export to opset 18, 19 or 20, as the ONNX spec (Changelog.md) says.

Debian's torch 1.13 and python3-onnx 1.12 cannot write opsets 18 to 20, and ONNX's version_converter
stops at 17: this edits the nodes themselves (onnx 1.12's helper API), for the operators torch's
exports of our models hold. What changes between 17 and 20 for them:

  18  Reduce* but ReduceSum (ReduceMean, ReduceMax, ...): `axes` leaves the attributes and becomes the
      optional int64 input 1 (with `noop_with_empty_axes`). Written as an initializer, or with
      `--axes-as constant` as a Constant node (what PyTorch 2's TorchScript exporter writes).
      Split: `num_outputs` (new) or the `split` input, exactly one of the two. A Split whose sizes
      are all equal (nanoGPT's `qkv.split(d, dim=2)`) gets `num_outputs` and loses its input, as
      PyTorch 2 writes `chunk`; `--split-as input` keeps the input instead. A Split without sizes
      (equal parts by its outputs) must name them: `num_outputs`.
      Pad gains an optional `axes` input, Resize attributes: our exports' forms stay valid.
  19  AveragePool gains `dilations`; Cast, Constant, Identity, Reshape, Shape, Size, Equal, Pad
      ('wrap'), Resize gain types or modes: nothing to rewrite.
  20  Gelu is a standard op: torch's exact GELU, Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x, .) ->
      Mul(0.5), becomes one Gelu node (approximate 'none'). ConstantOfShape, AffineGrid, DeformConv,
      ReduceMax/Min types change: nothing to rewrite.

The opset import is set, and the IR version to the one ONNX released the opset with (8 for 18, 9 for
19 and 20). onnx 1.12's checker knows opsets up to 17 only, so it checks the result only where it
knows the opset (never for 18 to 20, with this onnx): this script checks its own edits instead.

  /usr/bin/python3 scripts/onnx-upgrade-opset.py IN.onnx OUT.onnx --opset 18 [--axes-as constant]
"""
import argparse
import math
import sys

import onnx
from onnx import helper, numpy_helper, TensorProto

REDUCE_OPS = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
              "ReduceLogSumExp", "ReduceSumSquare"}
IR_VERSION = {18: 8, 19: 9, 20: 9}


def attribute(node, name):
    return next((a for a in node.attribute if a.name == name), None)


def drop_attribute(node, name):
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)


def constant_value(graph, name):
    """The value of an initializer or a Constant node's output, as a numpy array; None otherwise."""
    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in graph.node:
        if n.op_type == "Constant" and list(n.output) == [name]:
            value = attribute(n, "value")
            if value is not None:
                return numpy_helper.to_array(value.t)
    return None


class Upgrade:
    def __init__(self, model, opset, axes_as, split_as):
        self.model, self.graph, self.opset = model, model.graph, opset
        self.axes_as, self.split_as = axes_as, split_as
        self.names = {o for n in self.graph.node for o in n.output} | {t.name for t in self.graph.initializer} | \
            {i.name for i in self.graph.input}
        self.prepend = []  # Constant nodes for axes, each placed before its reader
        self.counts = {"reduce": 0, "split": 0, "gelu": 0}

    def fresh(self, base):
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def int64_input(self, node, base, values):
        name = self.fresh(base)
        tensor = helper.make_tensor(name, TensorProto.INT64, [len(values)], list(values))
        if self.axes_as == "constant":
            self.prepend.append((node, helper.make_node("Constant", [], [name], name=name + "_constant",
                                                        value=tensor)))
        else:
            self.graph.initializer.append(tensor)
        return name

    def reduce(self, node):
        axes = attribute(node, "axes")
        if axes is None:  # all axes, as before
            return
        drop_attribute(node, "axes")
        del node.input[1:]
        node.input.append(self.int64_input(node, (node.name or node.op_type) + "_axes", axes.ints))
        self.counts["reduce"] += 1

    def split(self, node):
        sizes = constant_value(self.graph, node.input[1]) if len(node.input) > 1 and node.input[1] else None
        if len(node.input) > 1 and node.input[1] and sizes is None:
            return  # sizes computed at run time: stays an input
        if sizes is None or (self.split_as == "num_outputs" and len(set(sizes.tolist())) == 1):
            del node.input[1:]
            drop_attribute(node, "num_outputs")
            node.attribute.append(helper.make_attribute("num_outputs", len(node.output)))
            self.counts["split"] += 1

    def readers(self, tensor):
        return [n for n in self.graph.node if tensor in n.input]

    def only_reader(self, tensor, op_type):
        readers = self.readers(tensor)
        if len(readers) == 1 and readers[0].op_type == op_type and tensor not in [o.name for o in self.graph.output]:
            return readers[0]
        return None

    def scalar_near(self, node, tensor_index, value):
        if len(node.input) <= tensor_index:
            return False
        v = constant_value(self.graph, node.input[tensor_index])
        return v is not None and v.size == 1 and math.isclose(float(v.reshape(-1)[0]), value, rel_tol=1e-6)

    def gelu(self, div):
        """torch's exact GELU from its Div by sqrt 2; returns the nodes it replaces, or None."""
        if not self.scalar_near(div, 1, math.sqrt(2.0)):
            return None
        x = div.input[0]
        erf = self.only_reader(div.output[0], "Erf")
        add = erf and self.only_reader(erf.output[0], "Add")
        if add is None or not (self.scalar_near(add, 1, 1.0) or
                               (add.input[1] == erf.output[0] and self.scalar_near(add, 0, 1.0))):
            return None
        mul_x = self.only_reader(add.output[0], "Mul")
        if mul_x is None or set(mul_x.input) != {x, add.output[0]}:
            return None
        half = self.only_reader(mul_x.output[0], "Mul")
        if half is None or not (self.scalar_near(half, 1, 0.5) or self.scalar_near(half, 0, 0.5)):
            return None
        name = (div.name.rsplit("/", 1)[0] + "/Gelu") if "/" in div.name else self.fresh("Gelu")
        self.counts["gelu"] += 1
        return [div, erf, add, mul_x, half], helper.make_node("Gelu", [x], [half.output[0]], name=name)

    def run(self):
        replaced, nodes = set(), []
        for node in self.graph.node:
            if node.output[0] in replaced:
                continue
            if node.op_type in REDUCE_OPS and self.opset >= 18:
                self.reduce(node)
            elif node.op_type == "Split" and self.opset >= 18:
                self.split(node)
            elif node.op_type == "Div" and self.opset >= 20:
                found = self.gelu(node)
                if found:
                    old, gelu = found
                    replaced.update(n.output[0] for n in old)
                    nodes.append(gelu)
                    continue
            nodes.append(node)
        before = {reader.output[0]: constant for reader, constant in self.prepend}
        ordered = []
        for node in nodes:
            if node.output[0] in before:
                ordered.append(before[node.output[0]])
            ordered.append(node)
        ordered = [onnx.NodeProto.FromString(n.SerializeToString()) for n in ordered]
        del self.graph.node[:]
        self.graph.node.extend(ordered)
        drop_unused_constants(self.graph)
        for entry in self.model.opset_import:
            if entry.domain in ("", "ai.onnx"):
                entry.version = self.opset
        self.model.ir_version = IR_VERSION[self.opset]


def drop_unused_constants(graph):
    """The GELU pattern's Constants (sqrt 2, 1, 0.5) and initializers that nothing reads any more."""
    read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    kept = [n for n in graph.node if not (n.op_type == "Constant" and n.output[0] not in read)]
    del graph.node[:]
    graph.node.extend(kept)
    inits = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(inits)


def check_own_edits(model, opset):
    """What onnx 1.12's checker would check of the edits, were it to know the opset."""
    graph = model.graph
    produced = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    for node in graph.node:
        for name in node.input:
            if name and name not in produced:
                sys.exit(f"internal: node {node.name!r} reads {name!r} before it is written")
        produced.update(node.output)
        if opset >= 18 and node.op_type in REDUCE_OPS:
            if attribute(node, "axes") is not None:
                sys.exit(f"internal: {node.name!r} keeps an axes attribute at opset {opset}")
            if len(node.input) > 1 and constant_value(graph, node.input[1]).dtype.name != "int64":
                sys.exit(f"internal: {node.name!r}'s axes are not int64")
        if opset >= 18 and node.op_type == "Split":
            count = attribute(node, "num_outputs")
            has_sizes = len(node.input) > 1 and bool(node.input[1])
            if (count is None) == (not has_sizes) or (count is not None and count.i != len(node.output)):
                sys.exit(f"internal: Split {node.name!r} must have num_outputs or sizes, not both")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--opset", type=int, required=True, choices=[18, 19, 20])
    parser.add_argument("--axes-as", choices=["initializer", "constant"], default="initializer")
    parser.add_argument("--split-as", choices=["num_outputs", "input"], default="num_outputs")
    args = parser.parse_args()
    model = onnx.load(args.input)
    source = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if source != 17:
        sys.exit(f"{args.input}: opset {source}; this script rewrites opset-17 exports only (torch 1.13's "
                 "newest: torch.onnx.export(..., opset_version=17))")
    upgrade = Upgrade(model, args.opset, args.axes_as, args.split_as)
    upgrade.run()
    check_own_edits(model, args.opset)
    if args.opset <= onnx.defs.onnx_opset_version():  # onnx 1.12 knows 17: never for 18 to 20 here
        onnx.checker.check_model(model)
    onnx.save(model, args.output)
    c = upgrade.counts
    print(f"{args.output}: opset {args.opset}, {c['reduce']} Reduce axes made inputs, {c['split']} Splits with "
          f"num_outputs, {c['gelu']} GELU patterns made Gelu")


if __name__ == "__main__":
    main()
