// Exports write files that parse back: the plan as JSON (the fields of `remat plan --json`), the
// chart as PNG and SVG, the chain as a chain file.
#include <gtest/gtest.h>

#include <QFile>
#include <QImage>
#include <QSvgRenderer>
#include <fstream>
#include <nlohmann/json.hpp>

#include "charts/memory_chart.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_export.hpp"
#include "document/timeline_files.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/planners/planners.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/timeline_formats.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "window/export_controller.hpp"
#include "window/file_controller.hpp"
#include "window/plan_controller.hpp"

namespace remat::gui {
namespace {

nlohmann::json readJson(const QString& path) {
  std::ifstream in(path.toStdString());
  EXPECT_TRUE(in.good()) << path.toStdString();
  return nlohmann::json::parse(in, nullptr, false);
}

class ExportTest : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    MainWindowFixture::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("resnet18"), ZooOptions{.batch = 8, .resolution = 64}).isOk());
  }
};

TEST_F(ExportTest, PlanJsonHasTheFieldsOfRematPlanJson) {
  window_.plans()->runPlanner(QStringLiteral("dp"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  ASSERT_EQ(window_.document()->planner(), QStringLiteral("dp"));
  ASSERT_TRUE(window_.exports()->exportPlanJson(path("plan.json")).isOk());
  const nlohmann::json json = readJson(path("plan.json"));
  ASSERT_FALSE(json.is_discarded());
  Result<PlanReport> expected = runPlanner(window_.document()->chain(), "dp");
  ASSERT_TRUE(expected.isOk());
  EXPECT_EQ(json.at("planner"), "dp");
  EXPECT_EQ(json.at("objective"), "A");
  EXPECT_EQ(json.at("objective_bytes").get<std::uint64_t>(), expected->objectiveBytes);
  EXPECT_EQ(json.at("checkpoints").get<std::vector<std::size_t>>(), expected->plan.checkpoints);
  EXPECT_EQ(json.at("dynamic_peak_bytes").get<std::uint64_t>(), expected->dynamicPeakBytes);
  EXPECT_EQ(json.at("static_bytes").get<std::uint64_t>(), expected->staticBytes);
  EXPECT_EQ(json.at("peak_bytes").get<std::uint64_t>(), expected->peakBytes());
  EXPECT_GE(json.at("plan_seconds").get<double>(), 0.0);
  EXPECT_EQ(json.at("A_bytes").get<std::uint64_t>(), expected->aBytes);
  EXPECT_EQ(json.at("R_bytes").get<std::uint64_t>(), expected->rBytes);
}

TEST_F(ExportTest, AHandEditedPlanExportsAsManualWithObjectiveE) {
  ASSERT_TRUE(window_.document()->toggleCheckpoint(3).isOk());
  ASSERT_TRUE(window_.exports()->exportPlanJson(path("manual.json")).isOk());
  const nlohmann::json json = readJson(path("manual.json"));
  EXPECT_EQ(json.at("planner"), "manual");
  EXPECT_EQ(json.at("objective"), "-");
  EXPECT_EQ(json.at("checkpoints"), nlohmann::json::array({3}));
  EXPECT_EQ(json.at("objective_bytes"), json.at("dynamic_peak_bytes"));
  EXPECT_EQ(json.at("plan_seconds").get<double>(), 0.0);
}

void expectSameOps(const Timeline& a, const Timeline& b) {
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (std::size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_EQ(a.entries[i].op, b.entries[i].op) << "op " << i;
    EXPECT_EQ(a.entries[i].footprintBytes, b.entries[i].footprintBytes) << "op " << i;
    EXPECT_EQ(a.entries[i].liveAfterBytes, b.entries[i].liveAfterBytes) << "op " << i;
  }
}

TEST_F(ExportTest, TimelinesWriteAndReadBack) {
  ASSERT_TRUE(window_.document()->applyPlan(Plan{{2, 5}}, QStringLiteral("manual")).isOk());
  const Timeline& predicted = window_.document()->simulation().timeline;
  for (const char* name : {"predicted.csv", "predicted.json", "predicted.trace.json"})
    ASSERT_TRUE(window_.exports()->exportPredictedTimeline(path(name)).isOk()) << name;
  for (const char* name : {"predicted.csv", "predicted.json"}) {
    Result<std::vector<Timeline>> read = readTimelines(path(name).toStdString());
    ASSERT_TRUE(read.isOk()) << read.status().message();
    ASSERT_EQ(read->size(), 1u);
    EXPECT_EQ(read->front().source, "predicted");
    EXPECT_EQ(read->front().planner, "manual");
    expectSameOps(read->front(), predicted);
    // Each op carries its modelled duration, so the file has a real time axis.
    double totalUs = 0.0;
    for (std::size_t i = 0; i < predicted.entries.size(); ++i) {
      EXPECT_EQ(read->front().entries[i].timeUs, predicted.entries[i].timeUs) << name << " op " << i;
      totalUs += read->front().entries[i].timeUs;
    }
    EXPECT_GT(totalUs, 0.0) << name;
  }
  const nlohmann::json trace = readJson(path("predicted.trace.json"));
  ASSERT_FALSE(trace.is_discarded());
  std::size_t opEvents = 0;
  for (const auto& event : trace.at("traceEvents")) opEvents += event.at("ph") == "X" ? 1 : 0;
  EXPECT_EQ(opEvents, predicted.entries.size());

  // A timeline file opens as the measured overlay, and exports next to the prediction.
  ASSERT_TRUE(window_.files()->openMeasuredTimeline(path("predicted.json")).isOk());
  ASSERT_TRUE(window_.document()->measured().has_value());
  expectSameOps(*window_.document()->measured(), predicted);
  ASSERT_TRUE(window_.exports()->exportMeasuredTimeline(path("both.csv")).isOk());
  Result<std::vector<Timeline>> both = readTimelines(path("both.csv").toStdString());
  ASSERT_TRUE(both.isOk()) << both.status().message();
  EXPECT_EQ(both->size(), 2u);

  // Bad names and bad files are errors with the exporter's or the reader's message.
  EXPECT_FALSE(window_.exports()->exportPredictedTimeline(path("timeline.txt")).isOk());
  QFile bad(path("bad.csv"));
  ASSERT_TRUE(bad.open(QIODevice::WriteOnly));
  bad.write("planner,run\nx,1\n");
  bad.close();
  EXPECT_FALSE(window_.files()->openMeasuredTimeline(path("bad.csv")).isOk());
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("bad.csv")));
  ASSERT_TRUE(window_.document()->measured().has_value());  // the earlier overlay stays
}

TEST_F(ExportTest, ChartPngAndSvgParseBack) {
  ASSERT_TRUE(window_.exports()->exportChartPng(path("chart.png")).isOk());
  const QImage image(path("chart.png"));
  ASSERT_FALSE(image.isNull());
  const QSize expected = window_.planView()->chart()->size() * window_.planView()->chart()->devicePixelRatio();
  EXPECT_EQ(image.size(), expected);
  ASSERT_TRUE(window_.exports()->exportChartSvg(path("chart.svg")).isOk());
  QSvgRenderer svg(path("chart.svg"));
  EXPECT_TRUE(svg.isValid());
  QFile file(path("chart.svg"));
  ASSERT_TRUE(file.open(QIODevice::ReadOnly));
  const QByteArray text = file.readAll();
  EXPECT_TRUE(text.contains("<svg"));
  EXPECT_TRUE(text.contains("memory (")) << "the axis title is text in the SVG";
  // Unwritable paths are errors, not crashes.
  EXPECT_FALSE(window_.exports()->exportChartPng(path("missing/dir/chart.png")).isOk());
  EXPECT_FALSE(window_.exports()->exportPlanJson(path("missing/dir/plan.json")).isOk());
}

TEST_F(ExportTest, SavedChainLoadsBackTheSame) {
  ASSERT_TRUE(window_.document()->toggleCheckpoint(2).isOk());
  EXPECT_TRUE(window_.isWindowModified() || !window_.document()->undoStack()->isClean());
  ASSERT_TRUE(window_.files()->saveChain(path("resnet18.json")).isOk());
  EXPECT_TRUE(window_.document()->undoStack()->isClean());
  EXPECT_EQ(window_.document()->filePath(), path("resnet18.json"));
  Result<Chain> loaded = loadChainFile(path("resnet18.json").toStdString());
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  EXPECT_EQ(chainSpecToText(loaded->spec), chainSpecToText(window_.document()->chain().spec));
  EXPECT_EQ(loaded->staticBytes(), window_.document()->chain().staticBytes());
  EXPECT_TRUE(window_.files()->recentFiles().contains(path("resnet18.json")));
}

TEST_F(ExportTest, ExportsNeverReplaceTheOpenChainFile) {
  // Issue 15: every writer goes through writeFileAtomically, which refuses the command's inputs.
  ASSERT_TRUE(window_.files()->saveChain(path("open.json")).isOk());
  const std::string before = chainSpecToText(window_.document()->chain().spec);
  const QString open = path("open.json");
  EXPECT_FALSE(window_.exports()->exportPredictedTimeline(open).isOk());
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("a file this command reads")))
      << window_.messageBar()->text().toStdString();
  EXPECT_FALSE(window_.exports()->exportPlanJson(open).isOk());
  EXPECT_FALSE(window_.exports()->exportChartPng(open).isOk());
  EXPECT_FALSE(window_.exports()->exportChartSvg(open).isOk());
  Result<Chain> still = loadChainFile(open.toStdString());
  ASSERT_TRUE(still.isOk()) << still.status().message();
  EXPECT_EQ(chainSpecToText(still->spec), before);
  EXPECT_TRUE(window_.files()->saveChain(open).isOk());  // Save itself replaces it, as asked
}

// Issue 21: timelines export as PyTorch memory snapshots (pickle and JSON) that read back, and a
// PyTorch recording opens as the measured overlay (its ops are PyTorch's, not the plan's: stale).
TEST_F(ExportTest, PyTorchMemorySnapshotsExportAndOpen) {
  ASSERT_TRUE(window_.document()->applyPlan(Plan{{2, 5}}, QStringLiteral("manual")).isOk());
  const Timeline& predicted = window_.document()->simulation().timeline;
  for (const char* name : {"predicted.pickle", "predicted.snapshot.json"}) {
    ASSERT_TRUE(window_.exports()->exportPredictedTimeline(path(name)).isOk()) << name;
    Result<std::vector<Timeline>> read = readTimelines(path(name).toStdString());
    ASSERT_TRUE(read.isOk()) << read.status().message();
    ASSERT_EQ(read->size(), 1u);
    expectSameOps(read->front(), predicted);
  }
  const QString recording = QStringLiteral(REMAT_TEST_DATA_DIR "/snapshots/cpu-recording.pickle");
  ASSERT_TRUE(window_.files()->openMeasuredTimeline(recording).isOk()) << window_.messageBar()->text().toStdString();
  ASSERT_TRUE(window_.document()->measured().has_value());
  EXPECT_EQ(window_.document()->measured()->source, "cpu");
  EXPECT_FALSE(window_.document()->measuredOrigin().plan.has_value());  // drawn as stale
  // A JSON snapshot under a plain .json name is one by its content.
  window_.document()->setMeasured(std::nullopt);
  ASSERT_TRUE(QFile::copy(QStringLiteral(REMAT_TEST_DATA_DIR "/snapshots/shaped.json"), path("cuda.json")));
  ASSERT_TRUE(window_.files()->openMeasuredTimeline(path("cuda.json")).isOk())
      << window_.messageBar()->text().toStdString();
  ASSERT_TRUE(window_.document()->measured().has_value());
  EXPECT_EQ(window_.document()->measured()->source, "cuda:0");
}

// Issue 25: the type picked in the save dialog decides the format, whatever the typed name says, and
// the name gets that type's extension. The types are the rows of the one table of formats.
TEST_F(ExportTest, TheSaveDialogsChosenTypeWins) {
  ASSERT_TRUE(window_.document()->applyPlan(Plan{{2, 5}}, QStringLiteral("budget:54951085")).isOk());
  const QStringList filters = timelineExportFilter().split(QStringLiteral(";;"));
  ASSERT_EQ(filters.size(), static_cast<qsizetype>(timelineFormats().size()));
  QString suggested;
  for (std::size_t row = 0; row < timelineFormats().size(); ++row) {
    const TimelineFormat& format = timelineFormats()[row];
    const QString stem = path(QStringLiteral("chosen%1").arg(row));
    window_.prompts().saveFile = [&](QWidget*, const QString&, const QString& name, const QString& all,
                                     const QString&) -> SaveTarget {
      suggested = name;
      EXPECT_TRUE(all.split(QStringLiteral(";;")).contains(filters[static_cast<qsizetype>(row)]));
      return {stem + QStringLiteral(".json"), filters[static_cast<qsizetype>(row)]};  // a name of another type
    };
    window_.exports()->exportDialog(ExportController::Kind::PredictedTimeline);
    const QString written =
        stem + QString::fromUtf8(format.extension.data(), static_cast<qsizetype>(format.extension.size()));
    ASSERT_TRUE(QFile::exists(written)) << format.name << ": " << window_.messageBar()->text().toStdString();
    Result<const TimelineFormat*> named = timelineFormatForPath(written.toStdString());
    ASSERT_TRUE(named.isOk());
    EXPECT_EQ((*named)->name, format.name);
    if (format.readable()) {
      EXPECT_TRUE(readTimelines(written.toStdString()).isOk()) << format.name;
    } else {  // the Chrome trace: Perfetto's JSON, not a remat-timeline file
      const nlohmann::json trace = readJson(written);
      EXPECT_TRUE(trace.contains("traceEvents")) << format.name;
    }
    if (written != stem + QStringLiteral(".json")) EXPECT_FALSE(QFile::exists(stem + QStringLiteral(".json")));
  }
  // The default name: chain and planner, without the budget's colon.
  EXPECT_FALSE(suggested.contains(QLatin1Char(':'))) << suggested.toStdString();
  EXPECT_TRUE(suggested.startsWith(QStringLiteral("resnet18_budget-54951085"))) << suggested.toStdString();
  // Other exports get their extension too.
  window_.prompts().saveFile = [&](QWidget*, const QString&, const QString&, const QString&, const QString& first) {
    return SaveTarget{path(QStringLiteral("chart")), first};
  };
  window_.exports()->exportDialog(ExportController::Kind::ChartPng);
  EXPECT_FALSE(QImage(path(QStringLiteral("chart.png"))).isNull());
}

}  // namespace
}  // namespace remat::gui
