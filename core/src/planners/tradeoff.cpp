// budget:SIZE and the Pareto front of (E, recompute cost): one dynamic program over checkpoint
// positions, read from the right as `optimal` is (docs/planners.md, "budget and the front").
//
// A suffix plan that starts with a checkpoint at i has two numbers that matter to its left: V, the
// largest of (checkpoint bytes held since i + seg) over its segments, and its recompute cost. A
// segment (i, k] in front of a suffix at k gives V' = max(seg(i, k), h(i, k) + V) and
// cost' = cost(i, k) + cost, both nondecreasing in (V, cost), and E of a whole plan is V at 0. So
// the labels (V, cost, checkpoints) of position i that nothing beats on all three can be built from
// those of the positions to its right, and position 0's labels hold the front. The checkpoint count
// is compared after the cost (lexicographically), which keeps the tie-breaks exact without a third
// dimension: see the proof in docs/planners.md.
#include "remat/planners/tradeoff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <span>

#include "remat/base/units.hpp"
#include "remat/memory/simulator.hpp"
#include "tables.hpp"

namespace remat {
namespace {

// A suffix plan that starts with a checkpoint at its position: V, its cost on the grid, how many
// checkpoints it has right of its start, and where it continues (next = n: the last segment).
struct Label {
  std::uint64_t peak = 0;
  std::uint64_t cost = 0;
  std::uint32_t count = 0;
  std::uint32_t next = 0;
  std::uint32_t nextLabel = 0;
};

// (cost, count) lexicographically: what the labels of one position fall in as V rises.
bool cheaper(const Label& a, const Label& b) { return a.cost < b.cost || (a.cost == b.cost && a.count < b.count); }

// The forward costs as integers on a grid of 2^-shift with the total below 2^61 (tradeoff.hpp),
// summed from the left: prefix[l] = q(1) + ... + q(l).
Result<std::vector<std::uint64_t>> costPrefix(const Chain& chain) {
  double total = 0.0;
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const double cost = chain.at(l).fwdCost;
    if (!std::isfinite(cost) || cost < 0.0)
      return Status::invalid("layer " + std::to_string(l) + " ('" + chain.layers[l - 1].name +
                             "'): fwd_cost must be finite and >= 0 for the budget planner, got " +
                             std::to_string(cost));
    total += cost;
  }
  if (!std::isfinite(total)) return Status::invalid("the forward costs of chain '" + chain.name + "' overflow");
  int exponent = 0;
  std::frexp(total, &exponent);  // total < 2^exponent
  std::vector<std::uint64_t> prefix(chain.size() + 1, 0);
  for (std::size_t l = 1; l <= chain.size(); ++l)
    prefix[l] =
        prefix[l - 1] + static_cast<std::uint64_t>(std::llround(std::ldexp(chain.at(l).fwdCost, 61 - exponent)));
  return prefix;
}

// The labels of every position, built right to left, each position's sorted by rising V with
// (cost, count) strictly falling; labels with V over `limit` are dropped (they can only lead to
// plans whose E is over it).
class FrontSolver {
 public:
  FrontSolver(const Chain& chain, std::vector<std::uint64_t> prefix, std::uint64_t limit)
      : tables_(planning::makeLayerTables(chain)), prefix_(std::move(prefix)), limit_(limit) {}

  Status solve(const PlannerOptions& options);
  std::span<const Label> labelsAt(std::size_t i) const { return sets_[i]; }
  Plan planOf(const Label& label) const;
  const FrontStatistics& statistics() const { return statistics_; }

 private:
  void solvePosition(std::size_t i);
  // Every first segment (i, k] in turn, its labels into pending_.
  void extendSegments(std::size_t i);
  // The labels a first segment (i, k] gives from the labels at k, into pending_ (merged into
  // current_ when enough have gathered).
  void extendThrough(std::size_t k, std::uint64_t seg, std::uint64_t held, std::uint64_t segmentCost);
  // A first segment (i, k] in front of the labels of k: held = h(i, k), cost = its recompute cost.
  struct Segment {
    std::size_t k;
    std::uint64_t held;
    std::uint64_t cost;
    std::span<const Label> suffixes;
    Label extended(std::size_t index) const {
      const Label& s = suffixes[index];
      return {held + s.peak, s.cost + cost, s.count + 1, static_cast<std::uint32_t>(k),
              static_cast<std::uint32_t>(index)};
    }
  };
  // Runs of at most this many labels are extended without looking at them first.
  static constexpr std::size_t kRunLength = 8;
  // The walk's queries rise with the labels, so `seen` carries beats' place in current_.
  void emitUnbeaten(const Segment& segment, std::size_t lo, std::size_t hi, std::size_t& seen);
  void mergePending();
  bool beats(std::uint64_t peak, const Label& bound, std::size_t& seen) const;
  bool beats(std::uint64_t peak, const Label& bound) const;
  std::uint64_t segmentCost(std::size_t i, std::size_t k) const {
    return prefix_[k - 1] - prefix_[i] + (tables_.e[k] > 0 ? prefix_[k] - prefix_[k - 1] : 0);
  }

  planning::LayerTables tables_;
  std::vector<std::uint64_t> prefix_;
  std::uint64_t limit_;
  std::uint64_t bound_ = 0;                        // the largest V worth keeping at the position being solved
  std::vector<std::vector<Label>> sets_;           // every position's labels, each in its own block
  std::vector<Label> current_, pending_, merged_;  // pending_: not yet merged into current_
  FrontStatistics statistics_;
};

Status FrontSolver::solve(const PlannerOptions& options) {
  const std::size_t n = tables_.n;
  sets_.assign(n + 1, {});
  double reported = 0.0;
  for (std::size_t i = n; i-- > 0;) {
    if (planning::cancelled(options.cancelFlag)) return Status::cancelled("planner budget cancelled");
    solvePosition(i);
    sets_[i].assign(current_.begin(), current_.end());  // exactly as large as it needs
    statistics_.labels += current_.size();
    statistics_.largestLabelSet = std::max<std::uint64_t>(statistics_.largestLabelSet, current_.size());
    ++statistics_.positions;
    // Position i extends over n - i segment ends: the work done grows as the square of n - i.
    const double done = static_cast<double>(n - i) / static_cast<double>(n);
    if (options.progress && (done * done >= reported + 0.01 || i == 0)) {
      reported = done * done;
      options.progress(reported);
    }
  }
  return Status::ok();
}

void FrontSolver::solvePosition(std::size_t i) {
  current_.clear();
  extendSegments(i);
  mergePending();
}

void FrontSolver::extendSegments(std::size_t i) {
  const std::size_t n = tables_.n;
  // Store-all from i, the last segment (i, n] alone, costs nothing and has no checkpoint: every
  // other label needs a smaller V to be worth keeping.
  const std::uint64_t storeAll = planning::lastSegmentPeak(tables_, i);
  bound_ = limit_;
  if (storeAll <= limit_) {
    pending_.push_back(Label{storeAll, 0, 0, static_cast<std::uint32_t>(n), 0});
    ++statistics_.transitions;
    bound_ = storeAll > 0 ? storeAll - 1 : 0;
  }
  planning::SegmentScanner scanner(tables_, i);
  for (std::size_t k = i + 1; k < n; ++k) {
    scanner.extend();
    if (scanner.backwardPeak() > bound_) return;  // seg(i, k') > bound for every k' >= k
    // Every label a longer first segment can give has V >= backwardPeak and costs at least the
    // R ops of (i, k), with a checkpoint: once a label here beats that, stop extending.
    if (beats(scanner.backwardPeak(), {0, prefix_[k - 1] - prefix_[i], 1, 0, 0})) return;
    const std::uint64_t seg = scanner.peak();
    if (seg <= bound_) extendThrough(k, seg, scanner.held(), segmentCost(i, k));
  }
}

// Whether a label of current_ with V <= peak is at least as cheap as `bound` (cost, then count).
// `seen` is how many labels of current_ have V <= an earlier peak no larger than this one: the
// search gallops on from there, so a walk with rising peaks costs about the log of each step.
bool FrontSolver::beats(std::uint64_t peak, const Label& bound, std::size_t& seen) const {
  const std::size_t size = current_.size();
  std::size_t lo = seen;  // every label before lo has V <= peak
  std::size_t step = 1;
  while (lo + step <= size && current_[lo + step - 1].peak <= peak) {
    lo += step;
    step *= 2;
  }
  const auto end = current_.begin() + static_cast<std::ptrdiff_t>(std::min(size, lo + step - 1));
  seen = static_cast<std::size_t>(std::upper_bound(current_.begin() + static_cast<std::ptrdiff_t>(lo), end, peak,
                                                   [](std::uint64_t v, const Label& l) { return v < l.peak; }) -
                                  current_.begin());
  return seen > 0 && !cheaper(bound, current_[seen - 1]);
}

bool FrontSolver::beats(std::uint64_t peak, const Label& bound) const {
  std::size_t seen = 0;
  return beats(peak, bound, seen);
}

void FrontSolver::extendThrough(std::size_t k, std::uint64_t seg, std::uint64_t held, std::uint64_t cost) {
  const std::span<const Label> suffixes = labelsAt(k);
  const std::size_t before = pending_.size();
  // Every suffix with held + V <= seg gives V' = seg; the last of them is the cheapest.
  const std::size_t first = static_cast<std::size_t>(
      std::partition_point(suffixes.begin(), suffixes.end(), [&](const Label& s) { return held + s.peak <= seg; }) -
      suffixes.begin());
  const Segment segment{k, held, cost, suffixes};
  if (first > 0) {
    Label collapsed = segment.extended(first - 1);
    collapsed.peak = seg;
    if (!beats(seg, collapsed)) pending_.push_back(collapsed);
  }
  std::size_t seen = 0;
  emitUnbeaten(segment, first, suffixes.size(), seen);
  statistics_.transitions += pending_.size() - before;
  // Merging costs the size of current_: wait until there is enough to merge (the labels waiting
  // only miss the chance to prune others, which is never wrong).
  if (pending_.size() > std::max<std::size_t>(kRunLength, current_.size() / 4)) mergePending();
}

// The labels of suffixes [lo, hi) through the segment, into pending_, but for runs that
// current_ beats: a run comes out with V rising and (cost, count) falling, so when its cheapest
// label is beaten at its least V, all of it is. Halving the runs that are not keeps the work
// near the number of labels that survive.
void FrontSolver::emitUnbeaten(const Segment& segment, std::size_t lo, std::size_t hi, std::size_t& seen) {
  if (lo >= hi || segment.held + segment.suffixes[lo].peak > bound_) return;
  if (beats(segment.held + segment.suffixes[lo].peak, segment.extended(hi - 1), seen)) return;
  if (hi - lo > kRunLength) {
    const std::size_t middle = lo + (hi - lo) / 2;
    emitUnbeaten(segment, lo, middle, seen);
    emitUnbeaten(segment, middle, hi, seen);
    return;
  }
  for (std::size_t index = lo; index < hi; ++index) {
    const Label label = segment.extended(index);
    if (label.peak > bound_) return;
    if (!beats(label.peak, label, seen)) pending_.push_back(label);
  }
}

// current_ := the labels of current_ and pending_ that nothing beats: with both sorted by rising
// V, one merge keeps each label cheaper than every label before it.
void FrontSolver::mergePending() {
  if (pending_.empty()) return;
  std::sort(pending_.begin(), pending_.end(),
            [](const Label& a, const Label& b) { return a.peak < b.peak || (a.peak == b.peak && cheaper(a, b)); });
  merged_.clear();
  std::size_t a = 0, b = 0;
  const Label* best = nullptr;
  while (a < current_.size() || b < pending_.size()) {
    const bool takeA =
        b == pending_.size() ||
        (a < current_.size() && (current_[a].peak < pending_[b].peak ||
                                 (current_[a].peak == pending_[b].peak && !cheaper(pending_[b], current_[a]))));
    const Label& next = takeA ? current_[a++] : pending_[b++];
    if (best == nullptr || cheaper(next, *best)) {
      merged_.push_back(next);
      best = &next;
    }
  }
  pending_.clear();
  current_.swap(merged_);
}

Plan FrontSolver::planOf(const Label& label) const {
  Plan plan;
  for (const Label* at = &label; at->next < tables_.n; at = &labelsAt(at->next)[at->nextLabel])
    plan.checkpoints.push_back(at->next);
  return plan;
}

// The solver for one chain; its labels at position 0 are the front's candidates.
Result<FrontSolver> solveFront(const Chain& chain, std::uint64_t limit, const PlannerOptions& options) {
  if (chain.size() == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  if (chain.size() > std::numeric_limits<std::uint32_t>::max() - 1)
    return Status::invalid("chain '" + chain.name + "' has too many layers for the budget planner");
  auto prefix = costPrefix(chain);
  if (!prefix) return prefix.status();
  FrontSolver solver(chain, std::move(prefix).value(), limit);
  try {
    REMAT_RETURN_IF_ERROR(solver.solve(options));
  } catch (const std::bad_alloc&) {
    // The label sets of a long chain with many distinct sizes can outgrow the memory (docs/planners.md
    // has the sizes measured): say how far it got instead of letting the exception out.
    const FrontStatistics& done = solver.statistics();
    return Status::outOfMemory("planner budget: out of memory on chain '" + chain.name + "' (" +
                               std::to_string(chain.size()) + " layers) after solving " +
                               std::to_string(done.positions) + " of its " + std::to_string(chain.size()) +
                               " checkpoint positions (from the right) and keeping " + std::to_string(done.labels) +
                               " Pareto labels (" + formatBytes(done.labels * sizeof(Label)) + ")");
  }
  return solver;
}

}  // namespace

Result<TradeoffFront> paretoFront(const Chain& chain, const PlannerOptions& options) {
  // No plan beats store-all's E at no cost, so the labels can stop at its E: seg(0, n).
  std::uint64_t storeAll = 0;
  if (chain.size() > 0) storeAll = segmentPeaks(chain, 0).back();
  auto solver = solveFront(chain, storeAll, options);
  if (!solver) return solver.status();
  TradeoffFront front;
  front.statistics = solver->statistics();
  // E = max(V, floor) (memory-model.md section 11.4): the labels up to floor are one point at floor,
  // the last of them, which costs least.
  const std::uint64_t floor = optimizerStepFootprint(chain);
  std::span<const Label> labels = solver->labelsAt(0);
  while (labels.size() > 1 && labels[1].peak <= floor) labels = labels.subspan(1);
  const Label* previous = nullptr;
  for (const Label& label : labels) {
    // A label that costs what the one before it costs has the same cost at a higher E (and fewer
    // checkpoints): not on the front of (E, cost).
    if (previous != nullptr && previous->cost == label.cost) continue;
    previous = &label;
    Plan plan = solver->planOf(label);
    const double cost = recomputeCost(chain, plan);
    front.points.push_back({std::move(plan), std::max(label.peak, floor), cost});
  }
  return front;
}

Result<PlannerOutput> planBudget(const Chain& chain, std::uint64_t budgetBytes, const PlannerOptions& options,
                                 FrontStatistics* statistics) {
  const std::uint64_t floor = optimizerStepFootprint(chain);
  if (budgetBytes < floor)
    return Status::invalid("no plan fits in " + formatBytes(budgetBytes) + ": the optimizer step alone takes " +
                           formatBytes(floor) + " (" + describeStepOptions(chain.step) + ")");
  auto solver = solveFront(chain, budgetBytes, options);
  if (!solver) return solver.status();
  if (statistics) *statistics = solver->statistics();
  const std::span<const Label> labels = solver->labelsAt(0);
  if (labels.empty()) {
    auto least = planOptimal(chain, options);
    if (!least) return least.status();
    return Status::invalid("no plan fits in " + formatBytes(budgetBytes) + ": the least dynamic peak of any plan is " +
                           formatBytes(least->objectiveBytes) + " (planner optimal)");
  }
  // The least cost is the last label's; of the labels with it, the first has the least E.
  const std::uint64_t leastCost = labels.back().cost;
  auto chosen = std::find_if(labels.begin(), labels.end(), [&](const Label& l) { return l.cost == leastCost; });
  // Of those whose E = max(V, floor) ties at floor, the last has the fewest checkpoints.
  while (chosen + 1 != labels.end() && chosen[1].cost == leastCost && chosen[1].peak <= floor) ++chosen;
  PlannerOutput output;
  output.plan = solver->planOf(*chosen);
  output.objectiveBytes = std::max(chosen->peak, floor);
  output.labels = solver->statistics().labels;
  return output;
}

const FrontPoint* cheapestWithin(const TradeoffFront& front, std::uint64_t budgetBytes) {
  const auto after =
      std::upper_bound(front.points.begin(), front.points.end(), budgetBytes,
                       [](std::uint64_t bytes, const FrontPoint& p) { return bytes < p.dynamicPeakBytes; });
  return after == front.points.begin() ? nullptr : &*std::prev(after);
}

double recomputeCostTolerance(const Chain& chain) {
  double total = 0.0;
  for (const ChainLayer& layer : chain.layers) total += std::fabs(layer.numbers.fwdCost);
  return 2.0 * static_cast<double>(std::max<std::size_t>(1, chain.size())) * std::numeric_limits<double>::epsilon() *
         total;
}

FrontPlacement placeAgainstFront(const TradeoffFront& front, std::uint64_t dynamicPeakBytes, double cost,
                                 double tolerance) {
  FrontPlacement placement;
  const std::vector<FrontPoint>& points = front.points;
  if (points.empty()) return placement;
  // The cheapest point at no more E (point 0 when E is below every point's, which no plan's is).
  const FrontPoint* samePeak = cheapestWithin(front, dynamicPeakBytes);
  placement.samePeakPoint = samePeak ? static_cast<std::size_t>(samePeak - points.data()) : 0;
  placement.extraRecomputeCost = std::max(0.0, cost - points[placement.samePeakPoint].recomputeCost);
  if (placement.extraRecomputeCost <= tolerance) placement.extraRecomputeCost = 0.0;
  // The point of least E that costs no more (the last, cheapest, point when every one costs more).
  const auto sameCost = std::find_if(points.begin(), points.end(),
                                     [&](const FrontPoint& p) { return p.recomputeCost <= cost + tolerance; });
  placement.sameCostPoint =
      sameCost == points.end() ? points.size() - 1 : static_cast<std::size_t>(sameCost - points.begin());
  const std::uint64_t frontPeak = points[placement.sameCostPoint].dynamicPeakBytes;
  placement.extraPeakBytes = dynamicPeakBytes > frontPeak ? dynamicPeakBytes - frontPeak : 0;
  placement.onFront = placement.extraPeakBytes == 0 && placement.extraRecomputeCost == 0.0;
  return placement;
}

}  // namespace remat
