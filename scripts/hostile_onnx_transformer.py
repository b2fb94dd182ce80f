"""The hostile campaign's ONNX family for issue 23's transformers: token ids of another rank or element
type, embedding tables of another rank or width, a sequence past the position table, past the
chain's limit on a dimension or so long that the [N, heads, S, S] attention tensor overflows 64-bit
bytes, an attention mask of the wrong shape, and a shorter sequence, which must import. Bases: the
committed small transformer exports of tests/data/onnx/transformer (scripts/make-transformer-onnx.py:
a nanoGPT-style decoder at opsets 14 and 17, a decoder of nn.TransformerEncoderLayer, torchvision's
VisionTransformer, a BERT-style encoder), their symbolic sequence fixed at 16 so that the campaign's
`--batch 2` is all they need (a fixed size takes the same path as `--dim sequence=V`).
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
        if not name.endswith(".onnx"):
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


def transformer(m, rng):
    ids = _ids(m)
    if ids is None:
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


TRANSFORMER_FAMILIES = [transformer]


def main():
    """This family alone through `remat import --output`, judged as the campaign judges it:
    /usr/bin/python3 scripts/hostile_onnx_transformer.py --remat build/dev/app/cli/remat --runs 200"""
    import hostile_onnx
    # A run's kind is the family's first draw, replayed from the generator as it was before it.
    return hostile_onnx.run_families_alone(main.__doc__.split("\n")[0], TRANSFORMER_FAMILIES, transformer_bases(),
                                           200, lambda family, before: before.choice(KINDS))


if __name__ == "__main__":
    raise SystemExit(main())
