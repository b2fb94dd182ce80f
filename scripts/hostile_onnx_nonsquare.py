"""The hostile campaign's ONNX family for non-square convolutions (issue 22: Inception-v3's 1x7 / 7x1
and 1x3 / 3x1 convs), on the committed Inception exports (tests/data/onnx: inception_v3 at 75 x 75
and the small inception-like model). Each kind changes one Conv whose kernel is not square (inside a
block, its output concatenated with other branches): a kernel side zero, negative or larger than the
padded input along that axis only (with weights of that shape), a kernel_shape that disagrees with
the weights along one axis, a stride side zero or negative, pads that differ between the start and the
end of one axis or are negative, a dilation along one axis, a 1-D or 3-D kernel_shape; and the same
conv written otherwise that must import (transposed: a 1x7 made 7x1 with its padding and weights
swapped, which keeps every shape; auto_pad SAME_UPPER where it gives the same padding).
scripts/hostile_onnx.py draws it with its own.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
import os

import onnx
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTS = os.path.join(HERE, "..", "tests", "data", "onnx")
KINDS = ["kernel-width-zero", "kernel-height-negative", "kernel-width-huge", "kernel-disagrees", "stride-width-zero",
         "stride-height-negative", "pads-width-uneven", "pads-negative", "dilation-width", "kernel-1d", "kernel-3d",
         "transposed", "same-upper"]


def nonsquare_bases():
    """The committed Inception exports (no weights: their weights are graph inputs with shapes)."""
    return {stem: onnx.load(os.path.join(EXPORTS, stem + ".onnx"))
            for stem in ("inception_v3_train_op14", "inception_small_train_op17_dynamic")
            if os.path.exists(os.path.join(EXPORTS, stem + ".onnx"))}


def _attribute(node, name):
    for a in node.attribute:
        if a.name == name:
            return list(a.ints)
    return None


def _set(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value))


def _weight_dims(m, name):
    """The shape dims of a weight: a graph input (exports without weights) or an initializer."""
    for i in m.graph.input:
        if i.name == name:
            return i.type.tensor_type.shape.dim
    return None


def _nonsquare_convs(m):
    return [n for n in m.graph.node if n.op_type == "Conv" and (_attribute(n, "kernel_shape") or [1, 1])[0] !=
            (_attribute(n, "kernel_shape") or [1, 1])[1] and _weight_dims(m, n.input[1]) is not None]


def nonsquare_conv(m, rng):
    convs = _nonsquare_convs(m)
    if not convs:
        return None
    conv = rng.choice(convs)
    kh, kw = _attribute(conv, "kernel_shape")
    pads = _attribute(conv, "pads") or [0, 0, 0, 0]
    kind = rng.choice(KINDS)
    if kind == "kernel-width-zero":
        _set(conv, "kernel_shape", [kh, 0])
        return True, True
    if kind == "kernel-height-negative":
        _set(conv, "kernel_shape", [-kh, kw])
        return True, True
    if kind == "kernel-width-huge":  # weights [K, C, kh, 100000]: larger than the padded width only
        _weight_dims(m, conv.input[1])[3].dim_value = 100000
        _set(conv, "kernel_shape", [kh, 100000])
        return True, True
    if kind == "kernel-disagrees":  # the weights say 1x7, kernel_shape 1x5
        _set(conv, "kernel_shape", [kh, kw - 2] if kw > 2 else [kh - 2, kw])
        return True, True
    if kind == "stride-width-zero":
        _set(conv, "strides", [1, 0])
        return True, True
    if kind == "stride-height-negative":
        _set(conv, "strides", [-1, 1])
        return True, True
    if kind == "pads-width-uneven":  # valid ONNX; a conv2d pads both ends of an axis alike
        _set(conv, "pads", [pads[0], pads[1] + 1, pads[2], pads[3]])
        return False, True
    if kind == "pads-negative":
        _set(conv, "pads", [pads[0], -1, pads[2], -1])
        return True, True
    if kind == "dilation-width":  # valid ONNX; conv2d layers are not dilated
        _set(conv, "dilations", [1, 2])
        return False, True
    if kind == "kernel-1d":
        _set(conv, "kernel_shape", [kw])
        return True, True
    if kind == "kernel-3d":
        _set(conv, "kernel_shape", [kh, kw, 1])
        return True, True
    if kind == "transposed":  # 1x7 padded (0, 3) as 7x1 padded (3, 0): the same output shape
        dims = _weight_dims(m, conv.input[1])
        dims[2].dim_value, dims[3].dim_value = kw, kh
        _set(conv, "kernel_shape", [kw, kh])
        _set(conv, "pads", [pads[1], pads[0], pads[3], pads[2]])
        return False, False, True
    # same-upper: stride 1 and an odd kernel: SAME pads (k - 1) / 2 at both ends, the export's own pads
    _set(conv, "pads", None)
    _set(conv, "auto_pad", b"SAME_UPPER")
    return False, False, True


NONSQUARE_FAMILIES = [nonsquare_conv]


def main():
    """This family alone through `remat import --output`, judged as the campaign judges it:
    /usr/bin/python3 scripts/hostile_onnx_nonsquare.py --remat build/dev/app/cli/remat --runs 200"""
    import hostile_onnx

    return hostile_onnx.run_families_alone(main.__doc__.split("\n")[0], NONSQUARE_FAMILIES, nonsquare_bases(), 200)


if __name__ == "__main__":
    raise SystemExit(main())
