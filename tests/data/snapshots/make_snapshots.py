#!/usr/bin/env python3
"""Makes the snapshot test data of tests/data/snapshots (README.md there) with Python's own pickle
and, for the CPU recording, Debian's PyTorch 1.13. Run from the repository root:
    /usr/bin/python3 tests/data/snapshots/make_snapshots.py
The C++ tests (tests/report/snapshot_test.cpp) read the files and compare with expected.json, whose
numbers this script computes by its own replay, apart from the C++ reader."""
import json
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def shaped_snapshot():
    """A CUDA-style snapshot as torch.cuda.memory._snapshot() returns it (PyTorch 2.x), small and
    with every kind of value: big ints (addresses), a float, a tuple, None, bools, and one frames
    list shared by several events (pickle writes it once and refers to it through the memo)."""
    base = 139_637_976_727_552  # 0x7f0000000000-ish: beyond 32 bits, so LONG1 in the pickle
    frames_fwd = [{"filename": "/home/user/model.py", "line": 12, "name": "forward"},
                  {"filename": "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "line": 1194,
                   "name": "_call_impl"}]
    frames_bwd = [{"filename": "/home/user/train.py", "line": 30, "name": "step"}]
    t0 = 1_700_000_000_000_000
    trace = [
        {"action": "segment_alloc", "addr": base, "size": 20 * MiB, "stream": 0, "time_us": t0, "frames": frames_fwd},
        # freed without being allocated in the trace: alive before it (static)
        {"action": "free_requested", "addr": base + 18 * MiB, "size": MiB, "stream": 0, "time_us": t0 + 1,
         "frames": []},
        {"action": "free_completed", "addr": base + 18 * MiB, "size": MiB, "stream": 0, "time_us": t0 + 1,
         "frames": []},
        {"action": "alloc", "addr": base, "size": 4 * MiB, "stream": 0, "time_us": t0 + 2, "frames": frames_fwd},
        {"action": "alloc", "addr": base + 4 * MiB, "size": 2 * MiB, "stream": 0, "time_us": t0 + 3,
         "frames": frames_fwd},
        {"action": "alloc", "addr": base + 6 * MiB, "size": 8 * MiB, "stream": 0, "time_us": t0 + 5,
         "frames": frames_bwd},
        {"action": "free_requested", "addr": base + 4 * MiB, "size": 2 * MiB, "stream": 0, "time_us": t0 + 8,
         "frames": frames_bwd},
        {"action": "free_completed", "addr": base + 4 * MiB, "size": 2 * MiB, "stream": 0, "time_us": t0 + 9,
         "frames": frames_bwd},
        {"action": "oom", "addr": 0, "size": 64 * MiB, "stream": 0, "time_us": t0 + 10, "frames": frames_bwd,
         "device_free": 3 * MiB},
        {"action": "free_requested", "addr": base + 6 * MiB, "size": 8 * MiB, "stream": 0, "time_us": t0 + 11,
         "frames": frames_bwd},
        {"action": "free_completed", "addr": base + 6 * MiB, "size": 8 * MiB, "stream": 0, "time_us": t0 + 12,
         "frames": frames_bwd},
    ]
    segment = {
        "device": 0, "address": base, "total_size": 20 * MiB, "allocated_size": 7 * MiB, "active_size": 7 * MiB,
        "requested_size": 7 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
        "is_expandable": False, "fraction_used": 0.35, "category": None,
        "frames": frames_fwd,
        "blocks": [
            {"address": base, "size": 4 * MiB, "requested_size": 4 * MiB, "state": "active_allocated",
             "frames": frames_fwd},
            {"address": base + 4 * MiB, "size": 12 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
            # alive before the trace and never freed: static too
            {"address": base + 16 * MiB, "size": 2 * MiB, "requested_size": 3 * MiB // 2,
             "state": "active_allocated", "frames": []},
            {"address": base + 18 * MiB, "size": 2 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
        ],
    }
    return {"segments": [segment], "device_traces": [trace, []]}


def replay(trace):
    """Dynamic live bytes over the trace: the peak, the end, and the bytes freed unallocated."""
    live, peak, alive, freed_unallocated = 0, 0, {}, 0
    for e in trace:
        if e["action"] == "alloc":
            alive[e["addr"]] = e["size"]
            live += e["size"]
        elif e["action"] in ("free_completed", "free"):
            if e["addr"] in alive:
                live -= alive.pop(e["addr"])
            else:
                freed_unallocated += e["size"]
        peak = max(peak, live)
    return peak, live, freed_unallocated, alive


def record_cpu_step():
    """One training step of a small CNN on the CPU, recorded as the contract says: the profiler's
    memory events as alloc / free_completed entries, frames naming the aten op and the module."""
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))
    names = {m: n for n, m in model.named_modules() if n}
    scopes = {}

    def enter(module, _inputs):
        scopes[module] = record_function("module::" + names[module])
        scopes[module].__enter__()

    def leave(module, _inputs, _output):
        scopes.pop(module).__exit__(None, None, None)

    for m in names:
        m.register_forward_pre_hook(enter)
        m.register_forward_hook(leave)
    x = torch.randn(4, 3, 16, 16)
    static_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) + x.numel() * x.element_size()
    marks = {}
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("remat::forward"):
            loss = model(x).sum()
        with record_function("remat::backward"):
            loss.backward()
    tree = prof.profiler.kineto_results.experimental_event_tree()
    events = []

    def walk(event):
        events.append(event)
        for child in event.children:
            walk(child)

    for root in tree:
        walk(root)
    allocations = sorted((e for e in events if str(e.tag).endswith("Allocation")), key=lambda e: e.start_time_ns)
    trace = []
    for e in allocations:
        module, op, phase, parent = "", "", "", e.parent
        while parent is not None:
            if parent.name.startswith("module::") and not module:
                module = parent.name[len("module::"):]
            elif parent.name.startswith("remat::"):
                phase = parent.name
            elif parent.name.startswith("aten::") and not op:
                op = parent.name
            parent = parent.parent
        if phase == "remat::backward" and "forward_end" not in marks:
            marks["forward_end"] = len(trace)
        f = e.extra_fields
        trace.append({"action": "alloc" if f.alloc_size > 0 else "free_completed", "addr": f.ptr,
                      "size": abs(f.alloc_size), "stream": 0, "time_us": e.start_time_ns // 1000,
                      "frames": [{"filename": module, "line": 0, "name": op or "(no op)"}]})
    forward_end = marks.get("forward_end", len(trace))
    return {
        "segments": [],
        "device_traces": [trace],
        "remat": {"format": "remat-torch-recording/1", "device": "cpu", "torch_version": str(torch.__version__),
                  "model": "conv-bn-relu-pool-linear", "plan": None, "batch": 4, "static_bytes": static_bytes,
                  "phases": [{"name": "forward_begin", "trace_index": 0},
                             {"name": "forward_end", "trace_index": forward_end},
                             {"name": "backward_end", "trace_index": len(trace)},
                             {"name": "step_end", "trace_index": len(trace)}]},
    }


def main():
    expected = {}
    shaped = shaped_snapshot()
    for protocol in (2, 3, 4, 5):
        with open(os.path.join(HERE, f"shaped-p{protocol}.pickle"), "wb") as f:
            pickle.dump(shaped, f, protocol=protocol)
    with open(os.path.join(HERE, "shaped.json"), "w") as f:
        json.dump(shaped, f, indent=1)
    peak, end, freed_unallocated, alive = replay(shaped["device_traces"][0])
    static = freed_unallocated
    for seg in shaped["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["address"] not in alive:
                static += b.get("requested_size", b["size"])
    expected["shaped"] = {"dynamic_peak_bytes": peak, "live_at_end_bytes": end, "static_bytes": static,
                          "source": "cuda:0"}
    recording = record_cpu_step()
    with open(os.path.join(HERE, "cpu-recording.pickle"), "wb") as f:
        pickle.dump(recording, f)
    peak, end, _, _ = replay(recording["device_traces"][0])
    expected["cpu-recording"] = {"dynamic_peak_bytes": peak, "live_at_end_bytes": end,
                                 "static_bytes": recording["remat"]["static_bytes"], "source": "cpu",
                                 "events": len(recording["device_traces"][0]),
                                 "forward_end": recording["remat"]["phases"][1]["trace_index"]}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
