#!/usr/bin/python3
"""Real ONNX exports of torchvision models for the importer (docs/import.md).

Default: writes the small exports without weights that the C++ tests read into tests/data/onnx/,
with models.json saying what each one is and what the importer must find (the parameter counts come
from torch and from the ONNX graph itself, not from the importer).

--matrix DIR --remat REMAT: exports every model of the issue's "Done when" list in every variant
(training and eval mode, opsets 11 to 17, with and without weights, fixed or symbolic batch) into
DIR one at a time, imports each with REMAT and checks it (parameter counts; for VGG and ResNet the
store-all timeline and every planner's E against the zoo; for MobileNetV2 optimal's E against the
zoo's), deletes it, and prints a Markdown table. With weights only opset 13 is exported (the weights
do not change the graph, and VGG-11-BN's are 0.5 GB per file).

Needs Debian's python3-torch (1.13: it exports opsets up to 17; the C++ tests cover 18 to 20 with
models they build themselves) and python3-torchvision; runs on the CPU. Run it with /usr/bin/python3.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

import onnx
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "onnx")

# Committed exports: (file stem, builder, zoo name or None, mode, opset, fixed batch or None, resolution).
# Small resolutions keep the CPU runs of the tests short; VGG needs 224 (its adaptive pooling to 7x7 exports
# only where 7 divides the feature map). densenet_small is torchvision's DenseNet class with two short dense
# blocks: the structure of DenseNet-121 at a size a test can run.
COMMITTED = [
    ("resnet18_train_op17_dynamic", "resnet18", "resnet18", "train", 17, None, 64),
    ("resnet18_eval_op15", "resnet18", None, "eval", 15, 2, 64),
    ("vgg11_bn_train_op11_dynamic", "vgg11_bn", "vgg11_bn", "train", 11, None, 224),
    ("mobilenet_v2_train_op13", "mobilenet_v2", "mobilenet_v2", "train", 13, 2, 64),
    ("squeezenet1_0_train_op12", "squeezenet1_0", None, "train", 12, 2, 64),
    ("densenet_small_train_op14", "densenet_small", None, "train", 14, 2, 32),
    ("efficientnet_b0_train_op13", "efficientnet_b0", "efficientnet_b0", "train", 13, 2, 64),
    ("mobilenet_v3_large_train_op17_dynamic", "mobilenet_v3_large", "mobilenet_v3_large", "train", 17, None, 64),
    ("regnet_y_400mf_train_op15_dynamic", "regnet_y_400mf", "regnet_y_400mf", "train", 15, None, 64),
    ("shufflenet_v2_x1_0_train_op13", "shufflenet_v2_x1_0", "shufflenet_v2_x1_0", "train", 13, 2, 64),
    ("googlenet_train_op13", "googlenet", None, "train", 13, 2, 64),
    ("googlenet_train_op17_dynamic", "googlenet", None, "train", 17, None, 64),
    ("inception_v3_train_op14", "inception_v3", "inception_v3", "train", 14, 2, 75),
    ("inception_small_train_op17_dynamic", "inception_small", None, "train", 17, None, 19),
]

MATRIX_MODELS = ["vgg11_bn", "resnet34", "resnet101", "mobilenet_v2", "alexnet", "squeezenet1_0", "densenet121",
                 "efficientnet_b0", "mobilenet_v3_large", "regnet_y_400mf",
                 "shufflenet_v2_x1_0", "googlenet", "inception_v3", "resnext50_32x4d", "wide_resnet50_2", "mnasnet1_0",
                 "regnet_x_400mf", "efficientnet_v2_s"]
ZOO_EQUAL = {"vgg11_bn", "resnet34", "resnet101", "alexnet", "inception_v3"}  # the zoo has them layer for layer
ZOO_BOUND = {"mobilenet_v2", "efficientnet_b0", "mobilenet_v3_large", "regnet_y_400mf", "shufflenet_v2_x1_0"}  # optimal's E at most the zoo's

# The step these scripts measure in PyTorch: forward and backward, no optimizer, the weight gradients
# kept between steps (the remat commands default to PyTorch 2's AdamW step, docs/memory-model.md 11).
STEP = ["--optimizer", "none", "--grads", "in-place"]


class SmallInception(torch.nn.Module):
    """Inception-v3's factorised modules in small (torchvision's BasicConv2d, few channels): a stem conv,
    an InceptionC-like block (1x7 and 7x1 convs, an average-pool branch), an InceptionD-like block (a
    1x7 / 7x1 branch ending in a 3x3 stride-2 conv, a max-pool branch), an InceptionE-like block (1x3
    and 3x1 convs reading one tensor, concatenated inside the concat), then avgpool, dropout and fc."""

    def __init__(self, classes=5):
        super().__init__()
        from torchvision.models.inception import BasicConv2d as C
        self.stem = C(3, 8, kernel_size=3, stride=2)
        self.c_branch1x1 = C(8, 6, kernel_size=1)
        self.c_branch7x7_1 = C(8, 4, kernel_size=1)
        self.c_branch7x7_2 = C(4, 4, kernel_size=(1, 7), padding=(0, 3))
        self.c_branch7x7_3 = C(4, 6, kernel_size=(7, 1), padding=(3, 0))
        self.c_branch_pool = C(8, 4, kernel_size=1)
        self.d_branch7x7x3_1 = C(16, 6, kernel_size=1)
        self.d_branch7x7x3_2 = C(6, 6, kernel_size=(1, 7), padding=(0, 3))
        self.d_branch7x7x3_3 = C(6, 6, kernel_size=(7, 1), padding=(3, 0))
        self.d_branch7x7x3_4 = C(6, 8, kernel_size=3, stride=2)
        self.e_branch3x3_1 = C(24, 8, kernel_size=1)
        self.e_branch3x3_2a = C(8, 6, kernel_size=(1, 3), padding=(0, 1))
        self.e_branch3x3_2b = C(8, 6, kernel_size=(3, 1), padding=(1, 0))
        self.e_branch_pool = C(24, 4, kernel_size=1)
        self.fc = torch.nn.Linear(16, classes)

    def forward(self, x):
        import torch.nn.functional as F
        x = self.stem(x)
        b7 = self.c_branch7x7_3(self.c_branch7x7_2(self.c_branch7x7_1(x)))
        pool = self.c_branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        x = torch.cat([self.c_branch1x1(x), b7, pool], 1)
        b7 = self.d_branch7x7x3_1(x)
        b7 = self.d_branch7x7x3_4(self.d_branch7x7x3_3(self.d_branch7x7x3_2(b7)))
        x = torch.cat([b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)
        b3 = self.e_branch3x3_1(x)
        b3 = torch.cat([self.e_branch3x3_2a(b3), self.e_branch3x3_2b(b3)], 1)
        x = torch.cat([b3, self.e_branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))], 1)
        x = F.dropout(F.adaptive_avg_pool2d(x, 1), p=0.5, training=self.training)
        return self.fc(torch.flatten(x, 1))


def build(name):
    torch.manual_seed(0)
    if name == "inception_small":
        return SmallInception()
    if name == "densenet_small":
        return torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, num_classes=10)
    if name.startswith("efficientnet"):
        # StochasticDepth in training mode draws its mask with an in-place bernoulli_, which torch 1.13
        # cannot export ("Unsupported: ONNX export of operator Bernoulli"); with probability 0 it is
        # the identity and exports nothing (docs/import.md).
        return getattr(torchvision.models, name)(stochastic_depth_prob=0.0)
    if name in ("googlenet", "inception_v3"):
        # In training mode the auxiliary classifiers are outputs of their own (three in all), and a chain
        # follows one input to one output: export without them (docs/import.md). Inception-v3's
        # init_weights=True draws truncated normals for minutes; the values do not change the graph.
        return getattr(torchvision.models, name)(weights=None, aux_logits=False, init_weights=name == "googlenet")
    return getattr(torchvision.models, name)()


def export(name, path, mode, opset, batch, resolution, weights):
    model = build(name)
    train = mode == "train"
    model.train(train)
    x = torch.randn(batch or 2, 3, resolution, resolution)
    dynamic = None if batch else {"input": {0: "batch"}, "logits": {0: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, opset_version=opset, export_params=weights,
                          training=torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL,
                          do_constant_folding=not train, input_names=["input"], output_names=["logits"],
                          dynamic_axes=dynamic)
    return model


def onnx_parameter_count(path):
    """The parameters the ONNX graph's layers use, counted from its weight shapes, once per use:
    Conv weight and bias, Gemm B and C, BatchNormalization scale and bias (not its running statistics,
    which are buffers)."""
    graph = onnx.load(path, load_external_data=False).graph
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for i in graph.input:
        shapes.setdefault(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim])
    for node in graph.node:  # eval-mode exports share equal weights through Identity
        if node.op_type == "Identity" and node.input[0] in shapes:
            shapes[node.output[0]] = shapes[node.input[0]]
    used = {"Conv": (1, 2), "Gemm": (1, 2), "BatchNormalization": (1, 2)}
    total = 0
    for node in graph.node:
        for i in used.get(node.op_type, ()):
            if i < len(node.input) and node.input[i]:
                n = 1
                for d in shapes[node.input[i]]:
                    n *= d
                total += n
    return total


def make_committed(only=None):
    """Exports the committed models (only those stems when given, keeping models.json's other entries)."""
    os.makedirs(DATA, exist_ok=True)
    manifest_path = os.path.join(DATA, "models.json")
    old = {}
    if only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = {m["file"]: m for m in json.load(f)["models"]}
    manifest = []
    for stem, name, zoo, mode, opset, batch, resolution in COMMITTED:
        if only and stem not in only and stem + ".onnx" in old:
            manifest.append(old[stem + ".onnx"])
            continue
        path = os.path.join(DATA, stem + ".onnx")
        model = export(name, path, mode, opset, batch, resolution, weights=False)
        manifest.append({
            "file": stem + ".onnx", "model": name, "zoo": zoo, "mode": mode, "opset": opset, "batch": batch,
            "resolution": resolution,
            "torch_parameters": sum(p.numel() for p in model.parameters()),
            "onnx_parameters": onnx_parameter_count(path),
        })
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    with open(manifest_path, "w") as f:
        json.dump({"generated_by": "scripts/make-onnx-test-models.py", "torch": torch.__version__,
                   "torchvision": torchvision.__version__, "models": manifest}, f, indent=1)
        f.write("\n")


def remat_json(remat, *args):
    out = subprocess.run([remat, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def same_layer_specs(mine, zoo):
    """Layer for layer the same spec (so the same numbers): torch exports AdaptiveAvgPool2d to a size that
    divides the input as an AveragePool, which the zoo writes as adaptive_avgpool (same values, same numbers)."""
    if len(mine) != len(zoo):
        return False
    for a, b in zip(mine, zoo):
        if a != b and not (a["name"] == b["name"] and a["kind"] == "avgpool" and b["kind"] == "adaptive_avgpool"):
            return False
    return True


def batch_args(chain, batch):
    """--batch for an ONNX model or zoo:NAME; a chain file (the zoo exported at another resolution) has its own."""
    return [] if chain.endswith(".json") else ["--batch", str(batch)]


def planner_peaks(remat, chain, batch):
    plans = remat_json(remat, "compare", chain, *batch_args(chain, batch), "--json", *STEP)["plans"]
    return {p["planner"]: p["dynamic_peak_bytes"] for p in plans}


def check_one(remat, name, path, mode, batch, expected_params, resolution=224):
    """The checks of one export; returns (ok, note)."""
    run_batch = batch or 4
    out = subprocess.run([remat, "import", path, "--batch", str(run_batch)], capture_output=True, text=True)
    if out.returncode != 0:
        return False, out.stderr.strip().splitlines()[-1]
    summary = out.stderr.splitlines()[0]
    params = int(summary.split(" parameters")[0].split()[-1])
    if params != expected_params:
        return False, f"{params} parameters, expected {expected_params}"
    if mode != "train" or name not in ZOO_EQUAL | ZOO_BOUND:
        return True, f"{params} parameters"
    zoo = "zoo:" + name  # zoo:NAME is 224 x 224; another resolution is its `remat zoo export` file
    if resolution != 224:
        zoo = path + ".zoo.json"
        subprocess.run([remat, "zoo", "export", name, "--batch", str(run_batch), "--resolution", str(resolution),
                        "--output", zoo], check=True, capture_output=True)
    mine, theirs = planner_peaks(remat, path, run_batch), planner_peaks(remat, zoo, run_batch)
    if name in ZOO_BOUND:
        ok = mine["optimal"] <= theirs["optimal"]
        return ok, f"optimal E {mine['optimal']} <= zoo {theirs['optimal']}" if ok else "optimal E above the zoo's"
    sim = [remat_json(remat, "simulate", c, *batch_args(c, run_batch), "--checkpoints", "", "--json", *STEP)
           for c in (path, zoo)]
    same_timeline = [o["footprint_bytes"] for o in sim[0]["ops"]] == [o["footprint_bytes"] for o in sim[1]["ops"]]
    same_static = sim[0]["static_bytes"] == sim[1]["static_bytes"]
    same_layers = same_layer_specs(json.loads(out.stdout)["layers"],
                                   remat_json(remat, "zoo", "export", name, "--batch", str(run_batch), "--resolution",
                                              str(resolution))["layers"])
    ok = mine == theirs and same_timeline and same_static and same_layers
    return ok, ("layers, store-all timeline, static bytes and every planner's E equal the zoo's" if ok
                else f"differs from the zoo (layers {same_layers}, timeline {same_timeline}, E {mine == theirs})")


def run_matrix(folder, remat, models, modes=("train", "eval"), opsets=range(11, 18), with_weights=(False, True),
               resolution=224):
    os.makedirs(folder, exist_ok=True)
    rows, failures = [], 0
    for name in models:
        for mode in modes:
            for weights in with_weights:
                for opset in (opsets if not weights else [13]):
                    for batch in (None, 2):
                        path = os.path.join(folder, f"{name}_{mode}_{opset}_{'w' if weights else 'nw'}.onnx")
                        model = export(name, path, mode, opset, batch, resolution, weights)
                        torch_params = sum(p.numel() for p in model.parameters())
                        expected = torch_params if mode == "train" else onnx_parameter_count(path)
                        ok, note = check_one(remat, name, path, mode, batch, expected, resolution)
                        for done in (path, path + ".zoo.json"):
                            if os.path.exists(done):
                                os.remove(done)
                        failures += 0 if ok else 1
                        rows.append((name, mode, opset, "yes" if weights else "no",
                                     "fixed 2" if batch else "symbolic", "ok" if ok else "FAILED", note))
                        print(" | ".join(str(c) for c in rows[-1]), file=sys.stderr, flush=True)
    print("| model | mode | opset | weights | batch | result | checked |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrix", metavar="DIR", help="export and check every variant in DIR")
    parser.add_argument("--remat", default=os.path.join(HERE, "..", "build", "dev", "app", "cli", "remat"))
    parser.add_argument("--models", default=",".join(MATRIX_MODELS), help="the matrix's models, comma-separated")
    parser.add_argument("--only", help="export only these committed stems, comma-separated (models.json keeps the rest)")
    parser.add_argument("--modes", default="train,eval", help="train, eval or both, comma-separated")
    parser.add_argument("--opsets", default="11,12,13,14,15,16,17", help="the opsets without weights, comma-separated")
    parser.add_argument("--weights", default="no,yes", help="no, yes (opset 13 with weights) or both")
    parser.add_argument("--resolution", type=int, default=224, help="the matrix's input size (Inception-v3's own: 299)")
    args = parser.parse_args()
    if args.matrix:
        opsets = [int(o) for o in args.opsets.split(",")]
        weights = [w == "yes" for w in args.weights.split(",")]
        sys.exit(1 if run_matrix(args.matrix, args.remat, args.models.split(","), args.modes.split(","), opsets,
                                 weights, args.resolution) else 0)
    make_committed(args.only.split(",") if args.only else None)


if __name__ == "__main__":
    main()
