#!/usr/bin/env python3
"""PyTorch's own tools read a snapshot that `remat run --device cpu --timeline X.pickle` exported
(docs/formats.md, "PyTorch memory snapshots"): pickle.load, torch.cuda._memory_viz's stats and
segments (the functions Debian's PyTorch 1.13 has; 2.x takes the whole snapshot, 1.13 its
segments), and a replay of each device trace as MemoryViz.js's Active Memory Timeline does it
(alloc / free_completed, sizes by address) that finds the peaks `remat run --json` printed.
    snapshot_memory_viz_test.py REMAT_BINARY
Exits 77 (ctest: skipped) with a message when torch is not installed."""
import json
import os
import pickle
import pickletools
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
    import torch.cuda._memory_viz as memory_viz
except ImportError as error:
    print(f"SKIP: PyTorch is not installed ({error}); apt-get install python3-torch to run this test")
    sys.exit(77)


def call(function, snapshot, *args, **kwargs):
    """2.x's functions take the snapshot dict, 1.13's the list of segments."""
    try:
        return function(snapshot, *args, **kwargs)
    except (TypeError, KeyError):
        return function(snapshot["segments"], *args, **kwargs)


# The opcodes MemoryViz.js's own unpickler (pytorch.org/memory_viz) understands; it takes protocols
# 2 to 4 and throws on anything else.
MEMORY_VIZ_OPCODES = {
    "APPENDS", "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1", "LONG_BINGET",
    "MARK", "MEMOIZE", "PROTO", "SETITEMS", "SHORT_BINUNICODE", "STOP", "TUPLE2", "APPEND", "NEWFALSE", "BINPUT",
    "BINUNICODE", "EMPTY_TUPLE", "NEWTRUE", "NONE", "BINFLOAT", "TUPLE", "TUPLE1", "TUPLE3", "LONG_BINPUT", "LIST",
    "DICT", "SETITEM"}


def replay(trace):
    """MemoryViz.js's process_alloc_data without the drawing: live bytes after every event."""
    live, peak, alive = 0, 0, {}
    for event in trace:
        if event["action"] == "alloc":
            alive[event["addr"]] = event["size"]
            live += event["size"]
        elif event["action"] in ("free_completed", "free"):
            live -= alive.pop(event["addr"])
        peak = max(peak, live)
    return peak, live


def main():
    remat = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        chain = os.path.join(folder, "resnet18.json")
        snapshot_path = os.path.join(folder, "run.pickle")
        subprocess.run([remat, "zoo", "export", "resnet18", "--batch", "2", "--resolution", "32", "-o", chain],
                       check=True)
        run = subprocess.run([remat, "run", chain, "--planner", "sqrt", "--device", "cpu", "--threads", "1",
                              "--timeline", snapshot_path, "--json"], check=True, capture_output=True, text=True)
        summary = json.loads(run.stdout)
        with open(snapshot_path, "rb") as f:
            data = f.read()
        snapshot = pickle.loads(data)

    # What pytorch.org/memory_viz can unpickle: protocol 4 at most, its opcodes only.
    opcodes = {op.name for op, _, _ in pickletools.genops(data)}
    assert data[:2] == b"\x80\x04", data[:2]
    assert opcodes <= MEMORY_VIZ_OPCODES, opcodes - MEMORY_VIZ_OPCODES

    assert set(snapshot) >= {"segments", "device_traces", "remat"}, sorted(snapshot)
    traces = snapshot["device_traces"]
    assert len(traces) == 2, len(traces)  # the prediction, then the measurement
    stats = call(memory_viz.stats, snapshot)
    assert stats["segments"] == len(snapshot["segments"]) == 2, stats
    assert stats["total_size"].value == sum(s["total_size"] for s in snapshot["segments"]), stats
    assert stats["active_allocated"].value > 0, stats
    flamegraph = call(memory_viz.segments, snapshot, format_flamegraph=lambda lines: lines)
    assert "active_allocated" in flamegraph and "stream_0" in flamegraph, flamegraph[:300]

    infos = snapshot["remat"]["traces"]
    assert [i["source"] for i in infos] == ["predicted", "cpu"], infos
    for trace, info in zip(traces, infos):
        for event in trace:
            frame = event["frames"][0]
            assert frame["name"].startswith("remat::"), frame
        peak, _ = replay(trace)
        print(f"{info['source']}: {len(trace)} events, dynamic peak {peak} bytes, static {info['static_bytes']}")
    predicted_peak, _ = replay(traces[0])
    measured_peak, _ = replay(traces[1])
    assert measured_peak == summary["measured_dynamic_peak_bytes"], (measured_peak, summary)
    assert predicted_peak == summary["predicted_dynamic_peak_bytes"], (predicted_peak, summary)
    print("torch", torch.__version__, "read the snapshot: stats", dict(stats))


if __name__ == "__main__":
    main()
