"""record_step: the recording's schema (the snapshot contract) and its peak against torch's counters."""

import json
import os
import pickle
import unittest

import subprocess

from support import SmallNet, needs_remat, remat_binary, temp_dir, torch

from remat_torch import apply_plan, read_snapshot, record_step, summarize

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "snapshot", "oom"}


class RecordingSchema(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = SmallNet().train()
        self.x = torch.randn(4, 3, 8, 8)

    def check_schema(self, s, plan):
        self.assertEqual(s["segments"], [])
        self.assertIsInstance(s["device_traces"], list)
        trace = s["device_traces"][0]
        self.assertGreater(len(trace), 10)
        live = {}
        for e in trace:
            self.assertIn(e["action"], ACTIONS)
            for key in ("addr", "size", "stream", "time_us"):
                self.assertIsInstance(e[key], int, key)
            self.assertGreater(e["size"], 0)
            for f in e["frames"]:
                self.assertEqual(set(f), {"filename", "line", "name"})
                self.assertIsInstance(f["line"], int)
            if e["action"] == "alloc":
                self.assertNotIn(e["addr"], live, "an address allocated twice without a free")
                live[e["addr"]] = e["size"]
            else:
                self.assertEqual(live.pop(e["addr"]), e["size"], "a free's size is its allocation's")
        times = [e["time_us"] for e in trace]
        self.assertEqual(times, sorted(times))
        r = s["remat"]
        self.assertEqual(r["format"], "remat-torch-recording/1")
        self.assertEqual(r["device"], "cpu")
        self.assertEqual(r["torch_version"], torch.__version__)
        self.assertEqual(r["plan"], plan)
        self.assertEqual(r["batch"], 4)
        params = sum(p.numel() * 4 for p in self.model.parameters())
        buffers = sum(b.numel() * b.element_size() for b in self.model.buffers())
        self.assertEqual(r["static_bytes"], params + buffers + self.x.numel() * 4 + 4 * 8)  # + int64 labels
        names = [p["name"] for p in r["phases"]]
        self.assertEqual(names, ["forward_begin", "forward_end", "backward_end", "step_end"])
        indices = [p["trace_index"] for p in r["phases"]]
        self.assertEqual(indices, sorted(indices))
        self.assertLessEqual(indices[-1], len(trace))
        # What outlives the step is the weight gradients the backward made (grads="none").
        self.assertEqual(sum(live.values()), params)
        self.assertEqual(r["persistent_bytes"], params)

    def test_json_and_pickle(self):
        with temp_dir() as folder:
            for name in ("step.json", "step.pickle"):
                path = os.path.join(folder, name)
                s = record_step(apply_plan(self.model, ["relu1"], self.x), self.x, path)
                self.check_schema(s, ["relu1"])
                with open(path, "rb") as f:
                    raw = f.read()
                if name.endswith(".json"):
                    self.assertEqual(json.loads(raw.decode("utf-8")), s)
                else:
                    self.assertEqual(raw[:2], b"\x80\x04")  # pickle protocol 4
                    self.assertEqual(pickle.loads(raw), s)
                self.assertEqual(read_snapshot(path), s)
            self.assertEqual(sorted(os.listdir(folder)), ["step.json", "step.pickle"])  # no temporaries left

    @needs_remat
    def test_remat_reads_the_recording(self):
        """Both encodings reach remat's reader: the pickle holds plain data only (no class references)."""
        with temp_dir() as folder:
            for name in ("step.json", "step.pickle"):
                path = os.path.join(folder, name)
                record_step(self.model, self.x, path)
                timeline = os.path.join(folder, name + ".timeline.json")
                done = subprocess.run([remat_binary(), "simulate", "zoo:alexnet", "--batch", "1",
                                       "--checkpoints", "", "--measured", path, "--timeline", timeline],
                                      capture_output=True, text=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                with open(timeline, encoding="utf-8") as f:
                    sources = [t["source"] for t in json.load(f)["timelines"]]
                self.assertIn("cpu", sources)

    def test_store_all_on_the_plain_model(self):
        self.check_schema(record_step(self.model, self.x), None)

    def test_frames_name_ops_and_modules(self):
        s = record_step(self.model, self.x)
        frames = [f for e in s["device_traces"][0] for f in e["frames"]]
        self.assertIn("aten::convolution_backward", {f["name"] for f in frames})
        modules = {f["filename"] for f in frames if f["name"].startswith("aten::mkldnn_convolution")}
        self.assertEqual(modules, {"conv1", "conv2"})
        backward = {f["filename"] for f in frames if f["name"] == "aten::convolution_backward"}
        self.assertEqual(backward, {"conv1", "conv2"})  # attributed through the autograd node's sequence number


class WholeStep(unittest.TestCase):
    """With an optimizer the recording is a loop's steady-state step: the state is static, the
    gradients made by the backward are freed by zero_grad(set_to_none=True) inside it, and the
    step's temporaries (single-tensor AdamW: the previous tensor's denominator beside a square root
    and a quotient) are in the trace."""

    def test_adamw_step_recorded(self):
        torch.manual_seed(0)
        model = SmallNet().train()
        x = torch.randn(4, 3, 8, 8)
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
        torch.nn.functional.cross_entropy(model(x), torch.zeros(4, dtype=torch.long)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        s = record_step(model, x, optimizer=optimizer)
        r = s["remat"]
        params = [p.numel() * 4 for p in model.parameters()]
        buffers = sum(b.numel() * b.element_size() for b in model.buffers())
        state = sum(t.numel() * t.element_size() for st in optimizer.state.values() for t in st.values())
        self.assertEqual(r["static_bytes"], sum(params) + buffers + x.numel() * 4 + 4 * 8 + state)
        self.assertEqual([p["name"] for p in r["phases"]],
                         ["forward_begin", "forward_end", "backward_end", "optimizer_end", "step_end"])
        self.assertEqual(r["step"], {"optimizer": "adamw", "foreach": False, "grads": "on-backward", "precision": "fp32"})
        summary = summarize(s["device_traces"][0], r["phases"])
        self.assertEqual(summary.persistent_bytes, 0)  # zero_grad(set_to_none=True) freed every gradient
        self.assertEqual(summary.peak_bytes, r["torch_counter_peak_bytes"])
        # The optimizer's phase holds every gradient plus the largest (previous + 2 x tensor) pair.
        trace = s["device_traces"][0]
        start = next(p["trace_index"] for p in r["phases"] if p["name"] == "backward_end")
        end = next(p["trace_index"] for p in r["phases"] if p["name"] == "optimizer_end")
        held = sum(e["size"] if e["action"] == "alloc" else -e["size"] for e in trace[:start])
        most = held
        for e in trace[start:end]:
            held += e["size"] if e["action"] == "alloc" else -e["size"]
            most = max(most, held)
        pairs = max(prev + 2 * t for prev, t in zip([0] + params[:-1], params))
        gradients = sum(params)
        # The step's temporaries, freed by its end (and a few 0-dim float32 scalars of 1.13's loop).
        self.assertGreaterEqual(most - held, pairs)
        self.assertLessEqual(most - held, pairs + 64)
        self.assertGreaterEqual(held, gradients)
        self.assertIsNone(next(iter(model.parameters())).grad)


class PeakAgainstTorchCounters(unittest.TestCase):
    def test_peak_is_torchs(self):
        """The trace's own peak equals the peak of PyTorch's allocation counter over the step, and it is
        reached inside an op (an allocation the op frees again), not between modules."""
        torch.manual_seed(0)
        model = SmallNet().train()
        x = torch.randn(8, 3, 8, 8)
        for plan in ([], ["relu1", "pool"]):
            s = record_step(apply_plan(model, plan, x), x)
            summary = summarize(s["device_traces"][0], s["remat"]["phases"])
            self.assertEqual(summary.peak_bytes, s["remat"]["torch_counter_peak_bytes"])
            self.assertLessEqual(summary.activation_peak_bytes, summary.peak_bytes)
            self.assertEqual(summary.activation_peak_bytes, s["remat"]["activation_peak_bytes"])

    def test_activation_peak_by_hand(self):
        trace = [
            {"action": "alloc", "addr": 1, "size": 100},
            {"action": "alloc", "addr": 2, "size": 50},  # persistent: never freed
            {"action": "alloc", "addr": 3, "size": 30},
            {"action": "free_completed", "addr": 1, "size": 100},
            {"action": "alloc", "addr": 1, "size": 10},
            {"action": "free_completed", "addr": 3, "size": 30},
            {"action": "free_completed", "addr": 1, "size": 10},
        ]
        phases = [{"name": "forward_end", "trace_index": 3}]
        s = summarize(trace, phases)
        self.assertEqual((s.peak_bytes, s.activation_peak_bytes, s.persistent_bytes), (180, 130, 50))
        self.assertEqual((s.forward_end_live_bytes, s.peak_index), (130, 2))


if __name__ == "__main__":
    unittest.main()
