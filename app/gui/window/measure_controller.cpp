#include "window/measure_controller.hpp"

#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/run_support.hpp"
#include "remat/devices/devices.hpp"
#include "window/main_window.hpp"

namespace remat::gui {

MeasureController::MeasureController(MainWindow* window) : WindowController(window) {}

void MeasureController::measure(const QString& device) {
  const Document* document = window_->document();
  if (!document->hasChain()) return window_->showError(tr("Open a chain or pick a zoo model first"));
  if (!measureDevices().contains(device)) {
    const Status missing = deviceInstalled(device.toStdString());
    return window_->showError(
        tr("This program cannot run on '%1': %2")
            .arg(device, QString::fromStdString(missing.isOk() ? "unknown device" : missing.message())));
  }
  RunRequest request{document->chain(), document->plan(), document->planner().toStdString(), device.toStdString(), 1};
  // The result belongs to this plan and chain, whatever is shown when it arrives.
  const MeasuredOrigin origin = document->currentOrigin();
  window_->jobs()->start<Result<Measurement>>(
      JobChannel::Run, tr("Measuring on %1").arg(device),
      [request](const JobRunner::Control& control) {
        return measurePlan(request, control.cancelFlag(),
                           [&control](double fraction, const QString& text) { control.progress(fraction, text); });
      },
      [this, device, origin](Result<Measurement> measured) {
        if (!measured) return (void)window_->report(measured.status());
        showMeasurement(device, origin, std::move(measured).value());
      });
}

void MeasureController::showMeasurement(const QString& device, const MeasuredOrigin& origin, Measurement measured) {
  Document* document = window_->document();
  const std::uint64_t measuredPeak = measured.timeline.dynamicPeakBytes();
  QString message =
      tr("Measured on %1: dynamic peak %2 (predicted %3)")
          .arg(device, ui::formatBytes(measuredPeak), ui::formatBytes(measured.predictedDynamicPeakBytes));
  const bool unchanged =
      origin.plan && *origin.plan == document->plan() && origin.chainRevision == document->chainRevision();
  // The prediction the run was measured against counts the device's workspaces: write them into
  // the chain (one undoable edit), unless the chain or plan changed while it ran.
  const std::size_t fitted = measured.fittedLayers.size();
  const QString layers = fitted == 1 ? tr("1 layer") : tr("%1 layers").arg(fitted);
  if (unchanged && fitted > 0) {
    if (!window_->report(
            document->editChain(measured.chain.spec, tr("%1 workspaces for %2").arg(device.toUpper(), layers))))
      return;
    document->setMeasured(std::move(measured.timeline));
    message += tr("; the %1 kernels' scratch is now in the forward and backward workspaces of %2 (undo to remove it)")
                   .arg(device, layers);
  } else {
    document->setMeasured(std::move(measured.timeline), origin);
  }
  if (!document->measuredIsCurrent()) message += tr("; the plan changed while it ran, so it is shown grey as stale");
  window_->showInfo(message);
}

}  // namespace remat::gui
