#!/usr/bin/python3
"""torchvision's swin_t (or a reduced SwinTransformer of the same class) trained one step under
PyTorch's CPU memory profiler, against remat's store-all prediction of the zoo's chain
(docs/memory-model.md section 12.7).

    /usr/bin/python3 scripts/torch-swin-memory.py --remat build/dev/app/cli/remat [--batch 2] [--resolution 224]
        [--embed-dim 96] [--per-layer] [--check]

It uses torch-op-memory.py's recorder (every allocation and free of the step; the parameter
gradients left out, as the model counts them static). One thread, float32. --per-layer runs each
chain layer alone as well, against `remat simulate` of that one layer. With --embed-dim other than 96 the chain is `remat zoo export swin_t` with every width
scaled (a reduced model, built from torchvision's own class).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, record_function

try:
    import torchvision
    from torchvision.models.swin_transformer import SwinTransformer
except ImportError:  # ctest's skip code: no torchvision, nothing to check against
    print("torchvision is not installed", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("torch_op_memory", os.path.join(HERE, "torch-op-memory.py"))
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)


def zoo_chain(remat, args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "swin.json")
        made = subprocess.run([remat, "zoo", "export", "swin_t", "--batch", str(args.batch), "--resolution",
                               str(args.resolution), "--classes", str(args.classes), "-o", path],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise RuntimeError("remat zoo export failed: " + made.stderr.strip())
        with open(path) as f:
            chain = json.load(f)
    scale = args.embed_dim / 96.0
    for layer in chain["layers"]:
        for field in ("width", "hidden"):
            if field in layer:
                layer[field] = int(layer[field] * scale)
    return chain


def chain_modules(model):
    """The chain's layers as modules, in order, with the zoo's names."""
    out = [("features.0", model.features[0])]
    for k in range(1, len(model.features)):
        stage = model.features[k]
        if isinstance(stage, torch.nn.Sequential):
            out += [("features.%d.%d" % (k, i), block) for i, block in enumerate(stage)]
        else:
            out.append(("features.%d" % k, stage))
    head = torch.nn.Sequential(model.norm, model.permute, model.avgpool, model.flatten, model.head)
    return out + [("norm+avgpool+head", head)]


def layer_step(module, x):
    """One layer alone: bytes kept when its backward starts, and the most bytes alive beyond them in
    its forward and in its backward (d(l) = ones and d(l-1) included), parameter gradients aside."""
    def step():
        y = module(x)
        with record_function("remat::backward"):
            y.backward(torch.ones_like(y))
    step()
    module.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    grads = {p.grad.data_ptr() for p in module.parameters() if p.grad is not None}
    module.zero_grad(set_to_none=True)
    events, backward_ns = recorder._allocations(prof), recorder._marker_time(prof, "remat::backward")
    never_freed = {}
    for i, (_, ptr, size, _, _) in enumerate(events):
        if size > 0:
            never_freed[ptr] = i
        else:
            never_freed.pop(ptr, None)
    skip = {i for ptr, i in never_freed.items() if ptr in grads}  # a .grad allocated in the step
    live, sizes, kept, forward, backward = 0, {}, None, 0, 0
    for i, (t, ptr, size, _, _) in enumerate(events):
        if kept is None and t >= backward_ns:
            kept = live
        if size > 0 and i not in skip:
            sizes[ptr] = size
            live += size
            forward, backward = (max(forward, live), backward) if kept is None else (forward, max(backward, live))
        elif size < 0 and ptr in sizes:
            live -= sizes.pop(ptr)
    return kept, forward - kept, backward - kept


def per_layer(args, model, chain):
    """Each chain layer alone, PyTorch against `remat simulate` of a one-layer chain: kept, F - kept
    (the model: wf) and B - kept (the model: wb; PyTorch's also holds d(l) and d(l-1))."""
    shape = [args.batch, 3, args.resolution, args.resolution]
    print("%-18s %12s %12s %10s %10s %10s %10s" % ("layer", "kept torch", "kept model", "F torch", "F model",
                                                  "B torch", "B model"))
    for (name, module), layer in zip(chain_modules(model), chain["layers"]):
        x = torch.randn(*shape, requires_grad=name != "features.0")
        kept, forward, backward = layer_step(module, x)
        one = dict(chain, input={"shape": shape, "dtype": "float32"}, layers=[layer])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "one.json")
            with open(path, "w") as f:
                json.dump(one, f)
            sim = json.loads(subprocess.run([args.remat, "simulate", path, "--checkpoints", "", "--json",
                                             *recorder.STEP], capture_output=True, text=True, check=True).stdout)
        ops = {op["op"]: op for op in sim["ops"]}
        model_kept = ops["F"]["live_after_bytes"]
        print("%-18s %12d %12d %10d %10d %10d %10d" % (name, kept, model_kept, forward,
                                                     ops["F"]["footprint_bytes"] - model_kept, backward,
                                                     ops["B"]["footprint_bytes"] - model_kept))
        with torch.no_grad():
            shape = list(module(x).shape)


def build(args):
    if args.embed_dim == 96:
        return torchvision.models.swin_t(num_classes=args.classes)
    return SwinTransformer(patch_size=[4, 4], embed_dim=args.embed_dim, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                           window_size=[7, 7], stochastic_depth_prob=0.2, num_classes=args.classes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--embed-dim", type=int, default=96, help="96 is swin_t; a multiple of 24 (heads 3..24)")
    ap.add_argument("--per-layer", action="store_true", help="also each chain layer alone (memory-model.md 12.7)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless E is within 5%% of the peak and the kept bytes within 1 KiB (ctest)")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = build(args)
    x = torch.randn(args.batch, 3, args.resolution, args.resolution)
    target = torch.randint(0, args.classes, (args.batch,))
    measured = recorder.measure_step(model, x, target)
    chain = zoo_chain(args.remat, args)
    predicted = recorder.remat_simulate(args.remat, chain)
    mib = 1024.0 * 1024.0
    print("torch %s, torchvision %s, SwinTransformer embed_dim %d: batch %d, %dx%d, %d classes" %
          (torch.__version__, torchvision.__version__, args.embed_dim, args.batch, args.resolution, args.resolution,
           args.classes))
    print("parameters: %d" % sum(p.numel() for p in model.parameters()))
    print("PyTorch peak %d B = %.3f MiB (at %s), without op scratch %.3f MiB, kept at backward %d B" %
          (measured["peak"], measured["peak"] / mib, measured["peak_op"], measured["peak_no_scratch"] / mib,
           measured["kept"]))
    print("remat E (store-all) %d B = %.3f MiB, live after F(n) %d B" %
          (predicted["E"], predicted["E"] / mib, predicted["kept"]))
    print("E / PyTorch peak: %.4f; kept: model - PyTorch = %d B" %
          (predicted["E"] / measured["peak"], predicted["kept"] - measured["kept"]))
    if args.per_layer:
        per_layer(args, model, chain)
    print(json.dumps({"measured": measured, "predicted": predicted}))
    if args.check and (abs(predicted["E"] / measured["peak"] - 1.0) > 0.05 or
                       abs(predicted["kept"] - measured["kept"]) > 1024):
        print("FAILED: the model is off by more than 5% (peak) or 1 KiB (kept)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
