#include "views/compare_model.hpp"

#include <QFont>

#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "document/plan_insight.hpp"
#include "remat/base/duration.hpp"
#include "remat/memory/plan.hpp"

namespace remat::gui {

CompareTableModel::CompareTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareTableModel::setEntries(std::array<Entry, 2> entries) {
  beginResetModel();
  entries_ = std::move(entries);
  hasEntries_ = true;
  endResetModel();
}

void CompareTableModel::clear() {
  beginResetModel();
  entries_ = {};
  hasEntries_ = false;
  endResetModel();
}

int CompareTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !hasEntries_ ? 0 : static_cast<int>(entries_.size());
}

int CompareTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CompareTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Vertical) {
    if (role == Qt::DisplayRole && section >= 0 && section < 2) return section == 0 ? tr("Left") : tr("Right");
    return {};
  }
  static const char* const titles[ColumnCount] = {"Planner", "Objective",   "Peak",      "Dynamic E",    "A",
                                                  "R",       "Checkpoints", "Recompute", "Planning time"};
  if (section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) return tr(titles[section]);
  return {};
}

QVariant CompareTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const Entry& entry = entries_[static_cast<std::size_t>(index.row())];
  const Entry& other = entries_[static_cast<std::size_t>(1 - index.row())];
  const int column = index.column();
  if (role == Qt::TextAlignmentRole)
    return QVariant::fromValue(
        Qt::Alignment((column <= Objective ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter));
  if (!entry.planned) {
    if (role == Qt::DisplayRole)
      return column == Planner ? entry.planner : column == Objective ? entry.error : QString();
    if (role == Qt::ToolTipRole) return entry.error;
    return {};
  }
  const PlanReport& r = entry.planned->report;
  const Simulation& sim = entry.planned->simulation;
  // The better of two numbers is bold (lower memory, cost and time).
  if (role == Qt::FontRole && other.planned && column >= Peak) {
    const PlanReport& o = other.planned->report;
    const Simulation& osim = other.planned->simulation;
    bool better = false;
    switch (column) {
      case Peak: better = sim.peakBytes() < osim.peakBytes(); break;
      case Dynamic: better = sim.dynamicPeakBytes < osim.dynamicPeakBytes; break;
      case A: better = sim.aBytes < osim.aBytes; break;
      case R: better = sim.rBytes < osim.rBytes; break;
      case Recompute: better = sim.recomputeCost < osim.recomputeCost; break;
      case PlanTime: better = r.planSeconds < o.planSeconds; break;
      default: break;
    }
    QFont font;
    font.setBold(better);
    return font;
  }
  if (role == Qt::ToolTipRole && column == Checkpoints)
    return tr("Checkpoints: %1").arg(QString::fromStdString(formatCheckpointList(r.plan)));
  if (role != Qt::DisplayRole) return {};
  switch (column) {
    case Planner: return QString::fromStdString(r.planner);
    case Objective: return ui::toQString(objectiveSymbol(r.objective));
    case Peak: return ui::formatBytes(sim.peakBytes());
    case Dynamic: return ui::formatBytes(sim.dynamicPeakBytes);
    case A: return ui::formatBytes(sim.aBytes);
    case R: return ui::formatBytes(sim.rBytes);
    case Checkpoints: return QString::number(r.plan.checkpoints.size());
    case Recompute: return recomputeCostWithShare(r.recomputeCostUnit, sim.recomputeCost, r.recomputeShare);
    case PlanTime: return QString::fromStdString(formatDuration(r.planSeconds));
    default: return {};
  }
}

}  // namespace remat::gui
