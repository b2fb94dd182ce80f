#!/usr/bin/env python3
"""PyTorch's measured activation peak against remat's predicted E, plan by plan (docs/executor.md).

For each model (a torchvision model the zoo also has) and planner: export the model to ONNX in
training mode, plan it with `remat plan --json` (E = its dynamic_peak_bytes), apply the plan with
remat_torch.apply_plan, record one training step with remat_torch.record_step, and compare the
measured activation peak (docs/pytorch.md, "The activation peak") with E. Exit 1 when a row is
further than --tolerance from E (unless --report), 2 on bad input.

  scripts/torch-fidelity.py --fast                       # CI: batch 2, 32x32, two models
  scripts/torch-fidelity.py --batch 8 --resolution 128 --threads 1 --markdown   # the full table
  scripts/torch-fidelity.py --device cuda --chain zoo --markdown   # the GPU rows (scripts/gpu-check.sh)
  scripts/torch-fidelity.py --models gpt_small,vit_b_16 --batch 2 --sequence 128 --resolution 224 \
      --planners none,optimal,linear,dp --markdown   # the transformers (scripts/torch_fidelity_transformers.py)
  scripts/torch-fidelity.py --fast --optimizer adamw --grads on-backward   # the whole step (below)

With --optimizer or --grads on-backward a row is the whole training step, as a PyTorch loop runs it:
forward, backward, optimizer.step() and zero_grad(set_to_none=True), recorded at the second step (the
optimizer's state exists), compared as totals: PyTorch's bytes alive before the step (weights,
buffers, input, labels, the optimizer's state, static gradients) plus its step's peak, against
remat's peak_bytes (static + E) under the same --optimizer / --foreach / --grads (docs/pytorch.md,
"The whole step").

Run with the Python that has PyTorch (/usr/bin/python3 on Debian: python3-torch).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

try:
    import torch
except ImportError as error:
    print(f"SKIP: torch-fidelity needs PyTorch ({error}); scripts/setup-deps.sh installs python3-torch")
    sys.exit(77)

from remat_torch import apply_plan, record_step, summarize  # noqa: E402
from remat_torch.step import OPTIMIZERS, Autocast, make_optimizer, remat_step_args, warm_up  # noqa: E402
from remat_torch.workspace import profile_workspaces, write_profiled_chain  # noqa: E402
from remat_torch.remat_cli import RematError, export_onnx, find_remat, make_model, run_remat  # noqa: E402
import torch_fidelity_transformers as transformers  # noqa: E402 (scripts/, beside this file)

ZOO = ["alexnet", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn",
       "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "mobilenet_v2", "efficientnet_b0",
       "mobilenet_v3_large", "regnet_y_400mf", "shufflenet_v2_x1_0", "convnext_tiny", "inception_v3"]
# Models built with other arguments than torchvision's defaults: Inception-v3's auxiliary classifier is
# a second output in training mode (a chain has one), as the zoo's inception_v3 (docs/import.md).
MODEL_ARGS = {"inception_v3": {"weights": None, "aux_logits": False, "init_weights": False}}
FAST = {"models": "resnet18,vgg11", "batch": 2, "resolution": 32}
KNOWN = os.path.join(REPO, "scripts", "torch-fidelity-known.json")
MIB = float(1 << 20)

def step_args(args):
    """remat's step options for the step PyTorch runs (by default forward and backward, no optimizer,
    the weight gradients kept between steps; the remat commands default to PyTorch 2's AdamW step,
    docs/memory-model.md 11)."""
    # Forward and backward only compares the activations: remat's paper model (in-place gradients).
    grads = args.grads if whole_step(args) else "in-place"
    return remat_step_args(args.optimizer, args.foreach == "on", grads, args.precision)


def whole_step(args):
    return args.optimizer != "none" or args.grads == "on-backward"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(ZOO), help="comma-separated torchvision names (default: the zoo's)")
    p.add_argument("--planners", default="none,optimal,linear", help="remat planners (default none,optimal,linear)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--resolution", type=int, default=128)
    p.add_argument("--sequence", type=int, default=128, help="gpt_small's sequence (default 128, its context)")
    p.add_argument("--heads", type=int, default=4, help="gpt_small's heads (default 4)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--tolerance", type=float, default=0.05, help="allowed |measured / E - 1| (default 0.05)")
    p.add_argument("--remat", help="the remat binary (default $REMAT, build/dev/app/cli/remat)")
    p.add_argument("--fast", action="store_true", help=f"CI's configuration: {FAST}")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    p.add_argument("--report", action="store_true", help="print the table, exit 0 whatever the rows say")
    p.add_argument("--explain", action="store_true",
                   help="per row: what PyTorch and remat hold after the forward pass, and what PyTorch holds at its peak")
    p.add_argument("--workspaces", choices=("torch", "none"), default="torch",
                   help="torch (default): plan the chain with PyTorch's own in-op scratch profiled into each layer's "
                        "wf / wb (remat_torch.profile_workspaces); none: the chain as imported (wf = wb = 0)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where PyTorch trains: cpu (default) or cuda (the first CUDA device; the GPU rows)")
    p.add_argument("--chain", choices=("onnx", "zoo"), default="onnx",
                   help="onnx (default): plan the model's ONNX export imported, as a user's would be; zoo: the zoo's "
                        "chain of the same name (equal to the import layer for layer, docs/import.md), for a remat "
                        "built without the ONNX importer")
    p.add_argument("--optimizer", choices=("none", *OPTIMIZERS), default="none",
                   help="the optimizer whose step ends PyTorch's step (default none: forward and backward only)")
    p.add_argument("--foreach", choices=("on", "off"), default="off",
                   help="the optimizer's foreach implementation (default off, PyTorch's default for CPU parameters)")
    p.add_argument("--grads", choices=("static", "on-backward"), default="static",
                   help="static: zero_grad(set_to_none=False) (default); on-backward: zero_grad(set_to_none=True)")
    p.add_argument("--precision", choices=("fp32", "bf16-mixed"), default="fp32",
                   help="bf16-mixed: the forward pass under torch.autocast(bfloat16) and remat's --precision "
                        "bf16-mixed; plans the chain as imported (PyTorch's scratch is profiled in float32)")
    p.add_argument("--known", default=KNOWN, help="known mismatches: rows that may miss the tolerance (default %(default)s)")
    args = p.parse_args(argv)
    if args.fast:
        args.models, args.batch, args.resolution = FAST["models"], FAST["batch"], FAST["resolution"]
    return args


def peak_place(trace, index):
    """Where the activation peak is reached: the op (innermost frame) and its module."""
    frames = trace[index]["frames"] if trace else []
    if not frames:
        return "-"
    op = frames[0]["name"]
    outer = next((f["name"] for f in frames if f["name"].startswith("autograd::engine")), None)
    if outer:
        op = outer.split(": ", 1)[-1] + " > " + op
    return f"{op} ({frames[0]['filename'] or 'no module'})"


def held_at(trace, index, top=6):
    """The allocations held just after trace entry ``index`` and not outliving the step, by (op, module)."""
    live = {}
    for i, e in enumerate(trace[: index + 1]):
        if e["action"] == "alloc":
            live[e["addr"]] = e
        else:
            live.pop(e["addr"], None)
    freed_later = {e["addr"] for e in trace[index + 1:] if e["action"] != "alloc"}
    groups = {}
    for addr, e in live.items():
        if addr not in freed_later:
            continue  # a weight gradient: static
        f = e["frames"][0] if e["frames"] else {"name": "?", "filename": ""}
        outer = next((g["name"].split(": ", 1)[-1] for g in e["frames"] if g["name"].startswith("autograd::engine")), "")
        key = f"{(outer + ' > ') if outer else ''}{f['name']} ({f['filename'] or '-'})"
        groups[key] = groups.get(key, 0) + e["size"]
    items = sorted(groups.items(), key=lambda kv: -kv[1])
    rest = sum(v for _, v in items[top:])
    return [f"{v / MIB:.2f} MiB {k}" for k, v in items[:top]] + ([f"{rest / MIB:.2f} MiB elsewhere"] if rest else [])


def measure(case, plan, name, args):
    applied = apply_plan(case.model, plan["checkpoint_names"], case.x)
    if args.precision == "bf16-mixed":
        applied = Autocast(applied)
    optimizer = warm_optimizer(case, applied, args) if args.optimizer != "none" else None
    torch.manual_seed(0)
    grads = "none" if args.grads == "on-backward" or not whole_step(args) else "zero"
    s = record_step(applied, case.x, labels=case.labels, model_name=name, grads=grads, optimizer=optimizer,
                    **loss_kwargs(case))
    trace = s["device_traces"][0]
    summary = summarize(trace, s["remat"]["phases"])
    if args.explain:
        print(f"## {name}, checkpoints {plan['checkpoint_names']}")
        print(f"   PyTorch holds {summary.forward_end_live_bytes / MIB:.2f} MiB after the forward pass")
        print("   at PyTorch's peak: " + "; ".join(held_at(trace, summary.peak_index)), flush=True)
    if not whole_step(args):
        return {"measured": summary.activation_peak_bytes, "between": s["remat"]["between_ops_peak_bytes"],
                "at": peak_place(trace, summary.peak_index), "forward_end": summary.forward_end_live_bytes}
    static = s["remat"]["static_bytes"]
    return {"measured": static + summary.peak_bytes, "between": static + s["remat"]["between_ops_peak_bytes"],
            "at": peak_place(trace, total_peak_index(trace)), "forward_end": summary.forward_end_live_bytes,
            "static_measured": static}


def warm_optimizer(case, applied, args):
    """The optimizer over the model's parameters after one step, so that its state exists (the
    recorded step is a loop's second, the steady state of docs/memory-model.md 11.1)."""
    optimizer = make_optimizer(args.optimizer, case.model, args.foreach == "on")
    warm_up(applied, case.x, optimizer, case.labels, case.loss_fn)
    return optimizer


def total_peak_index(trace):
    held = best = index = 0
    for i, e in enumerate(trace):
        held += e["size"] if e["action"] == "alloc" else -e["size"]
        if held > best:
            best, index = held, i
    return index


def loss_kwargs(case):
    return {"loss_fn": case.loss_fn} if case.loss_fn is not None else {}


def build_case(name, args, device):
    """The model, its input and how remat reads it: a torchvision CNN, or a transformer
    (scripts/torch_fidelity_transformers.py)."""
    if name in transformers.NAMES:
        return transformers.build(name, args.batch, args.resolution, args.sequence, args.heads, device)
    if name in MODEL_ARGS:
        import torchvision

        model = getattr(torchvision.models, name)(**MODEL_ARGS[name]).train().to(device)
    else:
        model = make_model(name).train().to(device)
    x = torch.randn(args.batch, 3, args.resolution, args.resolution, device=device)
    labels = torch.zeros(args.batch, dtype=torch.long, device=device)
    return transformers.Case(model, x, labels, shape=f"{args.resolution}x{args.resolution}")


def chain_for(name, case, args, folder):
    """The chain remat plans, as a remat-chain/1 file: the model's ONNX export imported, as a user's
    would be; the zoo's model of the same name where torch cannot export it (1.13 exports adaptive
    pooling only to a size that divides the input: VGG and AlexNet below 224 x 224). The zoo's VGG and
    ResNet equal their imports layer for layer (docs/import.md)."""
    onnx_path = os.path.join(folder, name + ".onnx")
    chain_path = os.path.join(folder, name + ".json")
    zoo_cmd = [args.remat, "zoo", "export", name, "--batch", str(args.batch), "--resolution", str(args.resolution),
               "--output", chain_path]
    if args.chain == "zoo":
        if name not in ZOO:
            raise RematError(f"--chain zoo: the zoo has no '{name}'")
        cmd, source = zoo_cmd, "zoo"
    else:
        try:
            case.export(onnx_path) if case.export else export_onnx(case.model, case.x, onnx_path)
            cmd = [args.remat, "import", onnx_path, "--batch", str(args.batch), *case.import_args, "--output", chain_path]
            source = "onnx"
        except Exception as error:  # torch.onnx raises several kinds
            if name not in ZOO:
                raise RuntimeError(f"ONNX export failed: {error}") from error
            cmd, source = zoo_cmd, "zoo"
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RematError(f"remat {cmd[1]} {name}: {proc.stderr.strip()}")
    return chain_path, source


def profiled_chain(case, chain_path, folder, name, grads="in-place"):
    """The chain with PyTorch's in-op scratch of each layer as its wf / wb (docs/memory-model.md 10.4),
    less the weight gradients B(l) writes under --grads on-backward, less its fresh gradient under
    --grads static (profiled with the .grad buffers allocated, as the loop runs)."""
    profile = profile_workspaces(case.model, case.x, chain_path, labels=case.labels,
                                 gradients_on_backward=grads == "on-backward", fresh_gradients=grads == "static",
                                 **loss_kwargs(case))
    path = os.path.join(folder, name + ".torch-workspaces.json")
    write_profiled_chain(chain_path, profile, path)
    return path


def rows_for(name, planners, args, folder):
    torch.manual_seed(0)
    case = build_case(name, args, torch.device(args.device))
    plain_path, source = chain_for(name, case, args, folder)
    # One unrecorded step first: oneDNN's (and cuDNN's) first calls set up caches a later step does not
    # allocate.
    loss_fn = case.loss_fn or torch.nn.functional.cross_entropy
    loss_fn(case.model(case.x), case.labels).backward()
    case.model.zero_grad(set_to_none=True)
    profile = args.workspaces == "torch" and args.precision == "fp32"
    grads = args.grads if whole_step(args) else "in-place"
    chain_path = profiled_chain(case, plain_path, folder, name, grads) if profile else plain_path
    step = [*case.plan_args, *step_args(args)]
    rows = []
    for planner in planners:
        plan = run_remat(["plan", chain_path, "--planner", planner, *step], args.remat)
        checkpoints = ",".join(map(str, plan["checkpoints"]))
        plain = run_remat(["simulate", plain_path, "--checkpoints", checkpoints, *step], args.remat)
        started = time.time()
        m = measure(case, plan, name, args)
        if args.explain:
            sim = run_remat(["simulate", chain_path, "--checkpoints", checkpoints, *step], args.remat)
            seed = next(i for i, op in enumerate(sim["ops"]) if op["op"] == "SEED")
            print(f"   remat holds {sim['ops'][seed - 1]['live_after_bytes'] / MIB:.2f} MiB after the forward pass, "
                  f"E at op {sim['peak_op_index']} ({sim['ops'][sim['peak_op_index']]['op']}"
                  f"({sim['ops'][sim['peak_op_index']]['layer']}))", flush=True)
        check_token_input(name, case, plan)
        check_labels(name, case, plan)
        # The whole step compares totals (static + E); forward and backward alone, E.
        key = "peak_bytes" if whole_step(args) else "dynamic_peak_bytes"
        rows.append({"model": name, "shape": case.shape, "chain": source, "planner": planner,
                     "checkpoints": len(plan["checkpoints"]), "E": plan[key], "E_plain": plain[key],
                     "static": plan["static_bytes"], "seconds": time.time() - started, **m})
    return rows


def check_token_input(name, case, plan):
    """Token ids are static, outside E, but counted: remat's x0 must be PyTorch's int64 ids, byte for
    byte (memory-model.md 12.9; before, a(0) counted them at float32's 4 bytes, half of PyTorch's)."""
    if case.x.is_floating_point():
        return
    ours, theirs = plan["static"]["input_bytes"], case.x.numel() * case.x.element_size()
    if ours != theirs:
        raise ValueError(f"{name}: remat counts x0 as {ours} bytes ({plan['static'].get('input_dtype')}), "
                         f"PyTorch's ids are {theirs} ({case.x.dtype})")


def check_labels(name, case, plan):
    """The loss's labels are static with the input: remat counts them as PyTorch's cross_entropy /
    nll_loss targets, int64, one per sample (one per token after lm_head), byte for byte
    (memory-model.md section 1)."""
    labels = getattr(case.model, "targets", case.labels)  # the GPT's loss reads its own [N, S] targets
    ours, theirs = plan["static"]["label_bytes"], labels.numel() * labels.element_size()
    if ours != theirs:
        raise ValueError(f"{name}: remat counts the labels as {ours} bytes, PyTorch's are {theirs} "
                         f"({labels.dtype}, {tuple(labels.shape)})")


def print_table(rows, args):
    whole = whole_step(args)
    e = "total" if whole else "E"
    head = ["model", "chain", "plan", "ckpts", f"remat {e} (MiB)", "PyTorch peak (MiB)", f"peak / {e}",
            f"{e} without scratch (MiB)", "between ops (MiB)", f"between / {e} without scratch", "PyTorch's peak at"]
    if whole:
        head[-1:-1] = ["remat static (MiB)", "PyTorch static (MiB)"]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join(["---"] * 3 + ["---:"] * (len(head) - 4) + ["---"]) + "|")
    for r in rows:
        if "error" in r:
            cells = [r["model"], "-", r["planner"]] + ["-"] * (len(head) - 4) + [r["error"]]
        else:
            cells = [r["model"], r["chain"], r["planner"], str(r["checkpoints"]), f"{r['E'] / MIB:.2f}",
                     f"{r['measured'] / MIB:.2f}", f"{r['measured'] / r['E']:.3f}", f"{r['E_plain'] / MIB:.2f}",
                     f"{r['between'] / MIB:.2f}", f"{r['between'] / r['E_plain']:.3f}", r["at"]]
            if whole:
                cells[-1:-1] = [f"{r['static'] / MIB:.2f}", f"{r['static_measured'] / MIB:.2f}"]
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells), flush=True)


def cpu_bfloat16_runs(args):
    """PyTorch's CPU bfloat16 convolution needs AVX-512 (oneDNN's bf16 path); skip where it has none."""
    if args.device != "cpu":
        return True
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.nn.functional.conv2d(torch.randn(1, 2, 4, 4), torch.randn(2, 2, 3, 3)).sum()
    except RuntimeError as error:
        print(f"SKIP: --precision bf16-mixed: this CPU's PyTorch runs no bfloat16 convolution ({error})")
        return False
    return True


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="torch.onnx")  # training-mode exports warn about every batch norm
    try:
        args.remat = find_remat(args.remat)
    except RematError as error:
        print(f"torch-fidelity: error: {error}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"torch-fidelity: error: --device cuda: this PyTorch ({torch.__version__}) sees no CUDA device",
              file=sys.stderr)
        return 2
    if args.precision == "bf16-mixed" and not cpu_bfloat16_runs(args):
        return 77
    models = [m for m in args.models.split(",") if m]
    planners = [p for p in args.planners.split(",") if p]
    where = (f"CUDA ({torch.cuda.get_device_name(0)})" if args.device == "cuda"
             else f"CPU, {torch.get_num_threads()} thread(s)")
    print(f"# PyTorch {torch.__version__}, {where}, batch {args.batch}, "
          f"{args.resolution}x{args.resolution}"
          + (f", sequence {args.sequence}" if "gpt_small" in models else "")
          + f", {'float32' if args.precision == 'fp32' else args.precision}; tolerance {args.tolerance:.0%}"
          + (f"; the whole step: {' '.join(step_args(args))}" if whole_step(args) else ""), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="torch-fidelity-") as folder:
        for name in models:
            try:
                new = rows_for(name, planners, args, folder)
            except (RematError, RuntimeError, ValueError) as error:
                new = [{"model": name, "planner": p, "error": str(error).splitlines()[0][:160]} for p in planners]
            print_table(new, args) if not args.markdown else None
            rows += new
    if args.markdown:
        print_table(rows, args)
    return verdict(rows, args)


def row_key(r, args):
    key = f"{r['model']}/{r['planner']}/batch {args.batch}/{r.get('shape') or f'{args.resolution}x{args.resolution}'}"
    key += ("/no workspaces" if args.workspaces == "none" else "") + ("/cuda" if args.device == "cuda" else "")
    key += f"/{args.precision}" if args.precision != "fp32" else ""
    return key + (f"/{args.optimizer} foreach {args.foreach} grads {args.grads}" if whole_step(args) else "")


def verdict(rows, args):
    """Rows past the tolerance fail unless the known-mismatch file lists them (with why); a listed row
    now within the tolerance fails too, so the list is kept to what is still wrong."""
    known = {}
    if args.known and os.path.exists(args.known):
        with open(args.known, encoding="utf-8") as f:
            known = {k["row"]: k for k in json.load(f)["known"]}
    within = failed = 0
    for r in rows:
        key = row_key(r, args)
        ok = "error" not in r and abs(r["measured"] / r["E"] - 1) <= args.tolerance
        within += ok
        if ok and key in known:
            print(f"# FIXED: {key} is now within {args.tolerance:.0%}: remove it from {args.known}")
            failed += 1
        elif not ok and key in known:
            print(f"# known: {key}: {known[key]['why']}")
        elif not ok:
            print(f"# FAIL: {key}: " + (r["error"] if "error" in r else f"PyTorch / E = {r['measured'] / r['E']:.3f}"))
            failed += 1
    print(f"# {within} of {len(rows)} rows within {args.tolerance:.0%} of E; {failed} failed")
    return 0 if args.report or not failed else 1


if __name__ == "__main__":
    sys.exit(main())
