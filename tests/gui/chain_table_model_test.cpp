// The layer table model: Qt's model checks, what it shows, and edits that go through the Document
// (valid ones are undoable, invalid ones are refused with a message and leave the chain as it was).
#include "views/chain_table_model.hpp"

#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSignalSpy>

#include "chain_helpers.hpp"
#include "common/units.hpp"
#include "document/chain_edits.hpp"
#include "document/document.hpp"
#include "gui_test_env.hpp"
#include "remat/memory/simulator.hpp"
#include "views/compare_model.hpp"

namespace remat::gui {
namespace {

using Col = ChainTableModel::Column;

class TableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(document_.setStepOptions(StepOptions{}).isOk());  // the numbers below are core's default step's
    document_.resetChain(test::smallCnn(), QString());
    model_ = std::make_unique<ChainTableModel>(&document_);
    tester_ =
        std::make_unique<QAbstractItemModelTester>(model_.get(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  }
  QString cell(int row, int column, int role = Qt::DisplayRole) const {
    return model_->data(model_->index(row, column), role).toString();
  }
  Document document_;
  std::unique_ptr<ChainTableModel> model_;
  std::unique_ptr<QAbstractItemModelTester> tester_;
};

TEST_F(TableTest, ShowsTheInputAndEveryLayerOfTheSpec) {
  const Chain& chain = document_.chain();
  ASSERT_EQ(model_->rowCount(), static_cast<int>(chain.spec.layers.size()) + 1);
  EXPECT_EQ(model_->columnCount(), static_cast<int>(Col::ColumnCount));
  EXPECT_EQ(cell(0, Col::Name), QStringLiteral("input"));
  EXPECT_EQ(cell(0, Col::OutputShape), QStringLiteral("[32, 3, 64, 64]"));
  EXPECT_TRUE(cell(0, Col::Settings).contains(QStringLiteral("shape=[32,3,64,64]")));
  // conv1: 32x32x64x64 float32 outputs, reads its input, 32*3*3*3 + 32 parameters.
  EXPECT_EQ(cell(1, Col::Layer), QStringLiteral("1"));
  EXPECT_EQ(cell(1, Col::Name), QStringLiteral("conv1"));
  EXPECT_EQ(cell(1, Col::Kind), QStringLiteral("conv2d"));
  EXPECT_EQ(cell(1, Col::OutputShape), QStringLiteral("[32, 32, 64, 64]"));
  EXPECT_EQ(cell(1, Col::OutputBytes), ui::formatBytes(32ull * 32 * 64 * 64 * 4));
  EXPECT_EQ(cell(1, Col::OutputBytes, Qt::EditRole), QString::number(32ull * 32 * 64 * 64 * 4));
  EXPECT_EQ(cell(1, Col::Flags), QStringLiteral("in"));
  EXPECT_EQ(cell(1, Col::Params), ui::formatBytes((32 * 3 * 3 * 3 + 32) * 4));
  EXPECT_TRUE(cell(1, Col::Settings).startsWith(QStringLiteral("out_channels=32 kernel=3")));
  EXPECT_EQ(cell(3, Col::Flags), QStringLiteral("out"));  // relu reads its output
  // The flatten view has no model layer, and the layers after it keep their model numbers.
  int flattenRow = -1;
  for (int r = 1; r < model_->rowCount(); ++r)
    if (cell(r, Col::Kind) == QStringLiteral("flatten")) flattenRow = r;
  ASSERT_GT(flattenRow, 0);
  EXPECT_EQ(cell(flattenRow, Col::Layer), QStringLiteral("-"));
  EXPECT_EQ(model_->layerForRow(flattenRow), 0u);
  EXPECT_EQ(model_->layerForRow(flattenRow + 1), static_cast<std::size_t>(flattenRow));
  EXPECT_EQ(model_->rowForLayer(static_cast<std::size_t>(flattenRow)), flattenRow + 1);
  // Only names, kinds and settings of real layers are editable.
  EXPECT_TRUE(model_->flags(model_->index(1, Col::Name)) & Qt::ItemIsEditable);
  EXPECT_FALSE(model_->flags(model_->index(1, Col::OutputBytes)) & Qt::ItemIsEditable);
  EXPECT_FALSE(model_->flags(model_->index(0, Col::Name)) & Qt::ItemIsEditable);
}

TEST_F(TableTest, AValidEditRebuildsTheChainAndIsUndoable) {
  QSignalSpy accepted(model_.get(), &ChainTableModel::editAccepted);
  const std::uint64_t before = document_.chain().outBytes(1);
  ASSERT_TRUE(model_->setData(model_->index(1, Col::Settings), QStringLiteral("out_channels=16 kernel=3 padding=1")));
  EXPECT_EQ(accepted.count(), 1);
  EXPECT_EQ(document_.chain().layers[0].numbers.outBytes, before / 2);
  EXPECT_EQ(document_.chain().spec.layers[0].outChannels, 16);
  EXPECT_EQ(cell(1, Col::OutputShape), QStringLiteral("[32, 16, 64, 64]"));
  // The simulation follows the edit at once.
  EXPECT_EQ(document_.simulation().peakBytes(), simulate(document_.chain(), Plan{})->peakBytes());
  ASSERT_TRUE(model_->setData(model_->index(2, Col::Name), QStringLiteral("norm1")));
  EXPECT_EQ(cell(2, Col::Name), QStringLiteral("norm1"));
  document_.undoStack()->undo();
  EXPECT_EQ(cell(2, Col::Name), QStringLiteral("bn1"));
  document_.undoStack()->undo();
  EXPECT_EQ(document_.chain().outBytes(1), before);
  EXPECT_EQ(cell(1, Col::OutputShape), QStringLiteral("[32, 32, 64, 64]"));
}

TEST_F(TableTest, AnInvalidEditIsRefusedWithAMessageAndTheChainIsKept) {
  QSignalSpy refused(model_.get(), &ChainTableModel::editRefused);
  const ChainSpec before = document_.chain().spec;
  // A zero-channel convolution, a foreign field, a kernel larger than the input, an empty name.
  EXPECT_FALSE(model_->setData(model_->index(1, Col::Settings), QStringLiteral("out_channels=0 kernel=3")));
  EXPECT_FALSE(model_->setData(model_->index(1, Col::Settings), QStringLiteral("out_channels=8 kernel=3 p=0.5")));
  EXPECT_FALSE(model_->setData(model_->index(1, Col::Settings), QStringLiteral("out_channels=8 kernel=999")));
  EXPECT_FALSE(model_->setData(model_->index(1, Col::Name), QStringLiteral("  ")));
  EXPECT_FALSE(model_->setData(model_->index(1, Col::Name), QStringLiteral("relu1")));  // already used
  EXPECT_FALSE(model_->setData(model_->index(1, Col::Kind), QStringLiteral("transformer")));
  ASSERT_EQ(refused.count(), 6);
  EXPECT_TRUE(refused.at(0).at(0).toString().contains(QStringLiteral("out_channels")));
  EXPECT_TRUE(refused.at(1).at(0).toString().contains(QStringLiteral("'p'")) ||
              refused.at(1).at(0).toString().contains(QStringLiteral("p")));
  EXPECT_TRUE(refused.at(2).at(0).toString().contains(QStringLiteral("conv1")));
  EXPECT_TRUE(refused.at(4).at(0).toString().contains(QStringLiteral("already used")));
  EXPECT_TRUE(refused.at(5).at(0).toString().contains(QStringLiteral("unknown kind")));
  EXPECT_EQ(chainSpecToText(document_.chain().spec), chainSpecToText(before));
  EXPECT_EQ(document_.undoStack()->count(), 0);
}

// A transformer layer's Extras cell names what its e holds, largest first, with the bytes; a
// convolution's (no named parts) has no such tooltip.
TEST_F(TableTest, ExtrasOfATransformerLayerNameTheirParts) {
  EXPECT_FALSE(cell(1, Col::Extras, Qt::ToolTipRole).contains(QStringLiteral("saves for its backward")));
  ZooOptions o;
  o.batch = 1;
  o.sequence = 32;
  o.fusedAttention = false;
  document_.resetChain(remat::testing::zooBuilt("gpt2", o), QString());
  const QString tip = cell(2, Col::Extras, Qt::ToolTipRole);  // transformer.h.0
  EXPECT_TRUE(tip.startsWith(QStringLiteral("e of layer 2, what its forward saves for its backward:")))
      << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("attention (math): probabilities [N, h, S, S]  ") +
                           ui::formatBytes(12ull * 32 * 32 * 4)))
      << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("norms: mean, rstd, ln_2's input"))) << tip.toStdString();
}

// A token model's input row is its int64 ids (PyTorch's torch.long), N·S·8 bytes, not the float
// dtype of its activations; an image input stays float32 (memory-model.md 12.9).
TEST_F(TableTest, TokenIdsShowAsInt64) {
  EXPECT_EQ(cell(0, Col::Kind), QStringLiteral("float32"));
  ZooOptions o;
  o.batch = 2;
  o.sequence = 32;
  document_.resetChain(remat::testing::zooBuilt("gpt2", o), QString());
  EXPECT_EQ(cell(0, Col::Kind), QStringLiteral("int64"));
  EXPECT_EQ(cell(0, Col::OutputBytes, Qt::EditRole), QString::number(2 * 32 * 8));
}

TEST_F(TableTest, AbstractLayersEditTheirNumbersDirectly) {
  std::vector<LayerNumbers> layers(5);
  for (std::size_t i = 0; i < layers.size(); ++i) layers[i].outBytes = 1024 * (i + 1);
  document_.resetChain(makeAbstractChain("toy", 512, layers), QString());
  EXPECT_TRUE(model_->flags(model_->index(2, Col::OutputBytes)) & Qt::ItemIsEditable);
  ASSERT_TRUE(model_->setData(model_->index(2, Col::OutputBytes), QStringLiteral("64 KiB")));
  EXPECT_EQ(document_.chain().outBytes(2), 65536u);
  ASSERT_TRUE(model_->setData(model_->index(2, Col::Flags), QStringLiteral("in, out")));
  EXPECT_TRUE(document_.chain().at(2).needsOutput);
  ASSERT_TRUE(model_->setData(model_->index(3, Col::Extras), QStringLiteral("100")));
  EXPECT_EQ(document_.chain().at(3).extraBytes, 100u);
  ASSERT_TRUE(model_->setData(model_->index(3, Col::Params), QStringLiteral("2048")));
  EXPECT_EQ(document_.chain().staticBytes(), 512u + 2 * 2048u);
  EXPECT_FALSE(model_->setData(model_->index(2, Col::OutputBytes), QStringLiteral("lots")));
  EXPECT_FALSE(model_->setData(model_->index(2, Col::Flags), QStringLiteral("sideways")));
  EXPECT_EQ(document_.chain().outBytes(2), 65536u);
}

TEST_F(TableTest, KindChangesStartFromWorkingSettings) {
  // relu1 (row 3) becomes a convolution over its 32 input channels, then abstract with its numbers.
  ASSERT_TRUE(model_->setData(model_->index(3, Col::Kind), QStringLiteral("conv2d")));
  EXPECT_EQ(document_.chain().spec.layers[2].kind, LayerKind::Conv2d);
  EXPECT_EQ(document_.chain().spec.layers[2].outChannels, 32);
  // An abstract layer states its numbers but hides its shape, so only the last layer may become one.
  QSignalSpy refused(model_.get(), &ChainTableModel::editRefused);
  EXPECT_FALSE(model_->setData(model_->index(3, Col::Kind), QStringLiteral("abstract")));
  ASSERT_EQ(refused.count(), 1);
  EXPECT_TRUE(refused.at(0).at(0).toString().contains(QStringLiteral("known input shape")));
  const int last = model_->rowCount() - 1;
  const std::size_t n = document_.chain().size();
  const LayerNumbers fcNumbers = document_.chain().at(n);
  ASSERT_TRUE(model_->setData(model_->index(last, Col::Kind), QStringLiteral("abstract")));
  EXPECT_EQ(document_.chain().at(n), fcNumbers);
  EXPECT_EQ(document_.chain().layers.back().kind, LayerKind::Abstract);
}

TEST_F(TableTest, StructuralEditsCarryCheckpointsWithTheirLayers) {
  ASSERT_TRUE(document_.applyPlan(Plan{{3, 6}}, QStringLiteral("test")).isOk());
  // Insert after layer 1: the checkpoints' layers move to 4 and 7.
  ChainEdit insert = editInsertLayer(document_.chain(), 1);
  ASSERT_TRUE(document_.editChain(insert.spec, QString::fromStdString(insert.description), insert.remap).isOk());
  EXPECT_EQ(document_.plan(), (Plan{{4, 7}}));
  EXPECT_EQ(document_.chain().spec.layers[1].kind, LayerKind::Relu);
  // Remove the checkpoint's layer 4 (spec index 3): that checkpoint goes, the other moves back.
  Result<ChainEdit> remove = editRemoveLayer(document_.chain().spec, 3);
  ASSERT_TRUE(remove.isOk());
  ASSERT_TRUE(document_.editChain(remove->spec, QString::fromStdString(remove->description), remove->remap).isOk());
  EXPECT_EQ(document_.plan(), (Plan{{6}}));
  // Move layer 6's spec row up one: its checkpoint follows it to 5.
  Result<ChainEdit> move = editMoveLayer(document_.chain().spec, 5, -1);
  ASSERT_TRUE(move.isOk());
  ASSERT_TRUE(document_.editChain(move->spec, QString::fromStdString(move->description), move->remap).isOk());
  EXPECT_EQ(document_.plan(), (Plan{{5}}));
  for (int i = 0; i < 3; ++i) document_.undoStack()->undo();
  EXPECT_EQ(document_.plan(), (Plan{{3, 6}}));
  EXPECT_EQ(document_.chain().spec.layers[1].name, "bn1");
  EXPECT_FALSE(editMoveLayer(document_.chain().spec, 0, -1).isOk());
}

TEST(ChainEdits, FlagsParseAndPrint) {
  EXPECT_EQ(flagsText(true, true), "in, out");
  EXPECT_EQ(flagsText(false, false), "-");
  EXPECT_EQ(*parseFlags("out in"), (std::pair<bool, bool>{true, true}));
  EXPECT_EQ(*parseFlags("-"), (std::pair<bool, bool>{false, false}));
  EXPECT_EQ(*parseFlags("IN"), (std::pair<bool, bool>{true, false}));
  EXPECT_FALSE(parseFlags("both").isOk());
}

TEST(CompareModel, PassesQtsModelChecksAndShowsBothPlans) {
  CompareTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(model.rowCount(), 0);
  const Chain chain = test::smallCnn();
  std::array<CompareTableModel::Entry, 2> entries;
  for (std::size_t side = 0; side < 2; ++side) {
    entries[side].planner = side == 0 ? QStringLiteral("dp") : QStringLiteral("linear");
    Result<SimulatedPlan> planned = planAndSimulate(chain, entries[side].planner.toStdString(), nullptr);
    ASSERT_TRUE(planned.isOk()) << planned.status().message();
    entries[side].planned = *planned;
  }
  model.setEntries(entries);
  ASSERT_EQ(model.rowCount(), 2);
  for (int row = 0; row < 2; ++row) {
    const Simulation& sim = entries[static_cast<std::size_t>(row)].planned->simulation;
    EXPECT_EQ(model.data(model.index(row, CompareTableModel::Peak)).toString(), ui::formatBytes(sim.peakBytes()));
    EXPECT_EQ(model.data(model.index(row, CompareTableModel::A)).toString(), ui::formatBytes(sim.aBytes));
    EXPECT_EQ(model.data(model.index(row, CompareTableModel::Checkpoints)).toString(),
              QString::number(sim.plan.checkpoints.size()));
  }
  EXPECT_EQ(model.data(model.index(0, CompareTableModel::Objective)).toString(), QStringLiteral("A"));
  EXPECT_EQ(model.data(model.index(1, CompareTableModel::Objective)).toString(), QStringLiteral("R"));
  entries[1].planned.reset();
  entries[1].error = QStringLiteral("cancelled");
  model.setEntries(entries);
  EXPECT_EQ(model.data(model.index(1, CompareTableModel::Objective)).toString(), QStringLiteral("cancelled"));
  model.clear();
  EXPECT_EQ(model.rowCount(), 0);
}

// Messages and undo labels name a layer by the number the table's # column (and the strip) shows,
// counting from 1, and a view by its name: the small CNN's fc1 comes after the flatten view.
TEST_F(TableTest, MessagesAndUndoLabelsUseTheTablesLayerNumbers) {
  const ChainSpec& spec = document_.chain().spec;
  int fc1Row = -1;
  int flattenRow = -1;
  for (int row = 1; row < model_->rowCount(); ++row) {
    if (cell(row, Col::Name) == QStringLiteral("fc1")) fc1Row = row;
    if (cell(row, Col::Kind) == QStringLiteral("flatten")) flattenRow = row;
  }
  ASSERT_GT(fc1Row, flattenRow);
  ASSERT_GT(flattenRow, 0);
  QSignalSpy accepted(model_.get(), &ChainTableModel::editAccepted);
  ASSERT_TRUE(model_->setData(model_->index(fc1Row, Col::Name), QStringLiteral("classifier")));
  ASSERT_EQ(accepted.count(), 1);
  const QString number = cell(fc1Row, Col::Layer);
  EXPECT_EQ(accepted.at(0).at(0).toString(), QStringLiteral("Rename layer %1 ('fc1') to 'classifier'").arg(number));
  EXPECT_EQ(document_.undoStack()->undoText(), accepted.at(0).at(0).toString());

  QSignalSpy refused(model_.get(), &ChainTableModel::editRefused);
  EXPECT_FALSE(model_->setData(model_->index(2, Col::Name), spec.layers[0].name.c_str()));
  ASSERT_EQ(refused.count(), 1);
  EXPECT_TRUE(refused.at(0).at(0).toString().startsWith(
      QStringLiteral("layer %1 ('%2')").arg(cell(2, Col::Layer), cell(2, Col::Name))))
      << refused.at(0).at(0).toString().toStdString();
  EXPECT_TRUE(refused.at(0).at(0).toString().contains(
      QStringLiteral("layer %1 ('%2')").arg(cell(1, Col::Layer), cell(1, Col::Name))));
  EXPECT_EQ(cell(1, Col::Layer), QStringLiteral("1"));
  EXPECT_EQ(editRemoveLayer(document_.chain().spec, static_cast<std::size_t>(flattenRow - 1))->description,
            "Remove view 'flatten'");

  // The plan's edits too: the strip's layer 5 is the table's 5.
  ASSERT_TRUE(document_.toggleCheckpoint(5).isOk());
  EXPECT_EQ(document_.undoStack()->undoText(),
            QStringLiteral("Add a checkpoint at layer 5 (%1)").arg(cell(5, Col::Name)));
  ASSERT_TRUE(document_.moveCheckpoint(5, 6).isOk());
  EXPECT_EQ(
      document_.undoStack()->undoText(),
      QStringLiteral("Move checkpoint from layer 5 (%1) to layer 6 (%2)").arg(cell(5, Col::Name), cell(6, Col::Name)));
}

}  // namespace
}  // namespace remat::gui
