// A checkpoint drag in the explorer on a 1,000-layer chain: each iteration moves one checkpoint by
// one layer, as the strip asks while the user drags it (CheckpointStrip::moveRequested), and lets
// every view redraw from the Document (summary cards, strip, memory chart, layer table, trade-off
// marker) before the next move. Counter: op_sequences, how many times the op sequence of a plan was
// built per move (the Document's simulation and liveness trace; 1 when each result is computed
// once). Results: docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "bench_chains.hpp"
#include "document/document.hpp"
#include "remat/memory/liveness.hpp"
#include "views/checkpoint_strip.hpp"
#include "views/plan_view.hpp"
#include "window/main_window.hpp"

namespace {

using remat::gui::MainWindow;

void BM_CheckpointDrag(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  MainWindow window;
  window.resize(1300, 850);
  window.show();
  remat::Plan plan;  // a checkpoint every 25 layers, as a sqrt-like plan of 1,000 layers has
  for (std::size_t l = 25; l < n; l += 25) plan.checkpoints.push_back(l);
  window.document()->resetChain(remat::bench::chainOf(n, remat::bench::Kind::Cnn), QString(), plan,
                                QStringLiteral("manual"));
  QCoreApplication::processEvents();
  std::size_t from = n / 2;  // a checkpoint (500 for 1,000 layers): it moves to 501 and back
  std::size_t to = from + 1;
  const std::uint64_t builtBefore = remat::opSequenceBuildCount();
  for (auto _ : state) {
    emit window.planView()->strip()->moveRequested(from, to);
    QCoreApplication::processEvents();  // the repaints the move asked for
    std::swap(from, to);
  }
  if (!window.document()->isCheckpoint(from)) state.SkipWithError("the drag was refused");
  state.counters["op_sequences"] = benchmark::Counter(static_cast<double>(remat::opSequenceBuildCount() - builtBefore) /
                                                      static_cast<double>(state.iterations()));
}
BENCHMARK(BM_CheckpointDrag)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir config;  // the window's settings (geometry, recent files) stay away from the user's
  qputenv("XDG_CONFIG_HOME", config.path().toUtf8());
  QStandardPaths::setTestModeEnabled(true);
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
