#pragma once
// What the main window's controllers share: the window, whose document, jobs, views and status line
// they act on. A controller owns one group of the window's work (files, planning, measuring,
// exports) and the state that belongs to it; the window builds the widgets, the actions and the
// menus, and wires the actions to the controllers.
#include <QObject>

namespace remat::gui {

class MainWindow;

class WindowController : public QObject {
 public:
  explicit WindowController(MainWindow* window);

 protected:
  MainWindow* window_;
};

}  // namespace remat::gui
