"""Plans as remat writes them: layer names, layer indices, or the `remat plan --json` document."""

from __future__ import annotations

import json
import os
from typing import List, Optional, Sequence, Union

PlanLike = Union[None, str, dict, Sequence[Union[int, str]]]


class PlanError(ValueError):
    """A plan that cannot be read or does not fit the chain."""


def chain_layer_names(chain: Union[str, dict, Sequence[str]]) -> List[str]:
    """The model layers' names, 1..n, from a remat-chain/1 file (path or parsed) or a list of names.

    Flatten entries are views, folded away before layers are numbered (docs/formats.md, section 1).
    """
    if isinstance(chain, (list, tuple)):
        return [str(name) for name in chain]
    if isinstance(chain, str):
        with open(chain, encoding="utf-8") as f:
            try:
                chain = json.load(f)
            except json.JSONDecodeError as error:
                raise PlanError(f"{chain_path_text(chain)}: not a JSON chain file: {error}") from error
    if not isinstance(chain, dict) or not isinstance(chain.get("layers"), list):
        raise PlanError("a chain must be a remat-chain/1 object with a 'layers' array, or a list of layer names")
    names = []
    for i, layer in enumerate(chain["layers"]):
        if not isinstance(layer, dict):
            raise PlanError(f"chain layer {i + 1}: not an object")
        if layer.get("kind") == "flatten":
            continue
        names.append(str(layer.get("name", f"layer{len(names) + 1}")))
    return names


def chain_path_text(path: object) -> str:
    return repr(path) if not isinstance(path, str) else path


def checkpoint_names(plan: PlanLike, layers: Optional[Sequence[str]] = None) -> List[str]:
    """The plan's checkpoints as chain layer names.

    ``plan`` is a list of layer names, a list of 1-based layer indices (then ``layers`` gives the
    chain's layer names), a ``remat plan --json`` object (its ``checkpoint_names``, else its
    ``checkpoints`` with ``layers``), the path of a file holding one, or None / [] (store all).
    """
    if plan is None:
        return []
    if isinstance(plan, str):
        if not os.path.exists(plan):
            raise PlanError(f"plan '{plan}': no such file")
        with open(plan, encoding="utf-8") as f:
            try:
                plan = json.load(f)
            except json.JSONDecodeError as error:
                raise PlanError(f"plan '{plan}': not JSON: {error}") from error
    if isinstance(plan, dict):
        if isinstance(plan.get("checkpoint_names"), list) and all(
            isinstance(n, str) for n in plan["checkpoint_names"]
        ):
            return list(plan["checkpoint_names"])
        if "checkpoints" not in plan:
            raise PlanError("a plan object needs 'checkpoint_names' or 'checkpoints' (what `remat plan --json` writes)")
        plan = plan["checkpoints"]
    if not isinstance(plan, (list, tuple)):
        raise PlanError(f"a plan is a list of layer names or indices, not {type(plan).__name__}")
    if all(isinstance(c, str) for c in plan):
        return list(plan)
    if all(isinstance(c, int) and not isinstance(c, bool) for c in plan):
        if not plan:
            return []
        if layers is None:
            raise PlanError(
                "a plan of layer indices needs the chain's layer names (layers=: a remat-chain/1 file "
                "from `remat import MODEL.onnx --output chain.json`, or the list of names)"
            )
        names = list(layers)
        out = []
        for c in plan:
            if not 1 <= c < len(names):
                raise PlanError(f"checkpoint {c} is not a layer 1..{len(names) - 1} of the chain ({len(names)} layers)")
            out.append(names[c - 1])
        return out
    raise PlanError("a plan mixes names and indices, or holds something else: give names or 1-based indices")
