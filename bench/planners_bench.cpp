// Planner speed: linear (O(n) on CNN-like chains, O(n log n) otherwise), dp (O(n^3 alpha(n)) worst
// case), optimal (O(n^2)) and greedy, on seeded random chains. Counters: time per layer, and for
// the quadratic and cubic planners time per n^2 or n^3 unit. Results: docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include "bench_chains.hpp"
#include "remat/planners/planners.hpp"

namespace {

using remat::bench::chainOf;
using remat::bench::Kind;

template <typename Planner>
void run(benchmark::State& state, Kind kind, Planner&& planner) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const remat::Chain& chain = chainOf(n, kind);
  std::size_t checkpoints = 0;
  std::uint64_t bounds = 0;
  for (auto _ : state) {
    auto result = planner(chain);
    if (!result) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    checkpoints = result->plan.checkpoints.size();
    bounds = result->boundsSolved;
    benchmark::DoNotOptimize(result->objectiveBytes);
  }
  const double layers = static_cast<double>(n);
  state.counters["per_layer"] =
      benchmark::Counter(layers, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["checkpoints"] = static_cast<double>(checkpoints);
  if (bounds > 0) state.counters["bounds"] = static_cast<double>(bounds);
}

void BM_LinearCnn(benchmark::State& state) {
  run(state, Kind::Cnn, [](const remat::Chain& c) { return remat::planLinear(c); });
}
void BM_LinearMixed(benchmark::State& state) {
  run(state, Kind::Mixed, [](const remat::Chain& c) { return remat::planLinear(c); });
}
void BM_DpCnn(benchmark::State& state) {
  run(state, Kind::Cnn, [](const remat::Chain& c) { return remat::planDp(c); });
}
void BM_DpMixed(benchmark::State& state) {
  run(state, Kind::Mixed, [](const remat::Chain& c) { return remat::planDp(c); });
}
void BM_DpEqual(benchmark::State& state) {
  run(state, Kind::Equal, [](const remat::Chain& c) { return remat::planDp(c); });
}
void BM_OptimalCnn(benchmark::State& state) {
  run(state, Kind::Cnn, [](const remat::Chain& c) { return remat::planOptimal(c); });
}
void BM_OptimalMixed(benchmark::State& state) {
  run(state, Kind::Mixed, [](const remat::Chain& c) { return remat::planOptimal(c); });
}
void BM_GreedyCnn(benchmark::State& state) {
  run(state, Kind::Cnn, [](const remat::Chain& c) { return remat::planGreedy(c); });
}

BENCHMARK(BM_LinearCnn)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LinearMixed)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DpCnn)->Arg(100)->Arg(300)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DpCnn)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DpMixed)->Arg(100)->Arg(300)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DpMixed)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DpEqual)->Arg(100)->Arg(300)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DpEqual)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OptimalCnn)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OptimalMixed)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GreedyCnn)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
