"""apply_plan: exactly the plan's checkpoints kept, gradients equal to the unmodified model's."""

import copy
import unittest
from unittest import mock

from support import SMALL_LAYERS, SmallNet, import_chain_names, needs_remat, nn, temp_dir, torch

import remat_torch
from remat_torch import LayerMapError, PlanError, TraceError, apply_plan, layer_map, record_step


def storage_ptr(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


def storage_bytes(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()


class Kept:
    """What one forward pass of an applied model keeps: the checkpointed segments' inputs, what autograd
    saves outside them, and each module's output (first forward only)."""

    def __init__(self, applied, model, x):
        self.checkpoint_inputs = []
        self.packed = {}
        self.outputs = {}
        real = remat_torch.apply.torch_checkpoint.checkpoint

        def spy(fn, *args, **kwargs):
            self.checkpoint_inputs.append(fn.input)  # the run holds x(c) (apply._SegmentRun)
            return real(fn, *args, **kwargs)

        def hook(name):
            def record(module, inputs, output):
                self.outputs.setdefault(name, output)

            return record

        handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]

        def pack(t):
            self.packed[storage_ptr(t)] = t
            return t

        with mock.patch.object(remat_torch.apply.torch_checkpoint, "checkpoint", spy):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                self.output = applied(x)
        for h in handles:
            h.remove()


class KeepsExactlyThePlan(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = SmallNet().train()
        self.x = torch.randn(2, 3, 8, 8)

    def test_checkpointed_segments_keep_only_their_inputs(self):
        applied = apply_plan(self.model, ["relu1", "pool"], self.x)
        self.assertEqual(applied.plan_names, ["relu1", "pool"])
        # (0, relu1]: conv1-bn1 checkpointed, relu1 plainly (it saves only its output, the checkpoint);
        # (relu1, pool] checkpointed; the last segment plainly.
        self.assertEqual(applied.checkpointed, [True, False, True, False])
        kept = Kept(applied, self.model, self.x)
        # Segments (0, relu1] and (relu1, pool] run under checkpoint: they keep x0 and x(relu1).
        self.assertEqual([storage_ptr(t) for t in kept.checkpoint_inputs],
                         [storage_ptr(self.x), storage_ptr(kept.outputs["relu1"])])
        # Nothing the checkpointed layers wrote is saved outside a checkpoint.
        inside = {storage_ptr(kept.outputs[n]) for n in ["conv1", "conv2", "relu2"]}
        self.assertFalse(inside & set(kept.packed), "a checkpointed layer's tensor is saved by autograd")
        # The last segment (drop, fc) saves what its ops save: dropout's mask and fc's input.
        self.assertIn(storage_ptr(kept.outputs["drop"]), kept.packed)

    def test_a_lone_max_pooling_keeps_no_indices(self):
        # (relu2, pool] is one layer with extras (the int64 indices): the model recomputes them in
        # RE(pool), so the segment runs under checkpoint; plainly, PyTorch would keep the indices.
        applied = apply_plan(self.model, ["relu2", "pool"], self.x)
        kept = Kept(applied, self.model, self.x)
        self.assertIn(storage_ptr(kept.outputs["relu2"]), [storage_ptr(t) for t in kept.checkpoint_inputs])
        self.assertFalse([t for t in kept.packed.values() if t.dtype == torch.int64], "max pooling indices kept")

    def test_store_all_saves_every_layer(self):
        applied = apply_plan(self.model, [], self.x)
        kept = Kept(applied, self.model, self.x)
        self.assertEqual(kept.checkpoint_inputs, [])
        for name in ["conv1", "relu1", "relu2", "drop"]:  # read by bn1, conv2, relu2/pool, fc
            self.assertIn(storage_ptr(kept.outputs[name]), kept.packed, name)

    def test_forward_keeps_the_planned_bytes(self):
        # The recording's live bytes at the end of the forward pass are exactly the kept tensors:
        # the checkpoints, what the last segment saves, the output, the RNG states checkpoint stashes.
        for plan in ([], ["relu1", "pool"], ["conv2"]):
            applied = apply_plan(self.model, plan, self.x)
            kept = Kept(applied, self.model, self.x)
            static = {storage_ptr(p) for p in [*self.model.parameters(), *self.model.buffers(), self.x]}
            held = {storage_ptr(t): storage_bytes(t) for t in kept.checkpoint_inputs}
            held.update({p: storage_bytes(t) for p, t in kept.packed.items()})
            held[storage_ptr(kept.output)] = storage_bytes(kept.output)
            rng = torch.get_rng_state().numel() * len(kept.checkpoint_inputs)
            expected = sum(b for p, b in held.items() if p not in static) + rng
            del kept
            s = record_step(applied, self.x)
            summary = remat_torch.summarize(s["device_traces"][0], s["remat"]["phases"])
            self.assertEqual(summary.forward_end_live_bytes, expected, f"plan {plan}")


class AddIntoConvOutput(nn.Module):
    """``x += ...`` into a tensor no backward saves, as torchvision's blocks write their residual add."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        x = self.conv1(x)
        x += 1.0
        return self.fc(torch.flatten(self.conv2(x), 1))


class InPlaceAdd(unittest.TestCase):
    def test_traced_in_place(self):
        import operator

        gm = remat_torch.layer_map.trace(AddIntoConvOutput())
        self.assertIn(operator.iadd, [n.target for n in gm.graph.nodes])

    def test_not_into_a_checkpoint(self):
        # Cuts after conv1 and conv2: x is the input of a recomputed segment, `x += 1` must not change it.
        GradientsEqual().check(AddIntoConvOutput, ["conv1", "conv2"], torch.randn(2, 3, 8, 8))


class GradientsEqual(unittest.TestCase):
    def check(self, make, plan, x, atol=0.0):
        torch.manual_seed(1)
        original = make().train()
        planned = copy.deepcopy(original)
        applied = apply_plan(planned, plan, x)
        labels = torch.arange(x.shape[0]) % 5
        for step in range(2):  # the second step starts from the first's running statistics
            for m in (original, applied):
                torch.manual_seed(10 + step)  # the same dropout masks
                out = m(x)
                torch.nn.functional.cross_entropy(out, labels).backward()
        for (name, p), q in zip(original.named_parameters(), planned.parameters()):
            if atol == 0.0:
                self.assertTrue(torch.equal(p.grad, q.grad), f"gradient of {name}")
            else:
                torch.testing.assert_close(p.grad, q.grad, atol=atol, rtol=0, msg=f"gradient of {name}")
        for (name, b), c in zip(original.named_buffers(), planned.buffers()):
            self.assertTrue(torch.equal(b, c), f"buffer {name} (running statistics updated once per step)")

    def test_small_net(self):
        for plan in ([], ["conv1"], ["bn1"], ["relu1", "pool"], ["conv1", "bn1", "relu1", "conv2", "relu2", "pool", "drop"]):
            self.check(SmallNet, plan, torch.randn(2, 3, 8, 8))

    def test_resnet18(self):
        import torchvision

        plan = ["relu", "layer1.0", "layer2.0", "layer2.1", "layer3.1", "avgpool"]
        self.check(lambda: torchvision.models.resnet18(num_classes=5), plan, torch.randn(2, 3, 32, 32))

    def test_mobilenet_v2_inplace_relu6_after_a_cut(self):
        import torchvision

        # features.0.1 is a batch norm followed by ReLU6(inplace=True): the cut must not let the
        # ReLU6 overwrite the checkpoint the recompute reads.
        plan = ["features.0.1", "features.1.conv.0.1", "features.2.conv.1.0", "features.3"]
        self.check(lambda: torchvision.models.mobilenet_v2(num_classes=5), plan, torch.randn(2, 3, 32, 32))


    def test_newer_torchvision_models(self):
        # SE blocks (a Mul by a broadcast gate), SiLU / Hardswish / Hardsigmoid, EfficientNet's
        # stochastic depth (its masks drawn again alike in the recompute: checkpoint keeps the RNG
        # state), RegNetY's blocks ending in a ReLU, ShuffleNetV2's chunk and channel shuffle.
        import torchvision

        plans = {
            "efficientnet_b0": ["features.1.0.block.1", "features.2.0.block.0.2", "features.2.1", "features.3.0.block.2",
                                "features.4.2"],
            "mobilenet_v3_large": ["features.0.2", "features.2.block.0.2", "features.4.block.2", "features.5",
                                   "features.12"],
            "regnet_y_400mf": ["stem.2", "trunk_output.block1.block1-0", "trunk_output.block2.block2-1"],
            "shufflenet_v2_x1_0": ["maxpool", "stage2.0", "stage2.0.channel_shuffle", "stage2.2", "stage3.1.channel_shuffle"],
        }
        for name, plan in plans.items():
            with self.subTest(model=name):
                self.check(lambda: getattr(torchvision.models, name)(num_classes=5), plan, torch.randn(2, 3, 32, 32))


class BlockEndsUnderTheCheckpoint(unittest.TestCase):
    """A segment that ends in a block whose last op is a ReLU (ResNet's, RegNetY's) runs whole under
    the checkpoint: the ReLU saves the recomputed output, which the model's RE(c) writes for B(c)
    (memory-model.md 2.3), not the checkpoint. A ReLU that is a chain layer of its own still runs
    plainly after the checkpointed rest (test_checkpointed_segments_keep_only_their_inputs)."""

    def test_resnet_block_relu_is_inside(self):
        import torchvision

        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=5).train()
        x = torch.randn(2, 3, 32, 32)
        applied = apply_plan(model, ["relu", "layer1.0", "layer1.1"], x)
        # (0, relu]: conv1-bn1 checkpointed, the stem's ReLU plainly; (relu, layer1.0] and
        # (layer1.0, layer1.1] each one checkpointed piece; the last segment plainly.
        self.assertEqual(applied.checkpointed, [True, False, True, True, False])
        kept = Kept(applied, model, x)
        # The checkpointed pieces read x0, x(relu) and x(layer1.0) (fx inlines the blocks, so their
        # outputs are known here as the pieces' inputs).
        inputs = [storage_ptr(t) for t in kept.checkpoint_inputs]
        self.assertEqual(inputs[:2], [storage_ptr(x), storage_ptr(kept.outputs["relu"])])
        self.assertEqual(len(inputs), 3)
        self.assertIn(inputs[1], kept.packed, "the stem ReLU saves its output, the checkpoint")
        self.assertNotIn(inputs[2], kept.packed, "layer1.0's final ReLU saved its output outside the checkpoint")


class CheckpointFreedAfterItsLastReader(unittest.TestCase):
    """A checkpoint x(c) that no backward op of the segment right of c reads lives until the
    recompute's last read, as memory-model.md 3.1 says, not through the segment's whole backward:
    torch's non-reentrant checkpoint would hold its argument that long (ShuffleNetV2's `linear`
    plan: a channel shuffle first after the cut, 0.9 MiB more than E in stage3.0's backward)."""

    def test_relu_after_the_cut_frees_the_checkpoint(self):
        import weakref

        torch.manual_seed(0)
        model = SmallNet().train()
        x = torch.randn(2, 3, 8, 8)
        # (conv2, pool]: relu2 saves only its output and pool saves relu2's, so after the recompute
        # nothing reads x(conv2).
        applied = apply_plan(model, ["conv2", "pool"], x)
        self.assertEqual(applied.checkpointed, [True, True, False])
        inputs = []
        real = remat_torch.apply.torch_checkpoint.checkpoint

        def spy(fn, *args, **kwargs):
            inputs.append(weakref.ref(fn.input))
            return real(fn, *args, **kwargs)

        alive_in_backward = []

        def on_relu2(module, args, output):
            if not alive_in_backward and output.requires_grad:  # the forward pass: its graph's node
                # Runs in the backward after the segment's recompute, before relu2's backward.
                output.register_hook(lambda grad: alive_in_backward.append(inputs[1]() is not None))

        handle = model.relu2.register_forward_hook(on_relu2)
        try:
            with mock.patch.object(remat_torch.apply.torch_checkpoint, "checkpoint", spy):
                out = applied(x)
            self.assertIsNotNone(inputs[1](), "x(conv2) is the checkpoint: held through the forward pass")
            out.sum().backward()
        finally:
            handle.remove()
        self.assertEqual(alive_in_backward, [False], "x(conv2) held after the recompute's last read")


class PlanForms(unittest.TestCase):
    def setUp(self):
        self.model = SmallNet().train()
        self.x = torch.randn(2, 3, 8, 8)

    def test_indices_documents_and_names_agree(self):
        by_names = apply_plan(self.model, ["relu1", "pool"], self.x)
        self.assertEqual(apply_plan(self.model, ["pool", "relu1"], self.x).plan_names, ["relu1", "pool"])
        by_indices = apply_plan(self.model, [3, 6], self.x, layers=SMALL_LAYERS)
        by_document = apply_plan(self.model, {"checkpoints": [3, 6], "checkpoint_names": ["relu1", "pool"]}, self.x)
        self.assertEqual(by_names.cut_nodes, by_indices.cut_nodes)
        self.assertEqual(by_names.cut_nodes, by_document.cut_nodes)
        chain = {"layers": [{"name": n, "kind": "relu"} for n in SMALL_LAYERS[:6]] + [{"kind": "flatten"}] +
                 [{"name": n, "kind": "relu"} for n in SMALL_LAYERS[6:]]}
        self.assertEqual(apply_plan(self.model, [7], self.x, layers=chain).plan_names, ["drop"])

    def test_bad_plans_name_the_problem(self):
        with self.assertRaisesRegex(LayerMapError, "layer 'conv9' of the plan names no node"):
            apply_plan(self.model, ["conv9"], self.x)
        with self.assertRaisesRegex(PlanError, "needs the chain's layer names"):
            apply_plan(self.model, [2], self.x)
        with self.assertRaisesRegex(PlanError, "not a layer 1..7"):
            apply_plan(self.model, [8], self.x, layers=SMALL_LAYERS)

    def test_a_cut_inside_a_residual_block_is_refused(self):
        import torchvision

        with self.assertRaisesRegex(LayerMapError, "cannot cut after layer 'layer1.0.conv1'.*also reads"):
            apply_plan(torchvision.models.resnet18(), ["layer1.0.conv1"], torch.randn(1, 3, 32, 32))

    def test_an_untraceable_module_is_named(self):
        class Branchy(torch.nn.Module):
            def forward(self, x):
                return x * 2 if x.sum() > 0 else x  # data-dependent control flow

        model = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), torch.nn.Sequential(torch.nn.ReLU(), Branchy()))
        with self.assertRaisesRegex(TraceError, "module '1.1' \\(Branchy\\)"):
            apply_plan(model, [], torch.randn(1, 3, 4, 4))


@needs_remat
class NamesMatchTheOnnxImport(unittest.TestCase):
    """Every layer of remat's import of a torchvision model maps to a node and is a valid cut."""

    def check(self, model, example):
        with temp_dir() as folder:
            names = import_chain_names(model, example, folder)
        gm = layer_map.trace(model)
        nodes = [layer_map.layer_output_node(gm, n) for n in names]
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        positions = [order[n] for n in nodes]
        self.assertEqual(positions, sorted(positions), "the chain's layers map to nodes in order")
        self.assertEqual(nodes[-1], list(gm.graph.nodes)[-1].args[0], "the last layer writes the output")
        every = apply_plan(model, names[:-1], example)  # every layer a checkpoint
        self.assertEqual(every.plan_names, names[:-1])

    def test_torchvision_models(self):
        import torchvision

        for name in ("resnet18", "vgg11_bn", "mobilenet_v2", "alexnet", "efficientnet_b0", "mobilenet_v3_large",
                     "regnet_y_400mf", "shufflenet_v2_x1_0"):
            with self.subTest(model=name):
                res = 224 if name in ("alexnet", "vgg11_bn") else 32  # 1.13 exports adaptive pooling to a divisor only
                self.check(getattr(torchvision.models, name)(), torch.randn(1 if res == 224 else 2, 3, res, res))

    def test_sub_div_and_broadcasting_add_blocks(self):
        # Issue 22: x - mean, + mean, / sigmoid(mean) (ONNX Sub, Add, Div of activations with
        # broadcasting) is one block named after its module, here and in remat's import.
        class Centre(torch.nn.Module):
            def forward(self, x):
                m = x.mean((2, 3), keepdim=True)
                return (m + (x - m)) / torch.sigmoid(m)

        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), Centre(), torch.nn.ReLU(), torch.nn.Flatten(),
                                    torch.nn.Linear(4 * 6 * 6, 5))
        self.check(model, torch.randn(2, 3, 8, 8))


class ShuffleNetNames(unittest.TestCase):
    """ShuffleNetV2 traces (fx unpacks ``x.chunk(2, dim=1)`` on Python 3.11 too), its channel shuffle
    is a layer of its own as remat's import names it, and the head's mean is also
    ``reducemean.flatten``."""

    def test_names(self):
        import operator

        import torchvision

        model = torchvision.models.shufflenet_v2_x1_0().eval()
        gm = layer_map.trace(model)
        x = torch.randn(1, 3, 32, 32)
        with torch.no_grad():
            self.assertTrue(torch.equal(gm(x), model(x)))
        names = layer_map.node_names(gm)
        self.assertIn("stage2.1.channel_shuffle", names)
        block = layer_map.layer_output_node(gm, "stage2.1")
        self.assertIs(block.target, torch.cat, "a block's output is its concatenation, not its chunk")
        shuffle = layer_map.layer_output_node(gm, "stage2.1.channel_shuffle")
        self.assertEqual(shuffle.meta[layer_map.NAME_KEY], "stage2.1.channel_shuffle")
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self.assertLess(order[block], order[shuffle])
        self.assertTrue(all(u.meta[layer_map.NAME_KEY] == "stage2.1.channel_shuffle" for u in block.users),
                        "only the shuffle reads the concatenation")
        self.assertIs(layer_map.layer_output_node(gm, "reducemean.flatten"), layer_map.layer_output_node(gm, "reducemean"))
        self.assertNotIn(operator.getitem, [layer_map.layer_output_node(gm, f"stage{s}.1").target for s in (2, 3, 4)])


if __name__ == "__main__":
    unittest.main()
