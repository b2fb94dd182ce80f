// The fixed rules (sqrt, uniform:K) and Chen et al. 2016's greedy with MXNet memonger's budget
// search.
#include <cmath>

#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"
#include "tables.hpp"

namespace remat {
namespace {

std::size_t ceilSqrt(std::size_t n) {
  std::size_t r = static_cast<std::size_t>(std::sqrt(static_cast<double>(n)));
  while (r * r < n) ++r;
  while (r > 0 && (r - 1) * (r - 1) >= n) --r;
  return r;
}

struct GreedyTrial {
  Plan plan;
  std::uint64_t savedBytes = 0;  // sum of a(c): memonger's save_size
  std::uint64_t largestRun = 0;  // largest running sum when a checkpoint was placed: max_size
};

GreedyTrial greedyTrial(const Chain& chain, std::uint64_t budgetBytes) {
  GreedyTrial trial;
  std::uint64_t running = 0;
  for (std::size_t l = 1; l < chain.size(); ++l) {
    running += keptBytes(chain, l);
    if (running > budgetBytes) {
      trial.plan.checkpoints.push_back(l);
      trial.savedBytes += chain.outBytes(l);
      trial.largestRun = std::max(trial.largestRun, running);
      running = 0;
    }
  }
  return trial;
}

}  // namespace

Plan planSqrt(std::size_t layerCount) {
  Plan plan;
  const std::size_t step = std::max<std::size_t>(1, ceilSqrt(layerCount));
  for (std::size_t c = step; c < layerCount; c += step) plan.checkpoints.push_back(c);
  return plan;
}

Plan planUniform(std::size_t layerCount, std::size_t segments) {
  // PyTorch checkpoint_sequential: segment size floor(n / K), boundaries at its multiples, the
  // remainder in the last segment. K > n is clamped to n (a boundary after every layer).
  Plan plan;
  if (layerCount == 0 || segments == 0) return plan;
  segments = std::min(segments, layerCount);
  const std::size_t size = layerCount / segments;
  for (std::size_t m = 1; m < segments; ++m) plan.checkpoints.push_back(m * size);
  return plan;
}

Plan planGreedyForBudget(const Chain& chain, std::uint64_t budgetBytes) { return greedyTrial(chain, budgetBytes).plan; }

Result<PlannerOutput> planGreedy(const Chain& chain, const PlannerOptions& options) {
  if (chain.size() == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  // memonger's search_plan: three rounds of budget = sqrt(save * max_run / 2) starting from 0,
  // then a grid from the least max_run seen to sqrt(2) times the last guess. Chen's own choice,
  // sqrt(x * y) from the budget-0 plan, is added to the grid. Each plan is scored by E.
  std::vector<std::uint64_t> budgets;
  std::uint64_t budget = 0;
  std::uint64_t leastRun = std::numeric_limits<std::uint64_t>::max();
  for (int round = 0; round < 3; ++round) {
    budgets.push_back(budget);
    const GreedyTrial trial = greedyTrial(chain, budget);
    if (round == 0) {
      budgets.push_back(static_cast<std::uint64_t>(
          std::sqrt(static_cast<double>(trial.savedBytes) * static_cast<double>(trial.largestRun))));
    }
    leastRun = std::min(leastRun, trial.largestRun);
    budget = static_cast<std::uint64_t>(
        std::sqrt(static_cast<double>(trial.savedBytes) * static_cast<double>(trial.largestRun) / 2.0));
  }
  const double highest = static_cast<double>(budget) * std::sqrt(2.0);
  constexpr int kGridTrials = 12;
  if (highest > static_cast<double>(leastRun)) {
    const double step = (highest - static_cast<double>(leastRun)) / kGridTrials;
    for (int trial = 1; trial <= kGridTrials; ++trial)
      budgets.push_back(static_cast<std::uint64_t>(static_cast<double>(leastRun) + step * trial));
  }
  PlannerOutput best;
  bool found = false;
  planning::WorkMeter meter(options, "greedy");
  for (std::size_t trial = 0; trial < budgets.size(); ++trial) {
    REMAT_RETURN_IF_ERROR(meter.at(static_cast<double>(trial) / static_cast<double>(budgets.size())));
    const std::uint64_t b = budgets[trial];
    Plan plan = planGreedyForBudget(chain, b);
    // decomposedPeak equals the simulator's E (decomposition_test) at O(n) without a timeline.
    const std::uint64_t peak = decomposedPeak(chain, plan);
    if (!found || peak < best.objectiveBytes) {
      best.plan = std::move(plan);
      best.objectiveBytes = peak;
      found = true;
    }
  }
  return best;
}

}  // namespace remat
