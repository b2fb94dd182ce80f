// Each result once: what the explorer shows of the current plan (the numbers, the strip, the chart,
// what is alive at the peak) comes from the Document's simulation and liveness trace, computed once
// per edit from one op sequence; a planner job's simulation is accepted as it is. Counted with core's
// opSequenceBuildCount(), which counts the op sequences built on this (the GUI) thread.
#include <gtest/gtest.h>

#include <QCoreApplication>

#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "main_window_fixture.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"
#include "views/checkpoint_strip.hpp"
#include "views/plan_view.hpp"
#include "window/plan_controller.hpp"

namespace remat::gui {
namespace {

class EachResultOnce : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    MainWindowFixture::SetUp();
    RandomChainOptions options;
    options.layers = 300;
    options.seed = 11;
    options.cnnLike = true;
    Plan plan;
    for (std::size_t l = 20; l < options.layers; l += 20) plan.checkpoints.push_back(l);
    window_.document()->resetChain(makeRandomChain(options), QString(), plan, QStringLiteral("manual"));
    QCoreApplication::processEvents();
  }
  Document& document() { return *window_.document(); }
};

TEST_F(EachResultOnce, ACheckpointDragBuildsTheOpSequenceOnce) {
  // Over the capacity, the peak card's tooltip describes the peak a second time: still once.
  window_.planView()->setCapacityBytes(1);
  const std::uint64_t before = opSequenceBuildCount();
  emit window_.planView()->strip()->moveRequested(140, 143);
  QCoreApplication::processEvents();
  EXPECT_EQ(opSequenceBuildCount() - before, 1u);
  ASSERT_TRUE(document().isCheckpoint(143));
  // What the views show belongs to the new plan: its trace, its peak, the tensors alive then.
  EXPECT_EQ(document().simulation().plan, document().plan());
  EXPECT_EQ(document().liveness().ops.size(), document().simulation().timeline.entries.size());
  Result<Simulation> fresh = simulate(document().chain(), document().plan());
  ASSERT_TRUE(fresh.isOk());
  EXPECT_EQ(document().simulation().peakBytes(), fresh->peakBytes());
  EXPECT_EQ(document().liveness().footprint(fresh->peakOpIndex), fresh->dynamicPeakBytes);
  const QWidget* peakCard = window_.planView()->findChild<QWidget*>(QStringLiteral("value_peak"));
  ASSERT_NE(peakCard, nullptr);
  EXPECT_TRUE(peakCard->toolTip().contains(QStringLiteral("alive during it"))) << peakCard->toolTip().toStdString();

  // Undo is an edit like any other.
  const std::uint64_t beforeUndo = opSequenceBuildCount();
  document().undoStack()->undo();
  QCoreApplication::processEvents();
  EXPECT_EQ(opSequenceBuildCount() - beforeUndo, 1u);
  EXPECT_TRUE(document().isCheckpoint(140));
}

TEST_F(EachResultOnce, APlannerJobsSimulationIsAcceptedNotComputedAgain) {
  const std::uint64_t before = opSequenceBuildCount();
  window_.plans()->runPlanner(QStringLiteral("linear"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  QCoreApplication::processEvents();
  ASSERT_EQ(document().planner(), QStringLiteral("linear"));
  EXPECT_EQ(opSequenceBuildCount() - before, 0u) << "the GUI thread simulated the planner's plan again";
  Result<Simulation> fresh = simulate(document().chain(), document().plan());
  ASSERT_TRUE(fresh.isOk());
  EXPECT_EQ(document().simulation().plan, document().plan());
  EXPECT_EQ(document().simulation().peakBytes(), fresh->peakBytes());
  EXPECT_EQ(document().simulation().timeline.planner, "linear");
  EXPECT_EQ(document().liveness().ops.size(), fresh->timeline.entries.size());
}

TEST_F(EachResultOnce, AJobsResultsForAnEditedChainAreNotAccepted) {
  // Results computed on another revision of the chain are simulated again, never shown as they are.
  PlanResults stale;
  stale.simulation = *simulate(document().chain(), Plan{{7}});
  stale.chainRevision = document().chainRevision() + 1;
  stale.simulation.dynamicPeakBytes = 1;  // a value no simulation of this chain gives
  ASSERT_TRUE(document().applyPlan(Plan{{7}}, QStringLiteral("x"), std::move(stale)).isOk());
  EXPECT_NE(document().simulation().dynamicPeakBytes, 1u);
  EXPECT_EQ(document().liveness().ops.size(), document().simulation().timeline.entries.size());
}

}  // namespace
}  // namespace remat::gui
