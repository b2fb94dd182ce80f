#!/usr/bin/env python3
"""Our CPU training step beside PyTorch's, on the same chains and the same thread count, at one
thread and at every core: the table in docs/benchmarks.md ("CPU step against PyTorch").

Ours: bench/cpu_step_bench (Google Benchmark; store-all, float32, 1000 classes, the step time after
one warm-up step, median of --repetitions). PyTorch: the torchvision model built as the zoo builds it
(MODEL_KWARGS; both report their parameter count, and a chain whose counts differ is refused),
a random batch, labels, CrossEntropyLoss, backward, torch.set_num_threads(t) (and OMP_NUM_THREADS=t), the median step after
one warm-up step. Each (chain, threads) pair runs ours and then PyTorch's back to back, so a change
in the machine's load hits both alike; the load average is printed before and after. With
--baseline, a second cpu_step_bench (an older build) runs right after ours in each pair, so a
change's before and after share the same load and the same PyTorch step.

  scripts/bench-cpu-vs-torch.py [--bench build/release/bench/cpu_step_bench] [--repetitions 3]
                                [--steps 5] [--threads 1,all] [--chains resnet18_b8_112,...]
                                [--baseline build/before/cpu_step_bench]

PyTorch comes from Debian's python3-torch and python3-torchvision: the first of this interpreter,
/usr/bin/python3 and python3 that imports both is used; without one the PyTorch column says so and
only our times are printed.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

CHAINS = ["resnet18_b8_112", "vgg11_b4_112", "vgg16_b8_224", "mobilenet_v2_b8_112",
          # Issue 22: depthwise convolutions, Squeeze-and-Excitation, SiLU / Hardswish, channel shuffles.
          "efficientnet_b0_b8_128", "mobilenet_v3_large_b8_128", "regnet_y_400mf_b8_128",
          "shufflenet_v2_x1_0_b8_128", "convnext_tiny_b8_128"]

# The torchvision constructor's arguments that make its model the zoo's (core/src/model/zoo.cpp):
# the zoo's EfficientNet has no stochastic depth (each MBConv's skip is a plain add), so PyTorch's
# must not drop residual branches either (its StochasticDepth is the identity at p = 0).
MODEL_KWARGS = {"efficientnet_b0": {"stochastic_depth_prob": 0.0}, "convnext_tiny": {"stochastic_depth_prob": 0.0}}

TORCH_STEP = r"""
import json, statistics, sys, time, torch, torchvision
model, batch, res, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
kwargs = json.loads(sys.argv[6])
torch.set_num_threads(threads)
torch.manual_seed(0)
net = getattr(torchvision.models, model)(weights=None, num_classes=1000, **kwargs).train()
x = torch.randn(batch, 3, res, res)
y = torch.randint(0, 1000, (batch,))
loss = torch.nn.CrossEntropyLoss()
times = []
for _ in range(steps + 1):
    net.zero_grad(set_to_none=True)
    start = time.perf_counter()
    loss(net(x), y).backward()
    times.append(time.perf_counter() - start)
print(sum(p.numel() for p in net.parameters()), 1000.0 * statistics.median(times[1:]))
"""


def parse_chain(name):
    model, batch, res = name.rsplit("_", 2)
    return model, int(batch[1:]), int(res)


def torch_python():
    """The first interpreter that imports torch and torchvision, or None."""
    for candidate in [sys.executable, "/usr/bin/python3", shutil.which("python3")]:
        if not candidate or not os.path.exists(candidate):
            continue
        probe = subprocess.run([candidate, "-c", "import torch, torchvision"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    return None


def ours_ms(bench, chain, threads, repetitions):
    """Our median step (ms) and the chain's parameter count."""
    args = [bench, f"--benchmark_filter=^cpu_step/{chain}/threads:{threads}/", "--benchmark_format=json",
            f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median" or (repetitions == 1 and "aggregate_name" not in b):
            if b.get("error_occurred"):
                raise SystemExit(f"{chain}: {b.get('error_message')}")
            return b["real_time"], int(b.get("params", -1))
    raise SystemExit(f"bench-cpu-vs-torch: no result for {chain} at {threads} threads (is it in {bench}?)")


def torch_ms(python, chain, threads, steps):
    """PyTorch's median step (ms) and its model's parameter count."""
    model, batch, res = parse_chain(chain)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    kwargs = json.dumps(MODEL_KWARGS.get(model, {}))
    out = subprocess.run([python, "-c", TORCH_STEP, model, str(batch), str(res), str(threads), str(steps), kwargs],
                         capture_output=True, text=True, env=env, check=True).stdout
    params, ms = out.strip().splitlines()[-1].split()
    return float(ms), int(params)


def row(args, python, chain, threads):
    """One table row: ours, PyTorch's, their ratio (and the baseline's), run back to back."""
    ours, our_params = ours_ms(args.bench, chain, threads, args.repetitions)
    before = ours_ms(args.baseline, chain, threads, args.repetitions)[0] if args.baseline else None
    theirs = None
    if python:
        theirs, their_params = torch_ms(python, chain, threads, args.steps)
        if our_params >= 0 and our_params != their_params:
            raise SystemExit(f"bench-cpu-vs-torch: {chain}: the zoo's chain has {our_params} parameters, "
                             f"torchvision's model {their_params}: not the same network")
    ratio = f"{ours / theirs:.2f}x" if theirs else "n/a"
    theirs_text = f"{theirs:.0f}" if theirs else "not installed"
    text = f"| {chain} | {threads} | {ours:.0f} | {theirs_text} | {ratio} |"
    if before is not None:
        text += f" {before:.0f} | {f'{before / theirs:.2f}x' if theirs else 'n/a'} |"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="build/release/bench/cpu_step_bench")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="PyTorch steps timed after the warm-up")
    parser.add_argument("--threads", default="1,all", help="comma-separated counts; 'all' is every core")
    parser.add_argument("--chains", default=",".join(CHAINS))
    parser.add_argument("--baseline", help="a second cpu_step_bench (an older build) run right after ours for "
                        "each pair: before and after a change under the same load")
    args = parser.parse_args()
    for bench in [args.bench] + ([args.baseline] if args.baseline else []):
        if not os.path.exists(bench):
            raise SystemExit(f"bench-cpu-vs-torch: {bench} not found: build the cpu_step_bench target "
                             "(cmake --preset release && cmake --build --preset release --target cpu_step_bench)")
    cores = os.cpu_count() or 1
    counts = sorted({cores if t == "all" else int(t) for t in args.threads.split(",")})
    python = torch_python()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {cores} cores, load average before: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if python is None:
        print("# PyTorch: not installed (apt-get install python3-torch python3-torchvision); our times only")
    baseline = "| baseline (ms) | baseline / PyTorch " if args.baseline else ""
    print(f"| chain | threads | ours (ms) | PyTorch (ms) | ours / PyTorch {baseline}|")
    print("|---|---|---|---|---|" + ("---|---|" if args.baseline else ""))
    for chain in args.chains.split(","):
        for threads in counts:
            print(row(args, python, chain, threads), flush=True)
    print(f"# load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
