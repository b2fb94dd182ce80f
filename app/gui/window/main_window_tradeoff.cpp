// MainWindow: the trade-off tab and the budget field, wired to the document and the planners.
#include <QLabel>

#include "common/units.hpp"
#include "document/document.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/tradeoff_view.hpp"
#include "window/main_window.hpp"

namespace remat::gui {

void MainWindow::connectTradeoff() {
  connect(tradeoffView_, &TradeoffView::applyRequested, this, [this](const Plan& plan, const QString& source) {
    if (!report(document_->applyPlan(plan, source), tr("Applied the front's plan %1").arg(source))) return;
    lastPlanned_ = LastPlanned{source, plan.checkpoints, 0.0};
  });
  connect(tradeoffView_, &TradeoffView::fitRequested, this, &MainWindow::fitCapacity);
  connect(tradeoffView_, &TradeoffView::statusMessage, this,
          [this](const QString& text) { statusText_->setText(text); });
  // The budget field: a size typed for budget:SIZE replans as soon as the typing pauses.
  connect(plannerPicker_, &PlannerPicker::sizeEdited, this, [this](const QString& name) {
    if (document_->hasChain()) runPlanner(name);
  });
}

void MainWindow::fitCapacity(std::uint64_t capacityBytes) {
  planView_->setCapacityBytes(capacityBytes);
  if (tradeoffView_->capacityBytes() != capacityBytes) tradeoffView_->setCapacityBytes(capacityBytes);
  if (!document_->hasChain()) return showError(tr("Open a chain or pick a zoo model first"));
  const std::uint64_t staticBytes = document_->chain().staticBytes();
  if (capacityBytes < staticBytes)
    return showError(tr("No plan fits in %1: static memory alone is %2 (input + parameters + parameter gradients)")
                         .arg(charts::formatBytes(capacityBytes), charts::formatBytes(staticBytes)));
  runPlanner(QStringLiteral("budget:%1").arg(capacityBytes - staticBytes));
}

}  // namespace remat::gui
