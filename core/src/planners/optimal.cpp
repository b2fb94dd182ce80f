// optimal: the exact minimum of E by the decomposition of docs/memory-model.md section 3 (with its
// dead-checkpoint case), and the decomposition itself.
//
// With V_j = max over segments j' >= j of ( sum_{j <= m < j'} h(c_m, c_(m+1)) + seg(c_j', c_(j'+1)) ),
// E(C) = V_0 and V_j = max(seg(c_j, c_(j+1)), h(c_j, c_(j+1)) + V_(j+1)). The right-hand side is
// nondecreasing in V_(j+1), so the best suffix from a checkpoint does not depend on what lies to
// its left: g(i) = min over k of max(seg(i, k), h(i, k) + g(k)), g over the last segment = seg(i, n),
// and E* = max(g(0), floor), floor the optimizer step's footprint (section 11.4). seg(i, k) for all k of one i comes
// from one SegmentScanner sweep: O(n^2) time, O(n) memory.
#include <limits>

#include "remat/planners/planners.hpp"
#include "tables.hpp"

namespace remat {

std::vector<std::uint64_t> segmentPeaks(const Chain& chain, std::size_t start) {
  std::vector<std::uint64_t> peaks;
  if (start >= chain.size()) return peaks;
  const planning::LayerTables tables = planning::makeLayerTables(chain);
  planning::SegmentScanner scanner(tables, start);
  peaks.reserve(chain.size() - start);
  while (scanner.end() < chain.size()) {
    scanner.extend();
    peaks.push_back(scanner.peak());
  }
  return peaks;
}

std::uint64_t heldCheckpointBytes(const Chain& chain, std::size_t start, std::size_t end) {
  if (start >= end || end > chain.size()) return 0;
  const planning::LayerTables tables = planning::makeLayerTables(chain);
  planning::SegmentScanner scanner(tables, start);
  while (scanner.end() < end) scanner.extend();
  return scanner.held();
}

std::uint64_t decomposedPeak(const Chain& chain, const Plan& plan) {
  const std::size_t n = chain.size();
  if (n == 0) return 0;
  const planning::LayerTables tables = planning::makeLayerTables(chain);
  std::uint64_t peak = 0;
  std::uint64_t heldLeft = 0;  // sum of h over the checkpoints left of the current segment
  std::size_t start = 0;
  for (std::size_t j = 0; j <= plan.checkpoints.size(); ++j) {
    const std::size_t end = j < plan.checkpoints.size() ? plan.checkpoints[j] : n;
    planning::SegmentScanner scanner(tables, start);
    while (scanner.end() < end) scanner.extend();
    peak = std::max(peak, heldLeft + scanner.peak());
    heldLeft += scanner.held();
    start = end;
  }
  return std::max(peak, tables.floor);
}

Result<PlannerOutput> planOptimal(const Chain& chain, const PlannerOptions& options) {
  const std::size_t n = chain.size();
  if (n == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  const planning::LayerTables tables = planning::makeLayerTables(chain);
  // Recompute cost of the ops a segment adds (R of its inner layers, RE of its end), for
  // breaking ties between plans of equal E towards less recomputation.
  std::vector<double> costPrefix(n + 1, 0.0);
  for (std::size_t l = 1; l <= n; ++l) costPrefix[l] = costPrefix[l - 1] + chain.at(l).fwdCost;

  constexpr std::uint64_t kInfinity = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint64_t> best(n + 1, kInfinity);  // g(i)
  std::vector<double> bestCost(n + 1, 0.0);           // recompute cost of the chosen suffix
  std::vector<std::size_t> next(n + 1, n);
  planning::WorkMeter meter(options, "optimal");
  for (std::size_t i = n; i-- > 0;) {
    const double done = static_cast<double>(n - 1 - i) / static_cast<double>(n);  // row i scans n - i segments
    REMAT_RETURN_IF_ERROR(meter.at(done * done));
    planning::SegmentScanner scanner(tables, i);
    std::uint64_t value = kInfinity;
    double cost = 0.0;
    std::size_t choice = n;
    for (std::size_t k = i + 1; k <= n; ++k) {
      scanner.extend();
      std::uint64_t candidate = scanner.peak();
      double candidateCost = 0.0;
      if (k < n) {
        candidate = std::max(candidate, scanner.held() + best[k]);
        candidateCost = costPrefix[k - 1] - costPrefix[i] + (tables.e[k] > 0 ? chain.at(k).fwdCost : 0.0) + bestCost[k];
      }
      // E = max(V_0, floor): under the optimizer step's footprint, first segments tie on E.
      if (i == 0) candidate = std::max(candidate, tables.floor);
      if (candidate < value || (candidate == value && candidateCost < cost)) {
        value = candidate;
        cost = candidateCost;
        choice = k;
      }
    }
    best[i] = value;
    bestCost[i] = cost;
    next[i] = choice;
  }
  PlannerOutput result;
  result.objectiveBytes = best[0];
  for (std::size_t i = next[0]; i < n; i = next[i]) result.plan.checkpoints.push_back(i);
  return result;
}

}  // namespace remat
