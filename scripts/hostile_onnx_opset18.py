"""The hostile campaign's ONNX families for opsets 18 to 20 (issues 22 and 23, PyTorch 2's exporters):
a Reduce*'s axes input (opset 18) not constant, out of range, still an attribute, or written as a
Constant node or with negative axes (which must import); a Split's num_outputs (18) against its
outputs, with the split input too or with neither, or swapped for the input (which must import);
a Gelu's approximate (20) unknown, 'tanh' where the CNN path reads only the exact form, or 'none'
written out (which must import). Bases: tests/data/onnx/opset18 (scripts/onnx-upgrade-opset.py's
rewrites of torch 1.13's opset-17 exports; the GPTs' sequence fixed as the transformer bases') and
the upgraded ResNet-18 with its GlobalAveragePool written as opset 18's ReduceMean(x, axes).
scripts/hostile_onnx.py draws them with its own families.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
import copy
import os

import onnx
from onnx import helper, TensorProto

from hostile_onnx_activations import EXPORTS
from hostile_onnx_transformer import SEQUENCE


def _reduce_mean_base(resnet):
    m = copy.deepcopy(resnet)
    for node in m.graph.node:
        if node.op_type == "GlobalAveragePool":
            node.op_type = "ReduceMean"
            node.input.append("pool_axes")
    m.graph.initializer.append(helper.make_tensor("pool_axes", TensorProto.INT64, [2], [2, 3]))
    return m


def opset18_bases():
    folder = os.path.join(EXPORTS, "opset18")
    models = {}
    for name in (sorted(os.listdir(folder)) if os.path.isdir(folder) else []):
        if not name.endswith(".onnx"):
            continue
        m = onnx.load(os.path.join(folder, name))
        for i in m.graph.input:
            for d in i.type.tensor_type.shape.dim:
                if d.dim_param == "sequence":
                    d.dim_value = SEQUENCE
        models["op18-" + name[:-5]] = m
    if "op18-resnet18_train_op18_dynamic" in models:
        models["op18-resnet18-reducemean"] = _reduce_mean_base(models["op18-resnet18_train_op18_dynamic"])
    return models


def _set_attribute(node, name, value):
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(name, value)])


def _initializer(m, name):
    return next((t for t in m.graph.initializer if t.name == name), None)


def _opset(m):
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)


def reduce_axes(m, rng):
    if _opset(m) < 18:  # the axes input is opset 18's
        return None
    node = next((n for n in m.graph.node if n.op_type == "ReduceMean" and len(n.input) > 1), None)
    if node is None or _initializer(m, node.input[1]) is None:
        return None
    axes = _initializer(m, node.input[1])
    kind = rng.choice(["not-constant", "out-of-rank", "attribute", "float-axes", "constant-node", "negative"])
    if kind == "not-constant":  # the axes a graph input: known only at run time
        m.graph.initializer.remove(axes)
        m.graph.input.append(helper.make_tensor_value_info(axes.name, TensorProto.INT64, [2]))
        return True, True
    if kind == "out-of-rank":
        axes.CopyFrom(helper.make_tensor(axes.name, TensorProto.INT64, [2], [2, rng.choice([4, 7, -5, 2**40])]))
        return True, True
    if kind == "attribute":  # opset 18 has no axes attribute
        _set_attribute(node, "axes", [2, 3])
        return True, True
    if kind == "float-axes":
        axes.CopyFrom(helper.make_tensor(axes.name, TensorProto.FLOAT, [2], [2.0, 3.0]))
        return True, True
    # The same computation written otherwise: must import.
    if kind == "negative":
        axes.CopyFrom(helper.make_tensor(axes.name, TensorProto.INT64, [2], rng.choice([[-1, -2], [3, -2]])))
        return False, False, True
    m.graph.initializer.remove(axes)
    constant = helper.make_node("Constant", [], [axes.name], "/avgpool/Constant", value=axes)
    nodes = list(m.graph.node)
    nodes.insert(nodes.index(node), constant)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return False, False, True


def split_outputs(m, rng):
    if _opset(m) < 18:  # num_outputs is opset 18's
        return None
    node = next((n for n in m.graph.node if n.op_type == "Split"), None)
    if node is None:
        return None
    counted = any(a.name == "num_outputs" for a in node.attribute)
    kind = rng.choice(["count", "count", "both", "neither", "swap"])
    if kind == "count":
        _set_attribute(node, "num_outputs", rng.choice([0, 1, 2, 4, -3, 2**31 - 1]))
        if counted or len(node.input) < 2:
            return True, True
        del node.input[1:]  # the sizes' input gone: num_outputs alone, and wrong
        return True, True
    if kind == "both":
        if not counted:
            _set_attribute(node, "num_outputs", len(node.output))
        else:
            m.graph.initializer.append(helper.make_tensor("split_sizes", TensorProto.INT64, [3], [32, 32, 32]))
            del node.input[1:]
            node.input.append("split_sizes")
        return True, True
    if kind == "neither":
        del node.input[1:]
        kept = [a for a in node.attribute if a.name != "num_outputs"]
        del node.attribute[:]
        node.attribute.extend(kept)
        return True, True
    if not counted:
        return None
    # num_outputs 3 of the GPT's [N, S, 96] qkv as the sizes' input: must import.
    kept = [a for a in node.attribute if a.name != "num_outputs"]
    del node.attribute[:]
    node.attribute.extend(kept)
    name = "split_sizes_" + str(rng.randrange(1 << 20))
    m.graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [3], [32, 32, 32]))
    node.input.append(name)
    return False, False, True


def gelu_approximate(m, rng):
    gelus = [n for n in m.graph.node if n.op_type == "Gelu"]
    if not gelus:
        return None
    node = rng.choice(gelus)
    value = rng.choice(["fancy", "", "TANH", "none ", "tanh", "none", "x" * 300])
    _set_attribute(node, "approximate", value)
    if value == "none":
        return False, False, True
    # 'tanh' is valid ONNX that the CNN path does not read (GELU is the exact form): refused, not invalid.
    return value != "tanh", True


OPSET18_FAMILIES = [reduce_axes, split_outputs, gelu_approximate]


def main():
    """These families alone through `remat import --output`, judged as the campaign judges them:
    /usr/bin/python3 scripts/hostile_onnx_opset18.py --remat build/dev/app/cli/remat --runs 300"""
    import hostile_onnx

    return hostile_onnx.run_families_alone(main.__doc__.split("\n")[0], OPSET18_FAMILIES, opset18_bases(), 300)


if __name__ == "__main__":
    raise SystemExit(main())
