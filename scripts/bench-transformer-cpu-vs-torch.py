#!/usr/bin/python3
"""Our CPU training step of the small GPT (or ViT-B/16) beside PyTorch's, at equal threads, as a ratio
in one run: the tables "Transformers: CPU step against PyTorch" in docs/benchmarks.md (issue 23).

The small GPT: nanoGPT's modules (4 pre-norm causal blocks, d 256, 4 heads, MLP 1,024, sequence
128, vocabulary 1,000, an untied head with ln_f; dropout 0), batch 8, float32. Ours: `remat run`
of the same chain, store-all, no optimizer, static gradients (forward, loss, backward: what
PyTorch's loop below does), `--steps N --json`, the median of the steps after the first. PyTorch
1.13 (Debian's /usr/bin/python3): math attention (it has no scaled_dot_product_attention), the
median step after one warm-up, torch.set_num_threads(t). Each thread count runs ours (math, then
fused) and PyTorch's back to back, so the machine's load hits them alike; the load average is
printed before and after. Both report their parameter count (equal, or the script stops).

  scripts/bench-transformer-cpu-vs-torch.py --remat build/release/app/cli/remat [--threads 1,2] [--steps 5]

--before OTHER_REMAT adds a second binary's steps (an older build: "before" columns), run right
before ours at each thread count, so a change is measured against its base and PyTorch in one run.

With --model vit_b_16: zoo:vit_b_16 (batch 4, 224x224, 1,000 classes, dropout 0) against
torchvision's vit_b_16() with the same cross-entropy step; both count 86,567,656 parameters. ViT's
attention is nn.MultiheadAttention's math path in PyTorch 1.13; ours runs both rules.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

BATCH, SEQ, WIDTH, LAYERS, HEADS, VOCAB = 8, 128, 256, 4, 4, 1000

TORCH_STEP = r"""
import math, statistics, sys, time, torch
from torch import nn
from torch.nn import functional as F
threads, steps = int(sys.argv[1]), int(sys.argv[2])
N, S, D, L, H, V = %d, %d, %d, %d, %d, %d
torch.set_num_threads(threads)
torch.manual_seed(0)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.c_attn, self.c_proj = nn.LayerNorm(D), nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.ln_2, self.c_fc, self.mlp_proj = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.tril(torch.ones(S, S, dtype=torch.bool)))
    def forward(self, x):
        n, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(n, s, H, d // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // H))
        att = F.softmax(att.masked_fill(~self.mask, float("-inf")), dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).contiguous().view(n, s, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(S, D)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f, self.lm_head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)
    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return F.log_softmax(self.lm_head(self.ln_f(x)), dim=-1)

net = Gpt().train()
ids = torch.randint(0, V, (N, S))
targets = torch.randint(0, V, (N * S,))
times = []
for _ in range(steps + 1):
    net.zero_grad(set_to_none=True)
    start = time.perf_counter()
    F.nll_loss(net(ids).view(-1, V), targets).backward()
    times.append(time.perf_counter() - start)
print(sum(p.numel() for p in net.parameters()), 1000.0 * statistics.median(times[1:]))
""" % (BATCH, SEQ, WIDTH, LAYERS, HEADS, VOCAB)


VIT_BATCH, VIT_PARAMS = 4, 86567656

TORCH_VIT_STEP = r"""
import statistics, sys, time, torch, torchvision
threads, steps, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
net = torchvision.models.vit_b_16().train()
images, labels = torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))
loss = torch.nn.CrossEntropyLoss()
times = []
for _ in range(steps + 1):
    net.zero_grad(set_to_none=True)
    start = time.perf_counter()
    loss(net(images), labels).backward()
    times.append(time.perf_counter() - start)
print(sum(p.numel() for p in net.parameters()), 1000.0 * statistics.median(times[1:]))
"""


def chain_json(fused):
    layers = [{"name": "wte+wpe", "kind": "token_embedding", "vocab": VOCAB, "positions": SEQ, "width": WIDTH,
               "p": 0}]
    layers += [{"name": f"h.{i}", "kind": "transformer_block", "heads": HEADS, "hidden": 4 * WIDTH, "causal": True,
                "fused_attention": fused, "p": 0} for i in range(LAYERS)]
    layers.append({"name": "ln_f+lm_head", "kind": "lm_head", "vocab": VOCAB})
    return {"format": "remat-chain/1", "name": "small-gpt", "input": {"shape": [BATCH, SEQ], "dtype": "float32"},
            "layers": layers}


def ours_ms(remat, fused, threads, steps, folder, model):
    if model == "vit_b_16":
        source = ["zoo:vit_b_16", "--batch", str(VIT_BATCH), "--attention", "fused" if fused else "math"]
    else:
        path = os.path.join(folder, f"gpt-{'fused' if fused else 'math'}.json")
        with open(path, "w") as f:
            json.dump(chain_json(fused), f)
        source = [path]
    out = subprocess.run([remat, "run", *source, "--checkpoints", "", "--device", "cpu", "--threads", str(threads),
                          "--steps", str(steps + 1), "--optimizer", "none", "--grads", "in-place", "--json"],
                         capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    step_seconds = result["step_seconds"]
    if not result["matches_prediction"]:
        sys.exit("ours: the measured footprint differs from the prediction")
    return 1000.0 * statistics.median(step_seconds[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remat", default="build/release/app/cli/remat")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--model", choices=["gpt_small", "vit_b_16"], default="gpt_small")
    parser.add_argument("--before", help="another remat binary (the base of a change), run beside ours")
    args = parser.parse_args()
    print(f"# load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    before_head = "before, math | before, fused | " if args.before else ""
    print(f"| threads | {before_head}ours, math | ours, fused | PyTorch 1.13 (math) | PyTorch / ours (math) | "
          "PyTorch / ours (fused) |")
    print("|---:|" + "---:|" * (7 if args.before else 5))
    with tempfile.TemporaryDirectory() as folder:
        for threads in [int(t) for t in args.threads.split(",")]:
            before = ""
            if args.before:
                before_math = ours_ms(args.before, False, threads, args.steps, folder, args.model)
                before_fused = ours_ms(args.before, True, threads, args.steps, folder, args.model)
                before = f"{before_math:.1f} ms | {before_fused:.1f} ms | "
            math_ms = ours_ms(args.remat, False, threads, args.steps, folder, args.model)
            fused_ms = ours_ms(args.remat, True, threads, args.steps, folder, args.model)
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            vit = args.model == "vit_b_16"
            step = [TORCH_VIT_STEP, str(threads), str(args.steps), str(VIT_BATCH)] if vit else \
                [TORCH_STEP, str(threads), str(args.steps)]
            out = subprocess.run(["/usr/bin/python3", "-c", *step],
                                 capture_output=True, text=True, check=True, env=env).stdout.split()
            params, torch_ms = int(out[0]), float(out[1])
            expected = VIT_PARAMS if vit else \
                (VOCAB + SEQ) * WIDTH + LAYERS * (12 * WIDTH * WIDTH + 13 * WIDTH) + 2 * WIDTH + VOCAB * WIDTH
            if params != expected:
                sys.exit(f"PyTorch's model has {params} parameters, the chain {expected}")
            print(f"| {threads} | {before}{math_ms:.1f} ms | {fused_ms:.1f} ms | {torch_ms:.1f} ms | "
                  f"{torch_ms / math_ms:.2f} | {torch_ms / fused_ms:.2f} |", flush=True)
    print(f"# load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
