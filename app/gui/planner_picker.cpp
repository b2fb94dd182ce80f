#include "planner_picker.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QSpinBox>

#include "remat/planners/planners.hpp"

namespace remat::gui {
namespace {
const QString kUniform = QStringLiteral("uniform:K");

QString plannerTip(const QString& name) {
  if (name == QLatin1String("none")) return QObject::tr("No checkpoints: store every activation");
  if (name == QLatin1String("sqrt")) return QObject::tr("Chen et al.'s sqrt(n) rule");
  if (name == QLatin1String("greedy")) return QObject::tr("A greedy rule on the activation sizes");
  if (name == kUniform) return QObject::tr("PyTorch checkpoint_sequential with K segments");
  if (name == QLatin1String("dp")) return QObject::tr("The paper's O(n^3) dynamic program, minimising A");
  if (name == QLatin1String("linear")) return QObject::tr("The paper's linear-time planner, minimising R");
  if (name == QLatin1String("optimal")) return QObject::tr("Exact minimum of the true peak E (slower)");
  return {};
}
}  // namespace

PlannerPicker::PlannerPicker(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  combo_ = new QComboBox(this);
  for (const std::string& name : plannerNames()) {
    const QString label = QString::fromStdString(name);
    combo_->addItem(label);
    combo_->setItemData(combo_->count() - 1, plannerTip(label), Qt::ToolTipRole);
  }
  combo_->setToolTip(tr("Checkpoint planner"));
  segments_ = new QSpinBox(this);
  segments_->setRange(1, 4096);
  segments_->setValue(4);
  segments_->setPrefix(tr("K="));
  segments_->setToolTip(tr("Segments of uniform:K"));
  layout->addWidget(combo_);
  layout->addWidget(segments_);
  connect(combo_, &QComboBox::currentIndexChanged, this, [this]() {
    updateSegments();
    emit plannerChanged(plannerName());
  });
  connect(segments_, &QSpinBox::valueChanged, this, [this]() { emit plannerChanged(plannerName()); });
  updateSegments();
}

QString PlannerPicker::plannerName() const {
  const QString name = combo_->currentText();
  return name == kUniform ? QStringLiteral("uniform:%1").arg(segments_->value()) : name;
}

bool PlannerPicker::setPlannerName(const QString& name) {
  if (name.startsWith(QLatin1String("uniform:"))) {
    bool ok = false;
    const int k = name.mid(8).toInt(&ok);
    const int index = combo_->findText(kUniform);
    if (!ok || k < 1 || index < 0) return false;
    segments_->setValue(k);
    combo_->setCurrentIndex(index);
    return true;
  }
  const int index = combo_->findText(name);
  if (index < 0) return false;
  combo_->setCurrentIndex(index);
  return true;
}

void PlannerPicker::updateSegments() { segments_->setVisible(combo_->currentText() == kUniform); }

}  // namespace remat::gui
