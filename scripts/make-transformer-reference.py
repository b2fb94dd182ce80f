#!/usr/bin/python3
"""Reference values of the transformer kinds from PyTorch, for tests/exec/transformer_run_test.cpp
(issue 23).

Variants, in training mode with dropout 0, float32, x [2, 8, 32] (N, S, d), 2 heads, MLP width 128:
- gpt_block: nanoGPT's pre-norm Block (ln_1, c_attn, causal softmax(q k^T / sqrt(dh)) v, c_proj,
  + x; ln_2, c_fc, gelu(approximate='tanh'), c_proj, + h1), written here with torch.nn as nanoGPT
  writes it (PyTorch 1.13 has no scaled_dot_product_attention: this is the math the CPU's fused
  flash kernel must reproduce too);
- vit_block: torchvision's EncoderBlock (nn.MultiheadAttention, exact GELU, LayerNorm eps 1e-6).
- bert_block: torch.nn.TransformerEncoderLayer, post-norm (BERT's order: attention, + x, norm1,
  MLP with exact GELU, + h, norm2), its parameters listed in the chain's order (norm1 first);
- gpt: a tiny GPT as a chain (token_embedding vocabulary 50 and positions 8, two gpt_blocks, an
  untied lm_head with ln_f) on fixed ids [2, 8] and one label per token, loss cross entropy (mean
  over the tokens): PyTorch's d(parameters) of every layer.
- bert: a tiny BERT as a chain (Hugging Face's BertEmbeddings: word embeddings of vocabulary 50, 16
  positions, 2 token types, (word + type) + position, LayerNorm eps 1e-12; two bert_blocks; the
  pooler, dense to 10 features then tanh on token 0) on the gpt's ids with every token type 0 (the
  model's buffer of zeros), loss cross entropy of the pooler's output over the batch: PyTorch's
  d(parameters) of every layer (the embedding's order: word, position, type tables, the norm's
  weight and bias).
- vit: a tiny ViT as a chain (patch_embedding: a [2, 3, 16, 16] image in 4x4 patches, d 32, so
  S = 17; two vit_blocks; cls_head with its LayerNorm and 10 classes), loss cross entropy over the
  batch: PyTorch's d(parameters) of every layer (patch_embedding's order: the conv's weight and
  bias, the class token, the position table).
Parameters in the chain's order (the modules' own parameter order), fixed values (spread), an
upstream gradient r, and PyTorch's y, dx and d(parameters) of sum(y * r). Run with Debian's
PyTorch (/usr/bin/python3); rewrites tests/data/transformer/torch_reference.json.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F
from torchvision.models.vision_transformer import EncoderBlock

from torch_reference_values import backward_record, set_parameters, spread, write_reference

SHAPE = [2, 8, 32]
HEADS = 2
HIDDEN = 128


class GptBlock(nn.Module):
    """nanoGPT's Block at dropout 0 (its CausalSelfAttention's slow path: the math)."""

    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, hidden)
        self.mlp_proj = nn.Linear(hidden, d)

    def attention(self, x):
        n, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(n, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(s, s, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(n, s, d))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


def record(module, x_values, params=None):
    params = params if params is not None else list(module.parameters())
    flat = set_parameters(params)
    x = torch.tensor(x_values, dtype=torch.float32).reshape(SHAPE).requires_grad_(True)
    y = module(x)
    r = torch.tensor(spread(y.numel(), 0.7, 1.0), dtype=torch.float32).reshape(y.shape)
    return {"param_count": len(flat), **backward_record(y, r, x, params)}


VOCAB = 50


class TinyGpt(nn.Module):
    """The chain's layers in order: wte+wpe, two blocks, ln_f+lm_head (no bias, untied)."""

    def __init__(self):
        super().__init__()
        d = SHAPE[2]
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(SHAPE[1], d)
        self.blocks = nn.ModuleList([GptBlock(d, HEADS, HIDDEN) for _ in range(2)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)

    def layers(self):
        return [[self.wte, self.wpe], *[[b] for b in self.blocks], [self.ln_f, self.lm_head]]

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return F.log_softmax(self.lm_head(self.ln_f(x)), dim=-1)


def bert_block_order(block):
    """nn.TransformerEncoderLayer's parameters in the chain's order (norm1 first)."""
    return [block.norm1.weight, block.norm1.bias, block.self_attn.in_proj_weight, block.self_attn.in_proj_bias,
            block.self_attn.out_proj.weight, block.self_attn.out_proj.bias, block.norm2.weight, block.norm2.bias,
            block.linear1.weight, block.linear1.bias, block.linear2.weight, block.linear2.bias]


class TinyBert(nn.Module):
    """The chain's layers in order: embeddings (with token types and LayerNorm), two post-norm
    blocks, the pooler (dense + tanh on token 0)."""

    def __init__(self):
        super().__init__()
        d = SHAPE[2]
        self.word = nn.Embedding(VOCAB, d)
        self.position = nn.Embedding(16, d)
        self.token_type = nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(d, HEADS, HIDDEN, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=False) for _ in range(2)])
        self.dense = nn.Linear(d, 10)

    def layers(self):
        return [[self.word, self.position, self.token_type, self.norm],
                *[[_Params(*bert_block_order(b))] for b in self.blocks], [self.dense]]

    def forward(self, ids):
        types = torch.zeros_like(ids)
        x = self.word(ids) + self.token_type(types)
        x = self.norm(x + self.position(torch.arange(ids.shape[1])))
        for b in self.blocks:
            x = b(x)
        return torch.tanh(self.dense(x[:, 0]))


class TinyVit(nn.Module):
    """torchvision's VisionTransformer's pieces at a test's size, in the chain's layer order."""

    def __init__(self):
        super().__init__()
        d = SHAPE[2]
        self.conv_proj = nn.Conv2d(3, d, kernel_size=4, stride=4)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embedding = nn.Parameter(torch.zeros(1, 17, d))
        self.blocks = nn.ModuleList([EncoderBlock(HEADS, d, HIDDEN, 0.0, 0.0) for _ in range(2)])
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, 10)

    def layers(self):
        return [[self.conv_proj, _Params(self.class_token, self.pos_embedding)], *[[b] for b in self.blocks],
                [self.ln, self.head]]

    def forward(self, image):
        x = self.conv_proj(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x)[:, 0])


class _Params:
    """Loose parameters listed as a module's would be."""

    def __init__(self, *params):
        self.params = params

    def parameters(self):
        return list(self.params)


def record_model(model, x, labels, loss_of):
    """Parameters set layer by layer from one spread; d(parameters) of loss_of(output) per layer."""
    groups = [[p for m in layer for p in m.parameters()] for layer in model.layers()]
    flat = set_parameters([p for g in groups for p in g])
    loss = loss_of(model(x), labels)
    loss.backward()
    counts = [sum(p.numel() for p in g) for g in groups]
    assert len(flat) == sum(counts)
    return {"layer_params": counts, "loss": float(loss),
            "dparams": [[float(v) for p in g for v in p.grad.flatten()] for g in groups]}


def compact(value):
    """Floats to 8 significant digits (the tests compare to 1e-4 of each tensor's scale); the inputs
    and parameters, which torch_reference_values.spread makes, are left out: the tests make the same
    values with test::spread (torch_reference.hpp), so only their counts are kept."""
    if isinstance(value, float):
        return float(f"{value:.8g}")
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items()}
    return value


def main():
    torch.manual_seed(0)
    x_values = spread(math.prod(SHAPE), 0.1, 2.0)
    result = {"torch_version": str(torch.__version__), "shape": SHAPE, "heads": HEADS, "hidden": HIDDEN,
              "variants": {}}
    result["variants"]["gpt_block"] = record(GptBlock(SHAPE[2], HEADS, HIDDEN).train(), x_values)
    vit = EncoderBlock(HEADS, SHAPE[2], HIDDEN, dropout=0.0, attention_dropout=0.0).train()
    result["variants"]["vit_block"] = record(vit, x_values)
    bert = nn.TransformerEncoderLayer(SHAPE[2], HEADS, HIDDEN, dropout=0.0, activation="gelu", batch_first=True,
                                      norm_first=False).train()
    order = [bert.norm1.weight, bert.norm1.bias, bert.self_attn.in_proj_weight, bert.self_attn.in_proj_bias,
             bert.self_attn.out_proj.weight, bert.self_attn.out_proj.bias, bert.norm2.weight, bert.norm2.bias,
             bert.linear1.weight, bert.linear1.bias, bert.linear2.weight, bert.linear2.bias]
    result["variants"]["bert_block"] = record(bert, x_values, order)
    ids = torch.tensor([(7 * i + 3) % VOCAB for i in range(SHAPE[0] * SHAPE[1])]).reshape(SHAPE[:2])
    labels = torch.tensor([(11 * i + 5) % VOCAB for i in range(SHAPE[0] * SHAPE[1])])
    gpt = record_model(TinyGpt().train(), ids, labels,
                       lambda y, t: F.nll_loss(y.reshape(-1, VOCAB), t))
    result["gpt"] = {"ids": [int(v) for v in ids.flatten()], "labels": [int(v) for v in labels], **gpt}
    image = torch.tensor(spread(2 * 3 * 16 * 16, 0.3, 1.0), dtype=torch.float32).reshape(2, 3, 16, 16)
    classes = torch.tensor([3, 7])
    vit = record_model(TinyVit().train(), image, classes, F.cross_entropy)
    result["vit"] = {"labels": [int(v) for v in classes], **vit}
    bert = record_model(TinyBert().train(), ids, classes, F.cross_entropy)
    result["bert"] = {"ids": [int(v) for v in ids.flatten()], "labels": [int(v) for v in classes], **bert}
    write_reference("transformer", compact(result))


if __name__ == "__main__":
    main()
