"""profile_workspaces: PyTorch's in-op scratch per chain layer, and the profiled chain remat reads."""

import json
import os
import subprocess
import unittest

from support import import_chain_names, needs_remat, remat_binary, temp_dir, torch

import torch.nn as nn

from remat_torch import apply_plan, record_step
from remat_torch.workspace import instrument, layer_of, profile_workspaces, write_profiled_chain

SCRATCH_BYTES = 3 << 20  # what Scratchy's forward holds for a moment, freed before it returns


def scratch_double(x):
    """2x, with SCRATCH_BYTES of scratch held after the output is written and freed before returning
    (one call for torch.fx: a traced graph frees a value only after its last reader)."""
    y = x * 2
    tmp = torch.empty(SCRATCH_BYTES // 4)
    tmp.fill_(1.0)
    del tmp
    return y


torch.fx.wrap("scratch_double")


class Scratchy(nn.Module):
    def forward(self, x):
        return scratch_double(x)


class WideNet(nn.Module):
    """conv (3 to 32, 3x3) - scratchy - relu - conv (32 to 64, 3x3) - pool - fc."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.scratchy = Scratchy()
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv2(self.relu(self.scratchy(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class ConvNet(nn.Module):
    """conv-bn-relu(inplace)-conv-relu-maxpool-fc at 32x32: what remat imports, layer for layer."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(4)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = self.pool(self.relu2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
        return self.fc(torch.flatten(x, 1))


WIDE_LAYERS = ["conv1", "scratchy", "relu", "conv2", "pool", "fc"]

WEIGHT_COUNT = 1 << 16  # Weighted's parameters: its fresh weight gradient is 256 KiB


class ScratchFirst(torch.autograd.Function):
    """2x; its backward holds SCRATCH_BYTES and frees them, then allocates its weight gradient, as
    PyTorch's oneDNN convolution backward does on CPUs without AVX-512."""

    @staticmethod
    def forward(ctx, x, w):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        tmp = torch.empty(SCRATCH_BYTES // 4)
        tmp.fill_(1.0)
        del tmp
        return grad * 2, torch.ones(WEIGHT_COUNT)


def scratch_first(x, w):
    return ScratchFirst.apply(x, w)


torch.fx.wrap("scratch_first")


class Weighted(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(WEIGHT_COUNT))

    def forward(self, x):
        return scratch_first(x, self.w)


class WeightedNet(nn.Module):
    """conv (3 to 8, 3x3) - weighted - pool - fc."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.weighted = Weighted()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.weighted(self.conv1(x))), 1))


WEIGHTED_LAYERS = ["conv1", "weighted", "pool", "fc"]


class LayerOf(unittest.TestCase):
    def test_exact_name_and_block_members(self):
        names = ["conv1", "layer1.0", "layer1.1", "fc"]
        self.assertEqual(layer_of("conv1", names), "conv1")
        self.assertEqual(layer_of("layer1.0.conv1", names), "layer1.0")
        self.assertEqual(layer_of("layer1.0.add", names), "layer1.0")
        self.assertEqual(layer_of("layer1.1.relu_1", names), "layer1.1")
        self.assertIsNone(layer_of("flatten", names))
        self.assertIsNone(layer_of("layer1", names), "a prefix of a layer is not inside it")


class Instrument(unittest.TestCase):
    def test_same_output_and_gradients(self):
        torch.manual_seed(0)
        model = WideNet().train()
        x = torch.randn(2, 3, 8, 8)
        gm, unmapped = instrument(model, WIDE_LAYERS)
        self.assertEqual(unmapped, ["flatten"])
        model.eval()
        gm.eval()
        with torch.no_grad():
            self.assertTrue(torch.equal(model(x), gm(x)))


class Profile(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        torch.set_num_threads(1)
        self.model = WideNet().train()
        self.x = torch.randn(4, 3, 32, 32)
        self.profile = profile_workspaces(self.model, self.x, WIDE_LAYERS)

    def test_forward_scratch_is_what_the_layer_frees_before_it_returns(self):
        w = self.profile.layers["scratchy"]
        self.assertEqual(w.fwd_bytes, SCRATCH_BYTES)
        self.assertLess(w.bwd_bytes, 64, "x * 2's backward allocates the input gradient (and the scalar 2)")

    def test_a_convolutions_backward_takes_scratch(self):
        # PyTorch's CPU convolution backward (oneDNN) allocates the output gradient again, in its layout.
        w = self.profile.layers["conv2"]
        self.assertGreater(w.bwd_bytes, 0)
        self.assertEqual(w.bwd_at, "aten::convolution_backward")

    def assert_gradients_come_off(self, counted):
        """wb never grows, never goes below zero, and falls by at most the layer's own gradients."""
        modules = dict(self.model.named_modules())
        for name in WIDE_LAYERS:
            plain, less = self.profile.layers[name].bwd_bytes, counted.layers[name].bwd_bytes
            grads = sum(p.numel() * p.element_size() for p in modules[name].parameters()) if name in modules else 0
            self.assertGreaterEqual(less, 0, name)
            self.assertLessEqual(less, plain, name)
            self.assertLessEqual(plain - less, grads, name)

    def test_gradients_on_backward_come_off_the_peak_as_outputs(self):
        # The layer's weight gradients count toward its peak and come off as B(l)'s outputs.
        self.assert_gradients_come_off(profile_workspaces(self.model, self.x, WIDE_LAYERS, gradients_on_backward=True))

    def test_a_fresh_gradient_allocated_after_the_scratch_comes_off_it(self):
        # Under --grads static the model holds B(l)'s fresh gradient on top of wb; PyTorch freed the
        # scratch before allocating it, so wb is the scratch less the gradient (memory-model.md 11.2).
        model, x = WeightedNet().train(), torch.randn(2, 3, 16, 16)
        plain = profile_workspaces(model, x, WEIGHTED_LAYERS).layers
        fresh = profile_workspaces(model, x, WEIGHTED_LAYERS, fresh_gradients=True).layers
        self.assertGreater(plain["weighted"].bwd_bytes, SCRATCH_BYTES // 2)
        self.assertEqual(fresh["weighted"].bwd_bytes, plain["weighted"].bwd_bytes - WEIGHT_COUNT * 4)
        conv = sum(p.numel() * 4 for p in model.conv1.parameters())
        self.assertEqual(fresh["conv1"].bwd_bytes, max(0, plain["conv1"].bwd_bytes - conv))
        self.assertTrue(all(p.grad is None for p in model.parameters()), "the profile runs on a copy")

    def test_fresh_gradients_freed_by_accumulate_grad_leave_the_layer(self):
        # A layer's second node starts from the first's base, not with the first's fresh gradient
        # still counted.
        self.assert_gradients_come_off(profile_workspaces(self.model, self.x, WIDE_LAYERS, fresh_gradients=True))

    def test_two_gradient_modes_at_once_are_refused(self):
        with self.assertRaisesRegex(ValueError, "two --grads modes"):
            profile_workspaces(self.model, self.x, WIDE_LAYERS, gradients_on_backward=True, fresh_gradients=True)

    def test_in_place_relu_takes_none(self):
        w = self.profile.layers["relu"]
        self.assertEqual((w.fwd_bytes, w.bwd_bytes), (0, 0))

    def test_max_pooling_indices_are_scratch_only_when_nothing_is_saved(self):
        model = ConvNet().train()
        x = torch.randn(8, 3, 32, 32)
        w = profile_workspaces(model, x, ["conv1", "bn1", "relu1", "conv2", "relu2", "pool", "fc"]).layers["pool"]
        self.assertEqual(w.fwd_bytes, 0, "keeping them, max_pool2d_with_indices's output and indices both stay")
        self.assertEqual(w.fwd_discard_bytes, 8 * 64 * 8 * 8 * 8, "discarding them, the int64 indices are freed")

    def test_the_model_is_left_as_it_was(self):
        self.assertTrue(all(p.grad is None for p in self.model.parameters()))


@needs_remat
class ProfiledChain(unittest.TestCase):
    """The profiled chain loads in remat, and its E is PyTorch's measured peak (store-all and a plan
    applied with apply_plan)."""

    def test_profiled_chain_loads_and_predicts_pytorch(self):
        torch.manual_seed(0)
        model = ConvNet().train()
        x = torch.randn(8, 3, 32, 32)
        with temp_dir() as folder:
            import_chain_names(model, x, folder)
            chain = os.path.join(folder, "chain.json")
            profiled = os.path.join(folder, "profiled.json")
            write_profiled_chain(chain, profile_workspaces(model, x, chain), profiled)
            with open(profiled, encoding="utf-8") as f:
                layers = json.load(f)["layers"]
            conv2 = next(layer for layer in layers if layer["name"] == "conv2")
            self.assertGreater(conv2["bwd_workspace_bytes"], 0)
            torch.nn.functional.cross_entropy(model(x), torch.zeros(8, dtype=torch.long)).backward()  # warm up
            for checkpoints, names in (("", []), ("2", ["bn1"])):
                plain = self._simulate(chain, checkpoints)
                e = self._simulate(profiled, checkpoints)
                self.assertGreater(e, plain, "PyTorch's scratch raises E")
                measured = record_step(apply_plan(model, names, x), x)["remat"]["activation_peak_bytes"]
                self.assertLess(abs(measured / e - 1), 0.05, f"checkpoints {names}: PyTorch {measured}, E {e}")

    def _simulate(self, chain, checkpoints):
        proc = subprocess.run([remat_binary(), "simulate", chain, "--checkpoints", checkpoints, "--json"],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)["dynamic_peak_bytes"]


if __name__ == "__main__":
    unittest.main()
