#include "views/compare_view.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "charts/memory_chart.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_insight.hpp"
#include "views/compare_model.hpp"
#include "views/planner_picker.hpp"

namespace remat::gui {

CompareView::CompareView(Document* document, JobRunner* jobs, QWidget* parent)
    : QWidget(parent), document_(document), jobs_(jobs), model_(new CompareTableModel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addLayout(buildPickers());
  layout->addWidget(buildTable());
  layout->addWidget(buildPanes(), 1);
  for (PlannerPicker* picker : pickers_)
    connect(picker, &PlannerPicker::plannerChanged, this, [this]() {
      stale_ = true;
      // The table never names a planner the pickers no longer show: a shown tab recomputes now.
      if (isVisible() && document_->hasChain()) compare();
    });
  // A comparison belongs to the chain it was made on: a new chain drops it (and a running job's
  // answer) and reruns when the tab is shown.
  connect(document_, &Document::chainChanged, this, [this]() {
    stale_ = true;
    jobs_->cancel(JobChannel::Compare);
    model_->clear();
    resetZoom_->setEnabled(false);
    for (std::size_t side = 0; side < 2; ++side) {
      charts_[side]->setZoom(std::nullopt);
      charts_[side]->setData({});
      titles_[side]->clear();
      apply_[side]->setEnabled(false);
    }
    status_->clear();
    if (isVisible()) compare();
  });
  // One zoom for both sides: the same stretch of the step, side by side.
  for (std::size_t side = 0; side < 2; ++side) {
    charts::MemoryChart* other = charts_[1 - side];
    connect(charts_[side], &charts::MemoryChart::zoomChanged, this, [this, other](std::optional<charts::XRange> range) {
      other->setZoom(range);
      resetZoom_->setEnabled(range.has_value());
    });
  }
  connect(resetZoom_, &QPushButton::clicked, charts_[0], &charts::MemoryChart::resetZoom);
}

// The two pickers, the compare button and the status line.
QHBoxLayout* CompareView::buildPickers() {
  auto* top = new QHBoxLayout();
  for (std::size_t side = 0; side < 2; ++side) {
    pickers_[side] = new PlannerPicker(this);
    top->addWidget(new QLabel(side == 0 ? tr("Left:") : tr("Right:"), this));
    top->addWidget(pickers_[side]);
    top->addSpacing(12);
  }
  pickers_[0]->setPlannerName(QStringLiteral("dp"));
  pickers_[1]->setPlannerName(QStringLiteral("linear"));
  auto* run = new QPushButton(QIcon(QStringLiteral(":/icons/compare.svg")), tr("Compare"), this);
  run->setToolTip(tr("Plan with both planners and compare (runs in the background)"));
  connect(run, &QPushButton::clicked, this, &CompareView::compare);
  top->addWidget(run);
  resetZoom_ = new QPushButton(tr("Reset zoom"), this);
  resetZoom_->setObjectName(QStringLiteral("compareResetZoom"));
  resetZoom_->setToolTip(charts::MemoryChart::zoomHelp() + tr(" (both charts follow)"));
  resetZoom_->setEnabled(false);
  top->addWidget(resetZoom_);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("compareStatus"));
  top->addWidget(status_, 1);
  return top;
}

// The numbers of both plans, two rows high.
QTableView* CompareView::buildTable() {
  table_ = new QTableView(this);
  table_->setModel(model_);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 10);
  table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setFixedHeight(table_->horizontalHeader()->sizeHint().height() +
                         2 * table_->verticalHeader()->defaultSectionSize() + 2 * table_->frameWidth() + 2);
  return table_;
}

// A pane per side: its title, its apply button and its chart.
QSplitter* CompareView::buildPanes() {
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  for (std::size_t side = 0; side < 2; ++side) {
    auto* pane = new QWidget(splitter);
    auto* box = new QVBoxLayout(pane);
    box->setContentsMargins(0, 0, 0, 0);
    auto* header = new QHBoxLayout();
    titles_[side] = new QLabel(pane);
    apply_[side] = new QPushButton(tr("Apply"), pane);
    apply_[side]->setToolTip(tr("Copy this plan into the editor (undoable)"));
    apply_[side]->setEnabled(false);
    header->addWidget(titles_[side], 1);
    header->addWidget(apply_[side]);
    box->addLayout(header);
    charts_[side] = new charts::MemoryChart(pane);
    box->addWidget(charts_[side], 1);
    splitter->addWidget(pane);
    connect(apply_[side], &QPushButton::clicked, this, [this, side]() {
      const auto& entry = model_->entries()[side];
      if (entry.planned) emit applyRequested(*entry.planned);
    });
  }
  return splitter;
}

QString CompareView::statusText() const { return status_->text(); }

void CompareView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_ && document_->hasChain() && !jobs_->isRunning(JobChannel::Compare)) compare();
}

void CompareView::compare() {
  if (!document_->hasChain()) {
    status_->setText(tr("No chain loaded"));
    return;
  }
  stale_ = false;
  const Chain chain = document_->chain();
  const std::array<std::string, 2> names = {pickers_[0]->plannerName().toStdString(),
                                            pickers_[1]->plannerName().toStdString()};
  status_->setText(tr("Planning %1 and %2...").arg(QString::fromStdString(names[0]), QString::fromStdString(names[1])));
  using Entries = std::array<CompareTableModel::Entry, 2>;
  jobs_->start<Entries>(
      JobChannel::Compare,
      tr("Comparing %1 and %2").arg(QString::fromStdString(names[0]), QString::fromStdString(names[1])),
      [chain, names](const JobRunner::Control& control) {
        Entries entries;
        for (std::size_t side = 0; side < 2; ++side) {
          control.progress(0.5 * static_cast<double>(side), QString::fromStdString("planning " + names[side]));
          entries[side].planner = QString::fromStdString(names[side]);
          const QString text = QString::fromStdString("planning " + names[side]);
          Result<SimulatedPlan> planned =
              planAndSimulate(chain, names[side], control.cancelFlag(), [&control, &text, side](double fraction) {
                control.progress(0.5 * (static_cast<double>(side) + fraction), text);
              });
          if (planned) {
            entries[side].planned = std::move(planned).value();
          } else {
            entries[side].error = QString::fromStdString(planned.status().message());
          }
        }
        control.progress(1.0);
        return entries;
      },
      [this](Entries entries) {
        model_->setEntries(std::move(entries));
        showResults();
      });
}

void CompareView::showResults() {
  const Chain& chain = document_->chain();
  charts::ChartRanges shared;
  QStringList errors;
  for (std::size_t side = 0; side < 2; ++side) {
    const CompareTableModel::Entry& entry = model_->entries()[side];
    apply_[side]->setEnabled(entry.planned.has_value());
    if (!entry.planned) {
      titles_[side]->setText(tr("<b>%1</b>: %2").arg(entry.planner.toHtmlEscaped(), entry.error.toHtmlEscaped()));
      charts_[side]->setData({});
      errors << entry.planner + QStringLiteral(": ") + entry.error;
      continue;
    }
    const Simulation& sim = entry.planned->simulation;
    const QString title = tr("%1: peak %2, %3 checkpoints")
                              .arg(entry.planner, ui::formatBytes(sim.peakBytes()))
                              .arg(sim.plan.checkpoints.size());
    titles_[side]->setText(QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()));
    charts_[side]->setData(chartData(chain, sim, entry.planned->liveness, std::nullopt, title));
    shared.xMax = std::max(shared.xMax, charts_[side]->naturalRanges().xMax);
    shared.yMaxBytes = std::max(shared.yMaxBytes, charts_[side]->naturalRanges().yMaxBytes);
  }
  // Same axes on both sides, so the eye compares heights and lengths directly.
  for (charts::MemoryChart* chart : charts_) chart->setSharedRanges(shared);
  status_->setText(errors.isEmpty() ? tr("Compared on %1").arg(QString::fromStdString(chain.name))
                                    : errors.join(QStringLiteral("; ")));
  if (!errors.isEmpty()) emit statusMessage(errors.join(QStringLiteral("; ")));
}

}  // namespace remat::gui
