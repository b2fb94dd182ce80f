"""Shared pieces of the remat_torch tests (run by tests/python/run_tests.py)."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402  (run_tests.py skips the whole suite when torch is missing)
import torch.nn as nn  # noqa: E402

torch.set_num_threads(1)


class SmallNet(nn.Module):
    """conv-bn-relu(inplace)-conv-relu-pool-fc: a chain whose layers are its own modules."""

    def __init__(self, classes: int = 5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8 * 4 * 4, classes)

    def forward(self, x):
        x = self.pool(self.relu2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
        return self.fc(self.drop(torch.flatten(x, 1)))


SMALL_LAYERS = ["conv1", "bn1", "relu1", "conv2", "relu2", "pool", "drop", "fc"]  # remat's names


def remat_binary():
    """The remat binary ctest passes in $REMAT, or the dev build's; None when neither is there."""
    for path in (os.environ.get("REMAT"), os.path.join(REPO, "build", "dev", "app", "cli", "remat")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def import_chain_names(model, example, folder):
    """The layer names remat's ONNX import gives ``model`` (the chain file's layers, flatten folded)."""
    from remat_torch.plan import chain_layer_names
    from remat_torch.remat_cli import export_onnx

    onnx_path = os.path.join(folder, "model.onnx")
    chain_path = os.path.join(folder, "chain.json")
    export_onnx(model, example, onnx_path)
    subprocess.run(
        [remat_binary(), "import", onnx_path, "--batch", str(example.shape[0]), "--output", chain_path],
        check=True, capture_output=True,
    )
    return chain_layer_names(chain_path)


def needs_remat(test):
    return unittest.skipUnless(remat_binary(), "the remat binary is not built (set $REMAT)")(test)


def temp_dir():
    return tempfile.TemporaryDirectory(prefix="remat-torch-test-")
