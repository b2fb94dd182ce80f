"""What the make-*-reference.py scripts share: fixed values, parameters set from them, the gradients
of sum(y * r) as JSON lists, and the reference file under tests/data. Debian's PyTorch only."""
import json
import math
import pathlib

import torch


def spread(count, phase, scale):
    """count fixed values in [-scale, scale], different for each phase."""
    return [scale * math.sin(1.3 * i + phase) for i in range(count)]


def set_parameters(params):
    """Sets params, in order, from one spread; returns the flat values (the chain's parameter order)."""
    flat = spread(sum(p.numel() for p in params), 0.4, 0.5)
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.tensor(flat[offset:offset + p.numel()]).reshape(p.shape))
            offset += p.numel()
    return flat


def backward_record(y, r, x, params):
    """Runs sum(y * r).backward(); returns y, dx and d(params), flattened, as lists of floats."""
    (y * r).sum().backward()
    return {
        "y": [float(v) for v in y.detach().flatten()],
        "dx": [float(v) for v in x.grad.flatten()],
        "dparams": [float(v) for p in params for v in p.grad.flatten()],
    }


def write_reference(folder, result):
    """Writes tests/data/FOLDER/torch_reference.json."""
    out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / folder / "torch_reference.json"
    out.write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {out}")
