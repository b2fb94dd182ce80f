// Issue 25: a chain with unsaved edits is not replaced (Load in the zoo bar, Open, an example, a
// drop) or closed with the window without asking: Save, Discard or Cancel. The prompt goes through
// the window's replaceable prompts, answered here.
#include <gtest/gtest.h>

#include <QCloseEvent>
#include <QUndoStack>

#include "document/document.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/chain_file.hpp"
#include "views/zoo_bar.hpp"
#include "window/file_controller.hpp"

namespace remat::gui {
namespace {

class UnsavedEditsTest : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    MainWindowFixture::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/toy_abstract.json")).isOk());
    window_.prompts().saveChanges = [this](QWidget*, const QString& what) {
      asked_ << what;
      return answer_;
    };
    window_.prompts().openFile = [this](QWidget*, const QString&, const QString&) { return openAnswer_; };
    ASSERT_TRUE(window_.document()->toggleCheckpoint(1).isOk());  // an edit: toy_abstract*
    edited_ = chainSpecToText(window_.document()->chain().spec);
  }
  bool stillEdited() const {
    return !window_.document()->undoStack()->isClean() && window_.document()->simulation().plan.checkpoints.size() == 1;
  }
  void loadZoo() {
    emit window_.zooBar()->loadRequested(QStringLiteral("resnet18"), ZooOptions{.batch = 2, .resolution = 32});
  }

  QStringList asked_;
  SaveChangesAnswer answer_ = SaveChangesAnswer::Cancel;
  QString openAnswer_;
  std::string edited_;
};

TEST_F(UnsavedEditsTest, CancelKeepsTheEditedChainEverywhere) {
  loadZoo();
  window_.action(QStringLiteral("new"))->trigger();
  openAnswer_ = QStringLiteral(":/examples/small_cnn.json");
  window_.action(QStringLiteral("open"))->trigger();
  ASSERT_EQ(asked_.size(), 3);
  EXPECT_TRUE(asked_.front().contains(QStringLiteral("toy"))) << asked_.front().toStdString();
  EXPECT_TRUE(stillEdited());
  EXPECT_EQ(window_.document()->chain().name, "toy_abstract");
  EXPECT_TRUE(window_.document()->undoStack()->canUndo());
  // Quit: the close is refused, the window stays.
  QCloseEvent close;
  QCoreApplication::sendEvent(&window_, &close);
  EXPECT_FALSE(close.isAccepted());
  EXPECT_EQ(asked_.size(), 4);
}

TEST_F(UnsavedEditsTest, DiscardReplacesTheChain) {
  answer_ = SaveChangesAnswer::Discard;
  loadZoo();
  ASSERT_EQ(asked_.size(), 1);
  EXPECT_EQ(window_.document()->chain().name, "resnet18");
  // A clean chain is replaced without a question.
  loadZoo();
  EXPECT_EQ(asked_.size(), 1);
}

TEST_F(UnsavedEditsTest, SaveWritesTheChainThenGoesOn) {
  answer_ = SaveChangesAnswer::Save;
  const QString file = path(QStringLiteral("kept.json"));
  int saveAsked = 0;
  window_.prompts().saveFile = [&](QWidget*, const QString&, const QString&, const QString&, const QString& filter) {
    ++saveAsked;
    return SaveTarget{file, filter};
  };
  openAnswer_ = QStringLiteral(":/examples/small_cnn.json");
  window_.action(QStringLiteral("open"))->trigger();
  EXPECT_EQ(saveAsked, 1);  // an example has no file of its own: Save asks where
  EXPECT_EQ(window_.document()->chain().name, "small_cnn");
  Result<Chain> saved = loadChainFile(file.toStdString());
  ASSERT_TRUE(saved.isOk()) << saved.status().message();
  EXPECT_EQ(chainSpecToText(saved->spec), edited_);
}

TEST_F(UnsavedEditsTest, ACancelledSaveCancelsTheReplacement) {
  answer_ = SaveChangesAnswer::Save;
  window_.prompts().saveFile = [](QWidget*, const QString&, const QString&, const QString&, const QString&) {
    return SaveTarget{};
  };
  loadZoo();
  EXPECT_TRUE(stillEdited());
  QCloseEvent close;
  QCoreApplication::sendEvent(&window_, &close);
  EXPECT_FALSE(close.isAccepted());
}

}  // namespace
}  // namespace remat::gui
