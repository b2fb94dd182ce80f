"""python -m remat_torch: plan (export, remat, apply) and record; bad input is exit 2."""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import unittest

from support import REPO, needs_remat, remat_binary, temp_dir


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    if remat_binary():
        env["REMAT"] = remat_binary()
    return subprocess.run([sys.executable, "-m", "remat_torch", *args], capture_output=True, text=True, env=env)


def run_main(*args):
    """The command line in this process (no new interpreter to import torch): (exit code, stdout, stderr)."""
    from remat_torch.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


class Cli(unittest.TestCase):
    @needs_remat
    def test_plan_applies_and_records(self):
        with temp_dir() as folder:
            plan_path = os.path.join(folder, "plan.json")
            rec = os.path.join(folder, "step.json")
            p = run_cli("plan", "resnet18", "--planner", "optimal", "--batch", "2", "--resolution", "32",
                        "--output", plan_path, "--record", rec, "--threads", "1")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("resnet18: planner optimal, checkpoints ", p.stdout)
            with open(plan_path, encoding="utf-8") as f:
                plan = json.load(f)
            self.assertEqual(plan["planner"], "optimal")
            self.assertTrue(plan["checkpoint_names"])
            with open(rec, encoding="utf-8") as f:
                recording = json.load(f)
            self.assertEqual(recording["remat"]["plan"], plan["checkpoint_names"])
            r = run_cli("record", "resnet18", "--plan", plan_path, "--batch", "2", "--resolution", "32",
                        "--out", os.path.join(folder, "again.pickle"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("activation peak", r.stdout)

    @needs_remat
    def test_whole_step_planned_and_recorded(self):
        """--optimizer: remat's total for the whole step and PyTorch's measured one, within 5%
        (docs/pytorch.md, "The whole step")."""
        with temp_dir() as folder:
            rec = os.path.join(folder, "step.json")
            p = run_cli("plan", "resnet18", "--planner", "none", "--batch", "2", "--resolution", "32", "--threads", "1",
                        "--optimizer", "adamw", "--record", rec, "--output", os.path.join(folder, "plan.json"))
            self.assertEqual(p.returncode, 0, p.stderr)
            predicted = float(re.search(r"the whole step ([0-9.]+) MiB \(--optimizer adamw --foreach off "
                                        r"--grads on-backward\)", p.stdout).group(1))
            measured = float(re.search(r"measured: whole step ([0-9.]+) MiB", p.stdout).group(1))
            self.assertLess(abs(measured / predicted - 1), 0.05, p.stdout)
            with open(rec, encoding="utf-8") as f:
                step = json.load(f)["remat"]["step"]
            self.assertEqual(step, {"optimizer": "adamw", "foreach": False, "grads": "on-backward", "precision": "fp32"})

    def test_a_user_factory(self):
        with temp_dir() as folder:
            out = os.path.join(folder, "s.json")
            code, stdout, stderr = run_main("record", "support:SmallNet", "--batch", "2", "--resolution", "8", "--out", out)
            self.assertEqual(code, 0, stderr)
            self.assertIn("support:SmallNet: activation peak", stdout)

    @needs_remat
    def test_profile_writes_the_workspaces(self):
        with temp_dir() as folder:
            out = os.path.join(folder, "chain.json")
            code, stdout, stderr = run_main("profile", "test_workspace:ConvNet", "--batch", "8", "--resolution", "32",
                                            "--threads", "1", "--out", out)
            self.assertEqual(code, 0, stderr)
            self.assertIn("conv2: wf ", stdout)
            with open(out, encoding="utf-8") as f:
                layers = {layer["name"]: layer for layer in json.load(f)["layers"]}
            self.assertGreater(layers["conv2"]["bwd_workspace_bytes"], 0)
            self.assertTrue(all("fwd_workspace_bytes" in layers[n] for n in ("conv1", "bn1", "relu1", "pool", "fc")))
            p = subprocess.run([remat_binary(), "simulate", out, "--checkpoints", ""], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_profile_for_static_gradients_takes_the_fresh_gradient_off(self):
        # --grads static profiles with the .grad buffers allocated; each layer's wb falls by at most
        # its own fresh gradient (memory-model.md 11.2).
        with temp_dir() as folder:
            wb = {}
            for grads in ("in-place", "static"):
                out = os.path.join(folder, grads + ".json")
                code, _, stderr = run_main("profile", "test_workspace:ConvNet", "--batch", "8", "--resolution", "32",
                                           "--threads", "1", "--grads", grads, "--out", out)
                self.assertEqual(code, 0, stderr)
                with open(out, encoding="utf-8") as f:
                    wb[grads] = {layer["name"]: layer["bwd_workspace_bytes"] for layer in json.load(f)["layers"]
                                 if "bwd_workspace_bytes" in layer}
            fc_grads = (64 * 8 * 8 * 10 + 10) * 4
            self.assertLessEqual(wb["static"]["fc"], wb["in-place"]["fc"])
            self.assertLessEqual(wb["in-place"]["fc"] - wb["static"]["fc"], fc_grads)
            self.assertEqual(set(wb["static"]), set(wb["in-place"]))

    def test_bad_input_is_exit_2(self):
        with temp_dir() as folder:
            cases = [
                (["record", "no_such_net", "--out", os.path.join(folder, "a.json")], "not a torchvision model name"),
                (["record", "support:Nothing", "--out", os.path.join(folder, "a.json")], "has no callable 'Nothing'"),
                (["record", "resnet18", "--out", os.path.join(folder, "missing", "a.json")], "does not exist"),
                (["plan", "resnet18", "--planner", "optimal", "--remat", os.path.join(folder, "nope")], None),
                (["profile", "resnet18", "--chain", os.path.join(folder, "none.json"), "--out",
                  os.path.join(folder, "p.json")], "no such file"),
            ]
            for args, message in cases:
                code, _, stderr = run_main(*args)
                self.assertEqual(code, 2, (args, stderr))
                self.assertIn("remat_torch: error: ", stderr)
                if message:
                    self.assertIn(message, stderr)
            self.assertEqual(os.listdir(folder), [])


if __name__ == "__main__":
    unittest.main()
