#include "remat/simulator.hpp"

#include <algorithm>
#include <limits>

namespace remat {
namespace {

constexpr std::size_t kNoReader = std::numeric_limits<std::size_t>::max();
constexpr std::uint32_t kNoTensor = std::numeric_limits<std::uint32_t>::max();

// One op with its tensor traffic. x0 is static and never appears as a tensor.
struct OpTraffic {
  std::uint32_t reads[4] = {kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  std::uint32_t writes[2] = {kNoTensor, kNoTensor};
  std::uint64_t scratchBytes = 0;  // workspace plus, for RE, the transient copy of x(c)
};

// Builds the tensor graph of the op sequence: which tensor version each op reads and writes.
struct TensorGraph {
  std::vector<OpTraffic> traffic;
  std::vector<std::uint64_t> tensorBytes;
  std::vector<std::size_t> lastReader;
};

TensorGraph buildTensorGraph(const Chain& chain, const std::vector<Op>& ops, std::size_t lastSegmentStart) {
  const std::size_t n = chain.size();
  TensorGraph graph;
  graph.traffic.resize(ops.size());
  graph.tensorBytes.reserve(ops.size() + n);
  // Newest version of x(l), E(l), d(l); index 0 of x is the static input.
  std::vector<std::uint32_t> x(n + 1, kNoTensor), extra(n + 1, kNoTensor), grad(n + 1, kNoTensor);
  auto newTensor = [&](std::uint64_t bytes) {
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
        x[l] = t.writes[w++] = newTensor(m.outBytes);
        const bool keep = op.kind == OpKind::R || l > lastSegmentStart;
        if (keep && m.extraBytes > 0) extra[l] = t.writes[w++] = newTensor(m.extraBytes);
        t.scratchBytes = m.fwdWorkspaceBytes;
        break;
      }
      case OpKind::RE: {
        const LayerNumbers& m = chain.at(l);
        read(x[l - 1]);
        extra[l] = t.writes[w++] = newTensor(m.extraBytes);
        t.scratchBytes = m.fwdWorkspaceBytes + m.outBytes;
        break;
      }
      case OpKind::Seed:
        read(x[n]);
        grad[n] = t.writes[w++] = newTensor(chain.at(n).outBytes);
        break;
      case OpKind::B: {
        const LayerNumbers& m = chain.at(l);
        read(grad[l]);
        if (m.needsInput) read(x[l - 1]);
        if (m.needsOutput) read(x[l]);
        if (m.extraBytes > 0) read(extra[l]);
        if (l > 1) grad[l - 1] = t.writes[w++] = newTensor(chain.at(l - 1).outBytes);
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

std::size_t lastSegmentStart(const Plan& plan) { return plan.checkpoints.empty() ? 0 : plan.checkpoints.back(); }

// Sweeps the op sequence once; calls visit(opIndex, footprint, liveAfter) for each op.
template <typename Visit>
void sweep(const Chain& chain, const std::vector<Op>& ops, const Plan& plan, Visit&& visit) {
  const TensorGraph graph = buildTensorGraph(chain, ops, lastSegmentStart(plan));
  std::uint64_t alive = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpTraffic& t = graph.traffic[i];
    for (std::uint32_t id : t.writes)
      if (id != kNoTensor) alive += graph.tensorBytes[id];
    const std::uint64_t footprint = alive + t.scratchBytes;
    for (std::uint32_t id : t.reads)
      if (id != kNoTensor && graph.lastReader[id] == i) alive -= graph.tensorBytes[id];
    for (std::uint32_t id : t.writes)
      if (id != kNoTensor && graph.lastReader[id] == kNoReader) alive -= graph.tensorBytes[id];
    visit(i, footprint, alive);
  }
}

}  // namespace

std::vector<Op> buildOpSequence(const Chain& chain, const Plan& plan) {
  const std::size_t n = chain.size();
  std::vector<Op> ops;
  const auto& c = plan.checkpoints;
  ops.reserve(3 * n + 2);
  for (std::size_t l = 1; l <= n; ++l) ops.push_back({OpKind::F, l});
  if (n == 0) return ops;
  ops.push_back({OpKind::Seed, 0});
  const std::size_t k = c.size();
  for (std::size_t j = k + 1; j-- > 0;) {
    const std::size_t start = j == 0 ? 0 : c[j - 1];  // c_j
    const std::size_t end = j == k ? n : c[j];        // c_(j+1)
    if (j < k) {
      for (std::size_t l = start + 1; l < end; ++l) ops.push_back({OpKind::R, l});
      if (chain.at(end).extraBytes > 0) ops.push_back({OpKind::RE, end});
    }
    for (std::size_t l = end; l > start; --l) ops.push_back({OpKind::B, l});
  }
  return ops;
}

std::uint64_t keptBytes(const Chain& chain, std::size_t l) {
  const std::size_t n = chain.size();
  const LayerNumbers& m = chain.at(l);
  const bool readLater = m.needsOutput || (l < n && chain.at(l + 1).needsInput);
  return (readLater ? m.outBytes : 0) + m.extraBytes;
}

namespace {
// T(l) = w(1) + ... + w(l); s(i, k) = T(k-1) - T(i) + a(k).
std::vector<std::uint64_t> keptPrefix(const Chain& chain) {
  std::vector<std::uint64_t> prefix(chain.size() + 1, 0);
  for (std::size_t l = 1; l <= chain.size(); ++l) prefix[l] = prefix[l - 1] + keptBytes(chain, l);
  return prefix;
}

template <typename Combine>
std::uint64_t objective(const Chain& chain, const Plan& plan, Combine&& combine) {
  const std::size_t n = chain.size();
  if (n == 0) return 0;
  const auto prefix = keptPrefix(chain);
  std::uint64_t checkpointSum = 0;
  std::uint64_t maxSegment = 0;
  std::uint64_t maxR = 0;
  std::size_t start = 0;
  for (std::size_t j = 0; j <= plan.checkpoints.size(); ++j) {
    const std::size_t end = j < plan.checkpoints.size() ? plan.checkpoints[j] : n;
    const std::uint64_t seg = prefix[end - 1] - prefix[start] + chain.at(end).outBytes;
    maxSegment = std::max(maxSegment, seg);
    maxR = std::max(maxR, checkpointSum + seg);
    if (end < n) checkpointSum += chain.at(end).outBytes;
    start = end;
  }
  return combine(checkpointSum, maxSegment, maxR);
}
}  // namespace

std::uint64_t objectiveA(const Chain& chain, const Plan& plan) {
  return objective(chain, plan, [](std::uint64_t sum, std::uint64_t maxSeg, std::uint64_t) { return sum + maxSeg; });
}

std::uint64_t objectiveR(const Chain& chain, const Plan& plan) {
  return objective(chain, plan, [](std::uint64_t, std::uint64_t, std::uint64_t maxR) { return maxR; });
}

double recomputeCost(const Chain& chain, const Plan& plan) {
  double cost = 0.0;
  for (const Op& op : buildOpSequence(chain, plan))
    if (op.kind == OpKind::R || op.kind == OpKind::RE) cost += chain.at(op.layer).fwdCost;
  return cost;
}

std::uint64_t dynamicPeak(const Chain& chain, const Plan& plan) {
  std::uint64_t peak = 0;
  sweep(chain, buildOpSequence(chain, plan), plan,
        [&](std::size_t, std::uint64_t footprint, std::uint64_t) { peak = std::max(peak, footprint); });
  return peak;
}

Result<Simulation> simulate(const Chain& chain, const Plan& plan) {
  if (chain.size() == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  REMAT_RETURN_IF_ERROR(validatePlan(plan, chain.size()));
  Simulation sim;
  sim.plan = plan;
  const std::vector<Op> ops = buildOpSequence(chain, plan);
  sim.timeline.source = "predicted";
  sim.timeline.staticBytes = chain.staticBytes();
  sim.timeline.layerNames.reserve(chain.size());
  for (const ChainLayer& layer : chain.layers) sim.timeline.layerNames.push_back(layer.name);
  sim.timeline.entries.resize(ops.size());
  sweep(chain, ops, plan, [&](std::size_t i, std::uint64_t footprint, std::uint64_t liveAfter) {
    TimelineEntry& entry = sim.timeline.entries[i];
    entry.op = ops[i];
    entry.footprintBytes = footprint;
    entry.liveAfterBytes = liveAfter;
    if (footprint > sim.dynamicPeakBytes) {
      sim.dynamicPeakBytes = footprint;
      sim.peakOpIndex = i;
    }
    if (ops[i].kind == OpKind::R || ops[i].kind == OpKind::RE) sim.recomputeCost += chain.at(ops[i].layer).fwdCost;
  });
  sim.staticBytes = chain.staticBytes();
  sim.aBytes = objectiveA(chain, plan);
  sim.rBytes = objectiveR(chain, plan);
  return sim;
}

}  // namespace remat
