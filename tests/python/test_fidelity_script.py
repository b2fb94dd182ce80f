"""scripts/torch-fidelity.py's device and chain choices: the zoo's chain gives the same rows as the
import, and a CUDA run on a PyTorch without CUDA is refused with exit 2 before any work."""

import os
import subprocess
import sys
import unittest

import torch

from support import REPO, needs_remat, remat_binary

SCRIPT = os.path.join(REPO, "scripts", "torch-fidelity.py")


def fidelity(*args):
    return subprocess.run([sys.executable, SCRIPT, *args, "--remat", remat_binary()], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


class FidelityScript(unittest.TestCase):
    @needs_remat
    def test_zoo_chain_rows_within_tolerance(self):
        p = fidelity("--models", "resnet18", "--planners", "none,optimal", "--batch", "2", "--resolution", "32",
                     "--chain", "zoo")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("2 of 2 rows within 5% of E; 0 failed", p.stdout)
        self.assertRegex(p.stdout, r"resnet18\s+zoo\s+none")

    @needs_remat
    @unittest.skipIf(torch.cuda.is_available(), "this PyTorch has CUDA: the refusal is for one without")
    def test_cuda_without_cuda_is_refused(self):
        p = fidelity("--device", "cuda", "--fast")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("--device cuda: this PyTorch", p.stderr)
        self.assertIn("sees no CUDA device", p.stderr)
        self.assertNotIn("rows within", p.stdout)


if __name__ == "__main__":
    unittest.main()
