#!/usr/bin/python3
"""Issue 23's full-size checks, too big to commit: exports the issue's GPT (4 layers, d 256, 4 heads,
sequence 128, vocabulary 1,000; nanoGPT's modules, opsets 14 to 17), torchvision's vit_b_16 (opset
17) and swin_t's configuration (opsets 14 and 17, fixed batch 2 and symbolic; stochastic depth 0,
which torch 1.13 cannot export in training mode) in training mode without weights
(scripts/make-transformer-onnx.py --full), imports each with `remat import` and checks that its
parameter count is PyTorch's, that every planner plans it (`remat compare`), that the ViT-B/16 import
is the zoo's vit_b_16 planner for planner, and that each Swin-T import is the zoo's swin_t (its
stochastic depth set to 0) planner for planner, at batch 2 (a fixed-batch Swin export imports at its
own batch: torch writes the batch into its window views).
Run: /usr/bin/python3 scripts/check-transformer-onnx.py --remat build/dev/app/cli/remat
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def remat(binary, *args):
    proc = subprocess.run([binary] + list(args), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit("remat %s: exit %d: %s" % (" ".join(args), proc.returncode, proc.stderr.strip()))
    return proc.stdout + proc.stderr


def peaks(text):
    """planner -> its dynamic peak E as compare prints it."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)\s+\S+\s+([\d.]+ \S+)", text, re.M)
            if m.group(1) not in ("planner", "chain", "recompute")}


def swin_zoo(binary, folder):
    """compare's E of the zoo's swin_t at batch 2, its stochastic depth set to 0 as in the exports."""
    path = os.path.join(folder, "swin_t_zoo.json")
    remat(binary, "zoo", "export", "swin_t", "--batch", "2", "--output", path)
    chain = json.load(open(path))
    for layer in chain["layers"]:
        if "stochastic_depth" in layer:
            layer["stochastic_depth"] = 0.0
    with open(path, "w") as f:
        json.dump(chain, f)
    return peaks(remat(binary, "compare", path, "--optimizer", "none", "--grads", "in-place"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--remat", default="build/dev/app/cli/remat")
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, os.path.join(HERE, "make-transformer-onnx.py"), "--full", folder], check=True,
                       capture_output=True)
        models = json.load(open(os.path.join(folder, "models.json")))["models"]
        for m in models:
            path = os.path.join(folder, m["file"])
            sizes = ["--batch", "8", "--dim", "sequence=128"] if m["file"].startswith("gpt") else ["--batch", "4"]
            if m["file"].startswith("swin"):
                sizes = ["--batch", "2"]
            summary = remat(args.remat, "import", path, "--output", os.path.join(folder, "chain.json"), *sizes)
            count = int(re.search(r"(\d+) parameters", summary).group(1))
            compare = peaks(remat(args.remat, "compare", path, *sizes, "--optimizer", "none", "--grads", "in-place"))
            ok = count == m["torch_parameters"] and "optimal" in compare
            if m["file"].startswith("vit"):
                zoo = peaks(remat(args.remat, "compare", "zoo:vit_b_16", "--batch", "4", "--optimizer", "none",
                                  "--grads", "in-place"))
                ok = ok and zoo == compare
            if m["file"].startswith("swin"):
                ok = ok and swin_zoo(args.remat, folder) == compare
            failures += not ok
            print("%-24s parameters %d (torch %d)  store-all E %s  optimal E %s  %s" % (
                m["file"], count, m["torch_parameters"], compare.get("none"), compare.get("optimal"),
                "ok" if ok else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
