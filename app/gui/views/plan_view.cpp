#include "views/plan_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

#include "charts/memory_chart.hpp"
#include "common/palette.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/plan_insight.hpp"
#include "remat/memory/op_times.hpp"
#include "remat/model/precision.hpp"
#include "views/checkpoint_strip.hpp"
#include "views/flow_layout.hpp"

namespace remat::gui {
namespace {

using ui::PaletteRole;

QString swatch(PaletteRole role, const QString& text) {
  return QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2").arg(ui::paletteName(role), text);
}

// A label and its field, kept together on one row of a wrapping layout.
QWidget* labelled(const QString& text, QWidget* field) {
  auto* group = new QWidget(field->parentWidget());
  auto* row = new QHBoxLayout(group);
  row->setContentsMargins(0, 0, 0, 0);
  row->setSpacing(4);
  auto* label = new QLabel(text, group);
  label->setBuddy(field);
  row->addWidget(label);
  row->addWidget(field);
  return group;
}

}  // namespace

PlanView::PlanView(Document* document, QWidget* parent) : QWidget(parent), document_(document) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->setSpacing(6);
  layout->addLayout(buildCards());
  layout->addWidget(buildLegend());
  strip_ = new CheckpointStrip(this);
  layout->addWidget(strip_);
  chart_ = new charts::MemoryChart(this);
  layout->addWidget(chart_, 1);
  layout->addLayout(buildChartOptions());
  connectControls();
  refreshChain();
  refreshPlan();
}

QLayout* PlanView::buildCards() {
  auto* cards = new FlowLayout();
  cards->setSpacing(6);
  addCard(cards, "peak", tr("Peak memory"), tr("Static memory plus the dynamic peak E: what the device must hold"));
  addCard(cards, "dynamic", tr("Dynamic peak E"),
          tr("The largest footprint of any op of the step (the memory model's truth)"));
  addCard(cards, "static", tr("Static"), tr("Input batch, parameters and parameter gradients: alive the whole step"));
  addCard(cards, "A", tr("Objective A"), tr("The paper's first estimate: every checkpoint alive at the peak"));
  addCard(cards, "R", tr("Objective R"), tr("The revised estimate: only the checkpoints up to a segment's start"));
  addCard(cards, "recompute", tr("Recompute"), tr("Forward cost of the recomputed ops, against one forward pass"));
  addCard(cards, "checkpoints", tr("Checkpoints"), tr("How many layers' outputs are kept"));
  addCard(cards, "plan", tr("Plan"), tr("Where the plan came from: a planner, or your edits"));
  return cards;
}

// The strip's legend, in the strip's colours.
QLabel* PlanView::buildLegend() {
  auto* legend = new QLabel(this);
  legend->setWordWrap(true);  // a narrow window wraps it rather than growing to its width
  legend->setText(tr("%1 &nbsp; %2 &nbsp; %3 &nbsp; <span style='color:%4'>&#9633;</span>&nbsp;peak layer"
                     " &nbsp;&nbsp; <span style='color:gray'>Click a layer to toggle its checkpoint, drag a "
                     "handle to move it; keys: &larr; &rarr; Space, Shift+&larr;/&rarr;</span>")
                      .arg(swatch(PaletteRole::KeptLayer, tr("kept from forward")),
                           swatch(PaletteRole::RecomputedLayer, tr("recomputed")),
                           swatch(PaletteRole::Checkpoint, tr("checkpoint")), ui::paletteName(PaletteRole::Peak)));
  return legend;
}

QLayout* PlanView::buildChartOptions() {
  auto* options = new FlowLayout(nullptr, 12);
  showStatic_ = new QCheckBox(tr("Static memory"), this);
  showStatic_->setObjectName(QStringLiteral("showStatic"));
  showStatic_->setChecked(true);
  showStatic_->setToolTip(tr("Draw static memory (input, parameters, gradients) under the ops"));
  proportional_ = new QCheckBox(tr("Cell width by bytes"), this);
  proportional_->setToolTip(tr("Make each layer's cell as wide as its output is large"));
  xAxis_ = new QComboBox(this);
  xAxis_->setObjectName(QStringLiteral("xAxis"));
  xAxis_->addItem(tr("Op sequence"));
  xAxis_->addItem(tr("Time"));
  xAxis_->setToolTip(
      tr("Horizontal axis: ops in order, or time: a measured run's clock, else each op's modelled duration "
         "(profiled milliseconds, or GFLOP at an assumed %1 GFLOP/s)")
          .arg(kDefaultGflopPerSecond, 0, 'f', 0));
  capacity_ = new QDoubleSpinBox(this);
  capacity_->setObjectName(QStringLiteral("capacity"));
  capacity_->setRange(0.0, 4096.0);
  capacity_->setDecimals(3);
  capacity_->setSuffix(tr(" GiB"));
  capacity_->setSpecialValueText(tr("none"));
  capacity_->setToolTip(tr("Draw a device capacity line (0: none)"));
  options->addWidget(showStatic_);
  options->addWidget(proportional_);
  options->addWidget(labelled(tr("X axis:"), xAxis_));
  options->addWidget(labelled(tr("Device capacity:"), capacity_));
  resetZoom_ = new QToolButton(this);
  resetZoom_->setObjectName(QStringLiteral("resetZoom"));
  resetZoom_->setText(tr("Reset zoom"));
  resetZoom_->setToolTip(charts::MemoryChart::zoomHelp());
  resetZoom_->setEnabled(false);
  options->addWidget(resetZoom_);
  return options;
}

void PlanView::connectControls() {
  // A refused click, drag or key says why where it happened (a tooltip at the cell) and in the
  // status bar; not in the message bar, whose appearing would move the strip under the pointer.
  const auto reportRefusal = [this](const Status& status, std::size_t layer) {
    if (status) return;
    const QString text = QString::fromStdString(status.message());
    strip_->showRefusal(layer, text);
    emit statusMessage(text);
  };
  connect(strip_, &CheckpointStrip::toggleRequested, this,
          [this, reportRefusal](std::size_t layer) { reportRefusal(document_->toggleCheckpoint(layer), layer); });
  connect(strip_, &CheckpointStrip::moveRequested, this, [this, reportRefusal](std::size_t from, std::size_t to) {
    reportRefusal(document_->moveCheckpoint(from, to), to);
  });
  connect(resetZoom_, &QToolButton::clicked, chart_, &charts::MemoryChart::resetZoom);
  connect(chart_, &charts::MemoryChart::zoomChanged, this,
          [this]() { resetZoom_->setEnabled(chart_->zoom().has_value()); });
  connect(strip_, &CheckpointStrip::cursorChanged, this, &PlanView::layerFocused);
  connect(showStatic_, &QCheckBox::toggled, this, &PlanView::applyChartOptions);
  connect(xAxis_, &QComboBox::currentIndexChanged, this, &PlanView::applyChartOptions);
  connect(capacity_, &QDoubleSpinBox::valueChanged, this, [this](double value) {
    capacityBytes_ = static_cast<std::uint64_t>(value * capacityUnitBytes_);
    applyChartOptions();
  });
  connect(proportional_, &QCheckBox::toggled, strip_, &CheckpointStrip::setProportional);
  connect(document_, &Document::chainChanged, this, &PlanView::refreshChain);
  // The capacity and the zoom are about one chain: a different one starts without them.
  connect(document_, &Document::chainReplaced, this, [this]() {
    setCapacityBytes(0);
    chart_->setZoom(std::nullopt);
    resetZoom_->setEnabled(false);
  });
  connect(document_, &Document::simulationChanged, this, &PlanView::refreshPlan);
  connect(document_, &Document::measuredChanged, this, &PlanView::refreshChart);
}

QLabel* PlanView::addCard(QLayout* row, const QString& key, const QString& title, const QString& tip) {
  auto* frame = new QFrame(this);
  frame->setFrameShape(QFrame::StyledPanel);
  frame->setToolTip(tip);
  auto* box = new QVBoxLayout(frame);
  box->setContentsMargins(8, 4, 8, 4);
  box->setSpacing(0);
  auto* caption = new QLabel(title, frame);
  QFont small = caption->font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  caption->setFont(small);
  caption->setStyleSheet(QStringLiteral("color: palette(mid);"));
  auto* value = new QLabel(QStringLiteral("-"), frame);
  value->setObjectName(QStringLiteral("value_") + key);
  QFont big = value->font();
  big.setPointSizeF(big.pointSizeF() * (key == QLatin1String("peak") ? 1.35 : 1.1));
  big.setBold(true);
  value->setFont(big);
  value->setTextInteractionFlags(Qt::TextSelectableByMouse);
  value->setFixedHeight(value->sizeHint().height());  // with setCardValue's width: a fixed size
  box->addWidget(caption);
  box->addWidget(value);
  row->addWidget(frame);
  values_.insert(key, value);
  return value;
}

QString PlanView::summaryText(const QString& key) const {
  const QLabel* label = values_.value(key);
  return label ? label->text() : QString();
}

QString PlanView::summaryToolTip(const QString& key) const {
  const QLabel* label = values_.value(key);
  return label ? label->toolTip() : QString();
}

void PlanView::setCapacityBytes(std::uint64_t bytes) {
  // The exact bytes are kept: the spin box shows them rounded to its decimals, in MiB below a GiB
  // (50 MiB, not 0.049 GiB) and in GiB above; typing goes on in the unit shown.
  {
    const QSignalBlocker blocker(capacity_);
    const bool mebibytes = bytes > 0 && static_cast<double>(bytes) < ui::kBytesPerGiB;
    capacityUnitBytes_ = mebibytes ? ui::kBytesPerGiB / 1024.0 : ui::kBytesPerGiB;
    capacity_->setSuffix(mebibytes ? tr(" MiB") : tr(" GiB"));
    capacity_->setDecimals(mebibytes ? 2 : 3);
    capacity_->setRange(0.0, mebibytes ? 1024.0 * 1024.0 : 4096.0);
    capacity_->setValue(static_cast<double>(bytes) / capacityUnitBytes_);
  }
  capacityBytes_ = bytes;
  applyChartOptions();
}

void PlanView::refreshChain() {
  // Another chain's numbers may be narrower: the cards fit them afresh.
  for (QLabel* value : std::as_const(values_)) {
    value->setMinimumWidth(0);
    value->setMaximumWidth(QWIDGETSIZE_MAX);
  }
  if (document_->hasChain()) strip_->setChain(document_->chain());
}

// A card's value keeps its width while the numbers change (a drag does not make the cards jump),
// growing when a value needs more. A label of fixed size also stops Qt from laying out the whole
// window again on every new value, which was most of a checkpoint toggle's repaint.
void PlanView::setCardValue(const QString& key, const QString& text) {
  QLabel* value = values_.value(key);
  if (value->text() != text) value->setText(text);
  const int width = std::max(value->sizeHint().width(), value->minimumWidth());
  if (width != value->minimumWidth() || width != value->maximumWidth()) value->setFixedWidth(width);
}

void PlanView::refreshPlan() {
  if (!document_->hasChain()) return;
  const Chain& chain = document_->chain();
  const Simulation& sim = document_->simulation();
  setCardValue("peak", ui::formatBytes(sim.peakBytes()));
  setCardValue("dynamic", ui::formatBytes(sim.dynamicPeakBytes));
  setCardValue("static", ui::formatBytes(sim.staticBytes));
  QString parts = tr("Alive the whole step (%1):").arg(QString::fromStdString(describeStepOptions(chain.step)));
  for (const charts::StaticPart& part : staticParts(chain))
    if (part.bytes > 0) parts += QStringLiteral("\n  %1  %2").arg(part.name, ui::formatBytes(part.bytes));
  if (const std::uint64_t copies = autocastWeightCopyBytes(chain); copies > 0)  // memory-model.md 11.7
    parts += tr("\nNot static: autocast's half weight copies, %1, each saved by its conv or linear until its "
                "backward (in the dynamic peak)")
                 .arg(ui::formatBytes(copies));
  values_["static"]->setToolTip(parts);
  setCardValue("A", ui::formatBytes(sim.aBytes));
  setCardValue("R", ui::formatBytes(sim.rBytes));
  setCardValue("recompute", recomputeCostWithShare(chain, sim.recomputeCost));
  values_["recompute"]->setToolTip(tr("Forward cost of the recomputed ops (R and RE), in %1; in brackets, its share of "
                                      "one forward pass")
                                       .arg(recomputeUnitDescription(chain)));
  setCardValue("checkpoints", QString::number(sim.plan.checkpoints.size()));
  setCardValue("plan", ui::readablePlannerName(document_->planner()));
  values_["plan"]->setToolTip(tr("Where the plan came from: %1").arg(document_->planner()));
  values_["peak"]->setToolTip(peakDescription(chain, sim, document_->liveness()));
  updatePeakWarning();
  strip_->setPlan(sim.plan, peakLayer(chain, sim));
  refreshChart();
}

void PlanView::refreshChart() {
  if (!document_->hasChain()) return;
  const Chain& chain = document_->chain();
  const QString title = tr("%1, plan %2: peak %3")
                            .arg(QString::fromStdString(chain.name), ui::readablePlannerName(document_->planner()),
                                 ui::formatBytes(document_->simulation().peakBytes()));
  charts::ChartData data =
      chartData(chain, document_->simulation(), document_->liveness(), document_->measured(), title);
  if (data.measured) {
    data.measuredStale = !document_->measuredIsCurrent();
    data.measuredPlan = document_->measuredOrigin().planner;
  }
  chart_->setData(std::move(data));
}

void PlanView::updatePeakWarning() {
  const std::uint64_t capacity = capacityBytes_;
  const bool over = document_->hasChain() && capacity > 0 && document_->simulation().peakBytes() > capacity;
  const QString style = over ? QStringLiteral("color: %1;").arg(ui::paletteName(PaletteRole::OverCapacity)) : QString();
  if (values_["peak"]->styleSheet() != style) values_["peak"]->setStyleSheet(style);
  values_["peak"]->setProperty("overCapacity", over);
  if (over)
    values_["peak"]->setToolTip(tr("Above the device capacity of %1\n\n").arg(ui::formatBytes(capacity)) +
                                peakDescription(document_->chain(), document_->simulation(), document_->liveness()));
}

void PlanView::applyChartOptions() {
  updatePeakWarning();
  charts::ChartOptions options = chart_->options();
  options.includeStatic = showStatic_->isChecked();
  options.xAxis = xAxis_->currentIndex() == 1 ? charts::XAxisMode::Time : charts::XAxisMode::OpIndex;
  options.capacityBytes = capacityBytes_;
  chart_->setOptions(options);
}

}  // namespace remat::gui
