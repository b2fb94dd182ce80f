"""The hostile campaign's ONNX families for issue 22's Squeeze-and-Excitation ops (GlobalAveragePool or
ReduceMean over H and W inside a block, the broadcasting Mul of two activations): products whose shapes
do not broadcast, wrong arities, a mean over other axes, and the same computation written otherwise
(a ReduceMean for the GlobalAveragePool, the Mul's operands swapped), on the committed EfficientNet-B0
and MobileNetV3-Large exports (tests/data/onnx). scripts/hostile_onnx.py draws them with its own.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
from onnx import helper


def _producer(m, tensor):
    return next((node for node in m.graph.node if tensor in node.output), None)


def _se_products(m):
    """(pool, mul) of each Squeeze-and-Excitation: the Mul of a scale (a Sigmoid or HardSigmoid of a
    pooled branch) and the tensor the GlobalAveragePool read."""
    found = []
    for node in m.graph.node:
        if node.op_type != "Mul" or len(node.input) != 2:
            continue
        for scale, x in (node.input, reversed(node.input)):
            gate = _producer(m, scale)
            if gate is None or gate.op_type not in ("Sigmoid", "HardSigmoid") or gate.input[0] == x:
                continue
            pool = next((p for p in m.graph.node if p.op_type == "GlobalAveragePool" and p.input[0] == x), None)
            if pool is not None:
                found.append((pool, node))
                break
    return found


def _opset(m):
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 13)


def squeeze_excitation(m, rng):
    pairs = _se_products(m)
    if not pairs:
        return None
    pool, mul = rng.choice(pairs)
    kind = rng.choice(["scale-of-the-input", "mul-three-inputs", "pool-two-inputs", "mean-over-channels",
                       "mean-as-reducemean", "mul-swapped", "mul-by-constant"])
    x = pool.input[0]
    if kind == "scale-of-the-input":  # scale [N, C, 1, 1] times the model's input [N, 3, H, W]: no broadcast
        mul.input[:] = [m.graph.input[0].name if t == x else t for t in mul.input]
        return True, True
    if kind == "mul-three-inputs":
        mul.input.append(x)
        return True, True
    if kind == "pool-two-inputs":
        pool.input.append(x)
        return True, True
    if kind == "mul-by-constant":  # an activation times a weight: refused at the node, as before issue 22
        weight = m.graph.initializer[0].name if m.graph.initializer else m.graph.input[-1].name
        mul.input[:] = [weight if t == x else t for t in mul.input]
        return False, False
    if kind == "mul-swapped":
        mul.input[:] = list(reversed(mul.input))
        return False, False, True
    axes = [2, 3] if kind == "mean-as-reducemean" else rng.choice([[1], [1, 2], [0], [2]])
    at = list(m.graph.node).index(pool)
    if _opset(m) >= 18:
        const = helper.make_node("Constant", [], [pool.output[0] + "_axes"], pool.name + "_axes",
                                 value=helper.make_tensor(pool.output[0] + "_axes", 7, [len(axes)], axes))
        mean = helper.make_node("ReduceMean", [x, const.output[0]], [pool.output[0]], pool.name + "_mean",
                                keepdims=1)
        m.graph.node.insert(at, const)
        at += 1
    else:
        mean = helper.make_node("ReduceMean", [x], [pool.output[0]], pool.name + "_mean", axes=axes, keepdims=1)
    m.graph.node.remove(pool)
    m.graph.node.insert(at, mean)
    return (False, False, True) if kind == "mean-as-reducemean" else (True, True)


SE_FAMILIES = [squeeze_excitation]
