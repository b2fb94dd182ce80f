#!/usr/bin/env python3
"""An implementation of docs/memory-model.md sections 2-3 apart from core/, for tests/data/golden.json.

golden.json is the simulator's independent check, so a change to the model's rules is computed
here, from the page's text, never from the simulator (tests/data/README.md). For every example it
recomputes each listed plan's op sequence (each op's footprint and the bytes alive after it), E,
and the minimum of E over all 2^(n-1) plans, and prints where golden.json differs.

  scripts/golden-check.py                 # check: exit 1 when golden.json differs from the rules
  scripts/golden-check.py --rule 2024     # the rules before RE wrote x(c) for B(c) (section 8)
  scripts/golden-check.py --write         # rewrite the E numbers and op sequences that differ

A and R (section 4) do not depend on the op sequence and are left as they are.
"""

import argparse
import itertools
import json
import os
import sys

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "golden.json")


def ops_of(n, layers, checkpoints):
    """Section 2.4: the op sequence of a plan."""
    ops = [("F", l) for l in range(1, n + 1)] + [("SEED", 0)]
    c = [0] + list(checkpoints) + [n]
    k = len(checkpoints)
    for j in range(k, -1, -1):
        start, end = c[j], c[j + 1]
        if j < k:
            ops += [("R", l) for l in range(start + 1, end)]
            if layers[end]["extra_bytes"] > 0:
                ops.append(("RE", end))
        ops += [("B", l) for l in range(end, start, -1)]
    return ops


def timeline(n, layers, checkpoints, rule):
    """Sections 2.3 and 3.1-3.2: each op's (footprint, live after)."""
    last_start = checkpoints[-1] if checkpoints else 0
    ops = ops_of(n, layers, checkpoints)
    sizes = []  # tensor id -> bytes
    x, extra, grad = {0: None}, {}, {}
    traffic = []  # (reads, writes, scratch)

    def new(size):
        sizes.append(size)
        return len(sizes) - 1

    for kind, l in ops:
        reads, writes, scratch = [], [], 0
        m = layers.get(l)
        if kind in ("F", "R"):
            reads.append(x[l - 1])
            x[l] = new(m["out_bytes"])
            writes.append(x[l])
            if (kind == "R" or l > last_start) and m["extra_bytes"] > 0:
                extra[l] = new(m["extra_bytes"])
                writes.append(extra[l])
            scratch = m["fwd_workspace_bytes"]
        elif kind == "RE":
            reads.append(x[l - 1])
            extra[l] = new(m["extra_bytes"])
            writes.append(extra[l])
            if rule == "now" and m["needs_output"]:
                x[l] = new(m["out_bytes"])  # the x(l) B(l) reads: a version, not scratch
                writes.append(x[l])
                scratch = m["fwd_workspace_bytes"]
            else:
                scratch = m["fwd_workspace_bytes"] + m["out_bytes"]
        elif kind == "SEED":
            reads.append(x[n])
            grad[n] = new(layers[n]["out_bytes"])
            writes.append(grad[n])
        else:  # B
            reads.append(grad[l])
            if m["needs_input"]:
                reads.append(x[l - 1])
            if m["needs_output"]:
                reads.append(x[l])
            if m["extra_bytes"] > 0:
                reads.append(extra[l])
            if l > 1:
                grad[l - 1] = new(layers[l - 1]["out_bytes"])
                writes.append(grad[l - 1])
            scratch = m["bwd_workspace_bytes"]
        traffic.append(([r for r in reads if r is not None], writes, scratch))
    return sweep(ops, traffic, sizes)


def sweep(ops, traffic, sizes):
    """Sections 3.1-3.2: a tensor lives from its writer to its last reader (or its writer)."""
    last_reader = {}
    for i, (reads, _, _) in enumerate(traffic):
        for r in reads:
            last_reader[r] = i
    alive, out = 0, []
    for i, (reads, writes, scratch) in enumerate(traffic):
        alive += sum(sizes[w] for w in writes)
        footprint = alive + scratch
        alive -= sum(sizes[r] for r in set(reads) if last_reader[r] == i)
        alive -= sum(sizes[w] for w in writes if w not in last_reader)
        out.append((ops[i], footprint, alive))
    return out


def check(example, rule, write):
    chain = example["chain"]
    layers = {i + 1: layer for i, layer in enumerate(chain["layers"])}
    n = len(layers)
    differences = 0
    for plan in example["plans"]:
        tl = timeline(n, layers, plan["checkpoints"], rule)
        ops = [{"op": op[0], "layer": op[1] or None, "footprint_bytes": f, "live_after_bytes": a} for op, f, a in tl]
        peak = max(f for _, f, _ in tl)
        listed = [{k: v for k, v in o.items() if k in ("op", "layer", "footprint_bytes", "live_after_bytes")}
                  for o in plan["ops"]]
        if peak != plan["dynamic_peak_bytes"] or listed != ops:
            differences += 1
            print(f"{chain['name']} {plan['checkpoints']}: E {plan['dynamic_peak_bytes']} -> {peak}")
            if write:
                plan["dynamic_peak_bytes"] = peak
                plan["ops"] = ops
    least = min(max(f for _, f, _ in timeline(n, layers, list(c), rule))
                for r in range(n) for c in itertools.combinations(range(1, n), r))
    if least != example["minimum"]["E"]:
        differences += 1
        print(f"{chain['name']} minimum E: {example['minimum']['E']} -> {least}")
        if write:
            example["minimum"]["E"] = least
    return differences


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rule", choices=("now", "2024"), default="now",
                   help="now: RE(c) writes the x(c) B(c) reads when out(c); 2024: RE's x(c) is always scratch")
    p.add_argument("--write", action="store_true", help="rewrite golden.json where it differs")
    p.add_argument("--golden", default=GOLDEN)
    args = p.parse_args()
    with open(args.golden, encoding="utf-8") as f:
        golden = json.load(f)
    differences = sum(check(example, args.rule, args.write) for example in golden["examples"])
    if args.write and differences:
        with open(args.golden, "w", encoding="utf-8") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
    print(f"{differences} difference(s) from the rules ({args.rule})")
    return 1 if differences and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
