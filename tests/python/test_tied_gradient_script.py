"""scripts/torch-tied-gradient.py (docs/memory-model.md 11.2): in PyTorch the tied table's gradient
bytes appear at the head's backward (MmBackward0), its .grad only after the embedding's backward,
and the step's peak is the model's B(1) footprint (the tied head's buffered gradient and the
embedding's dense one included), to 1 KiB."""

import json
import os
import subprocess
import sys
import unittest

from support import REPO, needs_remat, remat_binary

SCRIPT = os.path.join(REPO, "scripts", "torch-tied-gradient.py")


class TiedGradientScript(unittest.TestCase):
    @needs_remat
    def test_the_table_gradient_is_made_by_the_heads_backward(self):
        p = subprocess.run([sys.executable, SCRIPT, "--remat", remat_binary(), "--vocab", "1024", "--width", "64"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        result = json.loads(p.stdout.strip().splitlines()[-1])
        sized = [where for where, n in result["measured"]["table_sized"] if n > 0]
        self.assertIn("MmBackward0", sized[0])  # the first table-sized buffer: the head's backward
        self.assertTrue(all("EmbeddingBackward0" in where for where in sized[1:]), sized)
        self.assertEqual(result["measured"]["hook_after"], "torch::autograd::AccumulateGrad")
        self.assertLessEqual(abs(result["unexplained"]), 1024, p.stdout)


if __name__ == "__main__":
    unittest.main()
