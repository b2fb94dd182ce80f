// One training step on the CPU backend (oneDNN), store-all, float32, 1000 classes: the chains
// docs/benchmarks.md compares with PyTorch (scripts/bench-cpu-vs-torch.py runs both), at one thread
// and at every core. Each benchmark prepares the device, fits the chain's workspaces to it, runs
// one warm-up step (oneDNN's first execution, the allocator's first pages) and then times steps
// with the interpreter's own step clock (manual time: setup stays out).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/model/zoo.hpp"

namespace {

struct StepCase {
  const char* model;
  std::int64_t batch;
  std::int64_t resolution;
};

// The chains of the comparison (issues 13 and 22): small enough for a 2-core machine.
constexpr StepCase kCases[] = {
    {"resnet18", 8, 112},
    {"vgg11", 4, 112},
    {"vgg16", 8, 224},
    {"mobilenet_v2", 8, 112},
    // Issue 22: the zoo's models of depthwise convolutions, Squeeze-and-Excitation, SiLU /
    // Hardswish / Sigmoid and channel slices and shuffles.
    {"efficientnet_b0", 8, 128},
    {"mobilenet_v3_large", 8, 128},
    {"regnet_y_400mf", 8, 128},
    {"shufflenet_v2_x1_0", 8, 128},
    {"convnext_tiny", 8, 128},
};

void stepBenchmark(benchmark::State& state, StepCase c, int threads) {
  auto spec = remat::zooChain(c.model, {.batch = c.batch, .resolution = c.resolution, .numClasses = 1000});
  if (!spec) return state.SkipWithError(spec.status().message().c_str());
  auto chain = remat::buildChain(*spec);
  if (!chain) return state.SkipWithError(chain.status().message().c_str());
  remat::cpu::CpuDevice device({.threads = threads});
  auto fit = remat::fitWorkspacesToDevice(*chain, device);
  if (!fit) return state.SkipWithError(fit.status().message().c_str());
  auto interpreter = remat::Interpreter::create(fit->chain, device);
  if (!interpreter) return state.SkipWithError(interpreter.status().message().c_str());
  auto warmUp = (*interpreter)->run(remat::Plan{});
  if (!warmUp) return state.SkipWithError(warmUp.status().message().c_str());
  for (auto _ : state) {
    auto step = (*interpreter)->run(remat::Plan{});
    if (!step) return state.SkipWithError(step.status().message().c_str());
    state.SetIterationTime(step->stepSeconds.front());
  }
  state.counters["threads"] = device.threads();
  // scripts/bench-cpu-vs-torch.py compares it with the torchvision model's: the same network.
  state.counters["params"] = static_cast<double>(fit->chain.paramCount());
  state.counters["peak_MiB"] =
      static_cast<double>(warmUp->timelines.front().dynamicPeakBytes() + (*interpreter)->staticBytes()) / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  const int everyCore = remat::cpu::CpuDevice().threads();
  for (const StepCase& c : kCases)
    for (int threads : {1, everyCore}) {
      const std::string name = std::string("cpu_step/") + c.model + "_b" + std::to_string(c.batch) + "_" +
                               std::to_string(c.resolution) + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), stepBenchmark, c, threads)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(2.0);
      if (everyCore == 1) break;
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
