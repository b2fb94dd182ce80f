"""The hostile campaign's ONNX family for pools inside multi-branch pieces (issue 22: GoogLeNet's and
Inception's pool branches), on the committed GoogLeNet exports (tests/data/onnx, aux_logits=False).
Each kind changes one MaxPool that a block holds (its output read by a Conv of the same branch, its
input read by other branches too): a kernel, stride or padding out of range, padding that is not the
same on every side or more than half the kernel, a dilation, ceil_mode off or out of {0, 1}, the pool
reading a tensor of the wrong rank (a Flatten before it); and the same branch written otherwise (ceil
mode off where the windows fit, an AveragePool with count_include_pad) that must import.
scripts/hostile_onnx.py draws it with its own.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
from onnx import helper

KINDS = ["kernel-huge", "kernel-zero", "stride-zero", "stride-negative", "pads-uneven", "pads-over-half",
         "pads-negative", "dilation", "ceil-off", "ceil-odd", "wrong-rank", "as-average", "average-no-pad-count"]


def _block_pools(m):
    """MaxPools whose input other nodes read too: the pool branch of a multi-branch piece."""
    readers = {}
    for node in m.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    return [n for n in m.graph.node if n.op_type == "MaxPool" and readers.get(n.input[0], 0) > 1]


def _set(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value))


def block_pool(m, rng):
    pools = _block_pools(m)
    if not pools:
        return None
    pool = rng.choice(pools)
    kind = rng.choice(KINDS)
    if kind == "kernel-huge":  # larger than the padded input: no output
        _set(pool, "kernel_shape", [100000, 100000])
        return True, True
    if kind == "kernel-zero":
        _set(pool, "kernel_shape", [0, 0])
        return True, True
    if kind == "stride-zero":
        _set(pool, "strides", [0, 0])
        return True, True
    if kind == "stride-negative":
        _set(pool, "strides", [-1, -1])
        return True, True
    if kind == "pads-uneven":  # valid ONNX, but the chain's pools take one padding for every side
        _set(pool, "pads", [0, 0, 1, 1])
        return False, True
    if kind == "pads-over-half":  # valid ONNX; PyTorch's rule: at most half the kernel
        _set(pool, "pads", [2, 2, 2, 2])
        return False, True
    if kind == "pads-negative":
        _set(pool, "pads", [-1, -1, -1, -1])
        return True, True
    if kind == "dilation":  # valid ONNX (opset 10+); the chain's pools are not dilated
        _set(pool, "dilations", [2, 2])
        return False, True
    if kind == "ceil-off":  # 3x3, stride 1, padding 1: the same windows either way
        _set(pool, "ceil_mode", 0)
        return False, False, True
    if kind == "ceil-odd":  # neither 0 nor 1
        _set(pool, "ceil_mode", rng.choice([2, -1, 2 ** 40]))
        return False, True
    if kind == "wrong-rank":  # the pool reads [N, C*H*W]: a 2-D tensor has no windows
        flat = helper.make_node("Flatten", [pool.input[0]], [pool.input[0] + "_flat"], pool.name + "_flat")
        m.graph.node.insert(list(m.graph.node).index(pool), flat)
        pool.input[0] = flat.output[0]
        return True, True
    pool.op_type = "AveragePool"  # as-average, average-no-pad-count
    _set(pool, "count_include_pad", 1 if kind == "as-average" else 0)
    if kind == "as-average":  # the same shapes, PyTorch's AvgPool2d default: must import
        return False, False, True
    return False, True  # padding without count_include_pad: refused at the node


POOL_FAMILIES = [block_pool]
