#pragma once
// The explorer's command line:
//   remat-explorer [--chain FILE [--batch B] [--dim NAME=V]... | --zoo NAME [--batch B] [--resolution R]
//                  [--sequence S] [--dtype T]] [--attention fused|math]
//                  [--optimizer NAME] [--foreach on|off] [--grads static|on-backward]
//                  [--planner NAME] [--timeline FILE] [--tab plan|compare] [--capacity GIB]
//                  [--size WxH] [--measure cpu|gpu] [--screenshot OUT.png]
//                  [--measure-update N]
// --measure starts "Measure on CPU / GPU" once the chain is planned (a screenshot waits for it);
// --screenshot renders the main window offscreen, writes the PNG and exits (docs and tests);
// --measure-update times the strip -> simulate -> chart update on an N-layer chain and exits.
#include <QSize>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/step_options.hpp"
#include "remat/model/zoo.hpp"

namespace remat::gui {

class MainWindow;

struct AppOptions {
  QString chainPath;
  QString zooName;
  ZooOptions zoo;           // its fusedAttention is --attention, for ONNX models too
  bool batchGiven = false;  // --batch: also the batch an ONNX model (--chain model.onnx) is imported at
  // --dim NAME=V: an ONNX model's symbolic dimensions (zoo.sequence is --sequence, for zoo models).
  std::vector<std::pair<std::string, std::int64_t>> dims;
  StepOptions step;  // --optimizer, --foreach, --grads (the command line's defaults)
  QString planner;
  QString timelinePath;
  QString tab = QStringLiteral("plan");
  double capacityGiB = 0.0;  // device capacity line on the chart (0: none)
  QString screenshotPath;
  QSize size{1480, 920};
  bool sizeGiven = false;  // --size was given (else a window keeps the last session's size)
  QString measureDevice;   // --measure: measure the plan on this device once it is planned
  int measureUpdateLayers = 0;
  QString printedText;  // --help / --version: print this and exit 0 (no window, no display needed)
};

// args includes the program name (QCoreApplication::arguments()). Errors say which option is wrong.
// Needs a QCoreApplication (a QApplication is not needed: main parses before it opens a display).
Result<AppOptions> parseAppOptions(const QStringList& args);

// Loads what the options ask for into the window, runs the planner (waiting for it) and, for
// --screenshot, renders and writes the image. Returns the process exit code (0, 2 bad input, 1).
Status applyAppOptions(MainWindow& window, const AppOptions& options);
// Waits up to waitMs for running jobs (a --measure run) before it renders.
Status writeScreenshot(MainWindow& window, const QString& path, int waitMs = 60000);

// Mean seconds of one checkpoint toggle on an abstract CNN-like chain of n layers, over `toggles`
// toggles: the simulation alone, the edit with every view's update (document, simulate, strip,
// summary, chart data), and the repaint that follows; wall time, and the process' CPU time of the
// last two (what a loaded machine does not inflate). For the docs note on update speed.
struct UpdateTiming {
  double simulateSeconds = 0.0;
  double editSeconds = 0.0;
  double paintSeconds = 0.0;
  double editCpuSeconds = 0.0;
  double paintCpuSeconds = 0.0;
};
UpdateTiming measureUpdateSeconds(int layers, int toggles);

}  // namespace remat::gui
