#include "remat/memory/liveness.hpp"

#include <algorithm>

#include "remat/memory/simulator.hpp"
#include "tensor_graph.hpp"

namespace remat {

namespace detail {

void fillLivenessTrace(const TensorGraph& graph, LivenessTrace& trace) {
  trace.scratchBytes.reserve(trace.ops.size());
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const OpTraffic& t = graph.traffic[i];
    trace.scratchBytes.push_back(t.scratchBytes);
    for (std::uint32_t id : t.writes)
      if (id != kNoTensor) trace.tensors[id].writer = i;
  }
  for (std::size_t id = 0; id < trace.tensors.size(); ++id) {
    trace.tensors[id].bytes = graph.tensorBytes[id];
    if (graph.lastReader[id] != kNoReader) trace.tensors[id].lastReader = graph.lastReader[id];
  }
}

}  // namespace detail

LivenessTrace traceLiveness(const Chain& chain, const Plan& plan) {
  LivenessTrace trace;
  trace.ops = buildOpSequence(chain, plan);
  const detail::TensorGraph graph =
      detail::buildTensorGraph(chain, trace.ops, detail::lastSegmentStart(plan), detail::nameTensorsIn(&trace));
  detail::fillLivenessTrace(graph, trace);
  return trace;
}

std::vector<std::size_t> LivenessTrace::aliveDuring(std::size_t op) const {
  std::vector<std::size_t> alive;
  for (std::size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].writer <= op && tensors[t].freedAfter() >= op) alive.push_back(t);
  return alive;
}

std::uint64_t LivenessTrace::footprint(std::size_t op) const {
  std::uint64_t bytes = op < scratchBytes.size() ? scratchBytes[op] : 0;
  for (std::size_t t : aliveDuring(op)) bytes += tensors[t].bytes;
  return bytes;
}

std::vector<std::uint64_t> LivenessTrace::bytesAlivePerOp(TensorLife::Kind kind) const {
  // A difference array: +bytes at the writer, -bytes after the last reader.
  std::vector<std::int64_t> change(ops.size() + 1, 0);
  for (const TensorLife& tensor : tensors) {
    if (tensor.kind != kind || tensor.writer >= ops.size()) continue;
    change[tensor.writer] += static_cast<std::int64_t>(tensor.bytes);
    change[std::min(tensor.freedAfter() + 1, ops.size())] -= static_cast<std::int64_t>(tensor.bytes);
  }
  std::vector<std::uint64_t> bytes(ops.size(), 0);
  std::int64_t alive = 0;
  for (std::size_t op = 0; op < ops.size(); ++op) {
    alive += change[op];
    bytes[op] = static_cast<std::uint64_t>(alive);
  }
  return bytes;
}

std::string tensorName(const TensorLife& tensor) {
  const std::string layer = std::to_string(tensor.layer);
  switch (tensor.kind) {
    case TensorLife::Kind::Activation: return "x" + layer;
    case TensorLife::Kind::Gradient: return "dx" + layer;
    case TensorLife::Kind::Extra: return "E" + layer;
    case TensorLife::Kind::WeightGradient: return "dW" + layer;
  }
  return "?";
}

std::vector<CheckpointLife> checkpointLives(const LivenessTrace& trace, const Plan& plan) {
  std::vector<CheckpointLife> lives;
  for (std::size_t c : plan.checkpoints) {
    // A checkpoint's output is F(c)'s version, the first: R never rewrites a segment's end, and the
    // x(c) that RE(c) writes for B(c) (out(c), memory-model.md 2.3) is a later version.
    for (const TensorLife& t : trace.tensors) {
      if (t.kind == TensorLife::Kind::Activation && t.layer == c) {
        lives.push_back({c, t.writer, t.freedAfter()});
        break;
      }
    }
  }
  return lives;
}

}  // namespace remat
