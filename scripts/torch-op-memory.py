#!/usr/bin/python3
"""What PyTorch keeps, op by op: one training step of small layer sequences and of the zoo's models
under PyTorch's CPU memory profiler, against remat's prediction of the same chain.

Every allocation and free of the step is read from the profiler's event tree (profile_memory=True:
address, bytes, time, the op it happened in), so the peak inside an op counts, not only the live
bytes between modules. The activation bytes of an instant are the bytes allocated during the step
and not yet freed, less the parameter gradients: with zero_grad(set_to_none=True) (PyTorch 2.x's
default) each .grad is the buffer its backward op allocated, which AccumulateGrad keeps, and the
memory model counts the gradients as static (docs/memory-model.md section 1). Parameters, the input
batch and the labels exist before the step, so they are not in the trace at all.

For each case it prints PyTorch's activation peak, the same peak without the ops' own scratch
(buffers an op call allocates and frees itself: oneDNN's reordered weights and blocked outputs), the
bytes still allocated when backward starts (what autograd keeps between the passes, plus the logits
and the loss), and remat's E and live-after-F(n) for the same chain (`remat simulate CHAIN --json`,
store-all). With --remat-before it adds a second remat's E (the model before a change) as a column.

    /usr/bin/python3 scripts/torch-op-memory.py --remat build/dev/app/cli/remat [--zoo] [--only NAME]

One thread (torch.set_num_threads(1)), float32, batch 8, 128x128 unless a case says otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

MiB = 1024.0 * 1024.0


# --- What PyTorch allocates -------------------------------------------------------------------

# The step these scripts measure in PyTorch: forward and backward, no optimizer, the weight gradients
# kept between steps (the remat commands default to PyTorch 2's AdamW step, docs/memory-model.md 11).
STEP = ["--optimizer", "none", "--grads", "in-place"]


def _top_op(parents):
    """The op call an allocation happens in: a forward op called by the module, or one autograd
    node's evaluation in the backward (under the remat::backward marker)."""
    outer = [p for p in parents if not p.name.startswith("remat::")]
    return (outer[0].start_time_ns, outer[0].name) if outer else None


def _walk(node, parents, out):
    fields = node.extra_fields
    if type(fields).__name__.endswith("Allocation"):
        op = next((p.name for p in reversed(parents) if p.name and p.name != "[memory]"), "?")
        out.append((node.start_time_ns, fields.ptr, fields.alloc_size, op, _top_op(parents)))
    for child in node.children:
        _walk(child, parents + [node], out)


def _allocations(prof):
    events = []
    for root in prof.profiler.kineto_results.experimental_event_tree():
        _walk(root, [], events)
    events.sort(key=lambda e: e[0])
    return events


def _marker_time(prof, name):
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.name == name:
            return node.start_time_ns
        stack.extend(node.children)
    raise RuntimeError("no profiler event named " + name)


def measure_step(model, x, target):
    """Activation bytes of one training step: the peak, the op at the peak, the bytes kept when
    backward starts, and the peak without the ops' scratch (buffers an op call allocates and frees
    itself: oneDNN's reordered weights and blocked outputs, a batch norm's temporaries), which is
    what the model's E is with no workspaces (wf = wb = 0; section 10 of docs/memory-model.md)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    model.train()

    def step():
        loss = F.cross_entropy(model(x), target)
        with record_function("remat::backward"):
            loss.backward()

    step()  # warm-up: oneDNN's primitive caches, lazily made buffers
    model.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    grads = {p.grad.data_ptr() for p in model.parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    events = _allocations(prof)
    backward_ns = _marker_time(prof, "remat::backward")

    # Pair each allocation with its free. An allocation never freed in the step whose address is a
    # .grad is a parameter gradient (static in the model); one freed in the op call that made it is
    # scratch.
    open_alloc, grad_events, scratch_events = {}, set(), set()
    for i, (_, ptr, size, _, top) in enumerate(events):
        if size > 0:
            open_alloc[ptr] = i
        elif ptr in open_alloc:
            j = open_alloc.pop(ptr)
            if top is not None and events[j][4] == top:
                scratch_events.add(j)
    grad_events = {i for ptr, i in open_alloc.items() if ptr in grads}

    def peak_of(skip):
        live, sizes, peak, peak_op, kept = 0, {}, 0, "", None
        for i, (t, ptr, size, op, _) in enumerate(events):
            if kept is None and t >= backward_ns:
                kept = live
            if i in skip:
                continue
            if size > 0:
                sizes[ptr] = size
                live += size
                if live > peak:
                    peak, peak_op = live, op
            elif ptr in sizes:
                live -= sizes.pop(ptr)
        return peak, peak_op, (kept if kept is not None else live)

    peak, peak_op, kept = peak_of(grad_events)
    no_scratch, no_scratch_op, _ = peak_of(grad_events | scratch_events)
    return {"peak": peak, "peak_op": peak_op, "kept": kept, "peak_no_scratch": no_scratch,
            "peak_no_scratch_op": no_scratch_op}


# --- What remat predicts ----------------------------------------------------------------------


def remat_simulate(remat, chain):
    """chain: a remat-chain/1 dict, or the arguments of `remat zoo export` for a zoo model."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "chain.json")
        if isinstance(chain, dict):
            with open(path, "w") as f:
                json.dump(chain, f)
        else:
            made = subprocess.run([remat, "zoo", "export", *chain, "-o", path], capture_output=True, text=True)
            if made.returncode != 0:
                raise RuntimeError("remat zoo export failed: " + made.stderr.strip())
        run = subprocess.run([remat, "simulate", path, "--checkpoints", "", "--json", *STEP], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("remat simulate failed: " + run.stderr.strip())
    sim = json.loads(run.stdout)
    last_forward = max(i for i, op in enumerate(sim["ops"]) if op["op"] == "F")
    return {"E": sim["dynamic_peak_bytes"], "kept": sim["ops"][last_forward]["live_after_bytes"]}


# --- The cases ----------------------------------------------------------------------------------

BATCH, RES, CLASSES = 8, 128, 10


def conv(cin, cout, k=3, s=1, groups=1):
    return nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False)


def c_conv(cout, k=3, s=1, groups=1):
    return {"kind": "conv2d", "out_channels": cout, "kernel": k, "stride": s, "padding": (k - 1) // 2,
            "groups": groups, "bias": False}


def head(cin, spatial):
    """Every sequence but the linear one ends in a 1x1 conv (stride 8) and a linear layer: the conv
    keeps its input in every PyTorch version, as the model says. (A global average pooling would
    not do: PyTorch up to 2.1 keeps a mean's input, 2.2 and later do not; memory-model.md 5.1.)"""
    out = -(-spatial // 8)
    return [nn.Conv2d(cin, CLASSES, 1, 8), nn.Flatten(), nn.Linear(CLASSES * out * out, CLASSES)], [
        {"kind": "conv2d", "out_channels": CLASSES, "kernel": 1, "stride": 8}, {"kind": "flatten"},
        {"kind": "linear", "out_features": CLASSES}]


def sequences():
    """(name, input shape, PyTorch modules, remat chain layers); the head is added to each."""
    import torchvision.models.mobilenetv2 as mv2
    import torchvision.models.resnet as rn

    K = lambda kind, **kw: dict(kind=kind, **kw)  # noqa: E731
    bb = lambda cin, cout, s: rn.BasicBlock(  # noqa: E731
        cin, cout, s, None if s == 1 and cin == cout else nn.Sequential(conv(cin, cout, 1, s), nn.BatchNorm2d(cout)))
    return [
        ("conv-BN-ReLU(inplace)", 3, [conv(3, 64), nn.BatchNorm2d(64), nn.ReLU(True)],
         [c_conv(64), K("batchnorm"), K("relu")], 64),
        ("conv-ReLU(inplace)-MaxPool 2/2", 3, [conv(3, 64), nn.ReLU(True), nn.MaxPool2d(2)],
         [c_conv(64), K("relu"), K("maxpool", kernel=2)], 64),
        ("conv-BN-ReLU-MaxPool 3/2/1 (ResNet stem)", 3, [conv(3, 64, 7, 2), nn.BatchNorm2d(64), nn.ReLU(True),
                                                          nn.MaxPool2d(3, 2, 1)],
         [c_conv(64, 7, 2), K("batchnorm"), K("relu"), K("maxpool", kernel=3, stride=2, padding=1)], 64),
        ("conv-BN-ReLU6(inplace)", 3, [conv(3, 64), nn.BatchNorm2d(64), nn.ReLU6(True)],
         [c_conv(64), K("batchnorm"), K("relu6")], 64),
        ("conv-depthwise-BN-ReLU6(inplace)", 3, [conv(3, 64), conv(64, 64, groups=64), nn.BatchNorm2d(64),
                                                 nn.ReLU6(True)],
         [c_conv(64), c_conv(64, groups=64), K("batchnorm"), K("relu6")], 64),
        ("conv-ReLU(inplace)-AdaptiveAvgPool 7", 3, [conv(3, 64, 3, 8), nn.ReLU(True), nn.AdaptiveAvgPool2d(7)],
         [c_conv(64, 3, 8), K("relu"), K("adaptive_avgpool", output_height=7, output_width=7)], 64),
        ("conv-ReLU-flatten-linear-ReLU-dropout-linear", 3,
         [conv(3, 16, 3, 4), nn.ReLU(True), nn.Flatten(), nn.Linear(16 * 32 * 32, 512), nn.ReLU(True),
          nn.Dropout(0.5), nn.Linear(512, CLASSES)],
         [c_conv(16, 3, 4), K("relu"), K("flatten"), K("linear", out_features=512), K("relu"), K("dropout", p=0.5),
          K("linear", out_features=CLASSES)], None),
        ("conv-ReLU-flatten-linear-LayerNorm-GELU-linear-LayerNorm-SiLU-linear", 3,
         [conv(3, 16, 3, 4), nn.ReLU(True), nn.Flatten(), nn.Linear(16 * 32 * 32, 1024), nn.LayerNorm(1024),
          nn.GELU(), nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.SiLU(), nn.Linear(1024, CLASSES)],
         [c_conv(16, 3, 4), K("relu"), K("flatten"), K("linear", out_features=1024), K("layernorm"), K("gelu"),
          K("linear", out_features=1024), K("layernorm"), K("silu"), K("linear", out_features=CLASSES)], None),
        ("stem + basic block (residual add)", 3, [conv(3, 64), nn.BatchNorm2d(64), nn.ReLU(True), bb(64, 64, 1)],
         [c_conv(64), K("batchnorm"), K("relu"), K("basic_block", out_channels=64)], 64),
        ("stem + basic block, downsample", 3, [conv(3, 64), nn.BatchNorm2d(64), nn.ReLU(True), bb(64, 128, 2)],
         [c_conv(64), K("batchnorm"), K("relu"), K("basic_block", out_channels=128, stride=2)], 128),
        ("stem + inverted residual t=6", 3, [conv(3, 32, 3, 2), nn.BatchNorm2d(32), nn.ReLU6(True),
                                             mv2.InvertedResidual(32, 32, 1, 6)],
         [c_conv(32, 3, 2), K("batchnorm"), K("relu6"), K("inverted_residual", out_channels=32, expand_ratio=6)],
         32),
    ]


def sequence_cases():
    cases = []
    for name, cin, modules, layers, cout in sequences():
        if cout is not None:  # None: the sequence brings its own classifier
            with torch.no_grad():
                spatial = nn.Sequential(*modules)(torch.zeros(1, cin, RES, RES)).shape[-1]
            hmods, hlayers = head(cout, spatial)
            modules, layers = modules + hmods, layers + hlayers
        chain = {"format": "remat-chain/1", "name": name,
                 "input": {"shape": [BATCH, cin, RES, RES]}, "layers": layers}
        cases.append((name, nn.Sequential(*modules), torch.randn(BATCH, cin, RES, RES), CLASSES, chain))
    return cases


ZOO = ["alexnet", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn",
       "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "mobilenet_v2", "efficientnet_b0",
       "mobilenet_v3_large", "regnet_y_400mf", "shufflenet_v2_x1_0"]


def zoo_case(name):
    """The model is made when the case runs (lambda): fifteen at once would take gigabytes."""
    import torchvision

    args = [name, "--batch", str(BATCH), "--resolution", str(RES)]
    return (name, lambda: getattr(torchvision.models, name)(num_classes=1000), torch.randn(BATCH, 3, RES, RES), 1000,
            args)


# Models the zoo does not build: measured against the import of their own training-mode export.
ONNX = {"googlenet": dict(weights=None, aux_logits=False, init_weights=True),
        "inception_v3": dict(weights=None, aux_logits=False, init_weights=False)}


def onnx_case(name, remat):
    """The model, and its chain as `remat import` writes it from torch's training-mode export."""
    import warnings

    import torchvision

    def make():
        torch.manual_seed(0)
        return getattr(torchvision.models, name)(**ONNX[name])

    x = torch.randn(BATCH, 3, RES, RES)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name + ".onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(make().train(), x, path, opset_version=13, export_params=False,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=["input"], output_names=["logits"])
        made = subprocess.run([remat, "import", path], capture_output=True, text=True)
    if made.returncode != 0:
        raise RuntimeError("remat import failed: " + made.stderr.strip())
    return (name, make, x, 1000, json.loads(made.stdout))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--remat", default="build/dev/app/cli/remat", help="the remat CLI (the model after)")
    ap.add_argument("--remat-before", help="a second remat CLI: its E is printed as 'before'")
    ap.add_argument("--zoo", action="store_true", help="the zoo's models too (slow: minutes on one core)")
    ap.add_argument("--onnx", action="store_true", help="the models the zoo lacks (GoogLeNet, Inception-v3), from their exports")
    ap.add_argument("--only", action="append", help="only cases whose name contains this (repeatable)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--torch-cache", help="a JSON file of PyTorch's measurements by case name: read, and "
                    "written with the new ones (PyTorch's side does not change when the model does)")
    ap.add_argument("--torch-only", action="store_true", help="measure PyTorch only (fills --torch-cache)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    cases = sequence_cases()
    if args.zoo:
        cases += [zoo_case(n) for n in ZOO]
    if args.onnx:
        cases += [onnx_case(n, args.remat) for n in ONNX]
    if args.only:
        cases = [c for c in cases if any(o in c[0] for o in args.only)]
    cache = {}
    if args.torch_cache and os.path.exists(args.torch_cache):
        with open(args.torch_cache) as f:
            cache = json.load(f)
    rows = []
    print("| case | PyTorch peak | PyTorch peak, no op scratch | PyTorch kept | ours before: E | ours after: E "
          "| ours after: kept | after / no-scratch peak | after / peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, model, x, classes, chain in cases:
        target = torch.randint(0, classes, (x.shape[0],))
        if name not in cache:
            made = model() if callable(model) and not isinstance(model, nn.Module) else model
            cache[name] = measure_step(made, x, target)
            if args.torch_cache:
                with open(args.torch_cache, "w") as f:
                    json.dump(cache, f, indent=1)
        t = cache[name]
        if args.torch_only:
            print("| %s | %.2f | %.2f | %.2f |" % (name, t["peak"] / MiB, t["peak_no_scratch"] / MiB, t["kept"] / MiB),
                  flush=True)
            continue
        after = remat_simulate(args.remat, chain)
        before = remat_simulate(args.remat_before, chain) if args.remat_before else None
        rows.append({"name": name, "torch": t, "ours_E": after["E"], "ours_kept": after["kept"],
                     "before_E": before["E"] if before else None})
        print("| %s | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.3f | %.3f |" % (
            name, t["peak"] / MiB, t["peak_no_scratch"] / MiB, t["kept"] / MiB,
            "%.2f" % (before["E"] / MiB) if before else "-", after["E"] / MiB, after["kept"] / MiB,
            after["E"] / t["peak_no_scratch"], after["E"] / t["peak"]), flush=True)
        print("  PyTorch's peak in %s; without op scratch in %s" % (t["peak_op"], t["peak_no_scratch_op"]),
              file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
