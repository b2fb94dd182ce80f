#include "planner_picker.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QSpinBox>
#include <algorithm>

#include "charts/qt_text.hpp"
#include "remat/planners/registry.hpp"

namespace remat::gui {
namespace {

// The parameters this picker has an editor for: none, or a count (the spin box).
bool hasEditor(const PlannerEntry& entry) {
  return entry.parameter.kind == PlannerParameterKind::None || entry.parameter.kind == PlannerParameterKind::Count;
}

}  // namespace

PlannerPicker::PlannerPicker(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  combo_ = new QComboBox(this);
  for (const PlannerEntry& entry : plannerRegistry()) {
    combo_->addItem(QString::fromStdString(entry.listedName()));
    combo_->setItemData(combo_->count() - 1, charts::toQString(entry.description), Qt::ToolTipRole);
  }
  combo_->setToolTip(tr("Checkpoint planner"));
  count_ = new QSpinBox(this);
  count_->setRange(1, 4096);
  count_->setValue(4);
  layout->addWidget(combo_);
  layout->addWidget(count_);
  connect(combo_, &QComboBox::currentIndexChanged, this, [this]() {
    updateParameter();
    emit plannerChanged(plannerName());
  });
  connect(count_, &QSpinBox::valueChanged, this, [this]() { emit plannerChanged(plannerName()); });
  updateParameter();
}

const PlannerEntry& PlannerPicker::currentEntry() const {
  return plannerRegistry()[static_cast<std::size_t>(std::max(0, combo_->currentIndex()))];
}

QString PlannerPicker::plannerName() const {
  const PlannerEntry& entry = currentEntry();
  const QString name = charts::toQString(entry.name);
  return entry.parameter.kind == PlannerParameterKind::Count ? QStringLiteral("%1:%2").arg(name).arg(count_->value())
                                                             : name;
}

bool PlannerPicker::setPlannerName(const QString& name) {
  Result<ParsedPlannerName> parsed = parsePlannerName(name.toStdString());
  if (!parsed || !hasEditor(*parsed->entry)) return false;
  const std::span<const PlannerEntry> registry = plannerRegistry();
  const int index = static_cast<int>(parsed->entry - registry.data());
  // Counts above the spin box's range show as its maximum (a count above the layer count acts as it).
  if (parsed->entry->hasParameter())
    count_->setValue(static_cast<int>(std::min<std::uint64_t>(parsed->parameter, count_->maximum())));
  combo_->setCurrentIndex(index);
  return true;
}

void PlannerPicker::updateParameter() {
  const PlannerEntry& entry = currentEntry();
  count_->setVisible(entry.parameter.kind == PlannerParameterKind::Count);
  count_->setPrefix(charts::toQString(entry.parameter.symbol) + QLatin1Char('='));
  count_->setToolTip(QString::fromStdString(entry.listedName()) + QLatin1Char(' ') +
                     charts::toQString(entry.parameter.explanation));
}

}  // namespace remat::gui
