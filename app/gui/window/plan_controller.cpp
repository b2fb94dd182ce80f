#include "window/plan_controller.hpp"

#include <QTabWidget>

#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_jobs.hpp"
#include "remat/base/duration.hpp"
#include "remat/usecases/planning.hpp"
#include "views/compare_view.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/tradeoff_view.hpp"
#include "window/main_window.hpp"

namespace remat::gui {

PlanController::PlanController(MainWindow* window) : WindowController(window) {}

void PlanController::connectViews() {
  connect(window_->compareView(), &CompareView::applyRequested, this, [this](const SimulatedPlan& planned) {
    const PlanReport& r = planned.report;
    const QString planner = QString::fromStdString(r.planner);
    Document* document = window_->document();
    PlanResults results = planResultsOf(SimulatedPlan(planned), document->chainRevision());
    if (!window_->report(document->applyPlan(r.plan, planner, std::move(results)),
                         tr("Applied the %1 plan").arg(planner)))
      return;
    lastPlanned_ = LastPlanned{planner, r.plan.checkpoints, r.planSeconds};
    window_->tabs()->setCurrentIndex(0);
  });
  TradeoffView* tradeoff = window_->tradeoffView();
  connect(tradeoff, &TradeoffView::applyRequested, this, [this](const Plan& plan, const QString& source) {
    applyPlan(plan, source, 0.0, tr("Applied the front's plan %1").arg(source));
  });
  connect(tradeoff, &TradeoffView::fitRequested, this, &PlanController::fitCapacity);
  connect(tradeoff, &TradeoffView::statusMessage, window_, &MainWindow::setStatusText);
  // The budget field: a size typed for budget:SIZE replans as soon as the typing pauses.
  connect(window_->plannerPicker(), &PlannerPicker::sizeEdited, this, [this](const QString& name) {
    if (window_->document()->hasChain()) runPlanner(name);
  });
}

void PlanController::runPlanner(const QString& name) { startPlanJob(name, Apply::Undoable); }

void PlanController::planOpenedChain() { startPlanJob(window_->plannerPicker()->plannerName(), Apply::Opening); }

void PlanController::applyPlan(const Plan& plan, const QString& planner, double planSeconds, const QString& success) {
  if (!window_->report(window_->document()->applyPlan(plan, planner), success)) return;
  lastPlanned_ = LastPlanned{planner, plan.checkpoints, planSeconds};
}

void PlanController::startPlanJob(const QString& name, Apply apply, const QString& failureContext) {
  Document* document = window_->document();
  if (!document->hasChain()) return window_->showError(tr("Open a chain or pick a zoo model first"));
  const Chain chain = document->chain();
  const std::uint64_t revision = document->chainRevision();
  const std::string planner = name.toStdString();
  window_->jobs()->start<Result<SimulatedPlan>>(
      JobChannel::Plan, tr("Planning with %1").arg(name),
      [chain, planner](const JobRunner::Control& control) {
        control.progress(-1.0);
        const QString text = QStringLiteral("Planning with %1").arg(QString::fromStdString(planner));
        return planAndSimulate(chain, planner, control.cancelFlag(),
                               [&control, &text](double fraction) { control.progress(fraction, text); });
      },
      [this, name, apply, revision, failureContext](Result<SimulatedPlan> planned) {
        if (!planned)
          return (void)window_->report(
              failureContext.isEmpty() ? planned.status() : planned.status().withContext(failureContext.toStdString()));
        const PlanReport r = planned->report;
        Document* document = window_->document();
        PlanResults results = planResultsOf(std::move(planned).value(), revision);
        const Status applied = apply == Apply::Opening ? document->setOpeningPlan(r.plan, name, std::move(results))
                                                       : document->applyPlan(r.plan, name, std::move(results));
        if (!window_->report(applied)) return;
        lastPlanned_ = LastPlanned{name, r.plan.checkpoints, r.planSeconds};
        window_->setStatusText(tr("Showing the %1 plan: %2 checkpoints, peak %3, planned in %4")
                                   .arg(ui::readablePlannerName(name))
                                   .arg(r.plan.checkpoints.size())
                                   .arg(ui::formatBytes(r.peakBytes()))
                                   .arg(QString::fromStdString(formatDuration(r.planSeconds))));
      });
}

void PlanController::fitCapacity(std::uint64_t capacityBytes) {
  window_->planView()->setCapacityBytes(capacityBytes);
  if (window_->tradeoffView()->capacityBytes() != capacityBytes)
    window_->tradeoffView()->setCapacityBytes(capacityBytes);
  const Document* document = window_->document();
  if (!document->hasChain()) return window_->showError(tr("Open a chain or pick a zoo model first"));
  Result<CapacityBudget> budget = budgetForCapacity(document->chain(), capacityBytes);
  if (!budget) return window_->showError(QString::fromStdString(budget.status().message()));
  // The budget planner bounds the dynamic peak E; say how the total the user typed became that.
  const QString context = tr("Fit in %1 total (static %2 leaves %3 for the dynamic peak E)")
                              .arg(ui::formatBytes(capacityBytes), ui::formatBytes(document->chain().staticBytes()),
                                   ui::formatBytes(budget->budgetBytes));
  startPlanJob(QString::fromStdString(budget->planner), Apply::Undoable, context);
}

double PlanController::planSecondsForCurrentPlan() const {
  const Document* document = window_->document();
  if (lastPlanned_ && lastPlanned_->planner == document->planner() &&
      lastPlanned_->checkpoints == document->plan().checkpoints)
    return lastPlanned_->planSeconds;
  return 0.0;
}

}  // namespace remat::gui
