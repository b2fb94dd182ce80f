#pragma once
// The comparison table: one row per compared plan, one column per number (peak, A, R, checkpoints,
// recompute cost, planning time).
#include <QAbstractTableModel>
#include <array>
#include <optional>

#include "document/plan_jobs.hpp"

namespace remat::gui {

class CompareTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Planner, Objective, Peak, Dynamic, A, R, Checkpoints, Recompute, PlanTime, ColumnCount };
  struct Entry {
    QString planner;
    std::optional<SimulatedPlan> planned;
    QString error;  // why there is no result
  };

  explicit CompareTableModel(QObject* parent = nullptr);
  void setEntries(std::array<Entry, 2> entries);
  const std::array<Entry, 2>& entries() const { return entries_; }
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::array<Entry, 2> entries_;
  bool hasEntries_ = false;
};

}  // namespace remat::gui
