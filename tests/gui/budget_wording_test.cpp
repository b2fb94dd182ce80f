// Issue 25: the budget's words say total or dynamic, sizes carry units, and no "budget:54951085"
// reaches the user.
#include <gtest/gtest.h>

#include <QLabel>
#include <QLineEdit>

#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "main_window_fixture.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "window/file_controller.hpp"
#include "window/plan_controller.hpp"

namespace remat::gui {
namespace {

class BudgetWordingTest : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    MainWindowFixture::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("resnet18"), ZooOptions{.batch = 8, .resolution = 64}).isOk());
    ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  }
};

TEST_F(BudgetWordingTest, ThePlanCardSaysDynamicWithAUnit) {
  ASSERT_TRUE(window_.document()->applyPlan(Plan{{3}}, QStringLiteral("budget:54951085")).isOk());
  const QString card = window_.planView()->summaryText(QStringLiteral("plan"));
  EXPECT_FALSE(card.contains(QStringLiteral("54951085"))) << card.toStdString();
  EXPECT_TRUE(card.contains(QStringLiteral("dynamic"))) << card.toStdString();
  EXPECT_TRUE(card.contains(ui::formatBytes(54951085))) << card.toStdString();
  EXPECT_EQ(ui::readablePlannerName(QStringLiteral("dp")), QStringLiteral("dp"));
}

TEST_F(BudgetWordingTest, TheBudgetFieldIsLabelledDynamic) {
  ASSERT_TRUE(window_.plannerPicker()->setPlannerName(QStringLiteral("budget:2GiB")));
  QLabel* label = window_.plannerPicker()->sizeLabel();
  ASSERT_NE(label, nullptr);
  EXPECT_TRUE(label->isVisible());
  EXPECT_TRUE(label->text().contains(QStringLiteral("dynamic"))) << label->text().toStdString();
  EXPECT_EQ(label->buddy(), window_.plannerPicker()->sizeField());
  ASSERT_TRUE(window_.plannerPicker()->setPlannerName(QStringLiteral("dp")));
  EXPECT_FALSE(label->isVisible());
}

TEST_F(BudgetWordingTest, AFitThatFailsSaysTotalStaticAndDynamic) {
  const std::uint64_t staticBytes = window_.document()->chain().staticBytes();
  const std::uint64_t capacity = staticBytes + 1024;  // 1 KiB for the dynamic peak: nothing fits
  window_.plans()->fitCapacity(capacity);
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  const QString message = window_.messageBar()->text();
  EXPECT_TRUE(window_.messageBar()->isError());
  EXPECT_TRUE(message.contains(QStringLiteral("Fit in %1 total").arg(ui::formatBytes(capacity))))
      << message.toStdString();
  EXPECT_TRUE(message.contains(QStringLiteral("static %1").arg(ui::formatBytes(staticBytes)))) << message.toStdString();
  EXPECT_TRUE(message.contains(QStringLiteral("dynamic peak E"))) << message.toStdString();
}

}  // namespace
}  // namespace remat::gui
