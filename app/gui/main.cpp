// remat-explorer: the Qt desktop explorer. See app_options.hpp for the command line.
#include <QApplication>
#include <QIcon>
#include <cstdio>

#include "app_options.hpp"
#include "main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("RematExplorer"));
  QApplication::setApplicationName(QStringLiteral("remat-explorer"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/app.svg")));

  remat::Result<remat::gui::AppOptions> options = remat::gui::parseAppOptions(QApplication::arguments());
  if (!options) {
    std::fprintf(stderr, "remat-explorer: %s\n", options.status().message().c_str());
    return 2;
  }
  if (options->measureUpdateLayers > 0) {
    const remat::gui::UpdateTiming t = remat::gui::measureUpdateSeconds(options->measureUpdateLayers, 200);
    std::printf("checkpoint toggle, %d layers: simulate %.3f ms; edit and view updates %.3f ms; repaint %.3f ms\n",
                options->measureUpdateLayers, t.simulateSeconds * 1e3, t.editSeconds * 1e3, t.paintSeconds * 1e3);
    return 0;
  }
  remat::gui::MainWindow window;
  window.resize(options->size);
  if (!options->screenshotPath.isEmpty()) {
    window.setAttribute(Qt::WA_DontShowOnScreen, true);
    window.show();
  } else {
    window.show();
  }
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
