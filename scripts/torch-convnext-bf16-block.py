#!/usr/bin/python3
"""One torchvision CNBlock with PyTorch 2's CPU autocast dtypes forced by hand, on PyTorch 1.13.

docs/memory-model.md section 11.7 ("ConvNeXt's blocks under autocast"). Debian's PyTorch 1.13
cannot run a CNBlock under torch.autocast('cpu', dtype=torch.bfloat16): its CPU layer_norm has no
mixed-type kernel (a bfloat16 input with float32 weights fails). PyTorch 2 has one, and puts
neither layer_norm nor mul on a CPU autocast list. This script makes the casts autocast would make
(x(l-1) and the conv / linear weights to bfloat16) by hand, runs the rest as PyTorch does, and
records with saved_tensors_hooks what autograd saves for the backward: dtype and bytes of each
saved activation (parameters, which cost no activation bytes, are listed apart). Checked: the
product layer_scale * y is float32 (type promotion of a bfloat16 tensor and a float32 [C, 1, 1]
parameter, real 1.13 behaviour), so is the block's output, and the saved activations are the
model's: the input's bfloat16 cast, the three weight copies, and the bfloat16 inner tensors.

What 1.13 cannot show: PyTorch 2's mixed-type layer_norm keeps float32 mean and rstd and reads
the float32 weight and bias directly; here the layer norm runs on bfloat16 weights (one more
bfloat16 copy each, listed as "ln weight copy") and keeps bfloat16 statistics. The script reports
the sum with the statistics counted as float32 and without the layer norm's weight copies, which
is what the model predicts (E of the block under bf16-mixed). With --remat, the same block as a
one-layer chain (float32 input) goes through `remat simulate --precision bf16-mixed`, and its E (the
live bytes after F(1) less x(1)) must equal that sum, up to the block layout's alignment of each
saved tensor to 256 B (memory-model.md section 6; none at the default shape), or exit 1.

Usage: /usr/bin/python3 scripts/torch-convnext-bf16-block.py [--channels 96 --size 8 --batch 2]
           [--remat build/dev/app/cli/remat]
"""
import argparse
import json
import os
import subprocess
import tempfile

import torch
import torch.nn.functional as F


def cn_block_chain(c, size, batch):
    def conv(name, out, kernel, groups, source):
        return {"name": name, "kind": "conv2d", "out_channels": out, "kernel": kernel, "padding": kernel // 2,
                "groups": groups, "bias": True, "inputs": [source]}

    ops = [conv("block.0", c, 7, c, 0), {"name": "block.2", "kind": "layernorm", "epsilon": 1e-6, "inputs": [1]},
           conv("block.3", 4 * c, 1, 1, 2), {"name": "block.4", "kind": "gelu", "inputs": [3]},
           conv("block.5", c, 1, 1, 4), {"name": "layer_scale", "kind": "layer_scale", "inputs": [5]},
           {"name": "add", "kind": "add", "inputs": [6, 0]}]
    return {"format": "remat-chain/1", "name": "cnblock", "input": {"shape": [batch, c, size, size], "dtype": "float32"},
            "layers": [{"name": "features.1.0", "kind": "block", "ops": ops}]}


def remat_block_e(remat, c, size, batch):
    """The block's E under bf16-mixed: live bytes after F(1) less its float32 output."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cnblock.json")
        with open(path, "w") as f:
            json.dump(cn_block_chain(c, size, batch), f)
        out = subprocess.run([remat, "simulate", path, "--checkpoints", "", "--precision", "bf16-mixed", "--optimizer",
                              "none", "--grads", "static", "--json"], capture_output=True, text=True, check=True)
    first = next(op for op in json.loads(out.stdout)["ops"] if op["op"] == "F" and op["layer"] == 1)
    return first["live_after_bytes"] - batch * c * size * size * 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, default=96)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--remat", help="the remat binary: compare its E of the block")
    args = parser.parse_args()
    torch.manual_seed(0)
    c, bf16 = args.channels, torch.bfloat16
    dw = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
    ln = torch.nn.LayerNorm(c, eps=1e-6)
    l1, l2 = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)
    gamma = torch.nn.Parameter(torch.full((c, 1, 1), 1e-6))
    params = {p.data_ptr() for m in (dw, ln, l1, l2) for p in m.parameters()} | {gamma.data_ptr()}
    x = torch.randn(args.batch, c, args.size, args.size, requires_grad=True)  # float32 x(l-1)
    saved, names = [], {}

    def pack(t):
        kind = "parameter" if t.data_ptr() in params or t.data_ptr() == x.data_ptr() else names.get(t.data_ptr(), "?")
        saved.append((kind, t.dtype, t.numel() * t.element_size()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        xc = x.to(bf16)  # autocast's cast of the float32 input, for the depthwise conv
        names[xc.data_ptr()] = "input cast"
        w = dw.weight.to(bf16)
        names[w.data_ptr()] = "dwconv weight copy"
        t1 = F.conv2d(xc, w, dw.bias.to(bf16), padding=3, groups=c)
        names[t1.data_ptr()] = "dwconv output"
        lw, lb = ln.weight.to(bf16), ln.bias.to(bf16)  # 1.13 only: PyTorch 2 reads the float32 ones
        names[lw.data_ptr()] = names[lb.data_ptr()] = "ln weight copy"
        t2 = F.layer_norm(t1.permute(0, 2, 3, 1), (c,), lw, lb, 1e-6)
        names[t2.data_ptr()] = "layer norm output"
        w1 = l1.weight.to(bf16)
        names[w1.data_ptr()] = "linear1 weight copy"
        t3 = F.linear(t2, w1, l1.bias.to(bf16))
        names[t3.data_ptr()] = "linear1 output"
        t4 = F.gelu(t3)
        names[t4.data_ptr()] = "gelu output"
        w2 = l2.weight.to(bf16)
        names[w2.data_ptr()] = "linear2 weight copy"
        t5 = F.linear(t4, w2, l2.bias.to(bf16)).permute(0, 3, 1, 2)
        names[t5.data_ptr()] = "linear2 output"
        t6 = gamma * t5  # mul: on no autocast list, type promotion
        out = t6 + x
    print(f"PyTorch {torch.__version__}: layer_scale * y is {t6.dtype}, the block's output {out.dtype}")
    assert t6.dtype == torch.float32 and out.dtype == torch.float32
    model_bytes, slots = 0, 0
    for kind, dtype, nbytes in saved:
        if kind == "?" and dtype == bf16 and nbytes == args.batch * args.size * args.size * 2:
            kind = "layer norm statistic (bfloat16 here, float32 in PyTorch 2)"
            nbytes *= 2
        print(f"  {kind:58s} {str(dtype):15s} {nbytes:>10,} B")
        if kind not in ("parameter", "ln weight copy"):
            model_bytes += nbytes
            slots += 1
    print(f"saved activations as PyTorch 2 keeps them (the model's E of the block): {model_bytes:,} B")
    out.sum().backward()
    if args.remat:
        predicted = remat_block_e(args.remat, c, args.size, args.batch)
        aligned = 0 <= predicted - model_bytes <= 256 * slots
        verdict = "equal" if predicted == model_bytes else "within the layout's alignment" if aligned else "DIFFERENT"
        print(f"remat E of the block under bf16-mixed: {predicted:,} B: {verdict}")
        if not aligned:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
