// The budget planner and the Pareto front (remat/planners/tradeoff.hpp): budget:SIZE on seeded random
// chains of 100, 1,000 and 10,000 layers at two budgets, the whole front on the same chains, and
// the front of every zoo model at batch 64, 224x224. Counters: labels = Pareto labels kept over all
// positions, largest = the most at one position, points = the front's size. Results:
// docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include "bench_chains.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/tradeoff.hpp"

namespace {

using remat::bench::Kind;

const remat::Chain& randomChain(std::size_t n, Kind kind) { return remat::bench::chainOf(n, kind); }

// A budget `percent` of the way from the least E (optimal's) to store-all's E.
std::uint64_t budgetBetween(const remat::Chain& chain, std::uint64_t percent) {
  const std::uint64_t least = remat::planOptimal(chain)->objectiveBytes;
  const std::uint64_t storeAll = remat::dynamicPeak(chain, remat::Plan{});
  return least + (storeAll - least) * percent / 100;
}

void setCounters(benchmark::State& state, const remat::FrontStatistics& statistics) {
  state.counters["labels"] = static_cast<double>(statistics.labels);
  state.counters["largest"] = static_cast<double>(statistics.largestLabelSet);
}

// budget:SIZE with SIZE = the budget state.range(1) percent of the way from optimal to store-all.
void budget(benchmark::State& state, Kind kind) {
  const remat::Chain& chain = randomChain(static_cast<std::size_t>(state.range(0)), kind);
  const std::uint64_t bytes = budgetBetween(chain, static_cast<std::uint64_t>(state.range(1)));
  remat::FrontStatistics statistics;
  std::size_t checkpoints = 0;
  for (auto _ : state) {
    auto planned = remat::planBudget(chain, bytes, {}, &statistics);
    if (!planned) {
      state.SkipWithError(planned.status().message().c_str());
      return;
    }
    checkpoints = planned->plan.checkpoints.size();
    benchmark::DoNotOptimize(planned->objectiveBytes);
  }
  setCounters(state, statistics);
  state.counters["checkpoints"] = static_cast<double>(checkpoints);
}

void front(benchmark::State& state, const remat::Chain& chain) {
  remat::FrontStatistics statistics;
  std::size_t points = 0;
  for (auto _ : state) {
    auto computed = remat::paretoFront(chain);
    if (!computed) {
      state.SkipWithError(computed.status().message().c_str());
      return;
    }
    statistics = computed->statistics;
    points = computed->points.size();
    benchmark::DoNotOptimize(points);
  }
  setCounters(state, statistics);
  state.counters["points"] = static_cast<double>(points);
}

void BM_BudgetCnn(benchmark::State& state) { budget(state, Kind::Cnn); }
void BM_BudgetMixed(benchmark::State& state) { budget(state, Kind::Mixed); }
void BM_FrontCnn(benchmark::State& state) {
  front(state, randomChain(static_cast<std::size_t>(state.range(0)), Kind::Cnn));
}
void BM_FrontMixed(benchmark::State& state) {
  front(state, randomChain(static_cast<std::size_t>(state.range(0)), Kind::Mixed));
}

// The whole front, then budget:SIZE read off it: what the explorer does, against the pruned program.
void BM_FrontThenReadMixed(benchmark::State& state) {
  const remat::Chain& chain = randomChain(static_cast<std::size_t>(state.range(0)), Kind::Mixed);
  const std::uint64_t bytes = budgetBetween(chain, static_cast<std::uint64_t>(state.range(1)));
  for (auto _ : state) {
    auto computed = remat::paretoFront(chain);
    if (!computed) {
      state.SkipWithError(computed.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(remat::cheapestWithin(*computed, bytes));
  }
}

void registerZooFronts() {
  for (const remat::ZooEntry& entry : remat::zooModels()) {
    auto spec = remat::zooChain(entry.name, remat::ZooOptions{});
    auto chain = spec ? remat::buildChain(*spec) : remat::Result<remat::Chain>(spec.status());
    if (!chain) continue;
    benchmark::RegisterBenchmark(("BM_FrontZoo/" + entry.name).c_str(), [chain = *chain](benchmark::State& state) {
      front(state, chain);
    })->Unit(benchmark::kMillisecond);
  }
}

BENCHMARK(BM_BudgetCnn)->ArgsProduct({{100, 1000}, {10, 50}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BudgetMixed)->ArgsProduct({{100, 1000}, {10, 50}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BudgetCnn)->Args({10000, 10})->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BudgetMixed)->Args({10000, 10})->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FrontCnn)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FrontMixed)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FrontThenReadMixed)->ArgsProduct({{1000}, {10, 50}})->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  registerZooFronts();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
