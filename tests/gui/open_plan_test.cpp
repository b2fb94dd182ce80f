// Issue 25: a plan exported from the explorer opens again (File > Open plan): on the same chain,
// on an edited chain by its layers' names, and a plan that fits neither is refused with the
// reader's placed message, the plan shown unchanged.
#include <gtest/gtest.h>

#include <QFile>

#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "main_window_fixture.hpp"
#include "views/message_bar.hpp"
#include "window/export_controller.hpp"
#include "window/file_controller.hpp"

namespace remat::gui {
namespace {

class OpenPlanTest : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    MainWindowFixture::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/small_cnn.json")).isOk());
    ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  }
  std::vector<std::size_t> shown() { return window_.document()->plan().checkpoints; }
};

TEST_F(OpenPlanTest, AnExportedPlanOpensAgain) {
  ASSERT_TRUE(window_.document()->applyPlan(Plan{{2, 5}}, QStringLiteral("manual")).isOk());
  ASSERT_TRUE(window_.exports()->exportPlanJson(path(QStringLiteral("plan.json"))).isOk());
  ASSERT_TRUE(window_.document()->applyPlan(Plan{}, QStringLiteral("none")).isOk());
  window_.prompts().openFile = [this](QWidget*, const QString&, const QString&) {
    return path(QStringLiteral("plan.json"));
  };
  window_.action(QStringLiteral("openPlan"))->trigger();
  EXPECT_EQ(shown(), (std::vector<std::size_t>{2, 5})) << window_.messageBar()->text().toStdString();
  EXPECT_EQ(window_.document()->planner(), QStringLiteral("manual"));
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("names")))
      << window_.messageBar()->text().toStdString();
  window_.document()->undoStack()->undo();  // an undoable edit
  EXPECT_TRUE(shown().empty());
}

TEST_F(OpenPlanTest, APlanThatFitsNeitherWayIsRefusedWithItsPlace) {
  ASSERT_TRUE(window_.document()->applyPlan(Plan{{3}}, QStringLiteral("manual")).isOk());
  QFile file(path(QStringLiteral("far.json")));
  ASSERT_TRUE(file.open(QIODevice::WriteOnly));
  file.write("{\n  \"checkpoints\": [2, 400]\n}\n");
  file.close();
  EXPECT_FALSE(window_.files()->openPlan(path(QStringLiteral("far.json"))).isOk());
  EXPECT_TRUE(window_.messageBar()->isError());
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("far.json:2:3: checkpoints[1]: layer 400")))
      << window_.messageBar()->text().toStdString();
  EXPECT_EQ(shown(), (std::vector<std::size_t>{3}));
}

}  // namespace
}  // namespace remat::gui
