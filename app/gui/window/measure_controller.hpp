#pragma once
// The main window's measurements: Measure on CPU / GPU runs the plan shown in the background
// (document/run_support.hpp, the use case of usecases/measuring.hpp) and overlays what it measured;
// the device's workspaces it fitted become one undoable chain edit.
#include <QString>

#include "window/controller.hpp"

namespace remat::gui {

struct Measurement;
struct MeasuredOrigin;

class MeasureController : public WindowController {
 public:
  explicit MeasureController(MainWindow* window);

  void measure(const QString& device);  // background; the result overlays the prediction
  void showMeasurement(const QString& device, const MeasuredOrigin& origin, Measurement measured);
};

}  // namespace remat::gui
