// The memory chart as a user handles it: tooltips that stay while the pointer rests, zoom by
// dragging, the wheel and a double-click, pan, readable axes (also empty), the peak's label without
// static memory, and a time axis that spreads a prediction by its modelled op durations.
#include "charts/memory_chart.hpp"

#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QSet>
#include <QSignalSpy>
#include <QTest>
#include <QToolButton>
#include <QToolTip>
#include <QUndoStack>
#include <QWheelEvent>

#include "common/units.hpp"
#include "document/document.hpp"
#include "gui_test_env.hpp"
#include "remat/memory/op_times.hpp"
#include "views/plan_view.hpp"

namespace remat::gui {
namespace {

class ChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    view_ = std::make_unique<PlanView>(&document_);
    view_->resize(1100, 700);
    view_->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(view_.get()));
    document_.resetChain(test::smallCnn(), QString());
    ASSERT_TRUE(document_.applyPlan(Plan{{3, 9}}, QStringLiteral("manual")).isOk());
    QCoreApplication::processEvents();  // the chart lays out its new title and axes
  }

  charts::MemoryChart* chart() const { return view_->chart(); }
  QWidget* viewport() const { return chart()->viewport(); }
  // Where op x (data units) is drawn, halfway up the plot.
  QPoint at(double x) const { return chart()->viewportPosition({x, chart()->displayedRanges().yMaxBytes / 2}); }
  void drag(double fromX, double toX, Qt::KeyboardModifiers modifiers = Qt::NoModifier) const {
    QTest::mousePress(viewport(), Qt::LeftButton, modifiers, at(fromX));
    QTest::mouseMove(viewport(), at((fromX + toX) / 2));
    QTest::mouseMove(viewport(), at(toX));
    QTest::mouseRelease(viewport(), Qt::LeftButton, modifiers, at(toX));
  }
  void wheel(double x, int degrees) const {
    const QPoint position = at(x);
    QWheelEvent event(position, viewport()->mapToGlobal(position), QPoint(), QPoint(0, degrees), Qt::NoButton,
                      Qt::NoModifier, Qt::NoScrollPhase, false);
    QCoreApplication::sendEvent(viewport(), &event);
  }

  Document document_;  // declared before the view: destroyed after it
  std::unique_ptr<PlanView> view_;
};

TEST_F(ChartTest, ThePeaksTooltipStaysWhileThePointerRests) {
  const QPoint peak = chart()->viewportPosition(chart()->peakPoint());
  QTest::mouseMove(viewport(), peak);
  ASSERT_TRUE(QToolTip::isVisible());
  // The pointer rests: Qt sends the help event that once made the chart's scene hide the tooltip.
  QHelpEvent rest(QEvent::ToolTip, peak, viewport()->mapToGlobal(peak));
  QCoreApplication::sendEvent(viewport(), &rest);
  QTest::qWait(800);  // longer than a tooltip's fade-out after a hide request
  ASSERT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("alive during it"))) << QToolTip::text().toStdString();
}

TEST_F(ChartTest, DraggingZoomsIntoTheOpsTheWheelZoomsAroundThePointerAndDoubleClickResets) {
  auto* reset = view_->findChild<QToolButton*>(QStringLiteral("resetZoom"));
  ASSERT_NE(reset, nullptr);
  EXPECT_FALSE(reset->isEnabled());
  QSignalSpy changes(chart(), &charts::MemoryChart::zoomChanged);
  drag(10.0, 30.0);
  ASSERT_TRUE(chart()->zoom().has_value());
  EXPECT_NEAR(chart()->zoom()->from, 10.0, 0.5);
  EXPECT_NEAR(chart()->zoom()->to, 30.0, 0.5);
  EXPECT_EQ(changes.count(), 1);
  EXPECT_TRUE(reset->isEnabled());
  const QStringList labels = chart()->xAxisLabels();
  ASSERT_FALSE(labels.isEmpty());
  EXPECT_GE(labels.first().toDouble(), 10.0 - 0.5);
  EXPECT_LE(labels.last().toDouble(), 30.0 + 0.5);

  // A notch in zooms further, keeping the op under the pointer in place.
  const charts::XRange before = *chart()->zoom();
  wheel(20.0, 120);
  ASSERT_TRUE(chart()->zoom().has_value());
  EXPECT_LT(chart()->zoom()->to - chart()->zoom()->from, before.to - before.from);
  EXPECT_LT(chart()->zoom()->from, 20.0);
  EXPECT_GT(chart()->zoom()->to, 20.0);

  // Shift+drag pans: the same width, further left.
  const charts::XRange zoomed = *chart()->zoom();
  drag(20.0, 22.0, Qt::ShiftModifier);
  ASSERT_TRUE(chart()->zoom().has_value());
  EXPECT_NEAR(chart()->zoom()->to - chart()->zoom()->from, zoomed.to - zoomed.from, 1e-9);
  EXPECT_LT(chart()->zoom()->from, zoomed.from);

  QTest::mouseDClick(viewport(), Qt::LeftButton, Qt::NoModifier, at(20.0));
  EXPECT_FALSE(chart()->zoom().has_value());
  EXPECT_FALSE(reset->isEnabled());
  drag(5.0, 15.0);
  ASSERT_TRUE(chart()->zoom().has_value());
  QTest::mouseClick(reset, Qt::LeftButton);
  EXPECT_FALSE(chart()->zoom().has_value());
}

TEST_F(ChartTest, AShortDragIsAClickNotAZoom) {
  const QPoint start = at(12.0);
  QTest::mousePress(viewport(), Qt::LeftButton, Qt::NoModifier, start);
  QTest::mouseMove(viewport(), start + QPoint(2, 0));
  QTest::mouseRelease(viewport(), Qt::LeftButton, Qt::NoModifier, start + QPoint(2, 0));
  EXPECT_FALSE(chart()->zoom().has_value());
}

TEST_F(ChartTest, AxisLabelsNeverRepeatEvenOnAnEmptyChart) {
  charts::MemoryChart empty;
  empty.resize(600, 400);
  empty.show();
  const QStringList labels = empty.xAxisLabels();
  ASSERT_FALSE(labels.isEmpty());
  EXPECT_EQ(QSet<QString>(labels.begin(), labels.end()).size(), labels.size()) << labels.join(' ').toStdString();
  // Zoomed in as far as it goes, the op numbers are still whole and distinct.
  chart()->setZoom(charts::XRange{10.0, 10.5});
  const QStringList zoomed = chart()->xAxisLabels();
  EXPECT_EQ(QSet<QString>(zoomed.begin(), zoomed.end()).size(), zoomed.size()) << zoomed.join(' ').toStdString();
  for (const QString& label : zoomed) EXPECT_FALSE(label.contains(QLatin1Char('.'))) << label.toStdString();
}

// At 1,024 x 700 the chart is about 580 pixels wide: a row of nine legend entries was elided to
// "reco...", "check..."; a narrow chart puts its legend beside the plot, a wide one under it.
TEST_F(ChartTest, ANarrowChartsLegendStandsBesideThePlotSoNoNameIsCut) {
  view_->setCapacityBytes(1ull << 30);  // every entry shown: phases, capacity, markers, peak
  QCoreApplication::processEvents();
  EXPECT_GE(chart()->visibleSeriesNames().size(), 8);
  view_->resize(1600, 700);
  QCoreApplication::processEvents();
  EXPECT_FALSE(chart()->legendBeside()) << chart()->width();
  view_->resize(620, 700);
  QCoreApplication::processEvents();
  EXPECT_TRUE(chart()->legendBeside()) << chart()->width();
  view_->resize(1600, 700);
  QCoreApplication::processEvents();
  EXPECT_FALSE(chart()->legendBeside());
}

TEST_F(ChartTest, WithoutStaticMemoryThePeakMarkerSaysDynamicAndTheTotal) {
  const Simulation& sim = document_.simulation();
  EXPECT_EQ(chart()->peakLabel(), QStringLiteral("peak %1").arg(ui::formatBytes(sim.peakBytes())));
  auto* showStatic = view_->findChild<QCheckBox*>(QStringLiteral("showStatic"));
  ASSERT_NE(showStatic, nullptr);
  QTest::mouseClick(showStatic, Qt::LeftButton, Qt::NoModifier, QPoint(8, showStatic->height() / 2));
  ASSERT_FALSE(showStatic->isChecked());
  EXPECT_EQ(chart()->peakLabel(), QStringLiteral("dynamic peak %1 (total %2)")
                                      .arg(ui::formatBytes(sim.dynamicPeakBytes), ui::formatBytes(sim.peakBytes())));
  EXPECT_EQ(chart()->peakPoint().y(), static_cast<double>(sim.dynamicPeakBytes));
}

TEST_F(ChartTest, TheTimeAxisSpreadsThePredictionByModelledOpDurations) {
  auto* xAxis = view_->findChild<QComboBox*>(QStringLiteral("xAxis"));
  ASSERT_NE(xAxis, nullptr);
  xAxis->setFocus();
  QTest::keyClick(xAxis, Qt::Key_Down);
  ASSERT_EQ(xAxis->currentIndex(), 1);
  const Timeline& predicted = document_.simulation().timeline;
  double totalMs = 0.0;
  for (const TimelineEntry& e : predicted.entries) totalMs += e.timeUs / 1000.0;
  ASSERT_GT(totalMs, 0.0);
  EXPECT_NEAR(chart()->displayedRanges().xMax, totalMs, totalMs * 1e-9);
  // The bars stand side by side along the axis, not on one line at x = 0.
  const QList<QPointF> points = chart()->footprintPoints();
  ASSERT_FALSE(points.isEmpty());
  EXPECT_NEAR(points.last().x(), totalMs, totalMs * 1e-9);
  QSet<double> xs;
  for (const QPointF& p : points) xs.insert(p.x());
  EXPECT_GT(xs.size(), static_cast<qsizetype>(predicted.entries.size() / 2));
  EXPECT_TRUE(chart()->xAxisTitle().contains(QStringLiteral("modelled time (ms")));
  EXPECT_TRUE(chart()->xAxisTitle().contains(QString::fromStdString(describeOpTimeModel(document_.chain()))))
      << chart()->xAxisTitle().toStdString();
  // Another axis drops a zoom made in the old one's units.
  chart()->setZoom(charts::XRange{1.0, 2.0});
  QTest::keyClick(xAxis, Qt::Key_Up);
  EXPECT_FALSE(chart()->zoom().has_value());
}

// Issue 25: after an edit, a measured overlay of the old plan does not keep the time axis at its
// run's extent; the axis follows the new prediction, which is what is drawn.
TEST_F(ChartTest, TheTimeAxisFollowsTheNewPlanAfterAnEdit) {
  Timeline measured = document_.simulation().timeline;
  measured.source = "cpu";
  for (TimelineEntry& e : measured.entries) e.timeUs = 50'000.0;  // a slow device: far beyond the model
  document_.setMeasured(measured);
  auto* xAxis = view_->findChild<QComboBox*>(QStringLiteral("xAxis"));
  ASSERT_NE(xAxis, nullptr);
  xAxis->setCurrentIndex(1);
  const double runMs = 50.0 * static_cast<double>(measured.entries.size());
  EXPECT_NEAR(chart()->displayedRanges().xMax, runMs, 1e-6);  // the measured clock of the plan shown
  ASSERT_TRUE(document_.toggleCheckpoint(5).isOk());          // the overlay turns stale
  QCoreApplication::processEvents();
  double totalMs = 0.0;
  for (const TimelineEntry& e : document_.simulation().timeline.entries) totalMs += e.timeUs / 1000.0;
  ASSERT_GT(totalMs, 0.0);
  EXPECT_NEAR(chart()->displayedRanges().xMax, totalMs, totalMs * 1e-9);
  const QList<QPointF> points = chart()->footprintPoints();
  ASSERT_FALSE(points.isEmpty());
  EXPECT_NEAR(points.last().x(), totalMs, totalMs * 1e-9);
  // Undoing back to the measured plan brings the measured clock back.
  document_.undoStack()->undo();
  QCoreApplication::processEvents();
  EXPECT_NEAR(chart()->displayedRanges().xMax, runMs, 1e-6);
}

}  // namespace
}  // namespace remat::gui
