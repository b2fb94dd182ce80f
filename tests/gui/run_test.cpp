// Measuring the current plan on the CPU in the background: the measured timeline comes
// back, overlays the prediction (the same ops and, with exact kernels, the same bytes), and a
// cancelled run leaves nothing behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QToolButton>
#include <atomic>
#include <fstream>

#include "charts/memory_chart.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/run_support.hpp"
#include "gui_test_env.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/chain.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "window/app_options.hpp"
#include "window/export_controller.hpp"
#include "window/file_controller.hpp"
#include "window/main_window.hpp"
#include "window/measure_controller.hpp"

namespace remat::gui {
namespace {

Chain tinyCnn() {
  Chain chain = test::smallCnn();
  ChainSpec spec = chain.spec;
  spec.input.shape = {2, 3, 16, 16};  // small enough for a step to be quick
  Result<Chain> built = buildChain(spec);
  EXPECT_TRUE(built.isOk()) << built.status().message();
  return built.isOk() ? *built : Chain{};
}

TEST(Run, MeasuresThePlanOnTheCpuAndOverlaysIt) {
  EXPECT_TRUE(measureDevices().contains(QStringLiteral("cpu")));
  MainWindow window;
  window.resize(1300, 850);
  window.show();
  window.document()->resetChain(tinyCnn(), QString());
  ASSERT_TRUE(window.document()->applyPlan(Plan{{3, 9}}, QStringLiteral("manual")).isOk());
  window.measuring()->measure(QStringLiteral("cpu"));
  EXPECT_TRUE(window.jobs()->isRunning(JobChannel::Run));
  ASSERT_TRUE(window.jobs()->waitForIdle(120000));
  ASSERT_TRUE(window.document()->measured().has_value()) << window.messageBar()->text().toStdString();
  const Timeline& measured = *window.document()->measured();
  const Timeline& predicted = window.document()->simulation().timeline;
  EXPECT_EQ(measured.source, "cpu");
  ASSERT_EQ(measured.entries.size(), predicted.entries.size());
  for (std::size_t i = 0; i < measured.entries.size(); ++i) {
    EXPECT_EQ(measured.entries[i].op, predicted.entries[i].op);
    EXPECT_EQ(measured.entries[i].footprintBytes, predicted.entries[i].footprintBytes) << "op " << i;
    EXPECT_GE(measured.entries[i].timeUs, 0.0);
  }
  const QStringList series = window.planView()->chart()->visibleSeriesNames();
  EXPECT_TRUE(series.filter(QStringLiteral("measured (cpu")).size() == 1) << series.join(", ").toStdString();
  EXPECT_TRUE(window.messageBar()->text().contains(QStringLiteral("Measured on cpu")));
  EXPECT_TRUE(window.document()->undoStack()->undoText().contains(QStringLiteral("CPU workspaces")))
      << window.document()->undoStack()->undoText().toStdString();

  // What was measured exports with the prediction and opens again as the overlay.
  QTemporaryDir dir;
  ASSERT_TRUE(window.exports()->exportMeasuredTimeline(dir.filePath(QStringLiteral("run.csv"))).isOk());
  const Timeline before = measured;
  window.document()->setMeasured(std::nullopt);
  ASSERT_TRUE(window.files()->openMeasuredTimeline(dir.filePath(QStringLiteral("run.csv"))).isOk());
  ASSERT_TRUE(window.document()->measured().has_value());
  EXPECT_EQ(window.document()->measured()->source, "cpu");
  ASSERT_EQ(window.document()->measured()->entries.size(), before.entries.size());
  for (std::size_t i = 0; i < before.entries.size(); ++i)
    EXPECT_EQ(window.document()->measured()->entries[i].footprintBytes, before.entries[i].footprintBytes);
}

TEST(Run, ACancelledRunLeavesNoMeasurement) {
  MainWindow window;
  window.document()->resetChain(tinyCnn(), QString());
  QSignalSpy finished(window.jobs(), &JobRunner::finished);
  window.measuring()->measure(QStringLiteral("cpu"));
  window.jobs()->cancel(JobChannel::Run);
  EXPECT_FALSE(window.jobs()->isBusy());
  window.jobs()->shutdown();  // let the worker finish its step; its answer is dropped
  QCoreApplication::processEvents();
  EXPECT_FALSE(window.document()->measured().has_value());
  ASSERT_EQ(finished.count(), 1);
  EXPECT_FALSE(finished.at(0).at(1).toBool());
}

// While a measurement runs the status bar says which op of how many, and the Cancel button is
// labelled and explains itself.
TEST(Run, TheStatusBarShowsTheOpCountAndALabelledCancel) {
  MainWindow window;
  window.document()->resetChain(tinyCnn(), QString());
  QSignalSpy progress(window.jobs(), &JobRunner::progress);
  window.measuring()->measure(QStringLiteral("cpu"));
  ASSERT_TRUE(window.jobs()->waitForIdle(120000));
  QStringList texts;
  for (const QList<QVariant>& args : progress) texts << args.at(2).toString();
  EXPECT_EQ(texts.filter(QStringLiteral("Measuring on cpu: op 1 of ")).size(), 1) << texts.join("\n").toStdString();
  auto* cancel = window.findChild<QToolButton*>(QStringLiteral("cancelJob"));
  ASSERT_NE(cancel, nullptr);
  EXPECT_EQ(cancel->text(), QStringLiteral("Cancel"));
  EXPECT_EQ(cancel->toolButtonStyle(), Qt::ToolButtonTextBesideIcon);
  EXPECT_TRUE(cancel->toolTip().contains(QStringLiteral("frees its memory"))) << cancel->toolTip().toStdString();
}

// --measure cpu measures the opened chain's plan, as the Measure on CPU action does.
TEST(Run, TheMeasureOptionMeasuresOnStart) {
  QTemporaryDir dir;
  const QString chainPath = dir.filePath(QStringLiteral("tiny.json"));
  ASSERT_TRUE(saveChainFile(tinyCnn().spec, chainPath.toStdString()).isOk());
  Result<AppOptions> options = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--chain"), chainPath,
                                                QStringLiteral("--planner"), QStringLiteral("sqrt"),
                                                QStringLiteral("--measure"), QStringLiteral("cpu")});
  ASSERT_TRUE(options.isOk()) << options.status().message();
  EXPECT_EQ(options->measureDevice, QStringLiteral("cpu"));
  MainWindow window;
  ASSERT_TRUE(applyAppOptions(window, *options).isOk());
  ASSERT_TRUE(window.jobs()->waitForIdle(120000));
  ASSERT_TRUE(window.document()->measured().has_value()) << window.messageBar()->text().toStdString();
  EXPECT_EQ(window.document()->measured()->dynamicPeakBytes(), window.document()->simulation().dynamicPeakBytes);
  // Issue 25: the message speaks of workspaces, not of the chain file's field names.
  const QString message = window.messageBar()->text();
  EXPECT_TRUE(message.startsWith(QStringLiteral("Measured on cpu"))) << message.toStdString();
  EXPECT_FALSE(message.contains(QStringLiteral("wf / wb"))) << message.toStdString();
}

// Issue 25: the time left goes by the rate since the first op that did work, whose one-time set-up
// would otherwise be spread over the whole run.
TEST(Run, TheEstimateLeavesOutTheFirstOpsSetUp) {
  RunEstimate estimate;
  RunProgress p;
  p.costTotal = 100.0;
  EXPECT_LT(estimate.secondsLeft(p), 0.0);  // nothing done yet
  p.costDone = 1.0;
  p.elapsedSeconds = 10.0;  // the first op: 10 s of set-up
  EXPECT_LT(estimate.secondsLeft(p), 0.0);
  p.costDone = 2.0;
  p.elapsedSeconds = 10.1;
  EXPECT_LT(estimate.secondsLeft(p), 0.0);  // 1% since: too little to go by
  p.costDone = 5.0;
  p.elapsedSeconds = 10.4;  // then 0.1 s per 1%
  EXPECT_NEAR(estimate.secondsLeft(p), 0.1 * 95.0, 1e-9);
  EXPECT_GT(p.secondsLeft(), 100.0) << "the rate from the start, which this replaces";
  std::vector<std::string> names(1, "x");
  p.op = Op{OpKind::F, 1};
  EXPECT_TRUE(runProgressText(p, names, estimate.secondsLeft(p)).endsWith(QStringLiteral("about 9.5 s left")));
  EXPECT_FALSE(runProgressText(p, names, -1.0).contains(QStringLiteral("left")));
}

TEST(Run, AnUnknownDeviceIsAnError) {
  MainWindow window;
  window.document()->resetChain(tinyCnn(), QString());
  window.measuring()->measure(QStringLiteral("tpu"));
  EXPECT_FALSE(window.jobs()->isBusy());
  EXPECT_TRUE(window.messageBar()->isError());
  EXPECT_TRUE(window.messageBar()->text().contains(QStringLiteral("tpu")));
}

TEST(Run, MeasurePlanRefusesAnInvalidPlan) {
  const Chain chain = tinyCnn();
  RunRequest request{chain, Plan{{chain.size()}}, "manual", "cpu", 1};
  Result<Measurement> result = measurePlan(request, nullptr, {});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), ErrorCode::InvalidInput);
}

// An unprofiled chain is measured against the prediction with the CPU's workspaces: they come back
// written into the chain, and the progress names the op and the count as the run goes.
TEST(Run, MeasurePlanFitsTheWorkspacesAndReportsEachOp) {
  const Chain chain = tinyCnn();
  RunRequest request{chain, Plan{{3}}, "manual", "cpu", 2};
  QStringList texts;
  std::vector<double> fractions;
  Result<Measurement> measured = measurePlan(request, nullptr, [&](double fraction, const QString& text) {
    fractions.push_back(fraction);
    texts << text;
  });
  ASSERT_TRUE(measured.isOk()) << measured.status().message();
  EXPECT_FALSE(measured->fittedLayers.empty()) << "the convolutions' oneDNN scratch";
  for (std::size_t l : measured->fittedLayers)
    EXPECT_GT(measured->chain.at(l).fwdWorkspaceBytes + measured->chain.at(l).bwdWorkspaceBytes,
              chain.at(l).fwdWorkspaceBytes + chain.at(l).bwdWorkspaceBytes);
  Result<Simulation> predicted = simulate(measured->chain, request.plan);
  ASSERT_TRUE(predicted.isOk());
  ASSERT_EQ(measured->timeline.entries.size(), predicted->timeline.entries.size());
  for (std::size_t i = 0; i < predicted->timeline.entries.size(); ++i)
    EXPECT_EQ(measured->timeline.entries[i].footprintBytes, predicted->timeline.entries[i].footprintBytes);
  EXPECT_EQ(measured->predictedDynamicPeakBytes, predicted->dynamicPeakBytes);
  ASSERT_FALSE(texts.isEmpty());
  // The first op is always reported; later ones at most every 50 ms (so op 1 of step 2 may be too).
  const QStringList opTexts = texts.filter(QStringLiteral(": op "));
  ASSERT_FALSE(opTexts.isEmpty()) << texts.join("\n").toStdString();
  EXPECT_TRUE(opTexts.front().startsWith(QStringLiteral("Measuring on cpu: op 1 of ")))
      << texts.join("\n").toStdString();
  EXPECT_EQ(texts.back(), QStringLiteral("Measured"));
  EXPECT_EQ(fractions.back(), 1.0);
}

// A cancel raised while the run goes stops it before the next op.
TEST(Run, MeasurePlanStopsWhenCancelled) {
  const Chain chain = tinyCnn();
  RunRequest request{chain, Plan{}, "manual", "cpu", 3};
  std::atomic<bool> cancel{false};
  int opsReported = 0;
  Result<Measurement> measured = measurePlan(request, &cancel, [&](double, const QString& text) {
    if (text.contains(QStringLiteral(": op "))) {
      ++opsReported;
      cancel = true;
    }
  });
  ASSERT_FALSE(measured.isOk());
  EXPECT_EQ(measured.status().code(), ErrorCode::Cancelled);
  EXPECT_EQ(opsReported, 1);
  EXPECT_NE(measured.status().message().find("before op 2 of"), std::string::npos) << measured.status().message();
}

// Resident bytes of this process (/proc/self/statm), 0 when it cannot be read.
std::uint64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// A measurement cancelled half way gives its memory back to the system, not only to the allocator:
// the process is about as large after it as before (the kernels' code and caches stay).
TEST(Run, ACancelledMeasurementGivesItsMemoryBack) {
  Result<Chain> chain = parseChain(R"({"format": "remat-chain/1", "name": "wide", "input": {"shape": [16, 64, 64, 64]},
    "layers": [{"name": "c1", "kind": "conv2d", "out_channels": 64, "kernel": 3, "padding": 1},
               {"name": "r1", "kind": "relu"}, {"name": "c2", "kind": "conv2d", "out_channels": 64, "kernel": 3, "padding": 1},
               {"name": "r2", "kind": "relu"}, {"name": "c3", "kind": "conv2d", "out_channels": 64, "kernel": 3, "padding": 1},
               {"name": "r3", "kind": "relu"}, {"name": "c4", "kind": "conv2d", "out_channels": 64, "kernel": 3, "padding": 1},
               {"name": "r4", "kind": "relu"}, {"name": "pool", "kind": "adaptive_avgpool"}, {"name": "flat", "kind": "flatten"},
               {"name": "fc", "kind": "linear", "out_features": 10}]})",
                                   "wide");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const std::uint64_t before = residentBytes();
  ASSERT_GT(before, 0u);
  RunRequest request{*chain, Plan{}, "none", "cpu", 1};
  std::atomic<bool> cancel{false};
  Result<Measurement> measured = measurePlan(request, &cancel, [&](double, const QString& text) {
    // At the first reported backward op the forward's activations are all held.
    if (text.contains(QStringLiteral(": B("))) cancel = true;
  });
  ASSERT_EQ(measured.status().code(), ErrorCode::Cancelled) << measured.status().message();
  const std::uint64_t activations = 8 * chain->outBytes(1);  // what the forward held: 128 MiB
  const std::uint64_t after = residentBytes();
  EXPECT_LT(after, before + activations / 4) << "resident before " << before << ", after " << after;
}

// The progress text: op i of N with the op's label and, once something is done, the time left.
TEST(Run, ProgressTextHasTheOpCountAndAnEstimate) {
  RunProgress p;
  p.opIndex = 36;
  p.opCount = 98;
  p.op = Op{OpKind::B, 12};
  p.elapsedSeconds = 6.0;
  p.costDone = 3.0;
  p.costTotal = 4.0;
  std::vector<std::string> names(12, "x");
  names[11] = "conv4";
  EXPECT_EQ(runProgressText(p, names), QStringLiteral("op 37 of 98: B(12) conv4, about 2.0 s left"));
  p.costDone = 0.0;
  EXPECT_EQ(runProgressText(p, names), QStringLiteral("op 37 of 98: B(12) conv4"));
}

}  // namespace
}  // namespace remat::gui
