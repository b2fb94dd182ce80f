// The main window: bad input shows the loader's message (no crash, the old chain stays), drops
// open files, the command line's screenshot renders the window.
#include "window/main_window.hpp"

#include <gtest/gtest.h>

#include <QDropEvent>
#include <QFile>
#include <QImage>
#include <QMimeData>
#include <QSet>
#include <QSpinBox>
#include <QUrl>

#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "main_window_fixture.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "views/layer_panel.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "window/app_options.hpp"

namespace remat::gui {
namespace {

void writeText(const QString& path, const QByteArray& text) {
  QFile file(path);
  ASSERT_TRUE(file.open(QIODevice::WriteOnly));
  file.write(text);
}

// Drags a file onto the window and drops it; false when the window refuses the drag.
bool dropOnto(MainWindow& window, const QString& path) {
  QMimeData mime;
  mime.setUrls({QUrl::fromLocalFile(path)});
  // Qt delivers a drop only to the widget that accepted the drag's enter event.
  QDragEnterEvent enter(QPoint(200, 200), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(&window, &enter);
  if (!enter.isAccepted()) return false;
  QDropEvent drop(QPointF(200, 200), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(&window, &drop);
  return true;
}

class MainWindowTest : public test::MainWindowFixture {};

TEST_F(MainWindowTest, ABadChainFileShowsTheLoadersMessageAndKeepsTheChain) {
  ASSERT_TRUE(window_.openChainFile(QStringLiteral(":/examples/toy_abstract.json")).isOk());
  const std::string before = chainSpecToText(window_.document()->chain().spec);
  const QString bad = dir_.filePath(QStringLiteral("bad.json"));
  writeText(bad, R"({"format": "remat-chain/1", "name": "bad", "input": {"shape": [2, 3, 8, 8]},
                   "layers": [{"name": "c", "kind": "conv2d", "kernel": 3}]})");
  const Status status = window_.openChainFile(bad);
  ASSERT_FALSE(status.isOk());
  EXPECT_TRUE(window_.messageBar()->isError());
  EXPECT_EQ(window_.messageBar()->text(), QString::fromStdString(status.message()));
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("out_channels")));
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("bad.json")));
  EXPECT_EQ(chainSpecToText(window_.document()->chain().spec), before);
  EXPECT_FALSE(window_.openChainFile(dir_.filePath(QStringLiteral("missing.json"))).isOk());
  writeText(bad, "{not json");
  EXPECT_FALSE(window_.openChainFile(bad).isOk());
  EXPECT_FALSE(window_.loadZoo(QStringLiteral("vgg16"), ZooOptions{.batch = 2, .resolution = 4}).isOk());
  EXPECT_FALSE(window_.loadZoo(QStringLiteral("no_such_model"), ZooOptions{}).isOk());
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("no_such_model")));
  EXPECT_EQ(chainSpecToText(window_.document()->chain().spec), before);
}

TEST_F(MainWindowTest, DroppingAChainFileOpensIt) {
  const QString path = dir_.filePath(QStringLiteral("dropped.json"));
  ASSERT_TRUE(QFile::copy(QStringLiteral(":/examples/small_cnn.json"), path));
  ASSERT_TRUE(dropOnto(window_, path));
  ASSERT_TRUE(window_.document()->hasChain()) << window_.messageBar()->text().toStdString();
  EXPECT_EQ(window_.document()->chain().name, "small_cnn");
  EXPECT_EQ(window_.document()->filePath(), path);
  EXPECT_TRUE(window_.recentFiles().contains(path));
  EXPECT_TRUE(window_.windowTitle().contains(QStringLiteral("dropped.json")));
}

TEST_F(MainWindowTest, ADroppedHostileJsonFileIsRefusedNotThrown) {
  // Issue 15: the drop sniffed the file with nlohmann-json's value("format", ...), which throws on
  // a format that is not a string; deep nesting and huge files reached the parser unchecked.
  ASSERT_TRUE(window_.openChainFile(QStringLiteral(":/examples/toy_abstract.json")).isOk());
  for (const char* text : {R"({"format": 5})", R"({"format": "remat-chain/1", "layers": [[[[[[[[[[]]]]]]]]]]})",
                           "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"}) {
    const QString path = dir_.filePath(QStringLiteral("hostile.json"));
    writeText(path, text);
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(path)});
    QDragEnterEvent enter(QPoint(200, 200), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(&window_, &enter);
    QDropEvent drop(QPointF(200, 200), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(&window_, &drop);
    EXPECT_TRUE(window_.messageBar()->isError()) << text;
    EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("hostile.json")))
        << window_.messageBar()->text().toStdString();
  }
}

TEST_F(MainWindowTest, NewChainIsEditableAndThePlannerRunsInTheBackground) {
  ASSERT_TRUE(window_.newChain().isOk());
  EXPECT_GT(window_.document()->chain().size(), 3u);
  window_.runPlanner(QStringLiteral("optimal"));
  EXPECT_TRUE(window_.jobs()->isRunning(JobChannel::Plan));
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(window_.document()->planSource(), QStringLiteral("optimal"));
  EXPECT_EQ(window_.document()->undoStack()->count(), 1);
  EXPECT_EQ(window_.planView()->summaryText("plan"), QStringLiteral("optimal"));
}

TEST_F(MainWindowTest, AnOpenedChainShowsThePickedPlannersPlanWithoutAnEdit) {
  ASSERT_TRUE(window_.plannerPicker()->setPlannerName(QStringLiteral("linear")));
  ASSERT_TRUE(window_.loadZoo(QStringLiteral("vgg11"), ZooOptions{.batch = 2, .resolution = 32}).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(window_.document()->planSource(), QStringLiteral("linear"));
  EXPECT_FALSE(window_.document()->plan().checkpoints.empty());
  EXPECT_EQ(window_.planView()->summaryText("plan"), QStringLiteral("linear"));
  // The opening plan is not an edit: nothing to undo, the chain is unmodified.
  EXPECT_EQ(window_.document()->undoStack()->count(), 0);
  EXPECT_FALSE(window_.isWindowModified());

  ASSERT_TRUE(window_.plannerPicker()->setPlannerName(QStringLiteral("optimal")));
  ASSERT_TRUE(window_.openChainFile(QStringLiteral(":/examples/small_cnn.json")).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  EXPECT_EQ(window_.document()->planSource(), QStringLiteral("optimal"));
  EXPECT_EQ(window_.document()->undoStack()->count(), 0);
}

TEST_F(MainWindowTest, TheScreenshotIsTheWindowsSizeAndNotBlank) {
  Result<AppOptions> options = parseAppOptions(
      {QStringLiteral("remat-explorer"), QStringLiteral("--zoo"), QStringLiteral("resnet18"), QStringLiteral("--batch"),
       QStringLiteral("8"), QStringLiteral("--resolution"), QStringLiteral("64"), QStringLiteral("--planner"),
       QStringLiteral("linear"), QStringLiteral("--screenshot"), dir_.filePath(QStringLiteral("shot.png"))});
  ASSERT_TRUE(options.isOk()) << options.status().message();
  ASSERT_TRUE(applyAppOptions(window_, *options).isOk());
  EXPECT_EQ(window_.document()->planSource(), QStringLiteral("linear"));
  ASSERT_TRUE(writeScreenshot(window_, options->screenshotPath).isOk());
  const QImage image(options->screenshotPath);
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), window_.size() * window_.devicePixelRatio());
  // Not blank: many colours, and no single colour covers almost everything.
  QHash<QRgb, int> counts;
  for (int y = 0; y < image.height(); y += 3)
    for (int x = 0; x < image.width(); x += 3) ++counts[image.pixel(x, y)];
  int largest = 0;
  int total = 0;
  for (int count : counts) {
    largest = std::max(largest, count);
    total += count;
  }
  EXPECT_GT(counts.size(), 50);
  EXPECT_LT(largest, total * 9 / 10);
}

TEST(AppOptions, RejectsBadCommandLines) {
  const QString program = QStringLiteral("remat-explorer");
  EXPECT_FALSE(parseAppOptions({program, QStringLiteral("--chain"), QStringLiteral("a.json"), QStringLiteral("--zoo"),
                                QStringLiteral("vgg16")})
                   .isOk());
  EXPECT_FALSE(parseAppOptions({program, QStringLiteral("--batch"), QStringLiteral("zero")}).isOk());
  EXPECT_FALSE(parseAppOptions({program, QStringLiteral("--size"), QStringLiteral("huge")}).isOk());
  EXPECT_FALSE(parseAppOptions({program, QStringLiteral("--dtype"), QStringLiteral("int8")}).isOk());
  EXPECT_FALSE(parseAppOptions({program, QStringLiteral("--bogus")}).isOk());
  Result<AppOptions> ok = parseAppOptions(
      {program, QStringLiteral("--zoo"), QStringLiteral("vgg16"), QStringLiteral("--size"), QStringLiteral("800x600")});
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok->zooName, QStringLiteral("vgg16"));
  EXPECT_EQ(ok->size, QSize(800, 600));
  EXPECT_EQ(ok->zoo.batch, 64);
}

TEST(AppOptions, AnUnknownPlannerIsAnError) {
  MainWindow window;
  Result<AppOptions> options = parseAppOptions({QStringLiteral("x"), QStringLiteral("--zoo"), QStringLiteral("vgg11"),
                                                QStringLiteral("--planner"), QStringLiteral("magic")});
  ASSERT_TRUE(options.isOk());
  const Status status = applyAppOptions(window, *options);
  EXPECT_FALSE(status.isOk());
  EXPECT_TRUE(QString::fromStdString(status.message()).contains(QStringLiteral("magic")));
}

}  // namespace
}  // namespace remat::gui

namespace remat::gui {
namespace {

const QString kOnnxModel = QStringLiteral(REMAT_TEST_DATA_DIR "/onnx/resnet18_train_op17_dynamic.onnx");

// File > Open, drops and recent files take ONNX models; the ONNX batch field sets the batch and
// re-imports the open model when it changes.
TEST_F(MainWindowTest, OnnxModelsOpenAtTheBatchField) {
  if (!onnxImportAvailable()) GTEST_SKIP() << "built without ONNX (REMAT_WITH_ONNX=OFF)";
  window_.onnxBatch()->setValue(0);
  ASSERT_FALSE(window_.openChainFile(kOnnxModel).isOk());  // a symbolic batch, "as exported"
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("the batch dimension is symbolic ('batch')")));
  EXPECT_TRUE(window_.messageBar()->text().contains(QStringLiteral("'ONNX batch' field")));
  window_.onnxBatch()->setValue(4);
  ASSERT_TRUE(window_.openChainFile(kOnnxModel).isOk()) << window_.messageBar()->text().toStdString();
  EXPECT_EQ(window_.document()->chain().size(), 14u);
  EXPECT_EQ(window_.document()->chain().inputShape, (Shape{4, 3, 64, 64}));
  EXPECT_EQ(window_.document()->chain().layers[4].name, "layer1.0");
  EXPECT_TRUE(window_.document()->filePath().isEmpty());  // Save writes a chain file, never the model
  EXPECT_TRUE(window_.recentFiles().contains(kOnnxModel));
  window_.onnxBatch()->setValue(6);
  EXPECT_EQ(window_.document()->chain().inputShape.at(0), 6);
  ASSERT_TRUE(window_.newChain().isOk());
  window_.onnxBatch()->setValue(2);  // no ONNX model open: nothing to re-import
  EXPECT_EQ(window_.document()->chain().name, "new_chain");
}

TEST_F(MainWindowTest, DroppingAnOnnxModelImportsIt) {
  if (!onnxImportAvailable()) GTEST_SKIP() << "built without ONNX (REMAT_WITH_ONNX=OFF)";
  window_.onnxBatch()->setValue(3);
  ASSERT_TRUE(dropOnto(window_, kOnnxModel));
  ASSERT_TRUE(window_.document()->hasChain()) << window_.messageBar()->text().toStdString();
  EXPECT_EQ(window_.document()->chain().name, "resnet18_train_op17_dynamic");
  EXPECT_EQ(window_.document()->chain().inputShape.at(0), 3);
}

}  // namespace
}  // namespace remat::gui
