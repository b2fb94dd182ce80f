// Issue 25: a symbolic-batch ONNX model opens from the command line at --batch, a failed open for
// want of a batch asks for one (the window's prompts, answered here), and the ONNX batch field
// retries a model that failed to open.
#include <gtest/gtest.h>

#include <QSpinBox>

#include "document/document.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "views/message_bar.hpp"
#include "window/app_options.hpp"
#include "window/file_controller.hpp"

namespace remat::gui {
namespace {

const QString kOnnxModel = QStringLiteral(REMAT_TEST_DATA_DIR "/onnx/resnet18_train_op17_dynamic.onnx");

class OnnxBatchTest : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    if (!onnxImportAvailable()) GTEST_SKIP() << "built without ONNX (REMAT_WITH_ONNX=OFF)";
    MainWindowFixture::SetUp();
    window_.onnxBatch()->setValue(0);
    window_.prompts().askInt = [this](QWidget*, const QString&, const QString& label, int) {
      asked_ << label;
      return answer_;
    };
  }
  QStringList asked_;
  std::optional<int> answer_;
};

TEST_F(OnnxBatchTest, TheCommandLinesBatchAppliesToOnnxModels) {
  Result<AppOptions> options = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--chain"), kOnnxModel,
                                                QStringLiteral("--batch"), QStringLiteral("4")});
  ASSERT_TRUE(options.isOk()) << options.status().message();
  const Status applied = applyAppOptions(window_, *options);
  ASSERT_TRUE(applied.isOk()) << applied.message();
  EXPECT_EQ(window_.document()->chain().inputShape.at(0), 4);
  EXPECT_EQ(window_.onnxBatch()->value(), 4);
  EXPECT_TRUE(asked_.isEmpty());
}

TEST_F(OnnxBatchTest, AFailedOpenForWantOfABatchAsksForIt) {
  answer_ = 5;
  window_.files()->openChainAfterAsking(kOnnxModel);
  ASSERT_EQ(asked_.size(), 1);
  EXPECT_TRUE(asked_.front().contains(QStringLiteral("resnet18_train_op17_dynamic.onnx")))
      << asked_.front().toStdString();
  ASSERT_TRUE(window_.document()->hasChain()) << window_.messageBar()->text().toStdString();
  EXPECT_EQ(window_.document()->chain().inputShape.at(0), 5);
  EXPECT_EQ(window_.onnxBatch()->value(), 5);
  // A model with its batch given is not asked about.
  window_.files()->openChainAfterAsking(kOnnxModel);
  EXPECT_EQ(asked_.size(), 1);
}

TEST_F(OnnxBatchTest, ACancelledQuestionLeavesTheImportersMessage) {
  Result<AppOptions> options =
      parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--chain"), kOnnxModel});
  ASSERT_TRUE(options.isOk());
  EXPECT_FALSE(applyAppOptions(window_, *options).isOk());
  EXPECT_EQ(asked_.size(), 1);
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("the batch dimension is symbolic")));
  // The batch field then retries the model that failed.
  window_.onnxBatch()->setValue(3);
  ASSERT_TRUE(window_.document()->hasChain()) << window_.messageBar()->text().toStdString();
  EXPECT_EQ(window_.document()->chain().inputShape.at(0), 3);
}

}  // namespace
}  // namespace remat::gui
