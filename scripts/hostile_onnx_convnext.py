"""The hostile campaign's ONNX family for issue 22's ConvNeXt: the permutes to channels-last and back
(another perm, a permute back missing, a second one), what reads the channels-last tensor (a
LayerNormalization over another axis, a Relu, a MatMul whose weight is not transposed), the
layer_scale weight of another shape; and the same computation written otherwise (the layer_scale
Mul's or the bias Add's operands swapped), which must import. Bases: the committed small ConvNeXt
exports of tests/data/onnx/convnext (scripts/make-convnext-onnx.py, opsets 13 and 17).
scripts/hostile_onnx.py draws them with its own families.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
import os

import onnx
from onnx import helper, numpy_helper

from hostile_onnx_activations import EXPORTS, _readers


def convnext_bases():
    folder = os.path.join(EXPORTS, "convnext")
    return {"cn-" + name[:-5]: onnx.load(os.path.join(folder, name))
            for name in (sorted(os.listdir(folder)) if os.path.isdir(folder) else [])
            if name.endswith(".onnx") and name.startswith("convnext_small")}


def _perm(node):
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), None)


def _set_perm(node, perm):
    kept = [a for a in node.attribute if a.name != "perm"]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute("perm", perm)])


def _layer_scales(m):
    """The Mul nodes of layer_scale * x: one input an initializer or graph input of shape [C, 1, 1]."""
    weights = {t.name: list(t.dims) for t in m.graph.initializer}
    return [n for n in m.graph.node
            if n.op_type == "Mul" and any(len(weights.get(i, [])) == 3 and weights[i][1:] == [1, 1] for i in n.input)]


def _resize_initializer(m, name, dims):
    for t in m.graph.initializer:
        if t.name == name:
            count = 1
            for d in dims:
                count *= d
            t.CopyFrom(helper.make_tensor(name, onnx.TensorProto.FLOAT, dims, [0.5] * count))
            return True
    return False


def convnext(m, rng):
    forward = [n for n in m.graph.node if n.op_type == "Transpose" and _perm(n) == [0, 2, 3, 1]]
    back = [n for n in m.graph.node if n.op_type == "Transpose" and _perm(n) == [0, 3, 1, 2]]
    scales = _layer_scales(m)
    if not forward or not back or not scales:
        return None
    kind = rng.choice(["perm-other", "back-perm-other", "back-missing", "relu-reads", "norm-axis",
                       "weight-untransposed", "scale-shape", "swap-scale", "swap-bias"])
    if kind == "perm-other":
        _set_perm(rng.choice(forward), rng.choice([[0, 3, 2, 1], [0, 1, 3, 2], [0, 2, 1, 3]]))
        return True, True
    if kind == "back-perm-other":  # a second permute to channels-last of a channels-last tensor
        _set_perm(rng.choice(back), [0, 2, 3, 1])
        return True, True
    if kind == "back-missing":  # its reader reads the channels-last tensor
        node = rng.choice(back)
        for reader in _readers(m, node.output[0]):
            reader.input[:] = [node.input[0] if t == node.output[0] else t for t in reader.input]
        m.graph.node.remove(node)
        return True, True
    if kind == "relu-reads":  # a Relu reads a channels-last tensor; the permute back reads the Relu
        node = rng.choice(back)
        relu = helper.make_node("Relu", [node.input[0]], [node.input[0] + "_relu"], node.name + "_relu")
        m.graph.node.insert(list(m.graph.node).index(node), relu)
        node.input[0] = relu.output[0]
        return True, True
    if kind == "norm-axis":
        norms = [n for n in m.graph.node if n.op_type == "LayerNormalization"]
        if not norms:
            return None
        node = rng.choice(norms)
        kept = [a for a in node.attribute if a.name != "axis"]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("axis", rng.choice([1, 2, -2]))])
        return True, True
    if kind == "weight-untransposed":  # MatMul(x, W [out, in]) with in != out does not chain
        weights = [n for n in m.graph.node if n.op_type == "Transpose" and _perm(n) == [1, 0]]
        if not weights:
            return None
        node = rng.choice(weights)
        for reader in _readers(m, node.output[0]):
            reader.input[:] = [node.input[0] if t == node.output[0] else t for t in reader.input]
        m.graph.node.remove(node)
        return True, True
    if kind == "scale-shape":
        node = rng.choice(scales)
        weight = next(i for i in node.input if i in {t.name for t in m.graph.initializer})
        dims = next(list(t.dims) for t in m.graph.initializer if t.name == weight)
        new = rng.choice([[dims[0] + 1, 1, 1], [1, 1, dims[0]], [dims[0], 2, 1]])
        return (True, True) if _resize_initializer(m, weight, new) else None
    # The same computation written otherwise: must import.
    if kind == "swap-scale":
        node = rng.choice(scales)
    else:
        adds = [n for n in m.graph.node if n.op_type == "Add" and any(
            i in {t.name for t in m.graph.initializer} for i in n.input)]
        if not adds:
            return None
        node = rng.choice(adds)
    node.input[:] = list(reversed(node.input))
    return False, False, True


CONVNEXT_FAMILIES = [convnext]


def main():
    """This family alone through `remat import --output`, judged as the campaign judges it:
    /usr/bin/python3 scripts/hostile_onnx_convnext.py --remat build/dev/app/cli/remat --runs 200"""
    import hostile_onnx

    # A run's kind is the family's first draw, replayed from the generator as it was before it.
    kinds = ["perm-other", "back-perm-other", "back-missing", "relu-reads", "norm-axis", "weight-untransposed",
             "scale-shape", "swap-scale", "swap-bias"]
    return hostile_onnx.run_families_alone(main.__doc__.split("\n")[0], CONVNEXT_FAMILIES, convnext_bases(), 200,
                                           lambda family, before: before.choice(kinds))


if __name__ == "__main__":
    raise SystemExit(main())
