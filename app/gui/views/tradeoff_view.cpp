#include "views/tradeoff_view.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <chrono>

#include "charts/tradeoff_chart.hpp"
#include "common/palette.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_insight.hpp"
#include "remat/model/costs.hpp"
#include "remat/planners/registry.hpp"

namespace remat::gui {
namespace {

// The job: the front, then each default planner's plan to place on it.
Result<TradeoffResult> computeTradeoff(const Chain& chain, const JobRunner::Control& control) {
  PlannerOptions options;
  options.cancelFlag = control.cancelFlag();
  options.progress = [&control](double fraction) {
    control.progress(fraction, QObject::tr("Trade-off: the Pareto front, %1% done").arg(100.0 * fraction, 0, 'f', 0));
  };
  const auto start = std::chrono::steady_clock::now();
  auto front = paretoFront(chain, options);
  if (!front) return front.status();
  TradeoffResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.front = std::move(front).value();
  options.progress = nullptr;
  for (const std::string& name : defaultComparePlanners(chain.size())) {
    auto report = runPlanner(chain, name, options);
    if (!report) return report.status().withContext("planner " + name);
    result.planners.push_back(std::move(report).value());
  }
  return result;
}

QString checkpointsText(const Plan& plan) {
  if (plan.checkpoints.empty()) return QObject::tr("no checkpoints (store all)");
  QString list = QString::fromStdString(formatCheckpointList(plan));
  if (list.size() > 80) list = list.left(list.lastIndexOf(QLatin1Char(','), 80)) + QStringLiteral(",...");
  return QObject::tr("%1 checkpoints: %2").arg(plan.checkpoints.size()).arg(list);
}

// "peak 3.36 GiB (E 2.30 GiB), recompute 130.4 GFLOP (6.6%)".
QString numbersText(const Chain& chain, std::uint64_t dynamicPeakBytes, double cost) {
  return QObject::tr("peak %1 (E %2), recompute %3")
      .arg(ui::formatBytes(chain.staticBytes() + dynamicPeakBytes), ui::formatBytes(dynamicPeakBytes),
           recomputeCostWithShare(chain, cost));
}

QString placementText(const Chain& chain, const FrontPlacement& placement) {
  if (placement.onFront) return QObject::tr("on the front (point %1)").arg(placement.samePeakPoint + 1);
  QStringList parts;
  if (placement.extraRecomputeCost > 0.0)
    parts << QObject::tr("point %1 peaks no higher for %2 less")
                 .arg(placement.samePeakPoint + 1)
                 .arg(recomputeCostText(chain, placement.extraRecomputeCost));
  if (placement.extraPeakBytes > 0)
    parts << QObject::tr("point %1 costs no more with %2 less peak")
                 .arg(placement.sameCostPoint + 1)
                 .arg(ui::formatBytes(placement.extraPeakBytes));
  return QObject::tr("dominated: %1").arg(parts.join(QStringLiteral("; ")));
}

// The chart's marks for a result on chain.
charts::TradeoffChartData chartData(const Chain& chain, const TradeoffResult& result) {
  charts::TradeoffChartData data;
  const double staticBytes = static_cast<double>(chain.staticBytes());
  const auto& points = result.front.points;
  for (std::size_t i = 0; i < points.size(); ++i)
    data.front.push_back({staticBytes + static_cast<double>(points[i].dynamicPeakBytes), points[i].recomputeCost,
                          QObject::tr("front point %1 of %2: %3\n%4\nclick to apply this plan")
                              .arg(i + 1)
                              .arg(points.size())
                              .arg(numbersText(chain, points[i].dynamicPeakBytes, points[i].recomputeCost),
                                   checkpointsText(points[i].plan))});
  const double tolerance = recomputeCostTolerance(chain);
  for (const PlanReport& r : result.planners) {
    const FrontPlacement placement = placeAgainstFront(result.front, r.dynamicPeakBytes, r.recomputeCost, tolerance);
    data.planners.push_back(
        {staticBytes + static_cast<double>(r.dynamicPeakBytes), r.recomputeCost,
         QObject::tr("%1\n%2\n%3")
             .arg(QString::fromStdString(r.planner), numbersText(chain, r.dynamicPeakBytes, r.recomputeCost),
                  placementText(chain, placement))});
  }
  data.costTitle =
      QObject::tr("recompute (%1)").arg(QString::fromStdString(std::string(costUnitSymbol(chainCostUnit(chain)))));
  return data;
}

}  // namespace

TradeoffView::TradeoffView(Document* document, JobRunner* jobs, QWidget* parent)
    : QWidget(parent), document_(document), jobs_(jobs) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(buildControls());
  chart_ = new charts::TradeoffChart(this);
  layout->addWidget(chart_, 1);
  connectChart();
  // A front belongs to the chain it was computed on: a new or edited chain drops it (and a running
  // job's answer) and recomputes when the tab is shown.
  connect(document_, &Document::chainChanged, this, [this]() {
    stale_ = true;
    jobs_->cancel(JobChannel::Tradeoff);
    result_.reset();
    chart_->setData({});
    status_->clear();
    updateFit();
    if (isVisible()) compute();
  });
  connect(document_, &Document::simulationChanged, this, &TradeoffView::updateCurrent);
  // A cancelled computation (Esc) leaves the front to compute again.
  connect(jobs_, &JobRunner::finished, this, [this](JobChannel channel, bool delivered) {
    if (channel != JobChannel::Tradeoff || delivered || jobs_->isRunning(channel)) return;
    stale_ = true;
    status_->setText(tr("The front was not computed (cancelled): press Compute, or come back to this tab"));
  });
}

// The status line above the controls: Compute, the capacity field and what fits in it.
QWidget* TradeoffView::buildControls() {
  auto* box = new QWidget(this);
  auto* lines = new QVBoxLayout(box);
  lines->setContentsMargins(0, 0, 0, 0);
  status_ = new QLabel(box);
  status_->setObjectName(QStringLiteral("tradeoffStatus"));
  status_->setWordWrap(true);
  lines->addWidget(status_);
  auto* row = new QHBoxLayout();
  lines->addLayout(row);
  auto* run = new QPushButton(tr("Compute"), box);
  run->setObjectName(QStringLiteral("tradeoffCompute"));
  run->setToolTip(tr("Compute the exact front of peak against recompute (in the background; Esc cancels)"));
  connect(run, &QPushButton::clicked, this, &TradeoffView::compute);
  capacity_ = new QLineEdit(box);
  capacity_->setObjectName(QStringLiteral("tradeoffCapacity"));
  capacity_->setPlaceholderText(tr("e.g. 40 GiB"));
  capacity_->setMaximumWidth(140);
  capacity_->setToolTip(
      tr("Device capacity, static memory included: the cheapest plan on the front that fits is "
         "applied (you can also drag the capacity line)"));
  connect(capacity_, &QLineEdit::returnPressed, this, &TradeoffView::readCapacityField);
  fit_ = new QLabel(box);
  fit_->setObjectName(QStringLiteral("tradeoffFit"));
  row->addWidget(run);
  row->addSpacing(12);
  row->addWidget(new QLabel(tr("Fit in:"), box));
  row->addWidget(capacity_);
  row->addWidget(fit_, 1);
  return box;
}

void TradeoffView::connectChart() {
  connect(chart_, &charts::TradeoffChart::pointClicked, this, [this](std::size_t index) {
    if (!result_ || index >= result_->front.points.size()) return;
    const FrontPoint& point = result_->front.points[index];
    emit applyRequested(point.plan, QString::fromStdString(budgetPlannerName(point.dynamicPeakBytes)));
  });
  connect(chart_, &charts::TradeoffChart::capacityDragged, this, [this](std::uint64_t bytes) {
    capacityBytes_ = bytes;
    capacity_->setText(ui::formatBytes(bytes));
    updateFit();
  });
  connect(chart_, &charts::TradeoffChart::capacityDropped, this, [this](std::uint64_t bytes) {
    setCapacityBytes(bytes);
    emit fitRequested(bytes);
  });
}

QString TradeoffView::statusText() const { return status_->text(); }
QString TradeoffView::fitText() const { return fit_->text(); }

void TradeoffView::readCapacityField() {
  const std::optional<std::uint64_t> bytes = ui::parseBytes(capacity_->text());
  if (!bytes || *bytes == 0) {
    capacity_->setStyleSheet(QStringLiteral("color: %1;").arg(ui::paletteName(ui::PaletteRole::ErrorText)));
    emit statusMessage(tr("'%1' is not a capacity: write a byte size such as 40 GiB").arg(capacity_->text()));
    return;
  }
  capacity_->setStyleSheet(QString());
  setCapacityBytes(*bytes);
  emit fitRequested(*bytes);
}

void TradeoffView::setCapacityBytes(std::uint64_t bytes) {
  capacityBytes_ = bytes;
  capacity_->setText(bytes > 0 ? ui::formatBytes(bytes) : QString());
  chart_->setCapacityBytes(bytes);
  updateFit();
}

std::optional<std::size_t> TradeoffView::pointWithin(std::uint64_t capacityBytes) const {
  if (!result_ || !document_->hasChain()) return std::nullopt;
  const std::uint64_t staticBytes = document_->chain().staticBytes();
  if (capacityBytes < staticBytes) return std::nullopt;
  const FrontPoint* point = cheapestWithin(result_->front, capacityBytes - staticBytes);
  if (!point) return std::nullopt;
  return static_cast<std::size_t>(point - result_->front.points.data());
}

void TradeoffView::updateFit() {
  const std::optional<std::size_t> index = capacityBytes_ > 0 ? pointWithin(capacityBytes_) : std::nullopt;
  chart_->setHighlighted(index);
  if (capacityBytes_ == 0 || !result_) {
    fit_->clear();
  } else if (!index) {
    fit_->setText(tr("nothing fits"));
  } else {
    const FrontPoint& point = result_->front.points[*index];
    fit_->setText(tr("fits: point %1, %2")
                      .arg(*index + 1)
                      .arg(numbersText(document_->chain(), point.dynamicPeakBytes, point.recomputeCost)));
  }
}

void TradeoffView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_ && !jobs_->isRunning(JobChannel::Tradeoff)) compute();
}

void TradeoffView::compute() {
  if (!document_->hasChain()) return;
  stale_ = false;
  const Chain chain = document_->chain();
  status_->setText(tr("Computing the Pareto front of %1...").arg(QString::fromStdString(chain.name)));
  jobs_->start<Result<TradeoffResult>>(
      JobChannel::Tradeoff, tr("Trade-off of %1").arg(QString::fromStdString(chain.name)),
      [chain](const JobRunner::Control& control) { return computeTradeoff(chain, control); },
      [this](Result<TradeoffResult> computed) {
        if (!computed) {
          stale_ = true;
          status_->setText(QString::fromStdString(computed.status().message()));
          emit statusMessage(status_->text());
          return;
        }
        result_ = std::move(computed).value();
        showResult();
      });
}

void TradeoffView::showResult() {
  const Chain& chain = document_->chain();
  chart_->setData(chartData(chain, *result_));
  status_->setText(tr("%1 plans on the front of %2 (exact, %3 ms; %4). Click a point to apply its plan.")
                       .arg(result_->front.points.size())
                       .arg(QString::fromStdString(chain.name))
                       .arg(result_->seconds * 1e3, 0, 'f', 1)
                       .arg(recomputeUnitDescription(chain)));
  updateCurrent();
  updateFit();
}

void TradeoffView::updateCurrent() {
  if (!result_ || !document_->hasChain()) return;
  charts::TradeoffChartData data = chart_->data();
  const Simulation& sim = document_->simulation();
  data.current =
      charts::TradeoffMark{static_cast<double>(sim.peakBytes()), sim.recomputeCost,
                           tr("current plan (%1)\n%2")
                               .arg(ui::readablePlannerName(document_->planner()),
                                    numbersText(document_->chain(), sim.dynamicPeakBytes, sim.recomputeCost))};
  chart_->setData(std::move(data));
}

}  // namespace remat::gui
