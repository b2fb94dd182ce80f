// Issue 25: the explorer is usable on a 1,024 x 700 screen: the window takes that size (its minimum
// is no wider), and every control of every tab lies inside the window, reachable.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QLineEdit>
#include <QScrollArea>
#include <QTabWidget>
#include <QTest>
#include <QToolBar>

#include "document/job_runner.hpp"
#include "gui_test_env.hpp"
#include "views/checkpoint_strip.hpp"
#include "window/file_controller.hpp"
#include "window/main_window.hpp"

namespace remat::gui {
namespace {

constexpr QSize kSmallScreen{1024, 700};

// The part of `widget` the user can see: clipped by every scroll area's viewport above it.
QRect visibleRectIn(const QWidget* widget, const QWidget* window) {
  QRect rect(widget->mapTo(window, QPoint(0, 0)), widget->size());
  for (const QWidget* w = widget->parentWidget(); w && w != window; w = w->parentWidget())
    if (const auto* area = qobject_cast<const QAbstractScrollArea*>(w))
      rect &= QRect(area->viewport()->mapTo(window, QPoint(0, 0)), area->viewport()->size());
  return rect;
}

// Every visible button, field and box of the shown tab lies inside the window: wholly, or (in a
// scroll area) with a part showing, so scrolling reaches the rest.
void expectControlsInside(const MainWindow& window, const QString& tab) {
  const QRect inside = window.rect();
  int controls = 0;
  for (QWidget* widget : window.findChildren<QWidget*>()) {
    if (!widget->isVisible() || widget->window() != &window) continue;
    const bool control = qobject_cast<QAbstractButton*>(widget) || qobject_cast<QAbstractSpinBox*>(widget) ||
                         qobject_cast<QComboBox*>(widget) || qobject_cast<QLineEdit*>(widget) ||
                         qobject_cast<CheckpointStrip*>(widget);
    if (!control || qobject_cast<QLineEdit*>(widget->parentWidget()) ||
        qobject_cast<QComboBox*>(widget->parentWidget()) || qobject_cast<QAbstractSpinBox*>(widget->parentWidget()))
      continue;  // the line edit inside a spin box or a combo box is its box's
    ++controls;
    const QRect rect(widget->mapTo(&window, QPoint(0, 0)), widget->size());
    const bool scrolled = visibleRectIn(widget, &window) != rect;
    const QString what = tab + QStringLiteral(": ") + widget->metaObject()->className() + QLatin1Char(' ') +
                         widget->objectName() + QLatin1Char(' ') + widget->toolTip().left(40);
    if (scrolled) {
      EXPECT_FALSE(visibleRectIn(widget, &window).isEmpty() && !inside.intersects(rect)) << what.toStdString();
    } else {
      EXPECT_TRUE(inside.contains(rect)) << what.toStdString() << " at " << rect.x() << "," << rect.y() << " "
                                         << rect.width() << "x" << rect.height();
    }
  }
  EXPECT_GT(controls, 5) << tab.toStdString();
}

TEST(SmallScreen, EveryControlIsInsideTheWindowAt1024x700) {
  MainWindow window;
  window.action(QStringLiteral("runGpu"))->setVisible(true);  // the widest toolbar this program has
  window.resize(kSmallScreen);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  ASSERT_TRUE(window.files()->loadZoo(QStringLiteral("vgg16"), ZooOptions{.batch = 2, .resolution = 32}).isOk());
  ASSERT_TRUE(window.jobs()->waitForIdle(60000));
  QCoreApplication::processEvents();
  EXPECT_LE(window.minimumSizeHint().width(), kSmallScreen.width());
  EXPECT_LE(window.minimumSizeHint().height(), kSmallScreen.height());
  EXPECT_EQ(window.size(), kSmallScreen);
  for (int tab = 0; tab < window.tabs()->count(); ++tab) {
    window.tabs()->setCurrentIndex(tab);
    ASSERT_TRUE(window.jobs()->waitForIdle(60000));
    QCoreApplication::processEvents();
    expectControlsInside(window, window.tabs()->tabText(tab));
  }
}

}  // namespace
}  // namespace remat::gui
