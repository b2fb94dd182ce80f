#include "window/controller.hpp"

#include "window/main_window.hpp"

namespace remat::gui {

WindowController::WindowController(MainWindow* window) : QObject(window), window_(window) {}

}  // namespace remat::gui
