// remat-explorer: the Qt desktop explorer. See app_options.hpp for the command line.
#include <QApplication>
#include <QIcon>
#include <QScreen>
#include <cstdio>

#include "window/about.hpp"
#include "window/app_options.hpp"
#include "window/main_window.hpp"

namespace {

void setIdentity() {
  QCoreApplication::setOrganizationName(QStringLiteral("RematExplorer"));
  QCoreApplication::setApplicationName(QStringLiteral("remat-explorer"));
  QCoreApplication::setApplicationVersion(remat::gui::explorerVersion());
}

// The command line is read before a QApplication connects to a display, so --help, --version and
// a wrong option print their answer on a machine without one.
remat::Result<remat::gui::AppOptions> readCommandLine(int& argc, char** argv) {
  QCoreApplication core(argc, argv);
  setIdentity();
  return remat::gui::parseAppOptions(QCoreApplication::arguments());
}

}  // namespace

int main(int argc, char** argv) {
  remat::Result<remat::gui::AppOptions> options = readCommandLine(argc, argv);
  if (!options) {
    std::fprintf(stderr, "remat-explorer: %s\n", options.status().message().c_str());
    return 2;
  }
  if (!options->printedText.isEmpty()) {
    std::fputs(options->printedText.toLocal8Bit().constData(), stdout);
    return 0;
  }
  QApplication app(argc, argv);
  setIdentity();
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/app.svg")));

  if (options->measureUpdateLayers > 0) {
    const remat::gui::UpdateTiming t = remat::gui::measureUpdateSeconds(options->measureUpdateLayers, 200);
    std::printf(
        "checkpoint toggle, %d layers: simulate %.3f ms; edit and view updates %.3f ms; repaint %.3f ms; "
        "whole toggle %.3f ms (CPU: edit %.3f ms, repaint %.3f ms)\n",
        options->measureUpdateLayers, t.simulateSeconds * 1e3, t.editSeconds * 1e3, t.paintSeconds * 1e3,
        (t.editSeconds + t.paintSeconds) * 1e3, t.editCpuSeconds * 1e3, t.paintCpuSeconds * 1e3);
    return 0;
  }
  remat::gui::MainWindow window;
  if (!options->screenshotPath.isEmpty()) {
    window.resize(options->size);
    window.setAttribute(Qt::WA_DontShowOnScreen, true);
  } else if (options->sizeGiven || !window.geometryRestored()) {
    // The last session's size wins unless --size says otherwise; never larger than the screen.
    const QScreen* screen = window.screen();
    window.resize(screen ? options->size.boundedTo(screen->availableSize()) : options->size);
  }
  window.show();
  const remat::Status loaded = remat::gui::applyAppOptions(window, *options);
  if (!options->screenshotPath.isEmpty()) {
    if (!loaded) {
      std::fprintf(stderr, "remat-explorer: %s\n", loaded.message().c_str());
      return loaded.code() == remat::ErrorCode::Internal ? 1 : 2;
    }
    // A --measure run may take minutes (VGG-16 at batch 64 on a CPU): wait for it up to an hour.
    const int waitMs = options->measureDevice.isEmpty() ? 60000 : 3600 * 1000;
    const remat::Status written = remat::gui::writeScreenshot(window, options->screenshotPath, waitMs);
    if (!written) {
      std::fprintf(stderr, "remat-explorer: %s\n", written.message().c_str());
      return 2;
    }
    return 0;
  }
  // Interactively, a bad --chain or --zoo is shown in the window (message bar), not fatal.
  return QApplication::exec();
}
