// Results belong to what produced them: a measured overlay to the plan it measured (grey and never
// exported with another plan's prediction once the plan changes, current again after undo), a
// refused edit's message and a device capacity to the chain they were made on.
#include <gtest/gtest.h>

#include <QAction>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLineEdit>
#include <QTableView>
#include <QTest>
#include <algorithm>

#include "charts/memory_chart.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/report/exporters.hpp"
#include "views/chain_table_model.hpp"
#include "views/checkpoint_strip.hpp"
#include "views/layer_panel.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "window/export_controller.hpp"
#include "window/file_controller.hpp"
#include "window/measure_controller.hpp"

namespace remat::gui {
namespace {

// The small CNN at a size the CPU reference measures quickly.
Chain tinyCnn() {
  ChainSpec spec = test::smallCnn().spec;
  spec.input.shape = {2, 3, 16, 16};
  Result<Chain> built = buildChain(spec);
  EXPECT_TRUE(built.isOk()) << built.status().message();
  return built.isOk() ? *built : Chain{};
}

class StaleResultsTest : public test::MainWindowFixture {
 protected:
  void measureOnCpu() {
    window_.measuring()->measure(QStringLiteral("cpu"));
    ASSERT_TRUE(window_.jobs()->waitForIdle(120000));
    ASSERT_TRUE(window_.document()->measured().has_value()) << window_.messageBar()->text().toStdString();
  }
  QStringList measuredLegend() const {
    return window_.planView()->chart()->visibleSeriesNames().filter(QStringLiteral("measured"));
  }
  Document* document() const { return window_.document(); }
};

TEST_F(StaleResultsTest, ABudgetPlansMeasuredLegendReadsAsThePlanCardDoes) {
  // Issue 25's walk: the legend said "budget:2.5GiB" while the Plan card said "budget (dynamic <= ...)".
  document()->resetChain(tinyCnn(), QString());
  ASSERT_TRUE(document()->applyPlan(Plan{{3, 9}}, QStringLiteral("budget:2GiB")).isOk());
  measureOnCpu();
  ASSERT_EQ(measuredLegend().size(), 1);
  EXPECT_TRUE(measuredLegend().first().contains(QStringLiteral("budget (dynamic")))
      << measuredLegend().first().toStdString();
  EXPECT_FALSE(measuredLegend().first().contains(QStringLiteral("budget:"))) << measuredLegend().first().toStdString();
}

TEST_F(StaleResultsTest, AnEditMakesTheMeasurementStaleAndUndoMakesItCurrentAgain) {
  document()->resetChain(tinyCnn(), QString());
  ASSERT_TRUE(document()->applyPlan(Plan{{3, 9}}, QStringLiteral("linear")).isOk());
  measureOnCpu();
  ASSERT_TRUE(document()->measuredIsCurrent());
  EXPECT_TRUE(window_.action(QStringLiteral("exportMeasured"))->isEnabled());
  ASSERT_EQ(measuredLegend().size(), 1);
  EXPECT_FALSE(measuredLegend().first().contains(QStringLiteral("stale")));

  // The user adds a checkpoint on the strip: the overlay no longer belongs to the plan shown.
  CheckpointStrip* strip = window_.planView()->strip();
  QTest::mouseClick(strip, Qt::LeftButton, Qt::NoModifier, strip->cellPoint(6));
  ASSERT_EQ(document()->plan(), (Plan{{3, 6, 9}}));
  EXPECT_FALSE(document()->measuredIsCurrent());
  ASSERT_EQ(measuredLegend().size(), 1);
  EXPECT_TRUE(measuredLegend().first().contains(QStringLiteral("stale"))) << measuredLegend().first().toStdString();
  EXPECT_TRUE(measuredLegend().first().contains(QStringLiteral("linear")));
  EXPECT_FALSE(window_.action(QStringLiteral("exportMeasured"))->isEnabled());
  const Status refused = window_.exports()->exportMeasuredTimeline(path("mixed.csv"));
  ASSERT_FALSE(refused.isOk());
  EXPECT_TRUE(QString::fromStdString(refused.message()).contains(QStringLiteral("linear")));
  EXPECT_FALSE(QFile::exists(path("mixed.csv")));
  // A tooltip no longer pairs an op of this plan with the other plan's measurement.
  EXPECT_FALSE(window_.planView()->chart()->tooltipAt(0.5).contains(QStringLiteral("measured")));

  document()->undoStack()->undo();
  EXPECT_TRUE(document()->measuredIsCurrent());
  EXPECT_TRUE(window_.action(QStringLiteral("exportMeasured"))->isEnabled());
  ASSERT_TRUE(window_.exports()->exportMeasuredTimeline(path("both.csv")).isOk());
  Result<std::vector<Timeline>> both = readTimelines(path("both.csv").toStdString());
  ASSERT_TRUE(both.isOk()) << both.status().message();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].entries.size(), (*both)[1].entries.size());
}

TEST_F(StaleResultsTest, AChainEditMakesItStaleEvenWithTheSamePlan) {
  document()->resetChain(tinyCnn(), QString());
  measureOnCpu();
  ASSERT_TRUE(document()->measuredIsCurrent());
  ChainSpec renamed = document()->chain().spec;
  renamed.input.shape = {4, 3, 16, 16};
  ASSERT_TRUE(document()->editChain(renamed, QStringLiteral("Edit the input")).isOk());
  EXPECT_FALSE(document()->measuredIsCurrent());
  document()->undoStack()->undo();
  EXPECT_TRUE(document()->measuredIsCurrent());
}

// An unprofiled chain's run fits the CPU's workspaces; the chain gets them as one undoable edit.
TEST_F(StaleResultsTest, AMeasurementOfTheShownPlanWritesTheFittedWorkspacesAsOneEdit) {
  document()->resetChain(tinyCnn(), QString());
  const int edits = document()->undoStack()->count();
  measureOnCpu();
  EXPECT_TRUE(document()->measuredIsCurrent());
  EXPECT_EQ(document()->undoStack()->count(), edits + 1);
  const auto& layers = document()->chain().spec.layers;
  EXPECT_TRUE(std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.hasMeasuredWorkspace; }));
}

// A measurement that arrives after the plan changed keeps the plan it measured (shown stale) and
// leaves the chain alone: its fitted workspaces are not written over what the user has since.
TEST_F(StaleResultsTest, AMeasurementOfAnOlderPlanLeavesTheChainAlone) {
  document()->resetChain(tinyCnn(), QString());
  ASSERT_TRUE(document()->applyPlan(Plan{{3, 9}}, QStringLiteral("linear")).isOk());
  const std::string before = chainSpecToJson(document()->chain().spec).dump();
  const int edits = document()->undoStack()->count();
  window_.measuring()->measure(QStringLiteral("cpu"));
  ASSERT_TRUE(document()->toggleCheckpoint(6).isOk());  // while the run goes (its result is queued)
  ASSERT_TRUE(window_.jobs()->waitForIdle(120000));
  ASSERT_TRUE(document()->measured().has_value()) << window_.messageBar()->text().toStdString();
  EXPECT_FALSE(document()->measuredIsCurrent());
  EXPECT_EQ(document()->undoStack()->count(), edits + 1);  // the toggle, no workspace edit
  EXPECT_EQ(chainSpecToJson(document()->chain().spec).dump(), before);
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("stale")))
      << window_.messageBar()->text().toStdString();
  document()->undoStack()->undo();
  EXPECT_TRUE(document()->measuredIsCurrent());  // back on the plan it measured, on the same chain
}

TEST_F(StaleResultsTest, ATimelineFileOfAnotherPlanOpensAsStale) {
  document()->resetChain(tinyCnn(), QString());
  measureOnCpu();
  ASSERT_TRUE(window_.exports()->exportMeasuredTimeline(path("run.csv")).isOk());
  ASSERT_TRUE(document()->applyPlan(Plan{{3, 9}}, QStringLiteral("dp")).isOk());
  ASSERT_TRUE(window_.files()->openMeasuredTimeline(path("run.csv")).isOk());
  EXPECT_FALSE(document()->measuredIsCurrent());
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("stale")));
  EXPECT_FALSE(window_.exports()->exportMeasuredTimeline(path("mixed.csv")).isOk());
  // Back on the plan it measured (store everything), the same file is current.
  ASSERT_TRUE(document()->applyPlan(Plan{}, QStringLiteral("none")).isOk());
  ASSERT_TRUE(window_.files()->openMeasuredTimeline(path("run.csv")).isOk());
  EXPECT_TRUE(document()->measuredIsCurrent());
}

TEST_F(StaleResultsTest, ARefusedEditsMessageAndTheCapacityGoWithTheirChain) {
  ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/small_cnn.json")).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  // The user types 4 GiB into the capacity box...
  auto* capacity = window_.planView()->findChild<QDoubleSpinBox*>(QStringLiteral("capacity"));
  ASSERT_NE(capacity, nullptr);
  capacity->setFocus();
  QTest::keyClick(capacity, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(capacity, QStringLiteral("4"));
  QTest::keyClick(capacity, Qt::Key_Return);
  ASSERT_EQ(window_.planView()->capacityBytes(), 4ull << 30);
  // ... and renames a layer to a name another layer has: refused, with a red message.
  QTableView* table = window_.layerPanel()->view();
  const QModelIndex name = window_.layerPanel()->model()->index(2, ChainTableModel::Name);
  table->setCurrentIndex(name);
  table->edit(name);
  auto* editor = qobject_cast<QLineEdit*>(QApplication::focusWidget());
  ASSERT_NE(editor, nullptr);
  editor->selectAll();
  QTest::keyClicks(editor, QStringLiteral("conv1"));
  QTest::keyClick(editor, Qt::Key_Return);
  QCoreApplication::processEvents();  // the delegate commits on Return through a queued call
  ASSERT_FALSE(window_.layerPanel()->message().isEmpty());
  EXPECT_TRUE(window_.layerPanel()->message().contains(QStringLiteral("already used")));

  // Another chain starts clean: no message about the old one, no 4 GiB line over a toy chain.
  ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/toy_abstract.json")).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_TRUE(window_.layerPanel()->message().isEmpty());
  EXPECT_EQ(window_.planView()->capacityBytes(), 0u);
  EXPECT_EQ(capacity->value(), 0.0);
  EXPECT_LT(window_.planView()->chart()->displayedRanges().yMaxBytes, 1024.0 * 1024.0 * 1024.0);
}

}  // namespace
}  // namespace remat::gui
