#include "views/planner_picker.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTimer>
#include <algorithm>

#include "common/palette.hpp"
#include "common/qt_text.hpp"
#include "remat/planners/registry.hpp"

namespace remat::gui {
namespace {

// How long sizeEdited waits after the last key.
constexpr int kSettleMs = 300;

}  // namespace

PlannerPicker::PlannerPicker(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  combo_ = new QComboBox(this);
  for (const PlannerEntry& entry : plannerRegistry()) {
    combo_->addItem(QString::fromStdString(entry.listedName()));
    combo_->setItemData(combo_->count() - 1, ui::toQString(entry.description), Qt::ToolTipRole);
  }
  combo_->setToolTip(tr("Checkpoint planner"));
  count_ = new QSpinBox(this);
  count_->setRange(1, 4096);
  count_->setValue(4);
  size_ = new QLineEdit(QStringLiteral("4GiB"), this);
  size_->setMaximumWidth(110);
  sizeLabel_ = new QLabel(tr("dynamic E %1").arg(QChar(0x2264)), this);
  sizeLabel_->setToolTip(
      tr("The budget bounds the dynamic peak E; static memory (input, parameters, gradients) "
         "comes on top. To fit a total, use Fit in the Trade-off tab."));
  sizeLabel_->setBuddy(size_);
  settle_ = new QTimer(this);
  settle_->setSingleShot(true);
  settle_->setInterval(kSettleMs);
  layout->addWidget(combo_);
  layout->addWidget(count_);
  layout->addWidget(sizeLabel_);
  layout->addWidget(size_);
  connect(size_, &QLineEdit::textEdited, this, [this]() {
    if (sizeChanged()) settle_->start();
  });
  connect(settle_, &QTimer::timeout, this, [this]() { emit sizeEdited(plannerName()); });
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
  const QString name = ui::toQString(entry.name);
  switch (entry.parameter.kind) {
    case PlannerParameterKind::None: break;
    case PlannerParameterKind::Count: return QStringLiteral("%1:%2").arg(name).arg(count_->value());
    case PlannerParameterKind::ByteSize: return QStringLiteral("%1:%2").arg(name, size_->text().trimmed());
  }
  return name;
}

bool PlannerPicker::setPlannerName(const QString& name) {
  Result<ParsedPlannerName> parsed = parsePlannerName(name.toStdString());
  if (!parsed) return false;
  const std::span<const PlannerEntry> registry = plannerRegistry();
  const int index = static_cast<int>(parsed->entry - registry.data());
  switch (parsed->entry->parameter.kind) {
    case PlannerParameterKind::None: break;
    // Counts above the spin box's range show as its maximum (a count above the layer count acts as it).
    case PlannerParameterKind::Count:
      count_->setValue(static_cast<int>(std::min<std::uint64_t>(parsed->parameter, count_->maximum())));
      break;
    // A size shows as it was written ("3.5GiB" stays that, not 3758096384).
    case PlannerParameterKind::ByteSize: size_->setText(name.mid(name.indexOf(QLatin1Char(':')) + 1).trimmed()); break;
  }
  combo_->setCurrentIndex(index);
  (void)sizeChanged();
  return true;
}

// Marks a size core refuses; true for one it accepts.
bool PlannerPicker::sizeChanged() {
  const PlannerEntry& entry = currentEntry();
  if (entry.parameter.kind != PlannerParameterKind::ByteSize) return false;
  const Status valid = checkPlannerName(plannerName().toStdString());
  size_->setStyleSheet(valid ? QString()
                             : QStringLiteral("color: %1;").arg(ui::paletteName(ui::PaletteRole::ErrorText)));
  size_->setToolTip(valid ? QString::fromStdString(entry.listedName()) + QLatin1Char(' ') +
                                ui::toQString(entry.parameter.explanation) +
                                tr(" (a byte size: 4096, 512 MiB, 3.5GiB); the plan follows as you type")
                          : QString::fromStdString(valid.message()));
  emit plannerChanged(plannerName());
  return valid.isOk();
}

void PlannerPicker::updateParameter() {
  const PlannerEntry& entry = currentEntry();
  count_->setVisible(entry.parameter.kind == PlannerParameterKind::Count);
  size_->setVisible(entry.parameter.kind == PlannerParameterKind::ByteSize);
  sizeLabel_->setVisible(entry.parameter.kind == PlannerParameterKind::ByteSize);
  count_->setPrefix(ui::toQString(entry.parameter.symbol) + QLatin1Char('='));
  count_->setToolTip(QString::fromStdString(entry.listedName()) + QLatin1Char(' ') +
                     ui::toQString(entry.parameter.explanation));
}

}  // namespace remat::gui
