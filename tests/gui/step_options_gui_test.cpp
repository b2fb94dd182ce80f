// Issue 24 in the explorer: the step bar picks the optimizer, foreach and gradient mode as the
// command line's --optimizer, --foreach and --grads do; the choice is undoable, survives opening
// another chain, and the chart shows static memory by part (input, weights, gradients, optimizer
// state), the weight gradients' growth during backward and the optimizer step in a colour of its own.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QImage>
#include <QPushButton>
#include <QUndoStack>
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "charts/fill_columns.hpp"
#include "charts/memory_chart.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_insight.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/step_bar.hpp"
#include "views/zoo_bar.hpp"
#include "window/app_options.hpp"
#include "window/file_controller.hpp"
#include "window/prompts.hpp"

namespace remat::gui {
namespace {

class StepOptionsGuiTest : public test::MainWindowFixture {
 protected:
  StepOptionsGuiTest() { keepDefaultStep_ = true; }
  QComboBox* optimizer() { return window_.stepBar()->findChild<QComboBox*>(QStringLiteral("stepOptimizer")); }
  QComboBox* grads() { return window_.stepBar()->findChild<QComboBox*>(QStringLiteral("stepGrads")); }
  QComboBox* precision() { return window_.stepBar()->findChild<QComboBox*>(QStringLiteral("stepPrecision")); }
  QCheckBox* foreachBox() { return window_.stepBar()->findChild<QCheckBox*>(QStringLiteral("stepForeach")); }
  void loadResnet() {
    ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("resnet18"), ZooOptions{.batch = 2, .resolution = 64}).isOk());
    ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  }
  QStringList series() { return window_.planView()->chart()->visibleSeriesNames(); }
};

TEST_F(StepOptionsGuiTest, TheStepBarSetsTheStepAndTheChartShowsItsParts) {
  loadResnet();
  // A new window plans the step a PyTorch 2 loop takes, and the bar shows it.
  EXPECT_EQ(window_.document()->chain().step, kPyTorchDefaultStep);
  EXPECT_EQ(optimizer()->currentText(), QStringLiteral("adamw"));
  EXPECT_EQ(grads()->currentIndex(), 1);
  EXPECT_TRUE(foreachBox()->isChecked());
  optimizer()->setCurrentText(QStringLiteral("none"));
  ASSERT_EQ(grads()->itemData(2).toString(), QStringLiteral("in-place"));
  grads()->setCurrentIndex(2);
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  const Chain plain = window_.document()->chain();
  EXPECT_EQ(plain.step, StepOptions{});
  EXPECT_TRUE(series().contains(QStringLiteral("static")));  // core's default step: one band
  EXPECT_FALSE(series().contains(QStringLiteral("optimizer step")));
  EXPECT_FALSE(foreachBox()->isEnabled());  // nothing to run foreach without an optimizer

  optimizer()->setCurrentText(QStringLiteral("adamw"));
  grads()->setCurrentIndex(1);
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));  // the picked planner plans again
  const Chain& chain = window_.document()->chain();
  EXPECT_EQ(chain.step, (StepOptions{OptimizerKind::AdamW, true, GradMode::OnBackward}));
  EXPECT_TRUE(foreachBox()->isEnabled());
  // AdamW's two states replace the static gradients: static grows by one P.
  EXPECT_EQ(chain.staticBytes(), plain.staticBytes() + chain.paramBytes());
  EXPECT_EQ(window_.document()->simulation().timeline.entries.back().op.kind, OpKind::Step);
  EXPECT_EQ(window_.document()->planner(), window_.plannerPicker()->plannerName());
  const QStringList names = series();
  for (const char* name : {"input and labels", "weights", "optimizer state", "weight gradients", "optimizer step"})
    EXPECT_TRUE(names.contains(QString::fromLatin1(name))) << name << ": " << names.join(", ").toStdString();
  EXPECT_FALSE(names.contains(QStringLiteral("gradients")));  // made on backward: not static
  const QString parts = window_.planView()->summaryToolTip(QStringLiteral("static"));
  EXPECT_TRUE(parts.contains(QStringLiteral("adamw, foreach on, gradients on backward"))) << parts.toStdString();
  EXPECT_TRUE(parts.contains(QStringLiteral("optimizer state  ") + ui::formatBytes(2 * chain.paramBytes())))
      << parts.toStdString();
  // The batch's band and card line: x0 and the int64 labels, one per sample.
  const StaticBreakdown split = staticBreakdown(chain);
  EXPECT_EQ(split.labelBytes, labelCount(chain) * 8);
  EXPECT_GT(split.labelBytes, 0u);
  EXPECT_TRUE(
      parts.contains(QStringLiteral("input and labels  ") + ui::formatBytes(split.inputBytes + split.labelBytes)))
      << parts.toStdString();

  // Undo goes back to core's defaults, and the bar shows them.
  QUndoStack* undo = window_.document()->undoStack();
  while (window_.document()->chain().step != StepOptions{} && undo->canUndo()) undo->undo();
  EXPECT_EQ(window_.document()->chain().step, StepOptions{});
  EXPECT_EQ(optimizer()->currentText(), QStringLiteral("none"));
  EXPECT_EQ(grads()->currentIndex(), 2);
  // And further to the step the chain was opened with.
  while (undo->canUndo()) undo->undo();
  EXPECT_EQ(window_.document()->chain().step, kPyTorchDefaultStep);
  EXPECT_EQ(optimizer()->currentText(), QStringLiteral("adamw"));
}

TEST_F(StepOptionsGuiTest, AnotherChainTakesTheStepShown) {
  loadResnet();
  optimizer()->setCurrentText(QStringLiteral("momentum"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("vgg11"), ZooOptions{.batch = 2, .resolution = 32}).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(window_.document()->chain().step.optimizer, OptimizerKind::Momentum);
  EXPECT_EQ(window_.document()->chain().name, "vgg11");
}

// --precision's field (memory-model.md section 11.7): bf16-mixed rebuilds the numbers (half
// activations, float32 static block), survives an edit and another chain, and undoes to fp32.
TEST_F(StepOptionsGuiTest, ThePrecisionFieldRebuildsTheNumbersAndUndoes) {
  // Without an optimizer step, whose gradients would be the peak at this batch.
  ASSERT_TRUE(window_.document()->setStepOptions(StepOptions{}).isOk());
  window_.stepBar()->setStepOptions(StepOptions{});
  loadResnet();
  const Chain plain = window_.document()->chain();
  ASSERT_NE(precision(), nullptr);
  EXPECT_EQ(precision()->currentText(), QStringLiteral("fp32"));
  precision()->setCurrentText(QStringLiteral("bf16-mixed"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  const Chain& mixed = window_.document()->chain();
  EXPECT_EQ(mixed.step.precision, Precision::Bf16Mixed);
  EXPECT_EQ(mixed.staticBytes(), plain.staticBytes());
  EXPECT_EQ(mixed.at(2).outBytes * 2, plain.at(2).outBytes);  // the stem's batch norm runs in half
  // At batch 2 the weights outweigh the activations: store-all holds every half weight copy at the
  // loss, which makes E larger than float32's.
  EXPECT_GT(autocastWeightCopyBytes(mixed), 0u);
  EXPECT_GE(dynamicPeak(mixed, Plan{}), autocastWeightCopyBytes(mixed));
  EXPECT_GT(dynamicPeak(mixed, Plan{}), dynamicPeak(plain, Plan{}));
  const QString parts = window_.planView()->summaryToolTip(QStringLiteral("static"));
  EXPECT_TRUE(parts.contains(QStringLiteral("autocast's half weight copies"))) << parts.toStdString();

  ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("vgg11"), ZooOptions{.batch = 2, .resolution = 32}).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(window_.document()->chain().step.precision, Precision::Bf16Mixed);
  EXPECT_EQ(precision()->currentText(), QStringLiteral("bf16-mixed"));

  loadResnet();
  precision()->setCurrentText(QStringLiteral("bf16"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(window_.document()->chain().dtype, DType::BFloat16);
  QUndoStack* undo = window_.document()->undoStack();
  ASSERT_TRUE(undo->canUndo());
  // The step change, and the planner's plan planned again after it.
  while (window_.document()->chain().step.precision == Precision::Bf16 && undo->canUndo()) undo->undo();
  EXPECT_EQ(window_.document()->chain().step.precision, Precision::Bf16Mixed);
  EXPECT_EQ(window_.document()->chain().dtype, DType::Float32);
  EXPECT_EQ(precision()->currentText(), QStringLiteral("bf16-mixed"));
}

TEST(StepChartData, StaticPartsAddUpAndGradientsGrowDuringBackward) {
  auto spec = zooChain("resnet18", ZooOptions{.batch = 2, .resolution = 64});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  Chain chain = *built;
  chain.step = {OptimizerKind::Adam, false, GradMode::OnBackward};
  LivenessTrace trace;
  auto simulation = simulateWithLiveness(chain, Plan{}, trace);
  ASSERT_TRUE(simulation.isOk()) << simulation.status().message();
  const charts::ChartData data = chartData(chain, *simulation, trace, std::nullopt, QString());
  std::uint64_t parts = 0;
  for (const charts::StaticPart& part : data.staticParts) parts += part.bytes;
  EXPECT_EQ(parts, simulation->timeline.staticBytes);
  ASSERT_EQ(data.weightGradientBytes.size(), simulation->timeline.entries.size());
  // None in the forward pass, every parameter's at the optimizer step, never shrinking before it.
  const auto& entries = simulation->timeline.entries;
  const std::size_t seed = static_cast<std::size_t>(
      std::find_if(entries.begin(), entries.end(), [](const TimelineEntry& e) { return e.op.kind == OpKind::Seed; }) -
      entries.begin());
  for (std::size_t i = 0; i < seed; ++i) EXPECT_EQ(data.weightGradientBytes[i], 0u) << i;
  EXPECT_EQ(data.weightGradientBytes.back(), chain.paramBytes());
  EXPECT_TRUE(std::is_sorted(data.weightGradientBytes.begin(), data.weightGradientBytes.end()));
  for (std::size_t i = 0; i < entries.size(); ++i)
    EXPECT_LE(data.weightGradientBytes[i], entries[i].footprintBytes) << i;  // inside the bar
  chain.step.grads = GradMode::InPlace;
  auto inPlaceSim = simulateWithLiveness(chain, Plan{}, trace);
  ASSERT_TRUE(inPlaceSim.isOk());
  EXPECT_TRUE(chartData(chain, *inPlaceSim, trace, std::nullopt, QString()).weightGradientBytes.empty());
  // Static: each backward's fresh gradient (a block's largest inner op's), drawn in its bar only
  // (memory-model.md 11.2).
  chain.step.grads = GradMode::Static;
  auto staticSim = simulateWithLiveness(chain, Plan{}, trace);
  ASSERT_TRUE(staticSim.isOk());
  const auto fresh = chartData(chain, *staticSim, trace, std::nullopt, QString()).weightGradientBytes;
  ASSERT_EQ(fresh.size(), staticSim->timeline.entries.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    const Op op = staticSim->timeline.entries[i].op;
    EXPECT_EQ(fresh[i], op.kind == OpKind::B ? freshGradientBytes(chain, op.layer) : 0u) << i;
  }
}

// How many pixels of the image are within 8 of colour in every channel, in columns [from, to).
int pixelsNear(const QImage& image, const QColor& colour, int from, int to) {
  int count = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = from; x < to; ++x) {
      const QColor c = image.pixelColor(x, y);
      if (std::abs(c.red() - colour.red()) <= 8 && std::abs(c.green() - colour.green()) <= 8 &&
          std::abs(c.blue() - colour.blue()) <= 8)
        ++count;
    }
  return count;
}

TEST(StepChartImage, TheGradientsBandIsDrawnOnlyWhereGradientsAreAlive) {
  // Ten forward ops, then ten backward ops whose last five hold gradients (at the chart's scale).
  charts::ChartData data;
  for (std::size_t i = 0; i < 20; ++i)
    data.predicted.entries.push_back({Op{i < 10 ? OpKind::F : OpKind::B, i < 10 ? i + 1 : 20 - i}, 1000, 1000, 1.0});
  data.predicted.staticBytes = 200;
  data.weightGradientBytes.assign(20, 0);
  for (std::size_t i = 15; i < 20; ++i) data.weightGradientBytes[i] = 600;
  charts::MemoryChart chart;
  chart.setData(data);
  const QImage image = chart.renderImage(QSize(1000, 500)).convertToFormat(QImage::Format_RGB32);
  const QColor ochre = ui::paletteColor(ui::PaletteRole::WeightGradients);
  const QColor onWhite((ochre.red() * 200 + 255 * 55) / 255, (ochre.green() * 200 + 255 * 55) / 255,
                       (ochre.blue() * 200 + 255 * 55) / 255);
  const int split = image.width() / 2;  // the plot's middle is near the image's
  EXPECT_EQ(pixelsNear(image, onWhite, 0, split - 60), 0);
  EXPECT_GT(pixelsNear(image, onWhite, split + 60, image.width()), 1000);
}

TEST(StepFillColumns, TheWeightGradientsFillTheBottomOfTheirBar) {
  const charts::PixelMapping pixels{0.0, 1.0, 100.0, -1.0};  // one unit a pixel, 0 at row 100
  const int backward = static_cast<int>(Phase::Backward);
  const std::vector<charts::PhaseBar> bars = {{0.0, 2.0, 50.0, backward, 30.0}, {2.0, 4.0, 60.0, backward, 10.0}};
  const charts::ColumnFills fills = charts::columnFills(bars, 10.0, pixels, 0, 6);
  EXPECT_EQ(fills.columns[0], (charts::FillColumn{50, backward, 70}));
  EXPECT_EQ(fills.columns[2], (charts::FillColumn{40, backward, INT_MAX}));  // none above the base
  const std::vector<charts::FillRun> runs = charts::fillRuns(fills);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], (charts::FillRun{0, 2, 50, backward, 70}));
}

TEST(StepAppOptions, TheExplorerTakesTheCommandLinesStepOptions) {
  auto options = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--optimizer"),
                                  QStringLiteral("adam"), QStringLiteral("--grads"), QStringLiteral("on-backward"),
                                  QStringLiteral("--foreach"), QStringLiteral("off")});
  ASSERT_TRUE(options.isOk()) << options.status().message();
  EXPECT_EQ(options->step, (StepOptions{OptimizerKind::Adam, false, GradMode::OnBackward}));
  auto plain = parseAppOptions({QStringLiteral("remat-explorer")});
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(plain->step, kPyTorchDefaultStep);
  auto bad = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--optimizer"), QStringLiteral("lion")});
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "--optimizer: unknown optimizer 'lion' (valid: none, sgd, momentum, adam, adamw)");
}

TEST(StepAppOptions, TheExplorerTakesThePrecision) {
  auto plain = parseAppOptions({QStringLiteral("remat-explorer")});
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(plain->step.precision, Precision::Fp32);  // then a chain opened brings its file's dtype
  auto mixed =
      parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--precision"), QStringLiteral("fp16-mixed")});
  ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
  EXPECT_EQ(mixed->step.precision, Precision::Fp16Mixed);
  auto bad = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--precision"), QStringLiteral("tf32")});
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(),
            "--precision: unknown precision 'tf32' (valid: fp32, bf16, fp16, bf16-mixed, fp16-mixed)");
}

// One control for the dtypes: the zoo bar has no dtype box, and a zoo model loads (from the zoo
// bar's Load button) in the step bar's precision, pure or mixed; a chain file still brings its own.
class PrecisionControlTest : public StepOptionsGuiTest {
 protected:
  PrecisionControlTest() {
    // A step change is an edit: loading another model asks about it first; the answer is Discard.
    window_.prompts().saveChanges = [](QWidget*, const QString&) { return SaveChangesAnswer::Discard; };
  }
  void loadFromZooBar(const QString& model) {
    ZooBar* bar = window_.zooBar();
    ASSERT_TRUE(bar->setModelName(model));
    bar->setOptions(ZooOptions{.batch = 2, .resolution = 32});
    auto* load = bar->findChild<QPushButton*>();
    ASSERT_NE(load, nullptr);
    load->click();
    ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
    ASSERT_EQ(window_.document()->chain().name, model.toStdString());
  }
};

TEST_F(PrecisionControlTest, TheZooBarHasNoDtypeAndLoadsInTheStepsPrecision) {
  for (QComboBox* box : window_.zooBar()->findChildren<QComboBox*>()) {
    EXPECT_EQ(box->findText(QStringLiteral("bfloat16")), -1) << "a dtype box is left in the zoo bar";
    EXPECT_EQ(box->findText(QStringLiteral("float32")), -1) << "a dtype box is left in the zoo bar";
  }
  precision()->setCurrentText(QStringLiteral("bf16"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  loadFromZooBar(QStringLiteral("vgg11"));
  EXPECT_EQ(window_.document()->chain().dtype, DType::BFloat16);
  EXPECT_EQ(window_.document()->chain().step.precision, Precision::Bf16);
  EXPECT_EQ(precision()->currentText(), QStringLiteral("bf16"));
  const std::uint64_t halfParams = window_.document()->chain().paramBytes();

  precision()->setCurrentText(QStringLiteral("fp32"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  loadFromZooBar(QStringLiteral("resnet18"));
  loadFromZooBar(QStringLiteral("vgg11"));
  EXPECT_EQ(window_.document()->chain().dtype, DType::Float32);
  EXPECT_EQ(window_.document()->chain().paramBytes(), 2 * halfParams);

  precision()->setCurrentText(QStringLiteral("fp16-mixed"));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  loadFromZooBar(QStringLiteral("resnet18"));
  EXPECT_EQ(window_.document()->chain().step.precision, Precision::Fp16Mixed);
  EXPECT_EQ(window_.document()->chain().dtype, DType::Float32);  // the master weights
  EXPECT_EQ(precision()->currentText(), QStringLiteral("fp16-mixed"));
}

TEST_F(PrecisionControlTest, AChainFileBringsItsDtypeToTheOneField) {
  auto spec = zooChain("vgg11", ZooOptions{.batch = 2, .resolution = 32, .dtype = DType::Float16});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const QString file = path(QStringLiteral("half.json"));
  ASSERT_TRUE(saveChainFile(*spec, file.toStdString()).isOk());
  ASSERT_TRUE(window_.files()->openChainFile(file).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(precision()->currentText(), QStringLiteral("fp16"));
  // The next zoo model takes the precision shown, the file's.
  loadFromZooBar(QStringLiteral("resnet18"));
  EXPECT_EQ(window_.document()->chain().dtype, DType::Float16);
}

TEST(StepAppOptions, DtypeIsThePurePrecision) {
  const QString program = QStringLiteral("remat-explorer");
  auto half = parseAppOptions({program, QStringLiteral("--dtype"), QStringLiteral("bfloat16")});
  ASSERT_TRUE(half.isOk()) << half.status().message();
  EXPECT_EQ(half->step.precision, Precision::Bf16);
  auto agreeing = parseAppOptions({program, QStringLiteral("--dtype"), QStringLiteral("float16"),
                                   QStringLiteral("--precision"), QStringLiteral("fp16")});
  ASSERT_TRUE(agreeing.isOk()) << agreeing.status().message();
  EXPECT_EQ(agreeing->step.precision, Precision::Fp16);
  auto clash = parseAppOptions({program, QStringLiteral("--dtype"), QStringLiteral("bfloat16"),
                                QStringLiteral("--precision"), QStringLiteral("bf16-mixed")});
  ASSERT_FALSE(clash.isOk());
  EXPECT_EQ(clash.status().message(),
            "--dtype bfloat16 and --precision bf16-mixed disagree: give --precision alone (--dtype bfloat16 is "
            "--precision bf16)");
}

}  // namespace
}  // namespace remat::gui
