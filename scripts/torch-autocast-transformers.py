#!/usr/bin/python3
"""The transformer kinds under bf16-mixed against PyTorch 1.13's CPU autocast (docs/memory-model.md
12.10): one training step of the small GPT of scripts/torch-transformer-memory.py (nanoGPT's modules,
math attention, tied head) and of a small torchvision ViT, float32 and under
torch.autocast('cpu', dtype=torch.bfloat16), under PyTorch's CPU memory profiler (torch-op-memory.py's
measure_step: the step's allocations less the parameter gradients; the peak without the ops' own
scratch), against remat's store-all E of the same chain (`remat simulate --precision fp32|bf16-mixed
--optimizer none --grads in-place`). It prints measured / predicted and exits 1 when the bytes alive
when the backward starts (what autocast saved) differ from the model's live-after-F(n) by more than
--kept-tolerance (the causal masks' S^2 bytes per block, which the model leaves out), or when the
peak ratio leaves [--low, 1.0]: the model must stay an upper bound. At batch 2 the GPT's ratio is
0.94 in float32 as under autocast (memory-model.md 12.10: the head's backward counted at once).

    /usr/bin/python3 scripts/torch-autocast-transformers.py --remat build/dev/app/cli/remat [--models gpt,vit]
        [--batch 2] [--sequence 128] [--resolution 64]

One thread. The loss (cross entropy) runs on the float32 cast of the logits, as autocast's fp32 list
runs cross_entropy_loss; the forward's output is cast with .float() inside the wrapper, which is the
same ToCopy.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torchvision  # noqa: F401  (the ViTs)
except ImportError:  # ctest's skip code: no PyTorch, nothing to check against
    print("torch-autocast-transformers: PyTorch and torchvision are needed; skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tom = _load("torch_op_memory", "torch-op-memory.py")
gptmod = _load("torch_transformer_memory", "torch-transformer-memory.py")
STEP = ["--optimizer", "none", "--grads", "in-place"]


def gpt_case(args):
    ns = argparse.Namespace(batch=args.batch, sequence=args.sequence, vocab=1000, width=256, heads=4, layers=4,
                            dropout=0.0)
    net = gptmod.GPT(ns.vocab, ns.sequence, ns.width, ns.heads, ns.layers, 0.0)
    x = torch.randint(0, ns.vocab, (ns.batch, ns.sequence))
    target = torch.randint(0, ns.vocab, (ns.batch * ns.sequence,))
    return "small GPT (4 layers, d 256, seq %d, batch %d, math)" % (ns.sequence, ns.batch), net, x, target, gptmod.chain(ns)


def vit_case(args):
    import torchvision

    res, patch, layers, d, heads, mlp, classes = args.resolution, 16, 4, 192, 3, 768, 10
    net = torchvision.models.VisionTransformer(res, patch, layers, heads, d, mlp, num_classes=classes)
    x = torch.randn(args.batch, 3, res, res)
    target = torch.randint(0, classes, (args.batch,))
    block = {"kind": "transformer_block", "heads": heads, "hidden": mlp, "pre_norm": True, "fused_attention": False,
             "p": 0.0, "epsilon": 1e-6}
    chain = {"format": "remat-chain/1", "name": "small-vit",
             "input": {"shape": [args.batch, 3, res, res], "dtype": "float32"},
             "layers": [{"name": "patch", "kind": "patch_embedding", "patch": patch, "width": d, "p": 0.0}]
             + [dict(block, name="encoder.%d" % i) for i in range(layers)]
             + [{"name": "head", "kind": "cls_head", "out_features": classes, "epsilon": 1e-6}]}
    return "small ViT (%dx%d, patch 16, 4 layers, d 192, batch %d)" % (res, res, args.batch), net, x, target, chain


def vit_b_16_case(args):
    """torchvision's vit_b_16 at --resolution against the zoo's (math attention, as 1.13 runs it)."""
    import torchvision

    net = torchvision.models.vit_b_16(image_size=args.resolution)
    x = torch.randn(args.batch, 3, args.resolution, args.resolution)
    target = torch.randint(0, 1000, (args.batch,))
    if args.resolution != 224:
        raise ValueError("vit_b_16: the zoo chain is 224x224 (--resolution 224)")
    zoo = ["zoo:vit_b_16", "--batch", str(args.batch), "--attention", "math"]
    return "ViT-B/16 (%dx%d, batch %d, math)" % (args.resolution, args.resolution, args.batch), net, x, target, zoo


def remat_e(remat, chain, precision):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "chain.json")
        if isinstance(chain, dict):
            with open(path, "w") as f:
                json.dump(chain, f)
            source = [path]
        else:  # a zoo chain and its options
            source = chain
        run = subprocess.run([remat, "simulate", *source, "--checkpoints", "", "--precision", precision, "--json",
                              *STEP], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("remat simulate failed: " + run.stderr.strip())
    sim = json.loads(run.stdout)
    last_forward = max(i for i, op in enumerate(sim["ops"]) if op["op"] == "F")
    return sim["dynamic_peak_bytes"], sim["ops"][last_forward]["live_after_bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--models", default="gpt,vit")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--sequence", type=int, default=128)
    ap.add_argument("--resolution", type=int, default=64)
    ap.add_argument("--low", type=float, default=0.93, help="least measured / predicted (the model's excess)")
    ap.add_argument("--kept-tolerance", type=int, default=96 * 1024, help="bytes")
    args = ap.parse_args()
    torch.set_num_threads(1)
    failed = 0
    for name in args.models.split(","):
        torch.manual_seed(0)
        title, net, x, target, chain = {"gpt": gpt_case, "vit": vit_case, "vit_b_16": vit_b_16_case}[name](args)
        for autocast in (False, True):
            original = net.forward

            def forward(inp, _orig=original, _ac=autocast):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=_ac):
                    return _orig(inp).float()

            net.forward = forward
            step = tom.measure_step(net, x, target)
            net.forward = original
            precision = "bf16-mixed" if autocast else "fp32"
            e, kept = remat_e(args.remat, chain, precision)
            ratio = step["peak_no_scratch"] / e
            ok = args.low <= ratio <= 1.0 and 0 <= step["kept"] - kept <= args.kept_tolerance
            failed += not ok
            print("%s, %s: PyTorch peak without scratch %d B (at %s), kept at backward %d B; remat E %d B, live after F(n) %d B; "
                  "measured / predicted %.4f%s" % (title, precision, step["peak_no_scratch"],
                                                   step["peak_no_scratch_op"], step["kept"], e, kept, ratio,
                                                   "" if ok else "  FAILED (ratio in [%g, 1], kept within %d B)" % (args.low, args.kept_tolerance)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
