// The main window as a new user meets it: every toolbar control visible at 1280x720 and staying
// put while edits pile up on the undo stack, Add without a chain, the last layer's refusal said at
// the cell, About with the version and the docs, --help without a display, and a GPU
// action that loads nothing until it is used.
#include <gtest/gtest.h>

#include <QAction>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QProcess>
#include <QRegularExpression>
#include <QTest>
#include <QToolBar>
#include <QToolButton>
#include <QToolTip>
#include <QUrl>
#include <cstdlib>

#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "gui_test_env.hpp"
#include "process_maps.hpp"
#include "views/checkpoint_strip.hpp"
#include "views/layer_panel.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "window/about.hpp"
#include "window/app_options.hpp"
#include "window/file_controller.hpp"
#include "window/main_window.hpp"
#include "window/measure_controller.hpp"

namespace remat::gui {
namespace {

// Every action and widget of a toolbar is shown inside it, and nothing went to its "»" menu.
void expectAllVisible(const MainWindow& window, const char* name) {
  auto* bar = window.findChild<QToolBar*>(QString::fromLatin1(name));
  ASSERT_NE(bar, nullptr) << name;
  for (QAction* action : bar->actions()) {
    if (action->isSeparator() || !action->isVisible()) continue;
    QWidget* widget = bar->widgetForAction(action);
    ASSERT_NE(widget, nullptr) << action->text().toStdString();
    EXPECT_TRUE(widget->isVisible()) << name << ": " << action->text().toStdString();
    EXPECT_TRUE(bar->rect().contains(widget->geometry())) << name << ": " << action->text().toStdString();
    EXPECT_TRUE(window.rect().contains(QRect(widget->mapTo(&window, QPoint(0, 0)), widget->size())))
        << name << ": " << action->text().toStdString();
  }
  for (auto* extension : bar->findChildren<QToolButton*>(QStringLiteral("qt_toolbar_ext_button")))
    EXPECT_FALSE(extension->isVisible()) << name << " has an overflow menu";
}

class WindowLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    window_.resize(1280, 720);
    window_.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window_));
  }
  QWidget* toolButton(const QString& key) const {
    return window_.findChild<QToolBar*>(QStringLiteral("mainToolBar"))->widgetForAction(window_.action(key));
  }
  MainWindow window_;
};

TEST_F(WindowLayoutTest, EveryToolbarControlStaysVisibleAndInPlaceWhileEditsPileUp) {
  window_.action(QStringLiteral("runGpu"))->setVisible(true);  // the widest toolbar this program has
  ASSERT_TRUE(window_.files()->loadZoo(QStringLiteral("vgg16"), ZooOptions{.batch = 2, .resolution = 32}).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  QCoreApplication::processEvents();
  const QRect undoBefore = toolButton(QStringLiteral("toolUndo"))->geometry();
  const QRect measureBefore = toolButton(QStringLiteral("runCpu"))->geometry();
  // Edits with long undo texts: a plan, checkpoints added and moved on layers with long names.
  ASSERT_TRUE(window_.document()->applyPlan(Plan{}, QStringLiteral("none")).isOk());
  CheckpointStrip* strip = window_.planView()->strip();
  for (std::size_t layer : {21u, 22u, 30u})
    QTest::mouseClick(strip, Qt::LeftButton, Qt::NoModifier, strip->cellPoint(layer));
  ASSERT_TRUE(window_.document()->moveCheckpoint(21, 20).isOk());
  QCoreApplication::processEvents();
  const QString undoText = window_.document()->undoStack()->undoText();
  ASSERT_TRUE(undoText.startsWith(QStringLiteral("Move checkpoint from layer 21"))) << undoText.toStdString();
  EXPECT_EQ(toolButton(QStringLiteral("toolUndo"))->geometry(), undoBefore);
  EXPECT_EQ(toolButton(QStringLiteral("runCpu"))->geometry(), measureBefore);
  EXPECT_TRUE(window_.action(QStringLiteral("toolUndo"))->toolTip().contains(undoText));
  EXPECT_EQ(window_.action(QStringLiteral("undo"))->text(), QStringLiteral("&Undo %1").arg(undoText));  // the Edit menu
  expectAllVisible(window_, "mainToolBar");
  expectAllVisible(window_, "zooToolBar");
  // Clicking the toolbar's Undo undoes the move.
  QTest::mouseClick(toolButton(QStringLiteral("toolUndo")), Qt::LeftButton);
  EXPECT_EQ(window_.document()->plan(), (Plan{{21, 22, 30}}));
}

TEST_F(WindowLayoutTest, ANarrowWindowPutsTheZooBarOnItsOwnRowAndAWideOneOnTheSameRow) {
  window_.resize(1800, 720);
  QCoreApplication::processEvents();
  EXPECT_FALSE(window_.toolBarsOnTwoRows());
  window_.action(QStringLiteral("runGpu"))->setVisible(true);
  window_.resize(1024, 720);
  QCoreApplication::processEvents();
  EXPECT_TRUE(window_.toolBarsOnTwoRows());
  expectAllVisible(window_, "mainToolBar");
  expectAllVisible(window_, "zooToolBar");
  expectAllVisible(window_, "onnxToolBar");
  expectAllVisible(window_, "stepToolBar");
}

TEST_F(WindowLayoutTest, AddWithoutAChainStartsOne) {
  ASSERT_FALSE(window_.document()->hasChain());
  QToolButton* add = window_.layerPanel()->addButton();
  ASSERT_TRUE(add->isEnabled());
  QTest::mouseClick(add, Qt::LeftButton);
  ASSERT_TRUE(window_.document()->hasChain());
  EXPECT_GT(window_.document()->chain().size(), 1u);
  // With a chain, Add inserts a layer.
  const std::size_t layers = window_.document()->chain().spec.layers.size();
  QTest::mouseClick(add, Qt::LeftButton);
  EXPECT_EQ(window_.document()->chain().spec.layers.size(), layers + 1);
}

TEST_F(WindowLayoutTest, ClickingTheLastLayerSaysWhyAtTheStripAndInTheStatusBar) {
  ASSERT_TRUE(window_.files()->openChainFile(QStringLiteral(":/examples/small_cnn.json")).isOk());
  ASSERT_TRUE(window_.jobs()->waitForIdle(60000));
  CheckpointStrip* strip = window_.planView()->strip();
  const Plan before = window_.document()->plan();
  QTest::mouseClick(strip, Qt::LeftButton, Qt::NoModifier, strip->cellPoint(strip->layerCount()));
  EXPECT_EQ(window_.document()->plan(), before);
  ASSERT_TRUE(QToolTip::isVisible());  // at the cell the user clicked
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("the last layer"))) << QToolTip::text().toStdString();
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("fc2")));
  auto* status = window_.findChild<QLabel*>(QStringLiteral("statusText"));
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(status->text(), QToolTip::text());
}

TEST(About, GivesTheVersionThePaperAndLinksToDocsThatExist) {
  const QString html = aboutHtml();
  EXPECT_TRUE(html.contains(explorerVersion()));
  EXPECT_FALSE(explorerVersion().isEmpty());
  EXPECT_TRUE(html.contains(QStringLiteral("Hong et al.")));
  const QRegularExpression link(QStringLiteral("href=\"([^\"]+)\""));
  int links = 0;
  for (auto match = link.globalMatch(html); match.hasNext(); ++links) {
    const QUrl url(match.next().captured(1));
    ASSERT_TRUE(url.isLocalFile()) << url.toString().toStdString();
    EXPECT_TRUE(QFileInfo::exists(url.toLocalFile())) << url.toLocalFile().toStdString();
  }
  EXPECT_GE(links, 3);
}

TEST(CommandLine, HelpAndVersionAreTextNotAnExit) {
  Result<AppOptions> help = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--help")});
  ASSERT_TRUE(help.isOk());
  EXPECT_TRUE(help->printedText.contains(QStringLiteral("--zoo")));
  EXPECT_TRUE(help->printedText.contains(QStringLiteral("--screenshot")));
  Result<AppOptions> version = parseAppOptions({QStringLiteral("remat-explorer"), QStringLiteral("--version")});
  ASSERT_TRUE(version.isOk());
  EXPECT_FALSE(version->printedText.isEmpty());
}

// The program itself, with no display at all and no platform chosen: --help prints and exits 0.
TEST(CommandLine, TheExplorersHelpPrintsWithoutADisplay) {
  QProcess explorer;
  QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
    environment.remove(QString::fromLatin1(name));
  explorer.setProcessEnvironment(environment);
  for (const char* option : {"--help", "--version"}) {
    explorer.start(QStringLiteral(REMAT_EXPLORER_PATH), {QString::fromLatin1(option)});
    ASSERT_TRUE(explorer.waitForFinished(60000)) << option;
    EXPECT_EQ(explorer.exitStatus(), QProcess::NormalExit) << option;
    EXPECT_EQ(explorer.exitCode(), 0) << option << ": " << explorer.readAllStandardError().toStdString();
    EXPECT_FALSE(explorer.readAllStandardOutput().isEmpty()) << option;
  }
  explorer.start(QStringLiteral(REMAT_EXPLORER_PATH), {QStringLiteral("--bogus")});
  ASSERT_TRUE(explorer.waitForFinished(60000));
  EXPECT_EQ(explorer.exitCode(), 2);
  EXPECT_TRUE(explorer.readAllStandardError().contains("bogus"));
}

// With a GPU module file there (here one of another ABI version), the action is shown without
// loading it; the click finds out, and says why in the message bar.
TEST(GpuAction, IsShownForAModuleFileAndCheckedOnlyWhenUsed) {
  ASSERT_EQ(setenv("REMAT_GPU_MODULE", REMAT_STALE_GPU_MODULE, 1), 0);
  {
    MainWindow window;
    EXPECT_TRUE(window.action(QStringLiteral("runGpu"))->isVisible());
    EXPECT_TRUE(testing::mappedFilesContaining({"libremat_gpu", "stale_gpu_module"}).empty());
    EXPECT_TRUE(testing::mappedCudaLibraries().empty());
    window.document()->resetChain(test::smallCnn(), QString());
    window.measuring()->measure(QStringLiteral("gpu"));
    ASSERT_TRUE(window.jobs()->waitForIdle(60000));
    EXPECT_FALSE(window.document()->measured().has_value());
    EXPECT_TRUE(window.messageBar()->isError());
    EXPECT_TRUE(window.messageBar()->text().contains(QStringLiteral("ABI version")))
        << window.messageBar()->text().toStdString();
  }
  unsetenv("REMAT_GPU_MODULE");
}

}  // namespace
}  // namespace remat::gui
