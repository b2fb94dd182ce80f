#!/usr/bin/python3
"""A small GPT (nanoGPT's modules: pre-norm blocks, math attention as PyTorch 1.13's CPU runs it, tied
LM head, cross entropy over [N*S, V]) trained one step under PyTorch's CPU memory profiler, against
remat's store-all prediction of the same chain (docs/memory-model.md section 12.5).

    /usr/bin/python3 scripts/torch-transformer-memory.py --remat build/dev/app/cli/remat [--dropout 0.1]

It uses torch-op-memory.py's recorder (measure_step: every allocation and free of the step, the
parameter gradients left out, as the model counts them static). One thread, float32.
"""
import argparse
import importlib.util
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("torch_op_memory", os.path.join(HERE, "torch-op-memory.py"))
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)


class Block(nn.Module):
    def __init__(self, d, heads, context, p):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.gelu = nn.GELU(approximate="tanh")
        self.attn_drop, self.resid_drop1, self.resid_drop2 = nn.Dropout(p), nn.Dropout(p), nn.Dropout(p)
        self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def attn(self, x):
        n, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(n, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(n, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(n, s, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :s, :s] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(n, s, d)
        return self.c_proj(y)

    def forward(self, x):
        x = x + self.resid_drop1(self.attn(self.ln_1(x)))
        return x + self.resid_drop2(self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab, context, d, heads, layers, p):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(Block(d, heads, context, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one table

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x)).view(-1, self.lm_head.out_features)  # [N*S, V] for cross entropy


def chain(args):
    block = {"kind": "transformer_block", "heads": args.heads, "hidden": 4 * args.width, "causal": True,
             "pre_norm": True, "fused_attention": False, "p": args.dropout}
    layers = [{"name": "wte+wpe", "kind": "token_embedding", "vocab": args.vocab, "positions": args.sequence,
               "width": args.width, "p": args.dropout}]
    layers += [dict(block, name="h.%d" % i) for i in range(args.layers)]
    layers.append({"name": "ln_f+lm_head", "kind": "lm_head", "vocab": args.vocab, "tied": True, "norm": True})
    return {"format": "remat-chain/1", "name": "small-gpt",
            "input": {"shape": [args.batch, args.sequence], "dtype": "float32"}, "layers": layers}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remat", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--sequence", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = GPT(args.vocab, args.sequence, args.width, args.heads, args.layers, args.dropout)
    idx = torch.randint(0, args.vocab, (args.batch, args.sequence))
    target = torch.randint(0, args.vocab, (args.batch * args.sequence,))
    measured = recorder.measure_step(model, idx, target)
    predicted = recorder.remat_simulate(args.remat, chain(args))
    mib = 1024.0 * 1024.0
    print("torch %s, small GPT: batch %d, sequence %d, d %d, %d heads, %d layers, vocab %d, dropout %g" %
          (torch.__version__, args.batch, args.sequence, args.width, args.heads, args.layers, args.vocab, args.dropout))
    print("parameters: %d" % sum(p.numel() for p in model.parameters()))
    print("PyTorch peak %.3f MiB (at %s), without op scratch %.3f MiB, kept at backward %.3f MiB" %
          (measured["peak"] / mib, measured["peak_op"], measured["peak_no_scratch"] / mib, measured["kept"] / mib))
    print("remat E (store-all) %.3f MiB, live after F(n) %.3f MiB" % (predicted["E"] / mib, predicted["kept"] / mib))
    print("E / PyTorch peak: %.4f" % (predicted["E"] / measured["peak"]))
    print(json.dumps({"measured": measured, "predicted": predicted}))


if __name__ == "__main__":
    sys.exit(main())
