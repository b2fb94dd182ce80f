"""The hostile campaign's ONNX families (issue 26): models that are well-formed protobuf and wrong in
one structural way, made with Debian's python3-onnx from a small model built here (a conv net with
the Shape/Gather/Unsqueeze/Concat plumbing of x.view(n, -1) and a dead plumbing branch) and from the
committed exports of tests/data/onnx. Each family changes one field, node, attribute, tensor or
name; `random-field` changes any field of any message through the descriptors, as the C++ fuzzer's
mutator does. scripts/hostile-campaign.py runs them (--families onnx); scripts/make-onnx-regressions.py
writes one model of each family into tests/data/regressions/onnx.

mutate_onnx(base, rng) -> (bytes, surely_invalid, family, blamed_node, must_import): blamed_node says
whether the message must name a node; must_import that the model is valid and must import. The
families of issue 22's activations are in scripts/hostile_onnx_activations.py (Squeeze-and-Excitation's
in hostile_onnx_se.py, ShuffleNetV2's channel ops in hostile_onnx_shuffle.py).
"""
import copy
import math
import os

import onnx
from onnx import helper, numpy_helper, TensorProto  # noqa: F401  (numpy_helper: Debian's numpy)

import hostile_onnx_activations
import hostile_onnx_convnext
import hostile_onnx_transformer
import hostile_onnx_layernorm
import hostile_onnx_nonsquare
import hostile_onnx_opset18
import hostile_onnx_pools
import hostile_onnx_se
import hostile_onnx_shuffle

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTS = os.path.join(HERE, "..", "tests", "data", "onnx")


def small_model(opset=13):
    """x [2, 3, 4, 4] -> Conv(2, 3x3, weights in the file) -> Relu -> view(n, -1) -> Gemm(10); a dead
    Shape -> Gather -> Slice -> Concat branch, as torch leaves it after a folded view."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])
    init = [helper.make_tensor("conv.weight", TensorProto.FLOAT, [2, 3, 3, 3], [0.0] * 54),
            helper.make_tensor("conv.bias", TensorProto.FLOAT, [2], [0.0] * 2),
            helper.make_tensor("fc.weight", TensorProto.FLOAT, [10, 32], [0.0] * 320),
            helper.make_tensor("zero", TensorProto.INT64, [], [0]),
            helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv.weight", "conv.bias"], ["c"], "/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Relu", ["c"], ["r"], "/relu/Relu"),
        n("Shape", ["r"], ["s"], "/Shape"),
        n("Gather", ["s", "zero"], ["g"], "/Gather", axis=0),
        n("Constant", [], ["axes"], "/Constant", value=helper.make_tensor("axes", TensorProto.INT64, [1], [0])),
        n("Unsqueeze", ["g", "axes"], ["u"], "/Unsqueeze"),
        n("Concat", ["u", "minus_one"], ["target"], "/Concat", axis=0),
        n("Slice", ["s", "axes", "minus_one"], ["dead_slice"], "/Slice"),
        n("Div", ["dead_slice", "minus_one"], ["dead_div"], "/Div"),
        n("Reshape", ["r", "target"], ["f"], "/Reshape"),
        n("Gemm", ["f", "fc.weight"], ["y"], "/fc/Gemm", transB=1),
    ]
    graph = helper.make_graph(nodes, "small", [x], [y], init)
    model = helper.make_model(graph, producer_name="hostile-campaign",
                              opset_imports=[helper.make_operatorsetid("", opset)])
    model.ir_version = 7
    return model


def bases():
    models = {"small-op13": small_model(13), "small-op11": small_model(11)}
    # opset 11: Unsqueeze's axes are an attribute
    m = models["small-op11"]
    for node in m.graph.node:
        if node.op_type == "Unsqueeze":
            del node.input[1:]
            node.attribute.append(helper.make_attribute("axes", [0]))
    for name in sorted(os.listdir(EXPORTS)) if os.path.isdir(EXPORTS) else []:
        if name.endswith(".onnx"):
            models[name[:-5]] = onnx.load(os.path.join(EXPORTS, name))
    models.update(hostile_onnx_activations.activation_bases())
    models.update(hostile_onnx_layernorm.layernorm_bases())
    models.update(hostile_onnx_convnext.convnext_bases())
    models.update(hostile_onnx_transformer.transformer_bases())
    models.update(hostile_onnx_opset18.opset18_bases())
    return models


def _names(model):
    g = model.graph
    return ([i.name for i in g.input] + [t.name for t in g.initializer] +
            [o for node in g.node for o in node.output if o])


def _pick(rng, items):
    items = list(items)
    return rng.choice(items) if items else None


def _nodes(model, ops):
    return [i for i, node in enumerate(model.graph.node) if node.op_type in ops]


# Each family: (model, rng) -> (surely_invalid, blamed_node) after changing the model in place, or
# None when the base has nothing to change.

def empty_input(m, rng):
    i = _pick(rng, [i for i in _nodes(m, {"Concat", "Add", "Div", "Gather", "Sub", "Mul"})
                    if len(m.graph.node[i].input) > 1])
    if i is None:
        return None
    node = m.graph.node[i]
    node.input[rng.randrange(1, len(node.input))] = ""
    return True, True


def dangling_input(m, rng):
    i = _pick(rng, _nodes(m, {"Conv", "Gemm", "Flatten", "Relu", "BatchNormalization", "Concat", "Add", "MaxPool"}))
    if i is None:
        return None
    node = m.graph.node[i]
    node.input[rng.randrange(len(node.input))] = rng.choice(["missing", "x ", "\x1b[2Jghost", "n" * 3000])
    return True, True


def duplicate_name(m, rng):
    g = m.graph
    i = rng.randrange(len(g.node))
    node = g.node[i]
    if not node.output:
        return None
    kind = rng.choice(["input", "initializer", "earlier", "node-twice", "constant-as-weight", "input-twice"])
    if kind == "input" and g.input:
        node.output[0] = g.input[0].name
    elif kind == "initializer" and g.initializer:
        node.output[0] = rng.choice(g.initializer).name
    elif kind == "earlier" and i > 0 and g.node[i - 1].output:
        node.output[0] = g.node[i - 1].output[0]
    elif kind == "node-twice":
        g.node.insert(i + 1, copy.deepcopy(node))
    elif kind == "constant-as-weight":
        target = rng.choice([t.name for t in g.initializer] + [x.name for x in g.input])
        g.node.insert(0, helper.make_node("Constant", [], [target], "/Shadow", value_float=1.0))
    elif g.input:
        g.input.append(copy.deepcopy(rng.choice(g.input)))
        return True, False  # the graph's interface: no node to blame
    else:
        return None
    return True, True


def many_outputs(m, rng):
    i = _pick(rng, _nodes(m, {"Conv", "Gemm", "Flatten", "Relu"}))
    if i is None:
        return None
    node = m.graph.node[i]
    node.output.extend("%s_extra_%d" % (node.output[0], k) for k in range(rng.choice([1, 999])))
    return True, True


def initializer_data(m, rng):
    inits = [t for t in m.graph.initializer if t.dims and t.data_type == TensorProto.FLOAT]
    if not inits:
        return None
    t = rng.choice(inits)
    raw = t.raw_data or numpy_helper.to_array(t).tobytes()
    del t.float_data[:]
    kind = rng.choice(["short", "long", "missing", "typed-short"])
    if kind == "short":
        t.raw_data = raw[:-4]
    elif kind == "long":
        t.raw_data = raw + b"\0\0\0\0"
    elif kind == "missing":
        t.ClearField("raw_data")
    else:
        t.ClearField("raw_data")
        t.float_data.extend([0.0] * max(0, len(raw) // 4 - 1))
    return True, False


def weight_dtype(m, rng):
    weights = {n.input[1] for n in m.graph.node if n.op_type in ("Conv", "Gemm") and len(n.input) > 1}
    inits = [t for t in m.graph.initializer if t.name in weights]
    inputs = [x for x in m.graph.input if x.name in weights]
    dtype = rng.choice([TensorProto.STRING, TensorProto.INT8, TensorProto.BOOL, TensorProto.DOUBLE, 0, 999])
    if inits:
        rng.choice(inits).data_type = dtype
        return True, False
    if inputs:
        rng.choice(inputs).type.tensor_type.elem_type = dtype
        return True, dtype not in (0, 999)
    return None


def output_declaration(m, rng):
    out = m.graph.output[0].type.tensor_type
    kind = rng.choice(["string", "negative", "channels", "rank"])
    if kind == "string":
        out.elem_type = TensorProto.STRING
    elif kind == "negative":
        out.shape.Clear()
        for d in (-3, 1000):
            out.shape.dim.add().dim_value = d
    elif kind == "channels":
        out.shape.Clear()
        for d in (2, 99999):
            out.shape.dim.add().dim_value = d
    else:
        out.shape.Clear()
        for _ in range(200):
            out.shape.dim.add().dim_value = 1
    return True, False


def value_info(m, rng):
    i = _pick(rng, _nodes(m, {"Conv", "Relu", "MaxPool", "Gemm"}))
    if i is None:
        return None
    name = m.graph.node[i].output[0]
    dtype = rng.choice([TensorProto.FLOAT, TensorProto.DOUBLE])
    shape = [2, 12345] if dtype == TensorProto.FLOAT else None
    for v in list(m.graph.value_info):
        if v.name == name:
            m.graph.value_info.remove(v)
    m.graph.value_info.append(helper.make_tensor_value_info(name, dtype, shape))
    return True, True


def attribute_twice(m, rng):
    i = _pick(rng, [i for i, n in enumerate(m.graph.node) if n.attribute])
    if i is None:
        return None
    node = m.graph.node[i]
    node.attribute.append(copy.deepcopy(rng.choice(node.attribute)))
    return True, True


def graph_attribute(m, rng):
    i = _pick(rng, _nodes(m, {"Relu", "Conv", "Gemm", "Concat", "Add"}))
    if i is None:
        return None
    sub = helper.make_graph([], "sub", [], [])
    m.graph.node[i].attribute.append(helper.make_attribute("body", sub))
    return True, True


def attribute_type(m, rng):
    i = _pick(rng, [i for i, n in enumerate(m.graph.node) if n.attribute and n.op_type != "Constant"])
    if i is None:
        return None
    a = rng.choice(m.graph.node[i].attribute)
    a.type = rng.choice([t for t in (onnx.AttributeProto.STRING, onnx.AttributeProto.FLOATS, onnx.AttributeProto.TENSOR)
                         if t != a.type])  # another type than its own
    return True, True


def plumbing(m, rng):
    """Constant plumbing evaluated strictly, dead or alive: Unsqueeze with duplicate axes, Slice
    with empty or NaN bounds, Squeeze of an axis that is not 1."""
    g = m.graph
    kind = rng.choice(["unsqueeze-dup", "unsqueeze-scalar", "slice-empty", "slice-nan", "squeeze-3"])
    const = lambda name, dtype, dims, vals: g.node.insert(0, helper.make_node(  # noqa: E731
        "Constant", [], [name], "/" + name, value=helper.make_tensor(name, dtype, dims, vals)))
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 13)
    if kind.startswith("unsqueeze"):
        const("h_data", TensorProto.INT64, [] if kind == "unsqueeze-scalar" else [2], [3] if kind == "unsqueeze-scalar" else [3, 4])
        axes = [1, -1] if kind == "unsqueeze-scalar" else [0, 0]
        if opset >= 13:
            const("h_axes", TensorProto.INT64, [2], axes)
            node = helper.make_node("Unsqueeze", ["h_data", "h_axes"], ["h_out"], "/HostileUnsqueeze")
        else:
            node = helper.make_node("Unsqueeze", ["h_data"], ["h_out"], "/HostileUnsqueeze", axes=axes)
    elif kind.startswith("slice"):
        if opset < 10:
            return None
        const("h_data", TensorProto.INT64, [3], [1, 2, 3])
        if kind == "slice-empty":
            const("h_starts", TensorProto.INT64, [0], [])
        else:
            const("h_starts", TensorProto.FLOAT, [1], [math.nan])
        const("h_ends", TensorProto.INT64, [1], [2])
        node = helper.make_node("Slice", ["h_data", "h_starts", "h_ends"], ["h_out"], "/HostileSlice")
    else:
        const("h_data", TensorProto.INT64, [3], [1, 2, 3])
        if opset >= 13:
            const("h_axes", TensorProto.INT64, [1], [0])
            node = helper.make_node("Squeeze", ["h_data", "h_axes"], ["h_out"], "/HostileSqueeze")
        else:
            node = helper.make_node("Squeeze", ["h_data"], ["h_out"], "/HostileSqueeze", axes=[0])
    g.node.insert(len([n for n in g.node if n.name.startswith("/h_")]), node)
    return True, True


def producer(m, rng):
    """Accepted (the model is fine) but its summary must print the producer quoted and bounded."""
    m.producer_name = rng.choice(["\x1b]0;pwned\x07\x1b[2J", "p" * (1 << 20), "bel\x07", "nul\x00x"])
    m.producer_version = rng.choice(["", "1.0\x1b[31m", "v" * 5000])
    return False, False


def many_inputs(m, rng):
    """500 extra data inputs that reach the output, or 1000 graph outputs: a long list to cap."""
    g = m.graph
    if rng.random() < 0.5:
        last = g.node[-1].output[0]
        for k in range(1000):
            g.output.append(helper.make_tensor_value_info("%s_out_%d" % (last, k), TensorProto.FLOAT, None))
            g.node.append(helper.make_node("Relu", [last], ["%s_out_%d" % (last, k)], "/extra_%d" % k))
        return True, False
    first = g.node[0]
    for k in range(500):
        g.input.append(helper.make_tensor_value_info("data_%d" % k, TensorProto.FLOAT, [2, 10]))
        g.node.append(helper.make_node("Add", [g.output[0].name if k == 0 else "sum_%d" % (k - 1), "data_%d" % k],
                                       ["sum_%d" % k], "/add_%d" % k))
    g.output[0].name = "sum_499"
    del first
    return True, False


def random_field(m, rng, depth=0):
    """Any field of any message, through the descriptors (as fuzz/onnx_mutator.hpp)."""
    messages = []

    def walk(msg, d):
        if len(messages) > 5000 or d > 8:
            return
        messages.append(msg)
        for field, value in msg.ListFields():
            if field.type == field.TYPE_MESSAGE:
                for sub in (value if field.label == field.LABEL_REPEATED else [value]):
                    walk(sub, d + 1)
    walk(m, 0)
    msg = rng.choice(messages)
    fields = msg.DESCRIPTOR.fields
    field = rng.choice(fields)
    names = _names(m)
    awkward_int = rng.choice([0, -1, 1, 2, 3, 999, 2 ** 31 - 1, -2 ** 31, 2 ** 40, -3])
    try:
        if field.label == field.LABEL_REPEATED:
            values = getattr(msg, field.name)
            if len(values) and rng.random() < 0.4:
                del values[rng.randrange(len(values))]
            elif field.type == field.TYPE_MESSAGE:
                if len(values):
                    values.add().CopyFrom(values[rng.randrange(len(values))])
            elif field.type == field.TYPE_STRING:
                values.append(rng.choice(names + ["", "\x1b[2J"]))
            elif field.type in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
                values.append(rng.choice([math.nan, math.inf, -1.0, 0.0]))
            elif field.type != field.TYPE_BYTES:
                values.append(awkward_int)
        elif field.type == field.TYPE_MESSAGE:
            msg.ClearField(field.name)
        elif field.type == field.TYPE_STRING:
            setattr(msg, field.name, rng.choice(names + ["", "\x1b]0;t\x07", "s" * 3000]))
        elif field.type == field.TYPE_BYTES:
            value = getattr(msg, field.name)
            setattr(msg, field.name, value[:rng.randrange(len(value) + 1)] if value else b"\0\0\0")
        elif field.type in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
            setattr(msg, field.name, rng.choice([math.nan, math.inf, -1.0, 0.0, 1e30]))
        elif field.type == field.TYPE_ENUM:
            setattr(msg, field.name, rng.choice([v.number for v in field.enum_type.values]))
        elif field.type == field.TYPE_BOOL:
            setattr(msg, field.name, not getattr(msg, field.name))
        else:
            setattr(msg, field.name, awkward_int if awkward_int >= 0 or field.type not in (
                field.TYPE_UINT32, field.TYPE_UINT64) else 0)
    except (ValueError, TypeError):
        return None
    return False, False


FAMILIES = [empty_input, dangling_input, duplicate_name, many_outputs, initializer_data, weight_dtype,
            output_declaration, value_info, attribute_twice, graph_attribute, attribute_type, plumbing, producer,
            many_inputs, random_field] + hostile_onnx_activations.ACTIVATION_FAMILIES + \
    hostile_onnx_se.SE_FAMILIES + hostile_onnx_shuffle.SHUFFLE_FAMILIES + hostile_onnx_layernorm.LAYERNORM_FAMILIES + \
    hostile_onnx_convnext.CONVNEXT_FAMILIES + hostile_onnx_pools.POOL_FAMILIES + \
    hostile_onnx_nonsquare.NONSQUARE_FAMILIES + \
    hostile_onnx_transformer.TRANSFORMER_FAMILIES + hostile_onnx_opset18.OPSET18_FAMILIES


def mutate_onnx(models, rng, family=None):
    """One structural mutation of a base model: (bytes, surely_invalid, family, blamed_node,
    must_import)."""
    for _ in range(20):
        name = rng.choice(sorted(models))
        m = copy.deepcopy(models[name])
        f = family or rng.choice(FAMILIES)
        result = f(m, rng)
        if result is None:
            continue
        surely_invalid, blamed, must_import = (tuple(result) + (False,))[:3]
        return (m.SerializeToString(), surely_invalid, "%s/%s" % (f.__name__.replace("_", "-"), name), blamed,
                must_import)
    return models["small-op13"].SerializeToString(), False, "unchanged", False, False


# ---- One run of the campaign ----------------------------------------------------------------------

_BASES = None
CONTROL = set(range(0x00, 0x20)) - {0x0a} | {0x7f}


def judge_onnx(code, out, err, surely_invalid, blamed, model, written, timed_out, must_import=False):
    if timed_out:
        return "hang"
    if code < 0:
        return "crash (signal %d)" % -code
    if code not in (0, 2, 3):
        return "exit %d" % code
    if any(c in CONTROL for c in (out + err).encode("utf-8", "replace")):
        return "control character in the output"
    if max((len(line) for line in (out + err).split("\n")), default=0) > 2000:
        return "a line over 2000 characters"
    if code == 0:
        return "accepted invalid" if surely_invalid else "ok"
    if must_import and code == 2:
        return "refused a valid model"
    if written:
        return "wrote its output on a failure"
    if not err.startswith("remat:"):
        return "message without remat:"
    if len(err) > 2000:
        return "message over 2000 characters"
    if model not in err:
        return "message without the file"
    if blamed and "node " not in err:
        return "message without the node"
    return "refused"


def run_one_onnx(task):
    import random
    import shutil
    import subprocess
    import time
    global _BASES
    index, seed, work, remat, limit_s, memory_bytes, limit_resources = task
    if _BASES is None:
        _BASES = bases()
    rng = random.Random(seed)
    folder = os.path.join(work, "o%06d" % index)
    os.makedirs(folder)
    data, surely_invalid, family, blamed, must_import = mutate_onnx(_BASES, rng)
    model = os.path.join(folder, "m%06d.onnx" % index)
    with open(model, "wb") as f:
        f.write(data)
    output = os.path.join(folder, "out%06d.json" % index)
    what = rng.random()
    args = (["import", model, "--batch", "2", "--output", output] if what < 0.6 else
            ["plan", model, "--batch", "2", "--planner", rng.choice(["linear", "optimal", "sqrt"])] if what < 0.8 else
            ["simulate", model, "--batch", "2", "--checkpoints", ""])
    started = time.time()
    timed_out = False
    try:
        proc = subprocess.run([remat] + args, capture_output=True, timeout=limit_s,
                              preexec_fn=limit_resources(memory_bytes, 0))
        code = proc.returncode
        out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as expired:
        code, out, err, timed_out = -9, "", (expired.stderr or b"").decode("utf-8", "replace"), True
    seconds = time.time() - started
    written = code != 0 and os.path.exists(output)
    verdict = judge_onnx(code, out, err, surely_invalid, blamed, model, written, timed_out, must_import)
    result = {"index": index, "base": family.split("/", 1)[-1], "mutation": family, "command": args[0],
              "writer": None, "exit": code, "verdict": verdict, "seconds": round(seconds, 3),
              "message": err[:300], "message_chars": len(err)}
    if verdict not in ("ok", "refused"):
        shutil.copy(model, os.path.join(work, "..", "findings", "m%06d.onnx" % index))
        result["args"] = [a[:200] for a in args]
    shutil.rmtree(folder, ignore_errors=True)
    return result


def run_families_alone(description, families, bases, default_runs, kind_of=None):
    """A family module's own command line: its families alone through `remat import --output`, judged as
    the campaign judges them; exit 1 on a finding. kind_of(family, rng) names a run in the counts (the
    family's name by default); it gets the generator as it was before the family drew."""
    import argparse
    import collections
    import random
    import subprocess
    import tempfile

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--remat", default="build/dev/app/cli/remat")
    ap.add_argument("--runs", type=int, default=default_runs)
    ap.add_argument("--seed", type=int, default=22)
    args = ap.parse_args()
    counts = collections.Counter()
    findings = 0
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.runs):
            rng = random.Random(args.seed * 100003 + i)
            family, base, result, kind = None, None, None, None
            while result is None:
                base = rng.choice(sorted(bases))
                m = copy.deepcopy(bases[base])
                family = rng.choice(families)
                before = random.Random()
                before.setstate(rng.getstate())
                result = family(m, rng)
                kind = kind_of(family, before) if kind_of else family.__name__
            surely, blamed, must = (tuple(result) + (False,))[:3]
            model, output = os.path.join(folder, "m%05d.onnx" % i), os.path.join(folder, "out.json")
            with open(model, "wb") as f:
                f.write(m.SerializeToString())
            if os.path.exists(output):
                os.remove(output)
            proc = subprocess.run([args.remat, "import", model, "--batch", "2", "--output", output],
                                  capture_output=True, text=True, timeout=60)
            verdict = judge_onnx(proc.returncode, proc.stdout, proc.stderr, surely, blamed, model,
                                 os.path.exists(output), False, must)
            counts[(kind, verdict)] += 1
            if verdict not in ("ok", "refused"):
                findings += 1
                print("FINDING run %d (%s on %s): %s\n  %s" % (i, kind, base, verdict, proc.stderr[:500]))
    for (kind, verdict), n in sorted(counts.items()):
        print("%-22s %-28s %d" % (kind, verdict, n))
    print("%d runs, %d findings" % (args.runs, findings))
    return 1 if findings else 0
