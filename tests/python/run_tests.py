#!/usr/bin/env python3
"""Runs the remat_torch tests (python/remat_torch) with unittest; ctest's python_remat_torch.

Exit 77 (ctest's skip) with a message when PyTorch is missing: scripts/setup-deps.sh installs
Debian's python3-torch and python3-torchvision. $REMAT names the remat binary for the tests that
plan (ctest passes the build's); without it those are skipped with a message.
"""
import os
import sys
import unittest

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError as error:
    print(f"SKIP: the remat_torch tests need PyTorch and torchvision ({error}); "
          "scripts/setup-deps.sh installs python3-torch python3-torchvision")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
suite = unittest.defaultTestLoader.discover(here, pattern=pattern)
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
