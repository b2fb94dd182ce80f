"""scripts/torch-autocast-memory.py: PyTorch 1.13's CPU autocast step of a small CNN against remat's E
under --precision bf16-mixed and fp32 (docs/memory-model.md section 11.7), at two shapes, and of
torchvision's EfficientNet-B0 at batch 2, 32x32."""

import os
import subprocess
import sys
import unittest

from support import REPO, needs_remat, remat_binary

SCRIPT = os.path.join(REPO, "scripts", "torch-autocast-memory.py")


class AutocastScript(unittest.TestCase):
    @needs_remat
    def test_mixed_and_fp32_peaks_match_the_model(self):
        for shape in (["--batch", "8", "--resolution", "32"], ["--batch", "4", "--resolution", "64"]):
            p = subprocess.run([sys.executable, SCRIPT, *shape, "--remat", remat_binary()], capture_output=True,
                               text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertRegex(p.stdout, r"bf16 autocast: remat E \d+ B, PyTorch \d+ B without scratch: within 1024 B")
            self.assertRegex(p.stdout, r"float32: remat E \d+ B, PyTorch \d+ B without scratch: within 1024 B")
            # The saved half weight copies of the first conv (16*3*9*2) and of the second (32*16*9*2).
            self.assertIn("864 B", p.stdout)
            self.assertIn("9216 B", p.stdout)

    @needs_remat
    def test_efficientnet_b0_under_autocast_matches_the_model(self):
        # Squeeze-and-Excitation under CPU autocast: pool, product, SiLU and sigmoid in bfloat16
        # (docs/memory-model.md 11.7). Measured 2026-12-03: PyTorch / E = 1.0033 (fp32, 13 KB) and
        # 0.9993 (bf16-mixed, 7 KB); 16 KiB is a quarter of a block's bfloat16 weight copies.
        p = subprocess.run([sys.executable, SCRIPT, "--model", "efficientnet_b0", "--batch", "2", "--resolution", "32",
                            "--tolerance", "16384", "--remat", remat_binary()], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"bf16 autocast: remat E \d+ B, PyTorch \d+ B without scratch: within 16384 B")
        self.assertRegex(p.stdout, r"float32: remat E \d+ B, PyTorch \d+ B without scratch: within 16384 B")

    @needs_remat
    def test_convnext_block_with_hand_made_casts_matches_the_model(self):
        # A CNBlock with PyTorch 2's CPU autocast dtypes forced by hand on 1.13 (docs/memory-model.md
        # 11.7): layer_scale's product float32, and what autograd saves is the model's E to the byte.
        script = os.path.join(REPO, "scripts", "torch-convnext-bf16-block.py")
        p = subprocess.run([sys.executable, script, "--remat", remat_binary()], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("layer_scale * y is torch.float32, the block's output torch.float32", p.stdout)
        self.assertIn("remat E of the block under bf16-mixed: 452,800 B: equal", p.stdout)


if __name__ == "__main__":
    unittest.main()
