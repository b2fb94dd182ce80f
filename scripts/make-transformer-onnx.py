#!/usr/bin/python3
"""Small transformer exports for tests/input/onnx_transformer_test.cpp (issue 23).

Built from plain torch.nn and torchvision, no weights downloaded, exported by Debian's PyTorch 1.13 in
training mode (do_constant_folding=False) without their weights (export_params=False: the tables and
linears are graph inputs, so the files stay small):
- a nanoGPT-style decoder (token + position embeddings, pre-norm blocks with causal attention through
  masked_fill, GELU, a tied LM head and cross entropy with a second input, the targets), at opset 14
  (LayerNorm decomposed, exact GELU) and 17 (LayerNormalization, tanh GELU), symbolic batch and
  sequence;
- a decoder of nn.TransformerEncoderLayer(norm_first=True, batch_first=True) with an additive causal
  mask and ReLU, its logits as the output;
- torchvision's VisionTransformer at image 32, patch 8, 2 layers, d 64, 4 heads, 10 classes;
- a BERT-style post-norm encoder (token + position + token-type embeddings, LayerNorm,
  nn.TransformerEncoderLayer post-norm with GELU, a tanh pooler on token 0);
- torchvision's SwinTransformer at image 32, patch 4, embed_dim 16, depths 2, 2, heads 2, 4, window 2,
  10 classes (opset 17, symbolic batch) and at image 40, embed_dim 8, heads 1, 2, window 4, 4 classes
  (opset 14, fixed batch 2: LayerNorm decomposed, maps padded to whole windows), and swin_t's
  configuration at 224 x 224 (opset 17, fixed batch 2) for the comparison with the zoo's swin_t.
  torch 1.13 cannot export StochasticDepth in training mode (Bernoulli's out parameter), so every
  Swin is built with stochastic_depth_prob=0.0.
Writes tests/data/onnx/transformer/*.onnx and models.json (torch's parameter counts and the fields).
`--full DIR` also writes the issue's GPT (4 layers, d 256, 4 heads, sequence 128, vocabulary 1,000),
torchvision's vit_b_16 and swin_t (graph only; swin_t at opsets 14 and 17, fixed and symbolic batch)
into DIR for scripts/check-transformer-onnx.py.
Run with Debian's PyTorch: /usr/bin/python3 scripts/make-transformer-onnx.py
"""
import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.swin_transformer import SwinTransformer
from torchvision.models.vision_transformer import VisionTransformer, vit_b_16

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "onnx", "transformer")


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, block, p):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(p)
        self.resid_dropout = nn.Dropout(p)
        self.heads, self.d = heads, d
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class Mlp(nn.Module):
    def __init__(self, d, p, approximate):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU(approximate=approximate)
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, d, heads, block, p, approximate):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, block, p)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = Mlp(d, p, approximate)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """nanoGPT's GPT: wte + wpe, dropout, pre-norm blocks, ln_f, lm_head tied to wte, cross entropy."""

    def __init__(self, layers, d, heads, block, vocab, p, approximate="none"):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(block, d), drop=nn.Dropout(p),
            h=nn.ModuleList([Block(d, heads, block, p, approximate) for _ in range(layers)]), ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class TorchDecoder(nn.Module):
    """A decoder of nn.TransformerEncoderLayer(norm_first=True) with an additive causal mask."""

    def __init__(self, layers, d, heads, block, vocab, p):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, 4 * d, p, batch_first=True, norm_first=True)
                                     for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(0, t, dtype=torch.long))
        for layer in self.layers:
            x = layer(x, src_mask=mask)
        return self.head(self.norm(x))


class Bert(nn.Module):
    """BERT's embeddings (word + position + token type, LayerNorm, dropout), post-norm layers, pooler."""

    def __init__(self, layers, d, heads, block, vocab, p):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.position = nn.Embedding(block, d)
        self.token_type = nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(p)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, 4 * d, p, activation="gelu",
                                                                layer_norm_eps=1e-12, batch_first=True)
                                     for _ in range(layers)])
        self.pooler = nn.Linear(d, d)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)
        types = torch.zeros_like(idx)
        x = self.drop(self.norm(self.word(idx) + self.position(pos) + self.token_type(types)))
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(self.pooler(x[:, 0]))


def swin(embed_dim, depths, heads, window, classes=1000):
    """torchvision's SwinTransformer (swin_t: 96, [2, 2, 6, 2], [3, 6, 12, 24], 7) without stochastic depth."""
    return SwinTransformer(patch_size=[4, 4], embed_dim=embed_dim, depths=depths, num_heads=heads,
                           window_size=[window, window], stochastic_depth_prob=0.0, num_classes=classes).train()


def swin_t_config():
    return swin(96, [2, 2, 6, 2], [3, 6, 12, 24], 7)


def parameters(net):
    return sum(p.numel() for p in net.parameters())


def export(net, args, path, opset, inputs, axes, weights=False):
    torch.onnx.export(net, args, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, export_params=weights, input_names=inputs,
                      output_names=["output"], dynamic_axes=axes)


def small_models(out):
    torch.manual_seed(0)
    entries = []
    ids = torch.randint(0, 50, (2, 16))
    token_axes = {"idx": {0: "batch", 1: "sequence"}, "targets": {0: "batch", 1: "sequence"}}
    for opset, approximate in ((14, "none"), (17, "tanh")):
        gpt = Gpt(2, 32, 4, 16, 50, 0.1, approximate).train()
        name = f"gpt_small_op{opset}.onnx"
        export(gpt, (ids, ids), os.path.join(out, name), opset, ["idx", "targets"], token_axes)
        entries.append({"file": name, "kind": "gpt", "opset": opset, "layers": 2, "width": 32, "heads": 4,
                        "positions": 16, "vocab": 50, "p": 0.1, "gelu": approximate,
                        "torch_parameters": parameters(gpt)})
    dec = TorchDecoder(2, 32, 4, 16, 50, 0.0).train()
    export(dec, (ids,), os.path.join(out, "torch_decoder_op15.onnx"), 15, ["idx"], {"idx": {0: "batch", 1: "sequence"}})
    entries.append({"file": "torch_decoder_op15.onnx", "kind": "torch_decoder", "opset": 15, "layers": 2, "width": 32,
                    "heads": 4, "positions": 16, "vocab": 50, "p": 0.0, "torch_parameters": parameters(dec)})
    vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                            num_classes=10).train()
    export(vit, (torch.randn(2, 3, 32, 32),), os.path.join(out, "vit_small_op16.onnx"), 16, ["images"],
           {"images": {0: "batch"}})
    entries.append({"file": "vit_small_op16.onnx", "kind": "vit", "opset": 16, "image": 32, "patch": 8, "layers": 2,
                    "width": 64, "heads": 4, "hidden": 128, "classes": 10, "torch_parameters": parameters(vit)})
    bert = Bert(2, 32, 4, 16, 50, 0.1).train()
    export(bert, (ids,), os.path.join(out, "bert_small_op14.onnx"), 14, ["idx"], {"idx": {0: "batch", 1: "sequence"}})
    entries.append({"file": "bert_small_op14.onnx", "kind": "bert", "opset": 14, "layers": 2, "width": 32,
                    "heads": 4, "positions": 16, "vocab": 50, "p": 0.1, "torch_parameters": parameters(bert)})
    # Opset 17, symbolic batch: maps 8 x 8 and 4 x 4 of 2 x 2 windows. Opset 14, fixed batch:
    # maps 10 x 10 and 5 x 5 padded to whole 4 x 4 windows (12, 8), the merging padding the odd 5.
    for opset, axes, image, width, heads, window, classes in ((17, {"images": {0: "batch"}}, 32, 16, [2, 4], 2, 10),
                                                             (14, None, 40, 8, [1, 2], 4, 4)):
        net = swin(width, [2, 2], heads, window, classes=classes)
        name = f"swin_small_op{opset}{'_dynamic' if axes else ''}.onnx"
        export(net, (torch.randn(2, 3, image, image),), os.path.join(out, name), opset, ["images"], axes)
        entries.append({"file": name, "kind": "swin", "opset": opset, "image": image, "patch": 4, "width": width,
                        "depths": [2, 2], "heads": heads, "window": window, "classes": classes,
                        "torch_parameters": parameters(net)})
    net = swin_t_config()
    export(net, (torch.randn(2, 3, 224, 224),), os.path.join(out, "swin_t_op17.onnx"), 17, ["images"], None)
    entries.append({"file": "swin_t_op17.onnx", "kind": "swin_t", "opset": 17, "image": 224, "batch": 2,
                    "torch_parameters": parameters(net)})
    return entries


def full_models(out):
    torch.manual_seed(0)
    entries = []
    ids = torch.randint(0, 1000, (2, 128))
    for opset in (14, 15, 16, 17):
        gpt = Gpt(4, 256, 4, 128, 1000, 0.1).train()
        name = f"gpt_4l_256d_op{opset}.onnx"
        export(gpt, (ids, ids), os.path.join(out, name), opset, ["idx", "targets"],
               {"idx": {0: "batch", 1: "sequence"}, "targets": {0: "batch", 1: "sequence"}})
        entries.append({"file": name, "opset": opset, "torch_parameters": parameters(gpt)})
    vit = vit_b_16().train()
    export(vit, (torch.randn(1, 3, 224, 224),), os.path.join(out, "vit_b_16_op17.onnx"), 17, ["images"],
           {"images": {0: "batch"}})
    entries.append({"file": "vit_b_16_op17.onnx", "opset": 17, "torch_parameters": parameters(vit)})
    net = swin_t_config()
    for opset in (14, 17):
        for axes in (None, {"images": {0: "batch"}}):
            name = f"swin_t_op{opset}{'_dynamic' if axes else ''}.onnx"
            export(net, (torch.randn(2, 3, 224, 224),), os.path.join(out, name), opset, ["images"], axes)
            entries.append({"file": name, "opset": opset, "torch_parameters": parameters(net)})
    return entries


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", help="also write the full-size GPT, vit_b_16 and swin_t into this folder")
    args = parser.parse_args()
    out = OUT
    os.makedirs(out, exist_ok=True)
    entries = small_models(out)
    manifest = {"generated_by": "scripts/make-transformer-onnx.py", "torch": torch.__version__, "models": entries}
    with open(os.path.join(out, "models.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    if args.full:
        os.makedirs(args.full, exist_ok=True)
        full = full_models(args.full)
        with open(os.path.join(args.full, "models.json"), "w") as f:
            json.dump({"models": full}, f, indent=1)


if __name__ == "__main__":
    main()
