"""The hostile campaign's ONNX family for issue 23's transformers: token ids of another rank or element
type, embedding tables of another rank or width, a sequence past the position table, past the
chain's limit on a dimension or so long that the [N, heads, S, S] attention tensor overflows 64-bit
bytes, an attention mask of the wrong shape, and a shorter sequence, which must import. Bases: the
committed small transformer exports of tests/data/onnx/transformer (scripts/make-transformer-onnx.py:
a nanoGPT-style decoder at opsets 14 and 17, a decoder of nn.TransformerEncoderLayer, torchvision's
VisionTransformer, a BERT-style encoder), their symbolic sequence fixed at 16 so that the campaign's
`--batch 2` is all they need (a fixed size takes the same path as `--dim sequence=V`).
The Swin family (torchvision's SwinTransformer, the small exports swin_small_*: 2 x 2 windows at
opset 17, 4 x 4 windows over padded maps at opset 14): a relative position
bias table for another window, an index of another length or with an entry past the table, a shift
mask of the wrong shape, an op a V1 block does not have (as Swin V2's cosine attention), and the
model intact, which must import. swin_t's export is left out of the bases (a 6,764-node graph: seconds
per run).
scripts/hostile_onnx.py draws them with its own families.

A family changes the model in place and returns (surely_invalid, blamed_node[, must_import]), or None
when the base has nothing to change (hostile_onnx_activations.py says what the flags mean).
"""
import os

import onnx
from onnx import TensorProto

from hostile_onnx_activations import EXPORTS

SEQUENCE = 16
KINDS = ["ids-rank", "ids-float", "table-rank", "table-width", "past-positions", "sequence-over-limit",
         "attention-overflow", "mask-shape", "shorter"]


def transformer_bases():
    folder = os.path.join(EXPORTS, "transformer")
    models = {}
    for name in (sorted(os.listdir(folder)) if os.path.isdir(folder) else []):
        if not name.endswith(".onnx") or name.startswith("swin_t_"):
            continue
        m = onnx.load(os.path.join(folder, name))
        for i in m.graph.input:
            for d in i.type.tensor_type.shape.dim:
                if d.dim_param == "sequence":
                    d.dim_value = SEQUENCE
        models["tf-" + name[:-5]] = m
    return models


def _ids(m):
    """The token ids: the integer graph input a Gather reads as its indices."""
    gathered = {n.input[1] for n in m.graph.node if n.op_type == "Gather" and len(n.input) == 2}
    return next((i for i in m.graph.input if i.name in gathered and i.type.tensor_type.elem_type == TensorProto.INT64),
                None)


def _tables(m):
    """[rows, width] graph inputs a Gather reads as its table."""
    names = {n.input[0] for n in m.graph.node if n.op_type == "Gather"}
    return [i for i in m.graph.input if i.name in names and len(i.type.tensor_type.shape.dim) == 2]


def _dims(value_info, dims):
    shape = value_info.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        shape.dim.add().dim_value = d


def _sequence_inputs(m, size):
    for i in m.graph.input:
        if i.type.tensor_type.elem_type == TensorProto.INT64:
            dims = i.type.tensor_type.shape.dim
            if len(dims) == 2:
                dims[1].dim_value = size


def _is_swin(m):
    return any(i.name.endswith("relative_position_index") for i in m.graph.input)


def transformer(m, rng):
    ids = _ids(m)
    if ids is None or _is_swin(m):
        return None
    kind = rng.choice(KINDS)
    tables = _tables(m)
    if kind == "ids-rank":  # [batch, sequence, 1]
        ids.type.tensor_type.shape.dim.add().dim_value = 1
        return True, False
    if kind == "ids-float":
        ids.type.tensor_type.elem_type = TensorProto.FLOAT
        return True, False
    if kind == "table-rank":  # a [vocab, width, 1] table: the lookup is 4-D
        dims = [d.dim_value for d in tables[0].type.tensor_type.shape.dim]
        _dims(tables[0], dims + [1])
        return True, True
    if kind == "table-width":  # one table one column wider: the lookups do not add up
        table = rng.choice(tables)
        dims = [d.dim_value for d in table.type.tensor_type.shape.dim]
        _dims(table, [dims[0], dims[1] + 1])
        return True, True
    if kind == "past-positions":  # a sequence longer than the position table
        _sequence_inputs(m, rng.choice([17, 100, 4096]))
        return True, True
    if kind == "sequence-over-limit":
        _sequence_inputs(m, rng.choice([2 ** 31, 2 ** 40, 2 ** 62]))
        return True, False
    if kind == "attention-overflow":  # tables long enough, S = 2^31 - 1: N * heads * S * S overflows
        size = 2 ** 31 - 1
        for table in tables:
            dims = [d.dim_value for d in table.type.tensor_type.shape.dim]
            if dims[0] == SEQUENCE:
                _dims(table, [size, dims[1]])
        _sequence_inputs(m, size)
        return True, False  # refused by the position buffer's slice or the overflow: a node or not
    if kind == "mask-shape":  # nanoGPT's causal buffer [1, 1, 16, 16] one column short
        buffers = [i for i in m.graph.input if [d.dim_value for d in i.type.tensor_type.shape.dim] == [1, 1, 16, 16]]
        if not buffers:
            return None
        for b in buffers:
            _dims(b, [1, 1, 16, rng.choice([8, 15])])
        return True, True
    _sequence_inputs(m, rng.choice([1, 5, 8]))  # shorter: must import
    return False, False, True


SWIN_KINDS = ["bias-window", "index-length", "index-range", "mask-shape", "unsupported-op", "intact"]


def _side(m, block):
    """The window side M of a block (module path 'features.1.1') from its table's (2M - 1)^2 rows."""
    table = next(i for i in m.graph.input if i.name == block + ".attn.relative_position_bias_table")
    rows = table.type.tensor_type.shape.dim[0].dim_value
    return (round(rows ** 0.5) + 1) // 2


def _mask_adds(m):
    """The Adds of a shift mask to the scores viewed per image: (node, its block's module path)."""
    adds = []
    for n in m.graph.node:
        if n.op_type == "Add" and "/attn/Add_" in n.name and "Reshape" in n.input[0] and "Unsqueeze" in n.input[1]:
            adds.append((n, n.name.split("/")[-3]))
    return adds


def swin(m, rng):
    if not _is_swin(m):
        return None
    kind = rng.choice(SWIN_KINDS)
    tables = [i for i in m.graph.input if i.name.endswith("relative_position_bias_table")]
    indices = [i for i in m.graph.input if i.name.endswith("relative_position_index")]
    if kind == "bias-window":  # the table of a window one larger (or smaller)
        table = rng.choice(tables)
        rows, heads = [d.dim_value for d in table.type.tensor_type.shape.dim]
        side = (round(rows ** 0.5) + 1) // 2 + rng.choice([1, -1])
        _dims(table, [(2 * side - 1) ** 2, heads])
        return True, True
    if kind == "index-length":
        index = rng.choice(indices)
        n = index.type.tensor_type.shape.dim[0].dim_value
        _dims(index, [rng.choice([n - 1, 4 * n, 1])])
        return True, True
    if kind == "index-range":  # the buffer as an initializer, one entry past the table (or negative)
        index = rng.choice(indices)
        block = index.name[: -len(".attn.relative_position_index")]
        rows = (2 * _side(m, block) - 1) ** 2
        n = index.type.tensor_type.shape.dim[0].dim_value
        values = [k % rows for k in range(n)]
        values[rng.randrange(n)] = rng.choice([rows, rows + 7, 2 ** 40, -1])
        m.graph.initializer.append(onnx.helper.make_tensor(index.name, TensorProto.INT64, [n], values))
        return True, True
    if kind == "mask-shape":  # one window's mask (broadcasts, not the block's) or a column short
        adds = _mask_adds(m)
        if not adds:
            return None
        node, block = rng.choice(adds)
        area = _side(m, block) ** 2
        dims = rng.choice([[1, 1, 1, area, area], [1, 2, 1, area, area - 1], [area, area]])
        size = 1
        for d in dims:
            size *= d
        m.graph.initializer.append(onnx.helper.make_tensor("hostile_mask", TensorProto.FLOAT, dims, [0.0] * size))
        node.input[1] = "hostile_mask"
        return True, True
    if kind == "unsupported-op":  # an op no V1 block has, in place of the q scale's Mul
        muls = [n for n in m.graph.node if n.op_type == "Mul" and "/attn/Mul" in n.name and "Gather" in n.input[0]]
        rng.choice(muls).op_type = rng.choice(["Max", "Min"])
        return True, True
    return False, False, True  # intact: must import


TRANSFORMER_FAMILIES = [transformer, swin]


def main():
    """This family alone through `remat import --output`, judged as the campaign judges it:
    /usr/bin/python3 scripts/hostile_onnx_transformer.py --remat build/dev/app/cli/remat --runs 200"""
    import hostile_onnx
    # A run's kind is the family's first draw, replayed from the generator as it was before it.
    return hostile_onnx.run_families_alone(main.__doc__.split("\n")[0], TRANSFORMER_FAMILIES, transformer_bases(),
                                           200, lambda family, before: before.choice(
                                               SWIN_KINDS if family is swin else KINDS))


if __name__ == "__main__":
    raise SystemExit(main())
