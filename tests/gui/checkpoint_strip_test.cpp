// The checkpoint strip driven by real input: clicks, drags and keys change the plan, the displayed
// peak becomes the simulator's value for the new plan, and undo restores it.
#include "views/checkpoint_strip.hpp"

#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>
#include <QToolTip>
#include <cmath>

#include "charts/memory_chart.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/plan_insight.hpp"
#include "gui_test_env.hpp"
#include "remat/memory/simulator.hpp"
#include "views/plan_view.hpp"

namespace remat::gui {
namespace {

class StripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chain_ = test::smallCnn();
    ASSERT_GT(chain_.size(), 10u);
    view_ = std::make_unique<PlanView>(&document_);
    view_->resize(1100, 700);
    view_->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(view_.get()));
    // simulatedPeak() is core's simulation of chain_, whose step is core's default.
    ASSERT_TRUE(document_.setStepOptions(chain_.step).isOk());
    document_.resetChain(chain_, QString());
  }

  CheckpointStrip* strip() const { return view_->strip(); }
  std::uint64_t simulatedPeak(const Plan& plan) const {
    Result<Simulation> sim = simulate(chain_, plan);
    EXPECT_TRUE(sim.isOk());
    return sim->peakBytes();
  }
  void expectShows(const Plan& plan) const {
    EXPECT_EQ(document_.plan(), plan);
    EXPECT_EQ(view_->summaryText("peak"), ui::formatBytes(simulatedPeak(plan)));
    EXPECT_EQ(view_->summaryText("checkpoints"), QString::number(plan.checkpoints.size()));
    Result<Simulation> sim = simulate(chain_, plan);
    EXPECT_EQ(view_->chart()->peakPoint().y(), static_cast<double>(sim->peakBytes()));
  }

  Chain chain_;
  Document document_;  // declared before the view: destroyed after it
  std::unique_ptr<PlanView> view_;
};

TEST_F(StripTest, ClickTogglesACheckpointAndUndoRestoresThePeak) {
  expectShows(Plan{});
  const QString storeAllPeak = view_->summaryText("peak");
  // Checkpointing only x3 (bn1's output) forces layers 4..n to stay: find a layer whose toggle moves the peak.
  std::size_t layer = 0;
  for (std::size_t l = 1; l < chain_.size() && layer == 0; ++l)
    if (simulatedPeak(Plan{{l}}) != simulatedPeak(Plan{})) layer = l;
  ASSERT_NE(layer, 0u);
  QTest::mouseClick(strip(), Qt::LeftButton, Qt::NoModifier, strip()->cellPoint(layer));
  expectShows(Plan{{layer}});
  EXPECT_NE(view_->summaryText("peak"), storeAllPeak);
  EXPECT_EQ(view_->summaryText("plan"), QStringLiteral("manual"));

  document_.undoStack()->undo();
  expectShows(Plan{});
  EXPECT_EQ(view_->summaryText("peak"), storeAllPeak);
  document_.undoStack()->redo();
  expectShows(Plan{{layer}});

  // A second click on the same cell removes the checkpoint again.
  QTest::mouseClick(strip(), Qt::LeftButton, Qt::NoModifier, strip()->cellPoint(layer));
  expectShows(Plan{});
}

TEST_F(StripTest, DraggingAHandleMovesTheCheckpointToTheSnappedBoundary) {
  QTest::mouseClick(strip(), Qt::LeftButton, Qt::NoModifier, strip()->cellPoint(4));
  expectShows(Plan{{4}});
  // Drop a little off the boundary after layer 9: it snaps to 9.
  const QPoint target = strip()->boundaryPoint(9) + QPoint(4, 0);
  QTest::mousePress(strip(), Qt::LeftButton, Qt::NoModifier, strip()->boundaryPoint(4));
  QTest::mouseMove(strip(), strip()->boundaryPoint(6));
  QTest::mouseMove(strip(), target);
  QTest::mouseRelease(strip(), Qt::LeftButton, Qt::NoModifier, target);
  expectShows(Plan{{9}});
  EXPECT_EQ(strip()->cursor(), 9u);
  document_.undoStack()->undo();
  expectShows(Plan{{4}});
}

TEST_F(StripTest, DraggingOntoAnotherCheckpointIsRefused) {
  ASSERT_TRUE(document_.applyPlan(Plan{{3, 8}}, QStringLiteral("test")).isOk());
  QSignalSpy messages(view_.get(), &PlanView::statusMessage);
  QTest::mousePress(strip(), Qt::LeftButton, Qt::NoModifier, strip()->boundaryPoint(3));
  QTest::mouseMove(strip(), strip()->boundaryPoint(6));
  QTest::mouseMove(strip(), strip()->boundaryPoint(8));
  QTest::mouseRelease(strip(), Qt::LeftButton, Qt::NoModifier, strip()->boundaryPoint(8));
  expectShows(Plan{{3, 8}});
  ASSERT_EQ(messages.count(), 1);
  EXPECT_TRUE(messages.at(0).at(0).toString().contains(QStringLiteral("already a checkpoint")));
}

TEST_F(StripTest, KeyboardMovesTheCursorTogglesAndMoves) {
  strip()->setFocus();
  QTest::keyClick(strip(), Qt::Key_Home);
  for (int i = 0; i < 3; ++i) QTest::keyClick(strip(), Qt::Key_Right);
  EXPECT_EQ(strip()->cursor(), 4u);
  QTest::keyClick(strip(), Qt::Key_Space);
  expectShows(Plan{{4}});
  QTest::keyClick(strip(), Qt::Key_Right, Qt::ShiftModifier);  // moves the checkpoint with the cursor
  expectShows(Plan{{5}});
  EXPECT_EQ(strip()->cursor(), 5u);
  QTest::keyClick(strip(), Qt::Key_Left);
  QTest::keyClick(strip(), Qt::Key_Space);
  expectShows(Plan{{4, 5}});
  QTest::keyClick(strip(), Qt::Key_Right);
  QTest::keyClick(strip(), Qt::Key_Delete);
  expectShows(Plan{{4}});
  QTest::keyClick(strip(), Qt::Key_End);
  EXPECT_EQ(strip()->cursor(), chain_.size());
  for (int i = 0; i < 3; ++i) document_.undoStack()->undo();
  expectShows(Plan{{4}});
  document_.undoStack()->undo();
  expectShows(Plan{});
}

TEST_F(StripTest, TheLastLayerCannotBeACheckpoint) {
  QSignalSpy messages(view_.get(), &PlanView::statusMessage);
  QTest::mouseClick(strip(), Qt::LeftButton, Qt::NoModifier, strip()->cellPoint(chain_.size()));
  expectShows(Plan{});
  ASSERT_EQ(messages.count(), 1);
  EXPECT_TRUE(messages.at(0).at(0).toString().contains(QStringLiteral("cannot be a checkpoint")));
  EXPECT_EQ(document_.undoStack()->count(), 0);
}

TEST_F(StripTest, ThePeakTurnsRedAboveTheCapacityUntilACheckpointBringsItDown) {
  // Find a single checkpoint that lowers the peak, and put the capacity between the two peaks.
  const std::uint64_t storeAll = simulatedPeak(Plan{});
  std::size_t best = 1;
  for (std::size_t l = 1; l < chain_.size(); ++l)
    if (simulatedPeak(Plan{{l}}) < simulatedPeak(Plan{{best}})) best = l;
  const std::uint64_t lowered = simulatedPeak(Plan{{best}});
  ASSERT_LT(lowered, storeAll);
  view_->setCapacityBytes((storeAll + lowered) / 2);
  auto* peak = view_->findChild<QWidget*>(QStringLiteral("value_peak"));
  ASSERT_NE(peak, nullptr);
  EXPECT_TRUE(peak->property("overCapacity").toBool());
  QTest::mouseClick(strip(), Qt::LeftButton, Qt::NoModifier, strip()->cellPoint(best));
  expectShows(Plan{{best}});
  EXPECT_FALSE(peak->property("overCapacity").toBool());
  document_.undoStack()->undo();
  EXPECT_TRUE(peak->property("overCapacity").toBool());
}

TEST_F(StripTest, HoveringTheChartNamesThePeakAndTheOps) {
  ASSERT_TRUE(document_.applyPlan(Plan{{3, 9}}, QStringLiteral("manual")).isOk());
  QCoreApplication::processEvents();  // the chart lays out its new title and axes
  charts::MemoryChart* chart = view_->chart();
  const Simulation& sim = document_.simulation();
  QTest::mouseMove(chart->viewport(), chart->viewportPosition(chart->peakPoint()));
  ASSERT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().startsWith(QStringLiteral("Peak %1").arg(ui::formatBytes(sim.peakBytes()))))
      << QToolTip::text().toStdString();
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("alive during it")));
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("x3 (relu1)")));  // a checkpoint alive at the peak
  // Over op 0's bar (F(1) conv1), halfway up: the op's own numbers.
  const QPointF first(0.5, static_cast<double>(sim.staticBytes + sim.timeline.entries[0].footprintBytes / 2));
  QTest::mouseMove(chart->viewport(), chart->viewportPosition(first));
  ASSERT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().startsWith(QStringLiteral("op 0: F(1) conv1"))) << QToolTip::text().toStdString();
  EXPECT_EQ(QToolTip::text(), chart->tooltipAt(0.5));
}

TEST_F(StripTest, ProportionalCellsFollowBytesAndStillHitTheRightLayer) {
  strip()->setProportional(true);
  const StripGeometry g = strip()->stripGeometry();
  std::size_t biggest = 1;
  std::size_t smallest = 1;
  for (std::size_t l = 1; l <= chain_.size(); ++l) {
    if (chain_.outBytes(l) > chain_.outBytes(biggest)) biggest = l;
    if (chain_.outBytes(l) < chain_.outBytes(smallest)) smallest = l;
  }
  EXPECT_GT(g.cellRight(biggest) - g.cellLeft(biggest), g.cellRight(smallest) - g.cellLeft(smallest));
  const std::size_t layer = smallest < chain_.size() ? smallest : 1;
  QTest::mouseClick(strip(), Qt::LeftButton, Qt::NoModifier, strip()->cellPoint(layer));
  expectShows(Plan{{layer}});
}

// Every pair of neighbouring layers is kept apart by a separator line, at widths where the cells
// fall between pixels.
TEST_F(StripTest, EveryLayerBoundaryShowsASeparator) {
  const QColor separator = strip()->palette().color(QPalette::Base);
  const std::size_t peak = peakLayer(chain_, document_.simulation());  // framed in red
  for (int width : {803, 917, 1061}) {
    strip()->resize(width, strip()->height());
    const QImage image = strip()->grab().toImage();
    const StripGeometry g = strip()->stripGeometry();
    const QPoint cell = strip()->cellPoint(1);
    for (std::size_t b = 2; b + 1 < chain_.size(); ++b) {  // away from the cursor's and the peak's frames
      if (b == strip()->cursor() || b + 1 == strip()->cursor() || b == peak || b + 1 == peak) continue;
      const int x = static_cast<int>(std::lround(g.boundaryX(b)));
      EXPECT_EQ(image.pixelColor(x, cell.y()), separator) << "width " << width << ", after layer " << b;
    }
  }
}

}  // namespace
}  // namespace remat::gui
