"""scripts/torch-autocast-memory.py: PyTorch 1.13's CPU autocast step of a small CNN against remat's E
under --precision bf16-mixed and fp32 (docs/memory-model.md section 11.7), at two shapes."""

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


if __name__ == "__main__":
    unittest.main()
