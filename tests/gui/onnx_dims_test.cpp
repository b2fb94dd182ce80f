// Issue 23: a transformer's sizes in the explorer. An imported ONNX model's symbolic dimensions
// besides the batch get one field each (named as in the model: `sequence`), prefilled with the size
// used; changing one imports the model again on the Import job channel (a newer change drops an
// older result) and the plan and chart follow; a size the importer refuses leaves the chain shown
// and the importer's placed message. The attention rule is a control for models with attention and
// disabled, saying why, for the others; the zoo's token models take a sequence length.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QPushButton>
#include <QSpinBox>
#include <QTest>
#include <limits>

#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "views/import_bar.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/zoo_bar.hpp"
#include "window/app_options.hpp"
#include "window/file_controller.hpp"

namespace remat::gui {
namespace {

const QString kGpt = QStringLiteral(REMAT_TEST_DATA_DIR "/onnx/transformer/gpt_small_op17.onnx");
const QString kCnn = QStringLiteral(REMAT_TEST_DATA_DIR "/onnx/resnet18_train_op17_dynamic.onnx");

class OnnxDimsTest : public test::MainWindowFixture {
 protected:
  void SetUp() override {
    if (!onnxImportAvailable()) GTEST_SKIP() << "built without ONNX (REMAT_WITH_ONNX=OFF)";
    MainWindowFixture::SetUp();
    window_.prompts().askInt = [this](QWidget*, const QString&, const QString& label, int) {
      asked_ << label;
      return answer_;
    };
  }
  // Opens the small GPT from the command line, as `remat-explorer --chain gpt.onnx --batch 2 --dim
  // sequence=S` does.
  void openGpt(int sequence) {
    Result<AppOptions> options =
        parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--chain"), kGpt, QStringLiteral("--batch"),
                         QStringLiteral("2"), QStringLiteral("--dim"), QStringLiteral("sequence=%1").arg(sequence)});
    ASSERT_TRUE(options.isOk()) << options.status().message();
    const Status applied = applyAppOptions(window_, *options);
    ASSERT_TRUE(applied.isOk()) << applied.message();
  }
  QSpinBox* sequenceField() const { return window_.importBar()->field(QStringLiteral("sequence")); }
  Shape shown() const { return window_.document()->chain().inputShape; }
  QString message() const { return window_.messageBar()->text(); }

  QStringList asked_;
  std::optional<int> answer_;
};

TEST_F(OnnxDimsTest, TheCommandLinesDimOpensTheModelAndPrefillsItsField) {
  openGpt(8);
  EXPECT_EQ(shown(), (Shape{2, 8}));
  // On screen once the toolbars have laid themselves out again (not in the overflow menu).
  EXPECT_TRUE(QTest::qWaitFor([this]() { return window_.importBar()->isVisible(); }, 5000));
  EXPECT_EQ(window_.importBar()->dimensionNames(), QStringList{QStringLiteral("sequence")});
  ASSERT_NE(sequenceField(), nullptr);
  EXPECT_EQ(sequenceField()->value(), 8);
  EXPECT_TRUE(asked_.isEmpty());
  // At 1,024 x 700 too the field is on a toolbar row, inside the window, not in the overflow menu.
  window_.resize(1024, 700);
  EXPECT_TRUE(QTest::qWaitFor(
      [this]() {
        const QRect field(sequenceField()->mapTo(&window_, QPoint(0, 0)), sequenceField()->size());
        return sequenceField()->isVisible() && window_.rect().contains(field);
      },
      5000));
  // A zoo model has no import bar.
  ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("resnet18"), ZooOptions{.batch = 2, .resolution = 64}).isOk());
  EXPECT_TRUE(QTest::qWaitFor([this]() { return !window_.importBar()->isVisible(); }, 5000));
}

TEST_F(OnnxDimsTest, ChangingTheFieldImportsAgainInTheBackgroundAndTheChartFollows) {
  openGpt(8);
  const std::uint64_t peakAt8 = window_.document()->simulation().peakBytes();
  const QString cardAt8 = window_.planView()->summaryText(QStringLiteral("peak"));
  sequenceField()->setValue(16);
  EXPECT_TRUE(window_.jobs()->isRunning(JobChannel::Import));  // not on the GUI thread
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(shown(), (Shape{2, 16})) << message().toStdString();
  EXPECT_GT(window_.document()->simulation().peakBytes(), peakAt8);
  EXPECT_NE(window_.planView()->summaryText(QStringLiteral("peak")), cardAt8);
  EXPECT_EQ(window_.document()->planner(), window_.plannerPicker()->plannerName());  // planned again
  EXPECT_EQ(sequenceField()->value(), 16);
}

TEST_F(OnnxDimsTest, AnOlderSizesResultIsDroppedForTheNewerOne) {
  openGpt(8);
  const int dropped = window_.jobs()->droppedResults();
  // Typed digit by digit: 1, then 12. Only 12's import may land.
  QTest::keyClick(sequenceField(), Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(sequenceField(), QStringLiteral("12"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(shown(), (Shape{2, 12})) << message().toStdString();
  EXPECT_GE(window_.jobs()->droppedResults(), dropped + 1);
}

TEST_F(OnnxDimsTest, ASizeTheImporterRefusesShowsItsMessageAndKeepsTheChain) {
  openGpt(8);
  const struct {
    int size;
    const char* says;
  } refused[] = {
      {0,
       "gpt_small_op17.onnx: input 'idx', dimension 1 ('sequence') is symbolic: give its size with --dim "
       "sequence=N (the 'sequence' field in the tool bar sets it)"},
      {17, "gpt_small_op17.onnx: node "},  // past the 16 positions of its table: the embedding's node
      {std::numeric_limits<int>::max(), "gpt_small_op17.onnx: node "},
  };
  for (const auto& [size, says] : refused) {
    sequenceField()->setValue(size);
    ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
    EXPECT_TRUE(message().contains(QString::fromUtf8(says))) << size << ": " << message().toStdString();
    EXPECT_EQ(shown(), (Shape{2, 8})) << size;  // the chain shown stays
  }
  // The model that failed is imported again at the next size.
  sequenceField()->setValue(4);
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(shown(), (Shape{2, 4})) << message().toStdString();
}

TEST_F(OnnxDimsTest, AChainWithEditsIsNotReplaced) {
  openGpt(8);
  ASSERT_TRUE(window_.document()->toggleCheckpoint(2).isOk());
  sequenceField()->setValue(10);
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(shown(), (Shape{2, 8}));
  EXPECT_TRUE(message().contains(QStringLiteral("The new sizes apply when"))) << message().toStdString();
}

TEST_F(OnnxDimsTest, AMissingSizeIsAskedForByName) {
  window_.onnxBatch()->setValue(0);
  ASSERT_FALSE(window_.files()->openChainFile(kGpt).isOk());  // nothing asked: the message names the field
  EXPECT_TRUE(
      message().contains(QStringLiteral("give its size with --batch N (the 'ONNX batch' field in the tool bar")))
      << message().toStdString();
  answer_ = 3;
  window_.files()->openChainAfterAsking(kGpt);  // neither the batch nor the sequence given
  ASSERT_EQ(asked_.size(), 2);
  EXPECT_TRUE(asked_[0].contains(QStringLiteral("batch"))) << asked_[0].toStdString();
  EXPECT_TRUE(asked_[1].contains(QStringLiteral("'sequence'"))) << asked_[1].toStdString();
  ASSERT_TRUE(window_.document()->hasChain()) << message().toStdString();
  EXPECT_EQ(shown(), (Shape{3, 3}));
  EXPECT_EQ(window_.onnxBatch()->value(), 3);
  EXPECT_EQ(sequenceField()->value(), 3);
  // Cancelled: the importer's message stays.
  answer_.reset();
  sequenceField()->setValue(0);
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  window_.files()->openChainAfterAsking(kGpt);
  EXPECT_EQ(asked_.size(), 3);
  EXPECT_TRUE(message().contains(QStringLiteral("give its size with --dim sequence=N"))) << message().toStdString();
}

TEST_F(OnnxDimsTest, TheAttentionBoxImportsTheMathRuleAndIsOffWithoutAttention) {
  openGpt(8);
  QComboBox* box = window_.importBar()->attentionBox();
  EXPECT_TRUE(box->isEnabled());
  auto fusedLayers = [this]() {
    int fused = 0;
    for (const LayerSpec& layer : window_.document()->chain().spec.layers)
      fused += layer.kind == LayerKind::TransformerBlock && layer.fusedAttention ? 1 : 0;
    return fused;
  };
  EXPECT_EQ(fusedLayers(), 2);
  const std::uint64_t fusedExtras = window_.document()->chain().layers[1].numbers.extraBytes;
  box->setCurrentText(QStringLiteral("math"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(fusedLayers(), 0) << message().toStdString();
  // The S x S probabilities are kept: the block's E grows.
  EXPECT_GT(window_.document()->chain().layers[1].numbers.extraBytes, fusedExtras);
  // A CNN has no attention: the box says why it is off.
  window_.onnxBatch()->setValue(2);
  ASSERT_TRUE(window_.files()->openChainFile(kCnn).isOk()) << message().toStdString();
  EXPECT_FALSE(box->isEnabled());
  EXPECT_TRUE(box->toolTip().contains(QStringLiteral("no attention layer"))) << box->toolTip().toStdString();
  EXPECT_TRUE(window_.importBar()->dimensionNames().isEmpty());
}

TEST_F(OnnxDimsTest, TheZooBarsSizeFieldIsASequenceLengthForTokenModels) {
  ZooBar* bar = window_.zooBar();
  ASSERT_TRUE(bar->setModelName(QStringLiteral("gpt2")));
  EXPECT_EQ(bar->sizeField()->suffix(), QStringLiteral(" tokens"));
  EXPECT_EQ(bar->sizeField()->toolTip(), QStringLiteral("Sequence length"));
  EXPECT_TRUE(bar->attentionBox()->isEnabled());
  bar->setOptions(ZooOptions{.batch = 2, .sequence = 32});
  QTest::keyClick(bar->sizeField(), Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(bar->sizeField(), QStringLiteral("48"));
  bar->findChild<QPushButton*>()->click();  // Load
  EXPECT_EQ(shown(), (Shape{2, 48})) << message().toStdString();
  EXPECT_TRUE(message().contains(QStringLiteral("48 tokens"))) << message().toStdString();
  for (const char* name : {"vgg16", "swin_t"}) {
    ASSERT_TRUE(bar->setModelName(QString::fromUtf8(name)));
    EXPECT_FALSE(bar->attentionBox()->isEnabled()) << name;
    EXPECT_TRUE(bar->attentionBox()->toolTip().contains(QStringLiteral("has no attention layer"))) << name;
    EXPECT_EQ(bar->sizeField()->suffix(), QStringLiteral(" px"));
  }
  ASSERT_TRUE(bar->setModelName(QStringLiteral("vit_b_16")));
  EXPECT_TRUE(bar->attentionBox()->isEnabled());
}

TEST_F(OnnxDimsTest, TheCommandLineRefusesSizesThatDoNotApply) {
  auto parse = [](QStringList args) {
    args.prepend(QStringLiteral("remat-explorer"));
    return parseAppOptions(args).status();
  };
  EXPECT_TRUE(
      parse({QStringLiteral("--zoo"), QStringLiteral("gpt2"), QStringLiteral("--dim"), QStringLiteral("sequence=8")})
          .message()
          .find("--sequence") != std::string::npos);
  EXPECT_TRUE(parse({QStringLiteral("--chain"), kGpt, QStringLiteral("--sequence"), QStringLiteral("8")})
                  .message()
                  .find("--dim") != std::string::npos);
  EXPECT_FALSE(parse({QStringLiteral("--chain"), kGpt, QStringLiteral("--dim"), QStringLiteral("sequence=0")}).isOk());
  EXPECT_FALSE(
      parse({QStringLiteral("--zoo"), QStringLiteral("gpt2"), QStringLiteral("--attention"), QStringLiteral("slow")})
          .isOk());
  Result<AppOptions> zoo = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--zoo"),
                                            QStringLiteral("gpt2"), QStringLiteral("--sequence"), QStringLiteral("64"),
                                            QStringLiteral("--attention"), QStringLiteral("math")});
  ASSERT_TRUE(zoo.isOk()) << zoo.status().message();
  EXPECT_EQ(zoo->zoo.sequence, 64);
  EXPECT_FALSE(zoo->zoo.fusedAttention);
  // A --dim name the model does not have is refused with the names it has.
  Result<AppOptions> wrong =
      parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--chain"), kGpt, QStringLiteral("--batch"),
                       QStringLiteral("2"), QStringLiteral("--dim"), QStringLiteral("seq=8"), QStringLiteral("--dim"),
                       QStringLiteral("sequence=8")});
  ASSERT_TRUE(wrong.isOk());
  const Status applied = applyAppOptions(window_, *wrong);
  ASSERT_FALSE(applied.isOk());
  EXPECT_NE(applied.message().find("--dim 'seq': no input dimension has that name (the symbolic ones: 'sequence')"),
            std::string::npos)
      << applied.message();
}

}  // namespace
}  // namespace remat::gui
