#!/usr/bin/python3
"""Issue 22/23's opsets 18 to 20: each opset-17 export given is rewritten to 18, 19 and 20 by
scripts/onnx-upgrade-opset.py (19 with its Reduce axes as Constant nodes, 18 and 20 as initializers),
and each rewrite must import as its opset-17 source does: the same chain file (layers and fields, the
name aside), the same parameter count and every planner's E, A, R and recompute cost of
`remat compare --json` equal. Prints one row per export; exits 1 on any difference.

  /usr/bin/python3 scripts/check-opset-upgrade.py --remat build/dev/app/cli/remat \
      [--batch 2] [--dim sequence=128] EXPORT_op17.onnx ...
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return proc.stdout


def numbers(remat, model, sizes, folder):
    chain_path = os.path.join(folder, "chain.json")
    summary = run([remat, "import", model, "--output", chain_path] + sizes)
    params = int(re.search(r"(\d+) parameters", summary).group(1))
    with open(chain_path) as f:
        chain = json.load(f)
    chain.pop("name", None)
    plans = json.loads(run([remat, "compare", model, "--json", "--optimizer", "none", "--grads", "in-place"] + sizes))
    table = [{k: v for k, v in p.items() if k != "plan_seconds"} for p in plans["plans"]]  # all but the time
    return params, chain, table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("exports", nargs="+")
    parser.add_argument("--remat", default=os.path.join(HERE, "..", "build", "dev", "app", "cli", "remat"))
    parser.add_argument("--batch", default="2")
    parser.add_argument("--dim", action="append", default=[])
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        for source in args.exports:
            sizes = ["--batch", args.batch] + [x for d in args.dim for x in ("--dim", d)]
            if "gpt" not in os.path.basename(source):
                sizes = ["--batch", args.batch]
            base = numbers(args.remat, source, sizes, folder)
            optimal = next(p for p in base[2] if p["planner"] == "optimal")
            print(f"{os.path.basename(source)}: {base[0]:,} parameters, {len(base[1]['layers'])} layers, "
                  f"optimal E {optimal['dynamic_peak_bytes']:,} B")
            for opset in (18, 19, 20):
                target = os.path.join(folder, f"op{opset}.onnx")
                axes = "constant" if opset == 19 else "initializer"
                run(["/usr/bin/python3", os.path.join(HERE, "onnx-upgrade-opset.py"), source, target, "--opset",
                     str(opset), "--axes-as", axes])
                try:
                    same = numbers(args.remat, target, sizes, folder) == base
                    verdict = "equal" if same else "DIFFERENT"
                except RuntimeError as error:
                    same, verdict = False, f"FAILED: {error}"
                failed += not same
                print(f"  opset {opset}: {verdict}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
