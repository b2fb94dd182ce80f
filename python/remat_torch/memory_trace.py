"""Allocation traces: the profiler's memory events made into snapshot trace entries, and what a
trace says about a step (its peak, its activation peak, what it leaves allocated)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

_MODULE_RANGE = "remat_module::"
_PHASE_PREFIX = "remat::"


def _walk(roots):
    """(event, ancestors innermost first) for every event of the profiler's event tree."""
    stack = [(r, ()) for r in reversed(list(roots))]
    while stack:
        event, ancestors = stack.pop()
        yield event, ancestors
        inner = (event,) + ancestors
        for child in reversed(list(event.children)):
            stack.append((child, inner))


def _is_allocation(event) -> bool:
    return type(event.extra_fields).__name__.endswith("Allocation")


def _device_matches(fields, device) -> bool:
    d = getattr(fields, "device", None)
    if d is None:
        return device.type == "cpu"
    return d.type == device.type and (device.type == "cpu" or (d.index or 0) == (device.index or 0))


def from_profiler(prof, device) -> Tuple[List[dict], List[Tuple[str, int]], int]:
    """The step's allocation events as trace entries, the phase marks' times, and the peak of torch's
    own allocation counter over the step (its ``total_allocated`` minus its value before the step)."""
    roots = prof.profiler.kineto_results.experimental_event_tree()
    module_of_sequence: Dict[int, str] = {}
    allocations = []
    phase_times = []
    for event, ancestors in _walk(roots):
        name = event.name
        if name.startswith(_PHASE_PREFIX):
            phase_times.append((name[len(_PHASE_PREFIX):], event.start_time_ns))
            continue
        if _is_allocation(event):
            if _device_matches(event.extra_fields, device):
                allocations.append((event, ancestors))
            continue
        fields = event.extra_fields
        seq = getattr(fields, "sequence_number", -1)
        if seq is not None and seq >= 0 and not name.startswith("autograd::") and "Backward" not in name:
            module = _module_in(ancestors)
            if module and seq not in module_of_sequence:
                module_of_sequence[seq] = module
    allocations.sort(key=lambda a: a[0].start_time_ns)
    trace = []
    live: Dict[int, int] = {}
    counter_base: Optional[int] = None
    counter_peak = 0
    for event, ancestors in allocations:
        f = event.extra_fields
        size = int(f.alloc_size)
        addr = int(f.ptr)
        if size > 0:
            live[addr] = size
            action = "alloc"
        elif size < 0 and addr in live:
            size = live.pop(addr)
            action = "free_completed"
        else:  # a free of a block allocated before the step: not the step's
            continue
        total = int(f.total_allocated)
        if counter_base is None:
            counter_base = total - size  # the counter before the step's first allocation
        counter_peak = max(counter_peak, total - counter_base)
        trace.append(
            {
                "action": action,
                "addr": addr,
                "size": size,
                "stream": 0,
                "time_us": int(event.start_time_ns // 1000),
                "frames": _frames(ancestors, module_of_sequence),
                "_ns": int(event.start_time_ns),
                "_op": id(ancestors[-1]) if ancestors else None,  # the top-level op (an autograd node's evaluation)
            }
        )
    return trace, phase_times, counter_peak


def _module_in(ancestors) -> Optional[str]:
    for a in ancestors:
        if a.name.startswith(_MODULE_RANGE):
            return a.name[len(_MODULE_RANGE):]
    return None


def _frames(ancestors, module_of_sequence: Dict[int, str]) -> List[dict]:
    """The ops around an allocation, innermost first; filename = the module that ran them."""
    module = _module_in(ancestors)
    if module is None:  # a backward op: the module whose forward op made its autograd node
        for a in ancestors:
            seq = getattr(a.extra_fields, "sequence_number", -1)
            if a.name.startswith("autograd::engine::evaluate_function") and seq in module_of_sequence:
                module = module_of_sequence[seq]
                break
    frames = []
    for a in ancestors:
        if a.name.startswith(_MODULE_RANGE) or a.name.startswith(_PHASE_PREFIX):
            continue
        frames.append({"filename": module or "", "line": 0, "name": a.name})
        if len(frames) == 8:
            break
    return frames


def tensor_peak(trace: Sequence[dict]) -> int:
    """The activation peak without op scratch: allocations freed inside the top-level op that made
    them (a kernel's workspace, a reordered weight) left out, as between ops. Needs the entries'
    ``_op`` (from_profiler's; it is not written to files)."""
    made_in: Dict[int, object] = {}
    scratch = set()
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            made_in[e["addr"]] = (i, e.get("_op"))
        elif e["addr"] in made_in:
            j, op = made_in.pop(e["addr"])
            if op is not None and op == e.get("_op"):
                scratch.add(j)
    persistent = {j for j, _ in made_in.values()}
    live: Dict[int, int] = {}
    held = best = 0
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            if i not in scratch and i not in persistent:
                live[e["addr"]] = e["size"]
                held += e["size"]
                best = max(best, held)
        else:
            held -= live.pop(e["addr"], 0)
    return best


def index_at(trace: List[dict], time_ns: int) -> int:
    """The index of the first trace entry at or after ``time_ns``."""
    return bisect.bisect_left([e["_ns"] for e in trace], time_ns)


@dataclass
class TraceSummary:
    peak_bytes: int  # the most bytes the step's allocations held at once
    activation_peak_bytes: int  # the same without the allocations that outlive the step
    persistent_bytes: int  # allocated in the step, still allocated at its end (the weight gradients)
    forward_end_live_bytes: Optional[int]  # held when the forward pass ends (what it keeps)
    peak_index: int  # the trace entry that reaches activation_peak_bytes


def summarize(trace: Sequence[dict], phases: Sequence[dict] = ()) -> TraceSummary:
    """Replays a trace ("alloc" adds, "free_completed" removes; other actions are the allocator's
    segments and are not counted).

    The activation peak is the measure docs/pytorch.md defines against remat's E: the most bytes
    held at once by the step's allocations that are freed before the step ends. Allocations still
    held at the end (the weight gradients a step with ``grads="none"`` creates) are static in
    remat's model (static = input + weights + their gradients) and are left out at every moment."""
    live: Dict[int, Tuple[int, int]] = {}
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = (i, e["size"])
        elif e["action"] == "free_completed" and e["addr"] in live:
            del live[e["addr"]]
    persistent = {i for i, _ in live.values()}
    persistent_bytes = sum(size for _, size in live.values())
    forward_end = next((p["trace_index"] for p in phases if p["name"] == "forward_end"), None)
    held: Dict[int, int] = {}
    total = activation = peak = best = 0
    peak_index = 0
    forward_end_live = None
    for i, e in enumerate(trace):
        if forward_end is not None and i == forward_end:
            forward_end_live = activation
        if e["action"] == "alloc":
            held[e["addr"]] = i
            total += e["size"]
            if i not in persistent:
                activation += e["size"]
        elif e["action"] == "free_completed" and e["addr"] in held:
            j = held.pop(e["addr"])
            total -= e["size"]
            if j not in persistent:
                activation -= e["size"]
        peak = max(peak, total)
        if activation > best:
            best = activation
            peak_index = i
    if forward_end is not None and forward_end >= len(trace):
        forward_end_live = activation
    return TraceSummary(peak, best, persistent_bytes, forward_end_live, peak_index)
