#!/usr/bin/env python3
"""What autograd saves for a transformer cast to bfloat16 (docs/memory-model.md 12.11): a small GPT
(token and position tables, one pre-norm causal block with dropout 0.1, ln_f, the tied head,
log_softmax and nll_loss) cast with .to(torch.bfloat16), one forward pass under
torch.autograd.graph.saved_tensors_hooks. Prints each saved tensor's shape and dtype in order, the
dtypes of the logits, log-probabilities, loss and the table's gradient, and native_layer_norm's
outputs on a bfloat16 input (PyTorch 1.13's CPU kernel returns bfloat16 mean and rstd; CUDA's keep
float32, which the model counts). Run: /usr/bin/python3 scripts/torch-bf16-transformer-saved.py
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
D, HEADS, S, N, V = 64, 4, 16, 2, 100


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = [t.view(N, S, HEADS, D // HEADS).transpose(1, 2) for t in (q, k, v)]
        a = (q @ k.transpose(-2, -1)) * (1.0 / (D // HEADS) ** 0.5)
        a = a.masked_fill(torch.ones(S, S, dtype=torch.bool).tril().logical_not(), float("-inf"))
        a = self.drop(F.softmax(a, dim=-1))
        y = (a @ v).transpose(1, 2).contiguous().view(N, S, D)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)))))


def main():
    wte, wpe, block, ln_f = nn.Embedding(V, D), nn.Embedding(S, D), Block(), nn.LayerNorm(D)
    nn.ModuleList([wte, wpe, block, ln_f]).to(torch.bfloat16).train()
    ids = torch.randint(0, V, (N, S))
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), str(t.dtype)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        x = wte(ids) + wpe(torch.arange(S))
        x = ln_f(block(x))
        logits = x @ wte.weight.t()
        logp = F.log_softmax(logits, -1)
        loss = F.nll_loss(logp.view(-1, V), ids.view(-1))
    for shape, dtype in saved:
        print(shape, dtype)
    loss.backward()
    print("logits", logits.dtype, "log_softmax", logp.dtype, "loss", loss.dtype, "wte.grad", wte.weight.grad.dtype)
    out = torch.native_layer_norm(x.detach(), (D,), ln_f.weight, ln_f.bias, 1e-5)
    print("native_layer_norm on bfloat16: output, mean, rstd", [str(t.dtype) for t in out])


if __name__ == "__main__":
    main()
