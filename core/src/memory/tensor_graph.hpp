#pragma once
// The tensor graph of an op sequence (docs/memory-model.md sections 2-3): which tensor version each op
// reads and writes, how big each version is and which op reads it last. The simulator sweeps it
// for footprints and the liveness trace (liveness.hpp) names its tensors, so the rule that decides
// what is alive lives here once. Internal to core.
#include <cstdint>
#include <limits>
#include <vector>

#include "remat/model/chain.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"

namespace remat::detail {

inline constexpr std::size_t kNoReader = std::numeric_limits<std::size_t>::max();
inline constexpr std::uint32_t kNoTensor = std::numeric_limits<std::uint32_t>::max();

// One op with its tensor traffic. x0 is static and never appears as a tensor.
struct OpTraffic {
  std::uint32_t reads[4] = {kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  std::uint32_t writes[2] = {kNoTensor, kNoTensor};
  std::uint64_t scratchBytes = 0;  // workspace plus, for RE, the transient copy of x(c)
};

// Flat arrays, indexed by op and by tensor id (ids count up in allocation order): dynamicPeak()
// sweeps them millions of times in the brute-force tests.
struct TensorGraph {
  std::vector<OpTraffic> traffic;
  std::vector<std::uint64_t> tensorBytes;
  std::vector<std::size_t> lastReader;  // kNoReader: nobody reads it
};

// The start of the last segment (c_k; 0 without checkpoints): forward ops after it run in keep mode.
inline std::size_t lastSegmentStart(const Plan& plan) { return plan.checkpoints.empty() ? 0 : plan.checkpoints.back(); }

// Builds the graph of `ops` (buildOpSequence of a valid plan). onTensor(kind, layer) is called
// once per new tensor, in id order, for callers that name tensors; the simulator passes a no-op,
// which the compiler removes.
template <typename OnTensor>
TensorGraph buildTensorGraph(const Chain& chain, const std::vector<Op>& ops, std::size_t lastSegmentStart,
                             OnTensor&& onTensor) {
  using Kind = TensorLife::Kind;
  const std::size_t n = chain.size();
  TensorGraph graph;
  graph.traffic.resize(ops.size());
  graph.tensorBytes.reserve(ops.size() + n);
  // Newest version of x(l), E(l), d(l); index 0 of x is the static input.
  std::vector<std::uint32_t> x(n + 1, kNoTensor), extra(n + 1, kNoTensor), grad(n + 1, kNoTensor);
  auto newTensor = [&](Kind kind, std::size_t layer, std::uint64_t bytes) {
    onTensor(kind, layer);
    graph.tensorBytes.push_back(bytes);
    return static_cast<std::uint32_t>(graph.tensorBytes.size() - 1);
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    OpTraffic& t = graph.traffic[i];
    int r = 0;
    int w = 0;
    auto read = [&](std::uint32_t id) {
      if (id != kNoTensor) t.reads[r++] = id;
    };
    const std::size_t l = op.layer;
    switch (op.kind) {
      case OpKind::F:
      case OpKind::R: {
        const LayerNumbers& m = chain.at(l);
        read(x[l - 1]);
        x[l] = t.writes[w++] = newTensor(Kind::Activation, l, m.outBytes);
        const bool keep = op.kind == OpKind::R || l > lastSegmentStart;
        if (keep && m.extraBytes > 0) extra[l] = t.writes[w++] = newTensor(Kind::Extra, l, m.extraBytes);
        t.scratchBytes = m.fwdWorkspaceBytes;
        break;
      }
      case OpKind::RE: {
        const LayerNumbers& m = chain.at(l);
        read(x[l - 1]);
        extra[l] = t.writes[w++] = newTensor(Kind::Extra, l, m.extraBytes);
        t.scratchBytes = m.fwdWorkspaceBytes + m.outBytes;
        break;
      }
      case OpKind::Seed:
        read(x[n]);
        grad[n] = t.writes[w++] = newTensor(Kind::Gradient, n, chain.at(n).outBytes);
        break;
      case OpKind::B: {
        const LayerNumbers& m = chain.at(l);
        read(grad[l]);
        if (m.needsInput) read(x[l - 1]);
        if (m.needsOutput) read(x[l]);
        if (m.extraBytes > 0) read(extra[l]);
        if (l > 1) grad[l - 1] = t.writes[w++] = newTensor(Kind::Gradient, l - 1, chain.at(l - 1).outBytes);
        t.scratchBytes = m.bwdWorkspaceBytes;
        break;
      }
    }
  }
  graph.lastReader.assign(graph.tensorBytes.size(), kNoReader);
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::uint32_t id : graph.traffic[i].reads)
      if (id != kNoTensor) graph.lastReader[id] = i;
  return graph;
}

}  // namespace remat::detail
