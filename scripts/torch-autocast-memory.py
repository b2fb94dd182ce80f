#!/usr/bin/python3
"""Mixed precision against the memory model (docs/memory-model.md section 11.7): one training step of
a small CNN under PyTorch's CPU memory profiler, float32 and under torch.autocast('cpu',
dtype=torch.bfloat16), with the activation bytes counted as scripts/torch-op-memory.py counts them
(its measure_step: allocations of the step less the parameter gradients; with and without the ops'
own scratch), and the allocations still alive when backward starts listed by the op that made them,
so that autocast's weight copies and input casts can be seen. With --remat it puts remat's store-all
E of the same chain beside PyTorch's peak (`remat simulate --precision fp32|bf16-mixed`; the chain is
tests/data/autocast_cnn.json at batch 8, 32x32) and exits 1 when they differ by more than the loss's
bytes (--tolerance, 1 KiB).

    /usr/bin/python3 scripts/torch-autocast-memory.py [--batch 8] [--resolution 32] [--remat build/dev/app/cli/remat]
        [--model cnn|resnet18|resnet50|efficientnet_b0]

One thread, batch 8, 32x32 unless told. PyTorch 1.13's CPU autocast knows bfloat16 only. --model
resnet18 / resnet50 measures torchvision's ResNet (10 classes) instead of the small CNN, against
`remat zoo export resnetNN --classes 10` (residual blocks under autocast: every inner conv's half
weight copy saved, batch norms in bfloat16 with float32 statistics, the add in bfloat16);
--model efficientnet_b0 the same for EfficientNet-B0 (Squeeze-and-Excitation: pool, product, SiLU and
sigmoid in bfloat16 after the half convolutions).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("torch_op_memory", os.path.join(HERE, "torch-op-memory.py"))
tom = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tom)


# The step this script measures in PyTorch: forward and backward, no optimizer, the weight gradients
# kept between steps (the remat commands default to PyTorch 2's AdamW step, docs/memory-model.md 11).
STEP = ["--optimizer", "none", "--grads", "in-place"]

def model(classes):
    """conv-BN-ReLU, conv-BN-ReLU, maxpool 2, conv 1x1 stride 8, flatten, linear: the chain
    tests/data/autocast_cnn.json describes (no biases but the linear's)."""
    return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, classes, 1, 8), nn.Flatten(), nn.LazyLinear(classes))


def chain_json(batch, resolution, classes):
    """The chain of model(): tests/data/autocast_cnn.json at other shapes."""
    conv = lambda name, out, k, s, p, bias: {"kind": "conv2d", "name": name, "out_channels": out, "kernel": k,  # noqa
                                             "stride": s, "padding": p, "bias": bias}
    return {"format": "remat-chain/1", "name": "autocast_cnn",
            "input": {"shape": [batch, 3, resolution, resolution], "dtype": "float32"},
            "layers": [conv("c1", 16, 3, 1, 1, False), {"kind": "batchnorm", "name": "bn1"},
                       {"kind": "relu", "name": "r1"}, conv("c2", 32, 3, 1, 1, False),
                       {"kind": "batchnorm", "name": "bn2"}, {"kind": "relu", "name": "r2"},
                       {"kind": "maxpool", "name": "p", "kernel": 2, "stride": 2}, conv("head", classes, 1, 8, 0, True),
                       {"kind": "flatten", "name": "f"}, {"kind": "linear", "name": "fc", "out_features": classes}]}


def remat_e(remat, chain, precision):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "chain.json")
        if isinstance(chain, dict):
            with open(path, "w") as f:
                json.dump(chain, f)
        else:  # ("resnet18", batch, resolution, classes): the zoo's chain
            name, batch, resolution, classes = chain
            subprocess.run([remat, "zoo", "export", name, "--batch", str(batch), "--resolution", str(resolution),
                            "--classes", str(classes), "--output", path], check=True, capture_output=True)
        run = subprocess.run([remat, "simulate", path, "--checkpoints", "", "--precision", precision, "--json", *STEP],
                             capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("remat simulate failed: " + run.stderr.strip())
    return json.loads(run.stdout)["dynamic_peak_bytes"]


def kept_at_backward(net, x, target, autocast):
    """Allocations made in the forward (and loss) and still alive when backward starts, by op."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = net(x)
        loss = F.cross_entropy(out.float(), target)
        with record_function("remat::backward"):
            loss.backward()
    net.zero_grad(set_to_none=True)
    events = tom._allocations(prof)
    backward_ns = tom._marker_time(prof, "remat::backward")
    live = {}
    for t, ptr, size, op, _ in events:
        if t >= backward_ns:
            break
        if size > 0:
            live[ptr] = (size, op)
        else:
            live.pop(ptr, None)
    return sorted(live.values(), key=lambda v: -v[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--remat", help="the remat binary: compare its E with PyTorch's peak")
    parser.add_argument("--tolerance", type=int, default=1024, help="bytes (the loss's, which the model leaves out)")
    parser.add_argument("--model", default="cnn", choices=["cnn", "resnet18", "resnet50", "efficientnet_b0"])
    args = parser.parse_args()
    failed = 0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    classes = 10
    x = torch.randn(args.batch, 3, args.resolution, args.resolution)
    target = torch.randint(0, classes, (args.batch,))
    if args.model == "cnn":
        net = model(classes)
        net(x)  # materialises the lazy linear
        chain = chain_json(args.batch, args.resolution, classes)
    else:
        import torchvision
        net = getattr(torchvision.models, args.model)(num_classes=classes)
        chain = (args.model, args.batch, args.resolution, classes)
    for autocast in (False, True):
        name = "bf16 autocast" if autocast else "float32"
        original = net.forward

        def forward(inp, _orig=original, _ac=autocast):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=_ac):
                return _orig(inp).float()

        net.forward = forward
        step = tom.measure_step(net, x, target)
        net.forward = original
        print(f"{name}: peak {step['peak']} B, without scratch {step['peak_no_scratch']} B "
              f"(at {step['peak_no_scratch_op']}), kept when backward starts {step['kept']} B")
        for size, op in kept_at_backward(net, x, target, autocast):
            print(f"    {size:>8} B  {op}")
        if args.remat:
            e = remat_e(args.remat, chain, "bf16-mixed" if autocast else "fp32")
            ok = abs(step["peak_no_scratch"] - e) <= args.tolerance
            failed += not ok
            print(f"{name}: remat E {e} B, PyTorch {step['peak_no_scratch']} B without scratch: "
                  f"{'within' if ok else 'NOT within'} {args.tolerance} B (PyTorch / E = "
                  f"{step['peak_no_scratch'] / e:.4f})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
