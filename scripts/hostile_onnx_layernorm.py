"""The hostile campaign's ONNX families for issue 22's LayerNorm: LayerNormalization (opset 17) with
attributes out of bounds (epsilon NaN, negative, huge; another axis), without its bias, with weights
of the wrong shape or its statistics used; torch's decomposition below opset 17 (ReduceMean, Sub, Pow,
ReduceMean, Add, Sqrt, Div, Mul, Add) half-matched (another exponent or epsilon, a step dropped, an
int64 constant) or written otherwise (commuted operands, an initializer epsilon), which must import.
Bases: the committed MLP exports of tests/data/onnx/layernorm (scripts/make-layernorm-onnx.py).
scripts/hostile_onnx.py draws them with its own families.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
import os

import onnx
from onnx import helper, TensorProto

from hostile_onnx_activations import EXPORTS, _producer, _readers, _set_scalar


def layernorm_bases():
    folder = os.path.join(EXPORTS, "layernorm")
    return {"ln-" + name[:-5]: onnx.load(os.path.join(folder, name))
            for name in (sorted(os.listdir(folder)) if os.path.isdir(folder) else []) if name.endswith(".onnx")}


def _set_attribute(node, name, value):
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(name, value)])


def _weight_shape(m, name, shape):
    """Declares the weight `name` (a graph input or an initializer) with another shape."""
    for t in m.graph.initializer:
        if t.name == name:
            t.CopyFrom(helper.make_tensor(name, TensorProto.FLOAT, shape, [0.0] * shape[0]))
            return True
    for i in m.graph.input:
        if i.name == name:
            i.CopyFrom(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
            return True
    return False


def fused_layernorm(m, rng):
    node = next((n for n in m.graph.node if n.op_type == "LayerNormalization"), None)
    if node is None:
        return None
    kind = rng.choice(["epsilon-nan", "epsilon-negative", "epsilon-huge", "epsilon-int", "axis", "no-bias",
                       "weight-shape", "mean-used"])
    if kind.startswith("epsilon"):
        value = {"epsilon-nan": float("nan"), "epsilon-negative": -1e-5, "epsilon-huge": 1e30, "epsilon-int": 1}[kind]
        _set_attribute(node, "epsilon", value)
    elif kind == "axis":
        _set_attribute(node, "axis", rng.choice([0, -2, 7, -7]))  # not 2: the last axis of a GPT's [N, S, d]
    elif kind == "no-bias":
        del node.input[2:]
    elif kind == "weight-shape":
        if not _weight_shape(m, node.input[rng.choice([1, 2])], [rng.choice([1, 3, 31, 33])]):
            return None
    else:  # the saved mean as a second graph output
        node.output.append(node.output[0] + "_mean")
        m.graph.output.append(helper.make_tensor_value_info(node.output[1], TensorProto.FLOAT, None))
        return True, False  # refused, maybe for its two graph outputs before the node is read
    return True, True


def _decomposed(m):
    """(mean, sub, pow, variance, add, sqrt, div, mul, shift) of each decomposed LayerNorm."""
    found = []
    for mean in m.graph.node:
        if mean.op_type != "ReduceMean":
            continue
        sub = next((r for r in _readers(m, mean.output[0]) if r.op_type == "Sub"), None)
        if sub is None:
            continue
        chain = [mean, sub]
        for op in ["Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add"]:
            step = next((r for r in _readers(m, chain[-1].output[0]) if r.op_type == op), None)
            if step is None:
                break
            chain.append(step)
        if len(chain) == 9:
            found.append(tuple(chain))
    return found


def decomposed_layernorm(m, rng):
    chains = _decomposed(m)
    if not chains:
        return None
    mean, sub, pow_, variance, add, sqrt, div, mul, shift = rng.choice(chains)
    kind = rng.choice(["exponent", "epsilon-nan", "epsilon-huge", "epsilon-int64", "drop-sqrt", "variance-axis",
                       "mean-keepdims", "swap-mul", "swap-add", "swap-epsilon"])
    epsilon = next(t for t in add.input if t != variance.output[0])
    if kind == "exponent":
        return (True, True) if _set_scalar(m, pow_.input[1], rng.choice([3.0, 1.0, 2.5])) else None
    if kind in ("epsilon-nan", "epsilon-huge"):
        return (True, True) if _set_scalar(m, epsilon, float("nan") if kind == "epsilon-nan" else 1e30) else None
    if kind == "epsilon-int64":
        return (True, True) if _set_scalar(m, epsilon, 0, TensorProto.INT64) else None
    if kind == "drop-sqrt":
        div.input[1] = add.output[0]
        m.graph.node.remove(sqrt)
        return True, True
    if kind == "variance-axis":
        _set_attribute(variance, "axes", [0])
        return True, True
    if kind == "mean-keepdims":  # [N] means do not broadcast against [N, F] as torch wrote them
        _set_attribute(mean, "keepdims", 0)
        return True, True
    # The same computation written otherwise: must import.
    node = {"swap-mul": mul, "swap-add": shift, "swap-epsilon": add}[kind]
    node.input[:] = list(reversed(node.input))
    return False, False, True


LAYERNORM_FAMILIES = [fused_layernorm, decomposed_layernorm]


def main():
    """These families alone through `remat import --output`, judged as the campaign judges them:
    /usr/bin/python3 scripts/hostile_onnx_layernorm.py --remat build/dev/app/cli/remat --runs 400"""
    import hostile_onnx

    return hostile_onnx.run_families_alone(main.__doc__.split("\n")[0], LAYERNORM_FAMILIES, layernorm_bases(), 400)


if __name__ == "__main__":
    raise SystemExit(main())
