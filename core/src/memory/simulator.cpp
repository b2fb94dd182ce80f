#include "remat/memory/simulator.hpp"

#include <algorithm>

#include "remat/memory/liveness.hpp"
#include "remat/memory/op_times.hpp"
#include "tensor_graph.hpp"

namespace remat {
namespace {

using detail::kNoReader;
using detail::kNoTensor;
using detail::lastSegmentStart;
using detail::OpTraffic;
using detail::TensorGraph;

thread_local std::uint64_t opSequenceBuilds = 0;

// Sweeps the graph of an op sequence once; calls visit(opIndex, footprint, liveAfter) for each op.
template <typename Visit>
void sweepGraph(const TensorGraph& graph, Visit&& visit) {
  std::uint64_t alive = 0;
  for (std::size_t i = 0; i < graph.traffic.size(); ++i) {
    const OpTraffic& t = graph.traffic[i];
    for (std::uint32_t id : t.writes)
      if (id != kNoTensor) alive += graph.tensorBytes[id];
    const std::uint64_t footprint = alive + t.scratchBytes;
    for (std::uint32_t id : t.reads)
      if (id != kNoTensor && graph.lastReader[id] == i) alive -= graph.tensorBytes[id];
    for (std::uint32_t id : t.writes)
      if (id != kNoTensor && graph.lastReader[id] == kNoReader) alive -= graph.tensorBytes[id];
    // The weight gradients live to the step's last op (STEP, or B(1) without an optimizer), which
    // leaves nothing alive (memory-model.md section 11.2).
    if (i + 1 == graph.traffic.size()) alive = 0;
    visit(i, footprint, alive);
  }
}

template <typename Visit>
void sweep(const Chain& chain, const std::vector<Op>& ops, const Plan& plan, Visit&& visit) {
  sweepGraph(detail::buildTensorGraph(chain, ops, lastSegmentStart(plan), [](TensorLife::Kind, std::size_t) {}), visit);
}

}  // namespace

std::uint64_t opSequenceBuildCount() { return opSequenceBuilds; }

std::vector<Op> buildOpSequence(const Chain& chain, const Plan& plan) {
  ++opSequenceBuilds;
  const std::size_t n = chain.size();
  std::vector<Op> ops;
  const auto& c = plan.checkpoints;
  ops.reserve(3 * n + 3);
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
  if (hasOptimizerStep(chain.step)) ops.push_back({OpKind::Step, 0});
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

namespace {

// simulate(), and with a trace the liveness of the same op sequence and tensor graph.
Result<Simulation> simulateTracing(const Chain& chain, const Plan& plan, LivenessTrace* liveness) {
  if (chain.size() == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  REMAT_RETURN_IF_ERROR(validatePlan(plan, chain.size()));
  Simulation sim;
  sim.plan = plan;
  const std::vector<Op> ops = buildOpSequence(chain, plan);
  if (liveness) *liveness = LivenessTrace{};
  const TensorGraph graph =
      detail::buildTensorGraph(chain, ops, lastSegmentStart(plan), detail::nameTensorsIn(liveness));
  sim.timeline.source = "predicted";
  sim.timeline.staticBytes = chain.staticBytes();
  sim.timeline.step = chain.step;
  sim.timeline.layerNames.reserve(chain.size());
  for (const ChainLayer& layer : chain.layers) sim.timeline.layerNames.push_back(layer.name);
  sim.timeline.entries.resize(ops.size());
  sweepGraph(graph, [&](std::size_t i, std::uint64_t footprint, std::uint64_t liveAfter) {
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
  if (liveness) {
    liveness->ops = ops;
    detail::fillLivenessTrace(graph, *liveness);
  }
  // The ops' modelled durations: a clock for drawing and exporting the prediction, not memory.
  REMAT_RETURN_IF_ERROR(modelOpTimes(chain, sim.timeline));
  sim.staticBytes = chain.staticBytes();
  sim.recomputeCostUnit = chainCostUnit(chain);
  sim.recomputeShare = recomputeShare(chain, sim.recomputeCost);
  sim.aBytes = objectiveA(chain, plan);
  sim.rBytes = objectiveR(chain, plan);
  return sim;
}

}  // namespace

Result<Simulation> simulate(const Chain& chain, const Plan& plan) { return simulateTracing(chain, plan, nullptr); }

Result<Simulation> simulateWithLiveness(const Chain& chain, const Plan& plan, LivenessTrace& liveness) {
  Result<Simulation> simulation = simulateTracing(chain, plan, &liveness);
  if (!simulation) liveness = LivenessTrace{};
  return simulation;
}

}  // namespace remat
