// The job runner: results come back on the GUI thread, a newer request makes an older result stale
// (dropped, never shown), cancel sets the flag the planners poll, progress is reported.
#include "document/job_runner.hpp"

#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QThread>
#include <atomic>

#include "gui_test_env.hpp"

namespace remat::gui {
namespace {

TEST(JobRunner, DeliversResultsOnTheGuiThread) {
  JobRunner runner;
  QSignalSpy finished(&runner, &JobRunner::finished);
  int delivered = 0;
  QThread* deliveredOn = nullptr;
  QThread* workedOn = nullptr;
  runner.start<int>(
      JobChannel::Plan, QStringLiteral("answer"),
      [&workedOn](const JobRunner::Control&) {
        workedOn = QThread::currentThread();
        return 42;
      },
      [&](int value) {
        delivered = value;
        deliveredOn = QThread::currentThread();
      });
  EXPECT_TRUE(runner.isRunning(JobChannel::Plan));
  ASSERT_TRUE(runner.waitForIdle(10000));
  EXPECT_EQ(delivered, 42);
  EXPECT_EQ(deliveredOn, QThread::currentThread());
  EXPECT_NE(workedOn, QThread::currentThread());
  ASSERT_EQ(finished.count(), 1);
  EXPECT_TRUE(finished.at(0).at(1).toBool());
  EXPECT_FALSE(runner.isBusy());
}

TEST(JobRunner, AStaleResultIsDroppedWhenANewerRequestWasMade) {
  JobRunner runner;
  std::atomic<bool> firstSawCancel{false};
  std::atomic<bool> release{false};
  std::vector<QString> delivered;
  // The first job ignores nothing: it waits until released, then returns a result anyway.
  runner.start<QString>(
      JobChannel::Plan, QStringLiteral("old"),
      [&](const JobRunner::Control& control) {
        while (!release.load()) QThread::msleep(1);
        firstSawCancel = control.cancelled();
        return QStringLiteral("old");
      },
      [&](QString value) { delivered.push_back(value); });
  const quint64 firstGeneration = runner.generation(JobChannel::Plan);
  runner.start<QString>(
      JobChannel::Plan, QStringLiteral("new"),
      [&](const JobRunner::Control&) {
        release = true;
        return QStringLiteral("new");
      },
      [&](QString value) { delivered.push_back(value); });
  EXPECT_GT(runner.generation(JobChannel::Plan), firstGeneration);
  release = true;  // with one pool thread the second job would wait for the first
  ASSERT_TRUE(runner.waitForIdle(10000));
  // The old job may still be finishing: wait for the pool, then let its queued answer arrive.
  runner.shutdown();
  QCoreApplication::processEvents();
  EXPECT_EQ(delivered, std::vector<QString>{QStringLiteral("new")});
  EXPECT_TRUE(firstSawCancel.load());
  EXPECT_EQ(runner.droppedResults(), 1);
}

TEST(JobRunner, CancelSetsTheFlagAndDropsTheResult) {
  JobRunner runner;
  QSignalSpy finished(&runner, &JobRunner::finished);
  std::atomic<bool> started{false};
  bool delivered = false;
  runner.start<int>(
      JobChannel::Run, QStringLiteral("long"),
      [&](const JobRunner::Control& control) {
        started = true;
        while (!control.cancelled()) QThread::msleep(1);  // like a planner polling cancelFlag
        return 1;
      },
      [&](int) { delivered = true; });
  while (!started.load()) QThread::msleep(1);
  runner.cancel(JobChannel::Run);
  EXPECT_FALSE(runner.isBusy());
  ASSERT_EQ(finished.count(), 1);
  EXPECT_FALSE(finished.at(0).at(1).toBool());
  runner.shutdown();
  QCoreApplication::processEvents();
  EXPECT_FALSE(delivered);
  EXPECT_EQ(runner.droppedResults(), 1);
}

TEST(JobRunner, ReportsProgressOfTheCurrentJob) {
  JobRunner runner;
  QSignalSpy progress(&runner, &JobRunner::progress);
  runner.start<int>(
      JobChannel::Compare, QStringLiteral("steps"),
      [](const JobRunner::Control& control) {
        for (int i = 1; i <= 4; ++i) control.progress(i / 4.0, QStringLiteral("step %1").arg(i));
        return 0;
      },
      [](int) {});
  ASSERT_TRUE(runner.waitForIdle(10000));
  QCoreApplication::processEvents();
  ASSERT_EQ(progress.count(), 4);
  EXPECT_DOUBLE_EQ(progress.at(3).at(1).toDouble(), 1.0);
  EXPECT_EQ(progress.at(3).at(2).toString(), QStringLiteral("step 4"));
}

}  // namespace
}  // namespace remat::gui
