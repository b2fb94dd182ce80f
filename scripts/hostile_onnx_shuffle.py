"""The hostile campaign's ONNX family for ShuffleNetV2's channel ops (issue 22): the channel split
(a Slice of the channels) and the channel shuffle (Reshape [N, g, C/g, H, W] -> Transpose perm
[0, 2, 1, 3, 4] -> Reshape back), on the committed ShuffleNetV2 export (tests/data/onnx, fixed batch
2). Each kind changes one node or constant: another permutation, a second reader inside the
pattern, a split shape that does not hold C or is not the pattern, a Slice on another axis, with a
step or empty, a Reshape that does not go back; and the same computation written otherwise (the
split's bounds negative or past the end) that must import. scripts/hostile_onnx.py draws it with its
own.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
from onnx import helper, shape_inference

INT64 = 7
INT64_MAX = 2 ** 63 - 1


def _producer(m, tensor):
    return next((node for node in m.graph.node if tensor in node.output), None)


def _shuffles(m):
    """(reshape, transpose, back) of each channel shuffle."""
    found = []
    for t in m.graph.node:
        if t.op_type != "Transpose":
            continue
        first = _producer(m, t.input[0])
        back = next((n for n in m.graph.node if n.op_type == "Reshape" and n.input[0] == t.output[0]), None)
        if first is not None and first.op_type == "Reshape" and back is not None:
            found.append((first, t, back))
    return found


def _data_slices(m):
    """The channel split's Slices: those reading a channel shuffle's output."""
    outputs = {back.output[0] for _, _, back in _shuffles(m)}
    return [n for n in m.graph.node if n.op_type == "Slice" and n.input[0] in outputs]


def _constant(m, before, name, values):
    """A Constant node of int64 `values` inserted before node `before`; returns its output."""
    node = helper.make_node("Constant", [], [name], name + "_node",
                            value=helper.make_tensor(name, INT64, [len(values)], values))
    m.graph.node.insert(list(m.graph.node).index(before), node)
    return name


def _shape(m, tensor):
    """The [N, C, H, W] that a channel shuffle reads or writes (ONNX's shape inference knows the
    Concat before it, not the Reshapes' outputs)."""
    for first, _, back in _shuffles(m):
        if tensor in (first.input[0], back.output[0]):
            tensor = first.input[0]
    for v in shape_inference.infer_shapes(m).graph.value_info:
        if v.name == tensor:
            return [d.dim_value for d in v.type.tensor_type.shape.dim]
    return None


def _change_shuffle(m, rng, kind):
    first, transpose, back = rng.choice(_shuffles(m))
    if kind == "perm-other":  # only [0, 2, 1, 3, 4] is the shuffle
        perm = rng.choice([[0, 1, 2, 3, 4], [0, 2, 1, 4, 3], [0, 3, 1, 2, 4], [2, 0, 1, 3, 4]])
        transpose.attribute[0].CopyFrom(helper.make_attribute("perm", perm))
        return True, True
    if kind == "second-reader":  # a dead Identity beside the Transpose: the pattern's tensor read twice
        extra = helper.make_node("Identity", [first.output[0]], [first.output[0] + "_again"], first.name + "_again")
        m.graph.node.insert(list(m.graph.node).index(transpose) + 1, extra)
        return False, True
    shape = _shape(m, first.input[0])
    if not shape or len(shape) != 4 or 0 in shape or shape[1] % 2:
        return None
    n, g, per, h, w = shape[0], 2, shape[1] // 2, shape[2], shape[3]
    if kind == "split-not-c":  # g * C/g != C: the Reshape's element count differs
        target = [n, g + 1, per, h, w]
    elif kind == "split-batch-3":  # a leading 3 where the model's batch is 2
        target = [3, g, per, h, w]
    elif kind == "split-spatial":  # as many values, but H and W folded otherwise: not the pattern
        target = [n, g, per, h * w, 1] if w > 1 else [n, g * per, 1, h, w]
    else:  # "back-flatten": the last Reshape flattens instead of going back to [N, C, H, W]
        back.input[1] = _constant(m, back, back.name + "_flat", [n, g * per * h * w])
        return True, True
    first.input[1] = _constant(m, first, first.name + "_target", target)
    return kind != "split-spatial", True


def _change_slice(m, rng, kind):
    slices = _data_slices(m)
    if not slices:
        return None
    s = rng.choice(slices)
    shape = _shape(m, s.input[0])
    if not shape or len(shape) != 4 or 0 in shape:
        return None
    c = shape[1]
    first_half = s is slices[0] or rng.random() < 0.5
    begin, end = (0, c // 2) if first_half else (c // 2, c)
    if kind == "slice-other-axis":
        starts, ends, axes, steps = [begin], [end], [rng.choice([0, 2, 3, -1])], None
    elif kind == "slice-step":
        starts, ends, axes, steps = [begin], [end], [1], [rng.choice([2, -1])]
    elif kind == "slice-empty":
        starts, ends, axes, steps = [begin], [begin], [1], None
    elif kind == "slice-negative":  # the same channels, counted from the end
        starts, ends, axes, steps = [begin - c], [end - c if end < c else INT64_MAX], [-3], [1]
    else:  # "slice-two-axes"
        starts, ends, axes, steps = [begin, 0], [end, 2], [1, 2], None
    name = s.name + "_" + kind
    inputs = [s.input[0], _constant(m, s, name + "_starts", starts), _constant(m, s, name + "_ends", ends),
              _constant(m, s, name + "_axes", axes)]
    if steps is not None:
        inputs.append(_constant(m, s, name + "_steps", steps))
    s.input[:] = inputs
    if kind == "slice-negative":
        return False, False, True
    return kind == "slice-empty", True


def channel_shuffle(m, rng):
    if not _shuffles(m):
        return None
    kind = rng.choice(["perm-other", "second-reader", "split-not-c", "split-batch-3", "split-spatial",
                       "back-flatten", "slice-other-axis", "slice-step", "slice-empty", "slice-negative",
                       "slice-two-axes"])
    if kind.startswith("slice"):
        return _change_slice(m, rng, kind)
    return _change_shuffle(m, rng, kind)


SHUFFLE_FAMILIES = [channel_shuffle]
