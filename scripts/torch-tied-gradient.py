#!/usr/bin/python3
"""When PyTorch makes the gradient of a tied weight, and the step's peak with the gradients made on
backward, against remat's prediction (docs/memory-model.md 11.2, issue 23).

A small GPT (torch-transformer-memory.py's modules: wte + wpe, pre-norm blocks, ln_f, lm_head whose
weight IS wte's) takes one step after zero_grad(set_to_none=True) under the CPU memory profiler:
- which backward op allocated the buffer that ends up as wte.weight.grad (the head's, B(n), or the
  embedding's, B(1)), and when a hook on wte.weight fires (after which backward node);
- the step's peak, gradients included, against `remat simulate --optimizer none --grads
  on-backward` of the same chain, store-all.

    /usr/bin/python3 scripts/torch-tied-gradient.py --remat build/dev/app/cli/remat
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


recorder = load("torch_op_memory", "torch-op-memory.py")
gpt = load("torch_transformer_memory", "torch-transformer-memory.py")


def backward_nodes(prof):
    """(start_ns, name) of every autograd node evaluated, and of the hook's marker."""
    out, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.name.startswith("autograd::engine::evaluate_function") or node.name == "remat::tied_hook":
            out.append((node.start_time_ns, node.name.replace("autograd::engine::evaluate_function: ", "")))
        stack.extend(node.children)
    return sorted(out)


def table_sized(events, size):
    """Every allocation and free of a table-sized buffer in the step: (op call, op, bytes)."""
    sizes, out = {}, []
    for _, ptr, n, op, top in events:
        if n > 0:
            sizes[ptr] = n
        if abs(n) == size or (n < 0 and sizes.get(ptr) == size):
            out.append(("%s / %s" % (top[1] if top else "?", op), n))
        if n < 0:
            sizes.pop(ptr, None)
    return out


def measure(model, idx, target):
    table = model.wte.weight

    def hook(grad):
        with record_function("remat::tied_hook"):
            return grad

    def step():
        loss = F.cross_entropy(model(idx), target)
        with record_function("remat::backward"):
            loss.backward()

    step()  # warm-up
    model.zero_grad(set_to_none=True)
    handle = table.register_hook(hook)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    handle.remove()
    events = recorder._allocations(prof)
    grad_ptr = table.grad.data_ptr()
    made = [e for e in events if e[1] == grad_ptr and e[2] > 0][-1]  # the allocation .grad holds
    live, sizes, peak, peak_op = 0, {}, 0, ""
    for _, ptr, size, op, _ in events:
        if size > 0:
            sizes[ptr] = size
            live += size
            if live > peak:
                peak, peak_op = live, op
        elif ptr in sizes:
            live -= sizes.pop(ptr)
    nodes = backward_nodes(prof)
    hook_at = next(t for t, name in nodes if name == "remat::tied_hook")
    return {"grad_bytes": table.grad.numel() * 4, "grad_made_in": (made[4][1] if made[4] else "?") + " / " + made[3],
            "table_sized": table_sized(events, table.numel() * 4),
            "hook_after": [name for t, name in nodes if t < hook_at and name != "remat::tied_hook"][-1],
            "backward_nodes": [name for _, name in nodes], "peak": peak, "peak_op": peak_op}


def simulate(remat, chain):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "chain.json")
        with open(path, "w") as f:
            json.dump(chain, f)
        run = subprocess.run([remat, "simulate", path, "--checkpoints", "", "--json", "--optimizer", "none",
                              "--grads", "on-backward"], capture_output=True, text=True, check=True)
    sim = json.loads(run.stdout)
    ops = sim["ops"]
    peak_at = max(range(len(ops)), key=lambda i: ops[i]["footprint_bytes"])
    first_backward = next(op for op in ops if op["op"] == "B" and op.get("layer") == 1)
    return {"E": sim["dynamic_peak_bytes"], "peak_op": "%s(%s)" % (ops[peak_at]["op"], ops[peak_at].get("layer", "")),
            "B1": first_backward["footprint_bytes"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--sequence", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = gpt.GPT(args.vocab, args.sequence, args.width, args.heads, args.layers, args.dropout)
    idx = torch.randint(0, args.vocab, (args.batch, args.sequence))
    target = torch.randint(0, args.vocab, (args.batch * args.sequence,))
    measured = measure(model, idx, target)
    predicted = simulate(args.remat, gpt.chain(args))
    print("torch %s, tied GPT: batch %d, sequence %d, d %d, %d layers, vocab %d" %
          (torch.__version__, args.batch, args.sequence, args.width, args.layers, args.vocab))
    print("wte.weight.grad (%d bytes) was allocated in: %s" % (measured["grad_bytes"], measured["grad_made_in"]))
    for where, n in measured["table_sized"]:
        print("  table-sized %s: %s" % ("allocation" if n > 0 else "free", where))
    print("the hook on wte.weight fired after: %s" % measured["hook_after"])
    print("backward nodes in order: %s" % ", ".join(measured["backward_nodes"]))
    print("PyTorch peak (gradients included) %d B at %s; remat E %d B at %s; E / peak %.4f" %
          (measured["peak"], measured["peak_op"], predicted["E"], predicted["peak_op"],
           predicted["E"] / measured["peak"]))
    # B(1) in PyTorch: the head's buffered table gradient, the embedding's dense one and their
    # out-of-place sum (.grad); the model counts the three (G(1) from B(n), the tied head's buffer,
    # B(1)'s workspace), less the position table's gradient, which the model makes at B(n).
    explained = predicted["B1"] - args.sequence * args.width * 4
    print("PyTorch peak - (model's B(1) - the position table's gradient) = %d bytes" %
          (measured["peak"] - explained))
    print(json.dumps({"measured": measured, "predicted": predicted, "unexplained": measured["peak"] - explained}))


if __name__ == "__main__":
    sys.exit(main())
