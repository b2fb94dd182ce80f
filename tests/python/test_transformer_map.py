"""Transformers (issue 23): remat's import of the small GPT and a ViT maps layer by layer to fx nodes
(scope names as torch's exporter writes them, '+'-joined layers), every layer boundary is a cut, and
a plan with every block a checkpoint trains with the unmodified model's gradients."""

import copy
import os
import subprocess
import sys
import unittest

from support import import_chain_names, needs_remat, remat_binary, temp_dir, torch

from remat_torch import apply_plan, layer_map
from remat_torch.plan import chain_layer_names

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import torch_fidelity_transformers as transformers  # noqa: E402


def check_mapping(test, model, example, names, loss_in_model=False):
    gm = layer_map.trace(model)
    nodes = [layer_map.layer_output_node(gm, n) for n in names]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    positions = [order[n] for n in nodes]
    test.assertEqual(positions, sorted(positions), "the chain's layers map to nodes in order")
    test.assertEqual(len(set(positions)), len(positions), "no two layers end at one node")
    output = list(gm.graph.nodes)[-1].args[0]
    if loss_in_model:  # the GPT's loss is the lm_head kind's, made at the model's root after the head
        test.assertEqual(output.meta[layer_map.NAME_KEY], "cross_entropy")
        test.assertIn(nodes[-1], output.all_input_nodes[0].all_input_nodes)  # cross_entropy(logits.view(...))
    else:
        test.assertEqual(nodes[-1], output, "the last layer writes the output")


def gradients(model, run, x, loss_fn):
    """The gradients of ``model``'s parameters after a step of ``run`` (the model, or an applied plan,
    which shares its parameters)."""
    model.zero_grad(set_to_none=True)
    loss_fn(run(x)).backward()
    return {k: p.grad.clone() for k, p in model.named_parameters()}


@needs_remat
class TransformerNames(unittest.TestCase):
    def test_gpt(self):
        case = transformers.build("gpt_small", 2, 64, 16, 4, torch.device("cpu"))
        with temp_dir() as folder:
            onnx_path, chain_path = os.path.join(folder, "gpt.onnx"), os.path.join(folder, "gpt.json")
            case.export(onnx_path)
            subprocess.run([remat_binary(), "import", onnx_path, "--batch", "2", *case.import_args,
                            "--output", chain_path], check=True, capture_output=True)
            names = chain_layer_names(chain_path)
        self.assertEqual(names, ["wte+wpe+drop", "h.0", "h.1", "h.2", "h.3", "ln_f+lm_head"])
        check_mapping(self, case.model, case.x, names, loss_in_model=True)
        want = gradients(case.model, case.model, case.x, lambda loss: loss)
        applied = apply_plan(case.model, names[:-1], case.x)  # every layer a checkpoint
        got = gradients(case.model, applied, case.x, lambda loss: loss)
        for k, g in want.items():
            self.assertTrue(torch.equal(g, got[k]), k)

    def test_vit(self):
        from torchvision.models.vision_transformer import VisionTransformer

        torch.manual_seed(0)
        model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                                  num_classes=10).train()
        x = torch.randn(2, 3, 32, 32)
        with temp_dir() as folder:
            names = import_chain_names(copy.deepcopy(model), x, folder)
        self.assertEqual(names, ["conv_proj+encoder", "encoder.layers.encoder_layer_0", "encoder.layers.encoder_layer_1",
                                 "encoder.ln+heads.head"])
        check_mapping(self, model, x, names)
        labels = torch.zeros(2, dtype=torch.long)
        ce = torch.nn.functional.cross_entropy
        want = gradients(model, model, x, lambda out: ce(out, labels))
        got = gradients(model, apply_plan(model, names[:-1], x), x, lambda out: ce(out, labels))
        for k, g in want.items():
            self.assertTrue(torch.equal(g, got[k]), k)


if __name__ == "__main__":
    unittest.main()
