// Issue 25's small things: the comparison follows its pickers, the peak's tooltip lists largest
// first (the workspace included), the capacity box picks its unit by size, and a first start opens
// the zoo bar's model.
#include <gtest/gtest.h>

#include <QDoubleSpinBox>
#include <QTabWidget>
#include <algorithm>
#include <functional>

#include "chain_helpers.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_insight.hpp"
#include "main_window_fixture.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/model/chain.hpp"
#include "views/compare_model.hpp"
#include "views/compare_view.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/zoo_bar.hpp"
#include "window/app_options.hpp"
#include "window/file_controller.hpp"

namespace remat::gui {
namespace {

class SmallThingsTest : public test::MainWindowFixture {};

TEST_F(SmallThingsTest, TheCompareTableFollowsAPlannerChange) {
  ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/small_cnn.json")).isOk());
  window_.tabs()->setCurrentWidget(window_.compareView());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  CompareTableModel* model = window_.compareView()->model();
  ASSERT_EQ(model->rowCount(), 2);
  ASSERT_TRUE(window_.compareView()->picker(1)->setPlannerName(QStringLiteral("sqrt")));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));  // no Compare click
  EXPECT_EQ(model->data(model->index(1, CompareTableModel::Planner)).toString(), QStringLiteral("sqrt"));
  EXPECT_FALSE(window_.compareView()->isStale());
}

// A chain whose peak op has a workspace larger than some tensors alive during it.
TEST(PeakTooltip, ListsTheWorkspaceInSizeOrder) {
  using remat::testing::numbers;  // a, in, out, e, wf, wb
  const Chain chain =
      makeAbstractChain("ws", 1000, {numbers(4000, true, false, 0, 0, 20000), numbers(5000), numbers(100)});
  LivenessTrace trace;
  Result<Simulation> simulation = simulateWithLiveness(chain, Plan{}, trace);
  ASSERT_TRUE(simulation.isOk()) << simulation.status().message();
  const QString text = peakDescription(chain, *simulation, trace);
  const QStringList lines = text.split(QLatin1Char('\n'));
  const qsizetype header = lines.indexOf(
      *std::find_if(lines.begin(), lines.end(), [](const QString& l) { return l.contains("alive during it"); }));
  ASSERT_GE(header, 0) << text.toStdString();
  EXPECT_TRUE(lines[header].contains(QStringLiteral("largest first"))) << text.toStdString();
  std::vector<double> sizes;
  bool workspaceListed = false;
  for (qsizetype i = header + 1; i < lines.size(); ++i) {
    workspaceListed = workspaceListed || lines[i].contains(QStringLiteral("workspace"));
    const QStringList words = lines[i].trimmed().split(QLatin1Char(' '), Qt::SkipEmptyParts);
    ASSERT_GE(words.size(), 2) << lines[i].toStdString();
    const std::optional<std::uint64_t> bytes =
        ui::parseBytes(words[words.size() - 2] + QLatin1Char(' ') + words.back());
    ASSERT_TRUE(bytes.has_value()) << lines[i].toStdString();
    sizes.push_back(static_cast<double>(*bytes));
  }
  EXPECT_TRUE(workspaceListed) << text.toStdString();
  EXPECT_TRUE(std::is_sorted(sizes.begin(), sizes.end(), std::greater<>())) << text.toStdString();
}

// A transformer layer's E is named by parts in the peak tooltip (the attention's, the MLP's, the
// norms'), and the layer table's Extras cell says the same.
TEST(PeakTooltip, NamesWhatATransformerLayerKeeps) {
  ZooOptions o;
  o.batch = 2;
  o.sequence = 64;
  o.fusedAttention = false;
  const Chain chain = remat::testing::zooBuilt("gpt2", o);
  LivenessTrace trace;
  Result<Simulation> simulation = simulateWithLiveness(chain, Plan{}, trace);
  ASSERT_TRUE(simulation.isOk()) << simulation.status().message();
  const QString text = peakDescription(chain, *simulation, trace, 20);
  EXPECT_TRUE(text.contains(QStringLiteral("attention (math): probabilities [N, h, S, S]"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("MLP: fc's input, GELU's input and output"))) << text.toStdString();
  const QStringList block = savedPartLines(chain, 2);
  ASSERT_FALSE(block.isEmpty());
  // Largest first: at sequence 64 the MLP's tensors outweigh one probability tensor.
  EXPECT_TRUE(block.front().startsWith(QStringLiteral("MLP"))) << block.join('|').toStdString();
  EXPECT_TRUE(savedPartLines(chain, 99).isEmpty());
}

TEST_F(SmallThingsTest, TheCapacityBoxPicksItsUnitBySize) {
  ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/small_cnn.json")).isOk());
  auto* box = window_.planView()->findChild<QDoubleSpinBox*>(QStringLiteral("capacity"));
  ASSERT_NE(box, nullptr);
  window_.planView()->setCapacityBytes(50ull << 20);
  EXPECT_EQ(box->text(), QStringLiteral("50.00 MiB"));
  EXPECT_EQ(window_.planView()->capacityBytes(), 50ull << 20);
  box->setValue(60.0);  // typing goes on in MiB
  EXPECT_EQ(window_.planView()->capacityBytes(), 60ull << 20);
  window_.planView()->setCapacityBytes(3ull << 30);
  EXPECT_EQ(box->text(), QStringLiteral("3.000 GiB"));
}

TEST_F(SmallThingsTest, AFirstStartOpensTheZooBarsModel) {
  Result<AppOptions> options = parseAppOptions({QStringLiteral("remat-explorer")});
  ASSERT_TRUE(options.isOk()) << options.status().message();
  window_.zooBar()->setOptions(ZooOptions{.batch = 2, .resolution = 64});  // small, for the test's speed
  const Status applied = applyAppOptions(window_, *options);
  ASSERT_TRUE(applied.isOk()) << applied.message();
  ASSERT_TRUE(window_.document()->hasChain());
  EXPECT_EQ(window_.zooBar()->modelName(), QStringLiteral("vgg16"));
  EXPECT_EQ(QString::fromStdString(window_.document()->chain().name), QStringLiteral("vgg16"));
  EXPECT_FALSE(window_.document()->simulation().timeline.entries.empty());
}

// A token model's size field is its sequence length, starting at its context; the attention rule
// reaches the options; a CNN gets its resolution field back.
TEST_F(SmallThingsTest, TheZooBarTakesASequenceForTokenModels) {
  ZooBar* bar = window_.zooBar();
  ASSERT_TRUE(bar->setModelName(QStringLiteral("gpt2")));
  EXPECT_EQ(bar->options().sequence, 1024);
  EXPECT_TRUE(bar->options().fusedAttention);
  bar->setOptions(ZooOptions{.batch = 2, .sequence = 64, .fusedAttention = false});
  EXPECT_EQ(bar->options().sequence, 64);
  EXPECT_EQ(bar->options().batch, 2);
  EXPECT_FALSE(bar->options().fusedAttention);
  ASSERT_TRUE(bar->setModelName(QStringLiteral("bert_base")));
  EXPECT_EQ(bar->options().sequence, 64);  // still a sequence field: the value stays
  ASSERT_TRUE(bar->setModelName(QStringLiteral("resnet18")));
  EXPECT_EQ(bar->options().sequence, 0);
  EXPECT_EQ(bar->options().resolution, 224);
  ASSERT_TRUE(bar->setModelName(QStringLiteral("bert_base")));
  EXPECT_EQ(bar->options().sequence, 512);
}

}  // namespace
}  // namespace remat::gui
