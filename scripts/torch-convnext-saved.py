#!/usr/bin/python3
"""What PyTorch's autograd saves in one torchvision CNBlock and one LayerNorm2d (ConvNeXt, issue 22).

Walks the autograd graph of one forward and prints each node's `_saved_*` tensors (shape, strides,
dtype and which buffer they alias), the evidence for docs/memory-model.md section 6's ConvNeXt rule.
Run with Debian's PyTorch: /usr/bin/python3 scripts/torch-convnext-saved.py
"""
import torch
from torchvision.models.convnext import CNBlock, LayerNorm2d


def describe(tensor, names):
    """A saved tensor: its shape, strides, dtype and the named buffer it shares storage with."""
    ptr = tensor.untyped_storage().data_ptr() if hasattr(tensor, "untyped_storage") else tensor.storage().data_ptr()
    owner = names.get(ptr, "a buffer of its own")
    return f"{tuple(tensor.shape)} strides {tensor.stride()} {str(tensor.dtype)[6:]} ({owner})"


def walk(node, names, seen, depth=0):
    if node is None or node in seen:
        return
    seen.add(node)
    saved = []
    for attr in sorted(a for a in dir(node) if a.startswith("_saved_")):
        value = getattr(node, attr)
        if torch.is_tensor(value):
            saved.append(f"{attr[7:]}={describe(value, names)}")
    print("  " * depth + type(node).__name__ + (": " + "; ".join(saved) if saved else ""))
    for child, _ in node.next_functions:
        walk(child, names, seen, depth + 1)


def storage_of(tensor):
    return tensor.untyped_storage().data_ptr() if hasattr(tensor, "untyped_storage") else tensor.storage().data_ptr()


def main():
    torch.manual_seed(0)
    block = CNBlock(8, layer_scale=1.0, stochastic_depth_prob=0.0)
    x = torch.randn(2, 8, 5, 5, requires_grad=True)
    names = {storage_of(x): "the block's input"}
    # Name the intermediate buffers with forward hooks on the block's Sequential.
    def name_output(index):
        def hook(module, inputs, output):
            names.setdefault(storage_of(output), f"output of block.{index} ({type(module).__name__})")
        return hook

    for index, module in enumerate(block.block):
        module.register_forward_hook(name_output(index))
    names[storage_of(block.layer_scale)] = "the layer_scale parameter"
    y = block(x)
    print("CNBlock(8) on [2, 8, 5, 5]:")
    walk(y.grad_fn, names, set())
    conv = torch.nn.Conv2d(3, 8, 4, 4)
    norm = LayerNorm2d(8, eps=1e-6)
    c = conv(torch.randn(2, 3, 16, 16))
    names = {storage_of(c): "the conv's output"}
    z = norm(c)
    print(f"\nstem: Conv2d(3, 8, 4, 4) -> LayerNorm2d(8) on [2, 3, 16, 16]; output strides {z.stride()}:")
    walk(z.grad_fn, names, set())


if __name__ == "__main__":
    main()
