#!/usr/bin/env python3
"""PyTorch's side of the GPU check: the same torchvision models as nn.Sequential chains (one module
per chain layer, residual blocks whole), trained one step at a time with everything stored and with
torch.utils.checkpoint.checkpoint_sequential for every segment count K (use_reentrant=False).

Peak = torch.cuda.max_memory_allocated() during the step minus what was allocated before it (the
weights, the input batch and the labels), so the weight gradients and everything the step
allocates are counted. With --ours (remat_gpu_check's JSON) it prints our numbers beside PyTorch's
on the same footing: the pool's used high-water mark minus our input batch, weights and labels.

  torch_baseline.py [--models vgg16,resnet50] [--batch 64] [--resolution 224] [--steps 3]
                    [--ours FILE] [--json FILE] [--nondeterministic] [--tf32] [--no-inplace]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torchvision
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

MIB = 1024.0 * 1024.0


def sequential(name, num_classes, inplace):
    model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    if name.startswith("vgg") or name == "alexnet":
        modules = [*model.features, model.avgpool, nn.Flatten(1), *model.classifier]
    elif name.startswith("resnet"):
        modules = [model.conv1, model.bn1, model.relu, model.maxpool, *model.layer1, *model.layer2,
                   *model.layer3, *model.layer4, model.avgpool, nn.Flatten(1), model.fc]
    else:
        raise SystemExit(f"torch_baseline.py: no Sequential form for {name}")
    seq = nn.Sequential(*modules)
    if not inplace:
        for m in seq.modules():
            if isinstance(m, nn.ReLU):
                m.inplace = False
    return seq


def measure(model, x, y, segments, steps):
    """(peak bytes, median step ms) of store-all (segments 0) or checkpoint_sequential(segments)."""
    loss_fn = nn.CrossEntropyLoss()

    def step():
        model.zero_grad(set_to_none=True)
        if segments == 0:
            out = model(x)
        else:
            out = checkpoint_sequential(model, segments, x, use_reentrant=False)
        loss_fn(out, y).backward()

    step()  # warm-up: cuDNN's algorithm choice, cuBLAS's workspace, the allocator's segments
    torch.cuda.synchronize()
    peaks, times = [], []
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(1000.0 * (time.perf_counter() - start))
        peaks.append(torch.cuda.max_memory_allocated() - before)
    model.zero_grad(set_to_none=True)
    return max(peaks), statistics.median(times)


def run_model(name, args):
    torch.manual_seed(0)
    model = sequential(name, 1000, not args.no_inplace).cuda().train()
    x = torch.randn(args.batch, 3, args.resolution, args.resolution, device="cuda")
    y = torch.randint(0, 1000, (args.batch,), device="cuda")
    rows = []
    n = len(model)
    for segments in [0] + list(range(1, n + 1)):
        label = "store-all" if segments == 0 else f"checkpoint_sequential K={segments}"
        try:
            peak, ms = measure(model, x, y, segments, args.steps)
            rows.append({"segments": segments, "peak_bytes": peak, "step_ms": ms})
        except Exception as error:  # one K failing (OOM, an in-place conflict) must not hide the rest
            rows.append({"segments": segments, "error": str(error).splitlines()[0]})
            torch.cuda.empty_cache()
            print(f"  {name} {label}: failed: {rows[-1]['error']}", file=sys.stderr)
    del model, x, y
    torch.cuda.empty_cache()
    return {"model": name, "modules": n, "rows": rows}


def ours_for(ours, name):
    if not ours:
        return None
    for m in ours.get("models", []):
        if m["model"] == name:
            return m
    return None


def report(result, ours, args):
    name = result["model"]
    ok = [r for r in result["rows"] if "error" not in r]
    store = next((r for r in ok if r["segments"] == 0), None)
    ckpt = [r for r in ok if r["segments"] > 0]
    best = min(ckpt, key=lambda r: r["peak_bytes"]) if ckpt else None
    print(f"\nPyTorch {torch.__version__} on {name}, batch {args.batch}, {args.resolution}x{args.resolution}, float32"
          f" ({result['modules']} modules; cudnn.deterministic={not args.nondeterministic}, tf32={args.tf32})")
    if store:
        print(f"  store-all                       peak {store['peak_bytes'] / MIB:10.1f} MiB   step {store['step_ms']:8.2f} ms")
    if best:
        print(f"  best checkpoint_sequential K={best['segments']:<3d} peak {best['peak_bytes'] / MIB:10.1f} MiB   "
              f"step {best['step_ms']:8.2f} ms")
    mine = ours_for(ours, name)
    verdicts = []
    if mine:
        held = mine["input_bytes"] + mine["param_bytes"]
        print("  ours, like for like (pool used high-water - input - weights - labels):")
        plans = {p["planner"]: p for p in mine["plans"] if "error" not in p}
        for planner, p in plans.items():
            comparable = p["pool_used_high_bytes"] - held - p["label_bytes"]
            ratio_best = f"{comparable / best['peak_bytes']:.3f}x torch best" if best else ""
            ratio_store = f"{comparable / store['peak_bytes']:.3f}x torch store-all" if store else ""
            print(f"    {planner:<12s} peak {comparable / MIB:10.1f} MiB   step {p['step_ms']:8.2f} ms   "
                  f"{ratio_best}   {ratio_store}")
        within = all(abs(p["error_percent"]) <= 2.0 for p in plans.values())
        verdicts.append(("measured within 2% of predicted, every plan", within))
        if "optimal" in plans and best and name == "vgg16":
            comparable = plans["optimal"]["pool_used_high_bytes"] - held - plans["optimal"]["label_bytes"]
            verdicts.append(("optimal <= 0.70x PyTorch's best checkpoint_sequential (vgg16)",
                             comparable <= 0.70 * best["peak_bytes"]))
        if "none" in plans and store:
            verdicts.append(("our store-all step time <= 1.1x PyTorch's",
                             plans["none"]["step_ms"] <= 1.1 * store["step_ms"]))
    for text, passed in verdicts:
        print(f"  [{'PASS' if passed else 'FAIL'}] {text}")
    return verdicts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="vgg16,resnet50")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--ours", help="remat_gpu_check's --json output")
    parser.add_argument("--json", help="write PyTorch's measurements here")
    parser.add_argument("--nondeterministic", action="store_true")
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--no-inplace", action="store_true", help="turn torchvision's in-place ReLUs off")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_baseline.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = not args.nondeterministic
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    ours = None
    if args.ours:
        with open(args.ours) as f:
            ours = json.load(f)
    results, failed = [], False
    for name in [m for m in args.models.split(",") if m]:
        result = run_model(name, args)
        results.append(result)
        for _, passed in report(result, ours, args):
            failed = failed or not passed
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__,
                       "device": torch.cuda.get_device_name(), "models": results}, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
