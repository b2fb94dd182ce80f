#!/usr/bin/python3
"""Writes issue 26's hostile ONNX models into tests/data/regressions/onnx: one small model (the
campaign's base, scripts/hostile_onnx.py) per class of the issue, each wrong in one structural way.
tests/input/onnx_import_test.cpp and tests/cli/regressions_cli_test.cpp read them with the messages
of tests/data/regressions/expected.json.

    /usr/bin/python3 scripts/make-onnx-regressions.py [FOLDER]
"""
import copy
import math
import os
import sys

from onnx import helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_onnx import small_model  # noqa: E402
from hostile_onnx_activations import activation_model  # noqa: E402


def node(m, op):
    return next(n for n in m.graph.node if n.op_type == op)


def init(m, name):
    return next(t for t in m.graph.initializer if t.name == name)


def constant(m, name, dtype, dims, values, at=0):
    m.graph.node.insert(at, helper.make_node("Constant", [], [name], "/" + name,
                                             value=helper.make_tensor(name, dtype, dims, values)))


def dead(m, op, inputs, name, **attributes):
    m.graph.node.append(helper.make_node(op, inputs, [name + "_out"], "/" + name, **attributes))


def cases():
    out = {}

    def case(name):
        m = small_model(13)
        out[name] = m
        return m

    node(case("empty-input-in-a-live-concat"), "Concat").input[1] = ""
    node(case("empty-input-in-a-dead-div"), "Div").input[1] = ""
    node(case("empty-input-in-gather"), "Gather").input[1] = ""
    dead(case("empty-input-in-a-dead-add"), "Add", ["minus_one", ""], "DeadAdd")
    m = case("unsqueeze-duplicate-axes-1d")
    constant(m, "dup_axes", TensorProto.INT64, [2], [0, 0])
    dead(m, "Unsqueeze", ["minus_one", "dup_axes"], "DupUnsqueeze")
    m = case("unsqueeze-duplicate-axes-scalar")
    constant(m, "dup_axes", TensorProto.INT64, [2], [1, -1])
    dead(m, "Unsqueeze", ["zero", "dup_axes"], "DupUnsqueeze")
    node(case("conv-input-naming-nothing"), "Conv").input[1] = "no.such.weight"
    node(case("node-output-named-like-the-input"), "Relu").output[0] = "x"
    m = case("node-listed-twice")
    m.graph.node.insert(2, copy.deepcopy(m.graph.node[1]))
    m = case("constant-named-like-a-weight")
    constant(m, "conv.weight", TensorProto.FLOAT, [1], [1.0])
    m = case("weight-listed-twice-as-input")
    m.graph.input.append(helper.make_tensor_value_info("fc.bias", TensorProto.FLOAT, [10]))
    m.graph.input.append(helper.make_tensor_value_info("fc.bias", TensorProto.FLOAT, [10]))
    node(m, "Gemm").input.append("fc.bias")
    node(case("gemm-with-1000-outputs"), "Gemm").output.extend("extra_%d" % i for i in range(999))
    init(case("initializer-data-short"), "conv.weight").float_data.pop()
    m = case("initializer-data-missing")
    del init(m, "conv.weight").float_data[:]
    m = case("initializer-raw-data-long")
    t = init(m, "fc.weight")
    del t.float_data[:]
    t.raw_data = b"\0" * (320 * 4 + 4)
    m = case("weight-of-type-string")
    t = init(m, "conv.weight")
    t.data_type = TensorProto.STRING
    m = case("weight-of-type-double")
    t = init(m, "conv.weight")
    del t.float_data[:]
    t.data_type = TensorProto.DOUBLE
    t.double_data.extend([0.0] * 54)
    init(case("weight-of-type-999"), "fc.weight").data_type = 999
    case("graph-output-of-type-string").graph.output[0].type.tensor_type.elem_type = TensorProto.STRING
    m = case("graph-output-of-shape-minus-3")
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_value = -3
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 1000
    m = case("value-info-contradicting-the-conv")
    m.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 5, 4, 4]))
    m = case("attribute-twice")
    node(m, "Gemm").attribute.append(helper.make_attribute("transB", 0))
    m = case("graph-attribute-on-relu")
    node(m, "Relu").attribute.append(helper.make_attribute("body", helper.make_graph([], "sub", [], [])))
    m = case("dead-slice-with-empty-starts")
    constant(m, "empty_starts", TensorProto.INT64, [0], [])
    dead(m, "Slice", ["minus_one", "empty_starts", "minus_one"], "EmptySlice")
    m = case("dead-squeeze-of-an-axis-of-size-3")
    constant(m, "three", TensorProto.INT64, [3], [1, 2, 3])
    dead(m, "Squeeze", ["three", "zero_axis"], "Squeeze3")
    constant(m, "zero_axis", TensorProto.INT64, [1], [0])
    m = case("1000-graph-outputs")
    for k in range(999):
        m.graph.node.append(helper.make_node("Relu", ["y"], ["%d" % k]))
        m.graph.output.append(helper.make_tensor_value_info("%d" % k, TensorProto.FLOAT, None))
    assert not math.isnan(0.0)
    out.update(activation_cases())
    out.update(shuffle_cases())
    return out


def shuffle_model(middle):
    """x [2, 4, 2, 2] -> Conv (4, 1x1) -> the nodes `middle` makes of "c1" (returning its output) -> Conv
    (4, 1x1) -> y, weights as graph inputs (an export without weights): ShuffleNetV2's channel ops
    on their own."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 2, 2])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], "/c1/Conv", kernel_shape=[1, 1])]
    mid, channels = middle(nodes)
    nodes.append(helper.make_node("Conv", [mid, "w2"], ["y"], "/c2/Conv", kernel_shape=[1, 1]))
    weights = [helper.make_tensor_value_info("w1", TensorProto.FLOAT, [4, 4, 1, 1]),
               helper.make_tensor_value_info("w2", TensorProto.FLOAT, [4, channels, 1, 1])]
    graph = helper.make_graph(nodes, "shuffle", [x] + weights, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                              None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def int64s(name, values):
    return helper.make_node("Constant", [], [name], "/" + name,
                            value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values))


def shuffle_cases():
    """Issue 22's ShuffleNetV2 channel ops (scripts/hostile_onnx_shuffle.py's family): the campaign's
    find (a Slice bound of INT64_MAX, torch's "to the end", must import), a shuffle alone (imports) and two refusals."""
    def open_slice(nodes):
        nodes += [int64s("starts", [2]), int64s("ends", [2 ** 63 - 1]), int64s("axes", [1]),
                  helper.make_node("Slice", ["c1", "starts", "ends", "axes"], ["s"], "/s/Slice")]
        return "s", 2

    def shuffle(perm):
        def make(nodes):
            nodes += [int64s("split", [2, 2, 2, 2, 2]), helper.make_node("Reshape", ["c1", "split"], ["r"], "/r/Reshape"),
                      helper.make_node("Transpose", ["r"], ["t"], "/r/Transpose", perm=perm),
                      int64s("back", [2, 4, 2, 2]), helper.make_node("Reshape", ["t", "back"], ["b"], "/r/Reshape_1")]
            return "b", 4
        return make

    def batch_inside(nodes):  # a Reshape whose leading dimension is not the batch: --batch cannot rewrite it
        nodes += [int64s("to", [4, 8]), helper.make_node("Reshape", ["c1", "to"], ["f"], "/f/Reshape"),
                  int64s("again", [2, 4, 2, 2]), helper.make_node("Reshape", ["f", "again"], ["g"], "/f/Reshape_1")]
        return "g", 4

    return {"slice-ends-int64-max": shuffle_model(open_slice),
            "channel-shuffle-perm-identity": shuffle_model(shuffle([0, 1, 2, 3, 4])),
            "channel-shuffle-alone": shuffle_model(shuffle([0, 2, 1, 3, 4])),
            "reshape-batch-not-leading": shuffle_model(batch_inside)}


def activation_cases():
    """Issue 22's activations (scripts/hostile_onnx_activations.py's families): attributes other
    than PyTorch's, half-matched patterns, extra inputs and outputs."""
    out = {}

    def case(name, opset=13):
        m = activation_model(opset)
        out[name] = m
        return m

    def attribute(m, op, name, value):
        n = node(m, op)
        for a in [a for a in n.attribute if a.name == name]:
            n.attribute.remove(a)
        n.attribute.append(helper.make_attribute(name, value))

    attribute(case("hardsigmoid-alpha-nan"), "HardSigmoid", "alpha", math.nan)
    attribute(case("hardsigmoid-alpha-inf"), "HardSigmoid", "alpha", math.inf)
    attribute(case("hardsigmoid-alpha-onnx-default"), "HardSigmoid", "alpha", 0.2)
    attribute(case("hardsigmoid-beta-0.6"), "HardSigmoid", "beta", 0.6)
    attribute(case("hardsigmoid-alpha-of-type-int"), "HardSigmoid", "alpha", 1)
    m = case("hardsigmoid-alpha-twice")
    node(m, "HardSigmoid").attribute.append(helper.make_attribute("alpha", 1.0 / 6.0))
    attribute(case("gelu-approximate-tanh", 20), "Gelu", "approximate", "tanh")
    attribute(case("gelu-approximate-with-control-characters", 20), "Gelu", "approximate", "\x1b[2Jnone")
    attribute(case("gelu-approximate-of-type-float", 20), "Gelu", "approximate", 0.5)
    m = case("gelu-approximate-twice", 20)
    node(m, "Gelu").attribute.append(helper.make_attribute("approximate", "none"))
    m = case("silu-of-another-tensor")  # x * Sigmoid(y), y != x: not SiLU; shapes that do not broadcast
    node(m, "Mul").input[:] = ["x", "s"]
    m = case("silu-squared-gate")  # Sigmoid(x) * Sigmoid(x): imports as sigmoid, mul (expected.json "imports")
    node(m, "Mul").input[:] = ["s", "s"]
    m = case("erf-without-its-tail")  # Div -> Erf, the Add / Mul / Mul gone
    for n in [n for n in m.graph.node if n.name in ("/act4/Add", "/act4/Mul", "/act4/Mul_1") or
              n.output[0] in ("gelu.one", "gelu.half")]:
        m.graph.node.remove(n)
    node(m, "Flatten").input[0] = "g_erf"
    for name, value in (("gelu-divisor-not-sqrt-2", ("gelu.sqrt2", 1.41)), ("gelu-one-is-2", ("gelu.one", 2.0)),
                        ("gelu-half-is-nan", ("gelu.half", math.nan))):
        m = case(name)
        target = next(n for n in m.graph.node if n.op_type == "Constant" and n.output[0] == value[0])
        target.attribute[0].t.CopyFrom(helper.make_tensor(value[0], TensorProto.FLOAT, [], [value[1]]))
    m = case("gelu-one-of-type-int64")  # the campaign's find: Add(float, int64) is no GELU (no valid model)
    target = next(n for n in m.graph.node if n.op_type == "Constant" and n.output[0] == "gelu.one")
    target.attribute[0].t.CopyFrom(helper.make_tensor("gelu.one", TensorProto.INT64, [], [1]))
    m = case("gelu-divisor-a-vector")
    target = next(n for n in m.graph.node if n.op_type == "Constant" and n.output[0] == "gelu.sqrt2")
    target.attribute[0].t.CopyFrom(helper.make_tensor("gelu.sqrt2", TensorProto.FLOAT, [2], [math.sqrt(2.0)] * 2))
    node(case("sigmoid-with-two-inputs"), "Sigmoid").input.append("x")
    node(case("tanh-with-two-outputs"), "Tanh").output.append("t_second")
    node(case("hardswish-without-input", 14), "HardSwish").input[0] = ""
    return out


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                 "tests", "data", "regressions", "onnx")
    for name, model in cases().items():
        with open(os.path.join(folder, name + ".onnx"), "wb") as f:
            f.write(model.SerializeToString())
        print(name)


if __name__ == "__main__":
    main()
