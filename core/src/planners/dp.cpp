// dp: the exact minimum of objective A = sum of a(c) over C + max segment cost s(c_j, c_(j+1)).
//
// For a bound M on the segment costs, f_M(k) = a(k) + min { f_M(i) : i < k, s(i, k) <= M } is the
// least checkpoint sum of a plan up to checkpoint k, and min A = min over M of f_M(n) + M, M over
// the values s(i, k). Two facts make this O(n^3 alpha(n)) rather than O(n^4):
//  - s(i, k) = T(k-1) - T(i) + a(k) does not increase with i, so the allowed i of one k form a
//    window [lo(k), k-1]; the window minimum is an offline range-minimum: a stack of suffix minima
//    whose covered positions merge in a union-find, O(alpha(n)) per step, O(n) per bound.
//  - M walks down through the values s(i, k) without sorting them: per k a pointer to the first
//    i with s(i, k) below the current limit only moves right (O(n^2) moves in all), and after
//    solving bound M with a plan whose largest segment is M' <= M, every bound in [M', M] gives
//    the same f, so the walk jumps straight below M'.
// The walk stops when f_M(n) + (least possible largest segment) cannot beat the best A.
#include <algorithm>
#include <limits>

#include "remat/planners/planners.hpp"
#include "tables.hpp"

namespace remat {
namespace {

constexpr std::uint64_t kInfinity = std::numeric_limits<std::uint64_t>::max();

// Offline window minima over f[0..k-1] for windows [lo, k-1]: a stack of suffix minima; every
// position belongs to the set of the stack entry that covers it (the argmin of f over
// [position, k-1]).
class WindowMinimum {
 public:
  explicit WindowMinimum(std::size_t size) : parent_(size), rank_(size), label_(size) { stack_.reserve(size); }

  void reset() { stack_.clear(); }

  void push(std::size_t k, const std::vector<std::uint64_t>& f) {
    parent_[k] = k;
    rank_[k] = 0;
    label_[k] = k;
    std::size_t root = k;
    while (!stack_.empty() && f[stack_.back()] >= f[k]) {
      root = unite(root, find(stack_.back()));
      label_[root] = k;
      stack_.pop_back();
    }
    stack_.push_back(k);
  }

  // The position of the least f over [lo, last pushed]; ties go to the later position.
  std::size_t argmin(std::size_t lo) { return label_[find(lo)]; }

 private:
  std::size_t find(std::size_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];  // path halving
      x = parent_[x];
    }
    return x;
  }
  std::size_t unite(std::size_t a, std::size_t b) {
    if (rank_[a] < rank_[b]) std::swap(a, b);
    parent_[b] = a;
    if (rank_[a] == rank_[b]) ++rank_[a];
    return a;
  }

  std::vector<std::size_t> parent_;
  std::vector<std::uint8_t> rank_;
  std::vector<std::size_t> label_;
  std::vector<std::size_t> stack_;
};

// dp's progress estimate: its bound falls from s(0, n) towards the least largest segment cost.
struct BoundProgress {
  std::uint64_t first, least;
  double operator()(std::uint64_t limit) const {
    const double span = static_cast<double>(first) - static_cast<double>(least);
    return span > 0 ? (static_cast<double>(first) - static_cast<double>(limit)) / span : 0.0;
  }
};

}  // namespace

Result<PlannerOutput> planDp(const Chain& chain, const PlannerOptions& options) {
  const std::size_t n = chain.size();
  if (n == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  const planning::LayerTables t = planning::makePrefixTables(chain);
  auto segmentCost = [&t](std::size_t i, std::size_t k) { return t.T[k - 1] - t.T[i] + t.a[k]; };
  const std::uint64_t leastLargestSegment = planning::minimalMaxSegmentCost(t);

  // Any bound at or above s(0, n) allows storing all, which has A = s(0, n).
  PlannerOutput best;
  best.objectiveBytes = segmentCost(0, n);
  std::uint64_t limit = segmentCost(0, n);  // the next bound is the largest s(i, k) below it
  std::vector<std::size_t> lo(n + 1, 0);    // lo[k]: the first i with s(i, k) < limit
  std::vector<std::uint64_t> f(n + 1, 0);
  std::vector<std::size_t> pred(n + 1, 0);
  WindowMinimum window(n + 1);
  planning::WorkMeter meter(options, "dp");
  const BoundProgress progress{limit, leastLargestSegment};
  while (true) {
    REMAT_RETURN_IF_ERROR(meter.at(progress(limit)));
    bool any = false;
    std::uint64_t bound = 0;
    for (std::size_t k = 1; k <= n; ++k) {
      while (lo[k] < k && segmentCost(lo[k], k) >= limit) ++lo[k];
      if (lo[k] < k) any = true, bound = std::max(bound, segmentCost(lo[k], k));
    }
    if (!any || bound < leastLargestSegment) break;
    // With this bound the window of k is exactly [lo[k], k-1].
    ++best.boundsSolved;
    window.reset();
    f[0] = 0;
    window.push(0, f);
    for (std::size_t k = 1; k <= n; ++k) {
      if (lo[k] >= k) {
        f[k] = kInfinity;
      } else {
        const std::size_t from = window.argmin(lo[k]);
        pred[k] = from;
        f[k] = f[from] == kInfinity ? kInfinity : f[from] + (k < n ? t.a[k] : 0);
      }
      if (k < n) window.push(k, f);
    }
    if (f[n] == kInfinity) break;
    Plan plan;
    std::uint64_t largestSegment = 0;
    for (std::size_t k = n; k > 0; k = pred[k]) {
      largestSegment = std::max(largestSegment, segmentCost(pred[k], k));
      if (k < n) plan.checkpoints.push_back(k);
    }
    std::reverse(plan.checkpoints.begin(), plan.checkpoints.end());
    if (f[n] + largestSegment < best.objectiveBytes) {
      best.objectiveBytes = f[n] + largestSegment;
      best.plan = std::move(plan);
    }
    if (f[n] + leastLargestSegment >= best.objectiveBytes) break;
    limit = largestSegment;
  }
  return best;
}

}  // namespace remat
