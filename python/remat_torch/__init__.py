"""remat_torch: remat's checkpoint plans applied to PyTorch models, and PyTorch's memory recorded.

- apply_plan(model, plan, example_input): the model cut at the plan's checkpoints, every segment
  but the last under non-reentrant torch.utils.checkpoint (apply.py; the layer mapping: layer_map.py).
- record_step(model, batch, out=PATH): one training step under memory recording, written as a
  PyTorch memory snapshot with remat's "remat" key (record.py).
- profile_workspaces(model, example_input, chain) / write_profiled_chain: PyTorch's in-op scratch of
  each chain layer, written into the chain as its workspaces wf / wb (workspace.py).
- step.py: the optimizers of remat's --optimizer as torch.optim builds them and the warm-up step
  that creates their state, for recording a whole training step (record_step(..., optimizer=)).
- python -m remat_torch plan|record|profile ...: the command line (cli.py).

docs/pytorch.md describes all of it.
"""

from .apply import CheckpointedModel, apply_plan
from .layer_map import LayerMapError, TraceError
from .memory_trace import TraceSummary, summarize
from .plan import PlanError, chain_layer_names, checkpoint_names
from .record import read_snapshot, record_step, write_snapshot
from .workspace import WorkspaceProfile, profile_workspaces, write_profiled_chain

__all__ = [
    "CheckpointedModel", "LayerMapError", "PlanError", "TraceError", "TraceSummary", "apply_plan",
    "chain_layer_names", "checkpoint_names", "read_snapshot", "record_step", "summarize", "write_snapshot",
    "WorkspaceProfile", "profile_workspaces", "write_profiled_chain",
]
