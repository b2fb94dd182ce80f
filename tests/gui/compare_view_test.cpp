// The compare view plans with two planners in the background, shows both plans' peaks on the same
// axes, and "apply" copies a plan into the editor (undoably).
#include "views/compare_view.hpp"

#include <gtest/gtest.h>

#include <QPushButton>
#include <QTabWidget>
#include <QTest>

#include "charts/memory_chart.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "gui_test_env.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/planners/planners.hpp"
#include "views/compare_model.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "window/file_controller.hpp"
#include "window/main_window.hpp"

namespace remat::gui {
namespace {

TEST(CompareView, ShowsDpAndLinearSideBySideOnTheSameAxes) {
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  // The opening plan is store-all, so applying linear's is a change that undo takes back.
  ASSERT_TRUE(window.plannerPicker()->setPlannerName(QStringLiteral("none")));
  ASSERT_TRUE(window.files()->loadZoo(QStringLiteral("vgg16"), ZooOptions{.batch = 16, .resolution = 96}).isOk());
  CompareView* compare = window.compareView();
  EXPECT_EQ(compare->picker(0)->plannerName(), QStringLiteral("dp"));
  EXPECT_EQ(compare->picker(1)->plannerName(), QStringLiteral("linear"));
  window.tabs()->setCurrentWidget(compare);  // showing a stale comparison starts it
  ASSERT_TRUE(window.jobs()->waitForIdle(60000));
  ASSERT_EQ(compare->model()->rowCount(), 2);

  const Chain& chain = window.document()->chain();
  for (int side = 0; side < 2; ++side) {
    const std::string name = side == 0 ? "dp" : "linear";
    Result<PlanReport> expected = runPlanner(chain, name);
    ASSERT_TRUE(expected.isOk()) << expected.status().message();
    const auto& entry = compare->model()->entries()[static_cast<std::size_t>(side)];
    ASSERT_TRUE(entry.planned.has_value()) << entry.error.toStdString();
    EXPECT_EQ(entry.planned->report.plan, expected->plan);
    const QString peak = compare->model()->data(compare->model()->index(side, CompareTableModel::Peak)).toString();
    EXPECT_EQ(peak, ui::formatBytes(expected->peakBytes()));
    // Each chart draws its own plan's peak...
    EXPECT_EQ(compare->chart(side)->peakPoint().y(), static_cast<double>(expected->peakBytes()));
    EXPECT_TRUE(compare->chart(side)->data().title.contains(ui::formatBytes(expected->peakBytes())));
  }
  // ...on the same axes.
  EXPECT_EQ(compare->chart(0)->displayedRanges().yMaxBytes, compare->chart(1)->displayedRanges().yMaxBytes);
  EXPECT_EQ(compare->chart(0)->displayedRanges().xMax, compare->chart(1)->displayedRanges().xMax);
  EXPECT_GE(compare->chart(0)->displayedRanges().yMaxBytes, compare->chart(0)->peakPoint().y());
  EXPECT_GE(compare->chart(0)->displayedRanges().yMaxBytes, compare->chart(1)->peakPoint().y());

  // Apply the right (linear) plan: the editor shows it, and undo takes it back.
  // The comparison's simulation is the one shown: applying builds no op sequence on this thread.
  const Plan linearPlan = compare->model()->entries()[1].planned->report.plan;
  const std::uint64_t opSequencesBefore = opSequenceBuildCount();
  QTest::mouseClick(compare->applyButton(1), Qt::LeftButton);
  EXPECT_EQ(opSequenceBuildCount() - opSequencesBefore, 0u) << "Apply simulated the compared plan again";
  EXPECT_EQ(window.document()->plan(), linearPlan);
  EXPECT_EQ(window.document()->planner(), QStringLiteral("linear"));
  EXPECT_EQ(window.tabs()->currentIndex(), 0);
  EXPECT_EQ(window.planView()->summaryText("peak"),
            compare->model()->data(compare->model()->index(1, CompareTableModel::Peak)).toString());
  window.document()->undoStack()->undo();
  EXPECT_EQ(window.document()->plan(), Plan{});
}

TEST(CompareView, OtherPlannersCompareAndAChainEditMakesTheComparisonStale) {
  MainWindow window;
  window.resize(1200, 800);
  window.show();
  ASSERT_TRUE(
      window.files()->openChainFile(QStringLiteral(REMAT_SOURCE_DIR "/resources/examples/small_cnn.json")).isOk());
  CompareView* compare = window.compareView();
  ASSERT_TRUE(compare->picker(0)->setPlannerName(QStringLiteral("uniform:3")));
  ASSERT_TRUE(compare->picker(1)->setPlannerName(QStringLiteral("optimal")));
  compare->compare();
  ASSERT_TRUE(window.jobs()->waitForIdle(60000));
  ASSERT_EQ(compare->model()->rowCount(), 2);
  EXPECT_TRUE(compare->model()->entries()[0].planned.has_value());
  EXPECT_TRUE(compare->model()->entries()[1].planned.has_value());
  EXPECT_FALSE(compare->isStale());
  // An edit of the chain drops the comparison (its plans belong to the old chain).
  ASSERT_TRUE(window.document()->applyPlan(Plan{{2}}, QStringLiteral("x")).isOk());
  EXPECT_FALSE(compare->isStale());
  ChainSpec spec = window.document()->chain().spec;
  spec.layers[0].outChannels = 8;
  ASSERT_TRUE(window.document()->editChain(spec, QStringLiteral("narrower")).isOk());
  EXPECT_TRUE(compare->isStale());
  EXPECT_EQ(compare->model()->rowCount(), 0);
  EXPECT_FALSE(compare->applyButton(0)->isEnabled());
}

// Zooming one side zooms the other to the same ops; resetting either resets both.
TEST(CompareView, ZoomIsSharedByBothCharts) {
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  ASSERT_TRUE(window.files()->loadZoo(QStringLiteral("vgg11"), ZooOptions{.batch = 4, .resolution = 64}).isOk());
  CompareView* compare = window.compareView();
  window.tabs()->setCurrentWidget(compare);
  ASSERT_TRUE(window.jobs()->waitForIdle(60000));
  QCoreApplication::processEvents();
  charts::MemoryChart* left = compare->chart(0);
  QWidget* viewport = left->viewport();
  const double y = left->displayedRanges().yMaxBytes / 2;
  QTest::mousePress(viewport, Qt::LeftButton, Qt::NoModifier, left->viewportPosition({5.0, y}));
  QTest::mouseMove(viewport, left->viewportPosition({10.0, y}));
  QTest::mouseMove(viewport, left->viewportPosition({15.0, y}));
  QTest::mouseRelease(viewport, Qt::LeftButton, Qt::NoModifier, left->viewportPosition({15.0, y}));
  ASSERT_TRUE(left->zoom().has_value());
  EXPECT_NEAR(left->zoom()->from, 5.0, 0.5);
  EXPECT_EQ(compare->chart(1)->zoom(), left->zoom());
  EXPECT_EQ(compare->chart(1)->visibleXRange(), left->visibleXRange());
  QTest::mouseDClick(compare->chart(1)->viewport(), Qt::LeftButton, Qt::NoModifier,
                     compare->chart(1)->viewportPosition({10.0, y}));
  EXPECT_FALSE(compare->chart(1)->zoom().has_value());
  EXPECT_FALSE(left->zoom().has_value());
}

}  // namespace
}  // namespace remat::gui
