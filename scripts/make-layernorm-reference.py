#!/usr/bin/python3
"""Reference values of nn.LayerNorm from PyTorch, for tests/exec/layernorm_run_test.cpp.

For each case: a fixed input x ([4, 8] float32, rows with different means and spreads), the
weight and bias set from a fixed spread (PyTorch's parameter order: weight [F], then bias [F]), a
fixed upstream gradient r, and PyTorch's y, dx and d(weight, bias) of sum(y * r). It also records what
autograd's NativeLayerNormBackward0 saved (the input, the mean and rstd with their shapes and
dtypes; never the output), which the memory model's rule for layernorm must match. Run with
Debian's PyTorch (/usr/bin/python3); rewrites tests/data/layernorm/torch_reference.json.
"""
import math

import torch

from torch_reference_values import backward_record, set_parameters, spread, write_reference

ROWS, FEATURES = 4, 8
CASES = {"default": 1e-5, "epsilon_0.5": 0.5}


def saved_by_autograd(y, x):
    """What the layer-norm backward node keeps, from its _saved_* fields."""
    node = y.grad_fn
    mean, rstd = node._saved_result1, node._saved_result2
    return {"node": type(node).__name__,
            "input_is_x": node._saved_input is x,
            "keeps_output": any(torch.is_tensor(getattr(node, a)) and getattr(node, a).data_ptr() == y.data_ptr()
                                for a in dir(node) if a.startswith("_saved")),
            "mean": {"shape": list(mean.shape), "dtype": str(mean.dtype).replace("torch.", "")},
            "rstd": {"shape": list(rstd.shape), "dtype": str(rstd.dtype).replace("torch.", "")},
            "statistics_bytes": mean.numel() * mean.element_size() + rstd.numel() * rstd.element_size()}


def main():
    count = ROWS * FEATURES
    # Each row its own mean (row offset) and spread, so the normalisation does something visible.
    x_values = [(1.0 + 0.5 * (i // FEATURES)) * v + (i // FEATURES) - 1.5 for i, v in enumerate(spread(count, 0.9, 2.0))]
    r_values = [math.sin(0.7 * i + 0.3) for i in range(count)]
    result = {"torch_version": str(torch.__version__), "shape": [ROWS, FEATURES], "x": x_values, "r": r_values,
              "cases": {}}
    for name, epsilon in CASES.items():
        module = torch.nn.LayerNorm(FEATURES, eps=epsilon)
        params = list(module.parameters())
        flat = set_parameters(params)
        x = torch.tensor(x_values, dtype=torch.float32).reshape(ROWS, FEATURES).requires_grad_(True)
        r = torch.tensor(r_values, dtype=torch.float32).reshape(ROWS, FEATURES)
        y = module(x)
        saved = saved_by_autograd(y, x)
        record = backward_record(y, r, x, params)
        result["cases"][name] = dict(epsilon=epsilon, params=flat, saved=saved, **record)
    write_reference("layernorm", result)


if __name__ == "__main__":
    main()
