#pragma once
// The trade-off tab: the exact Pareto front of peak memory against recompute cost for the chain
// (computed in the background on JobChannel::Tradeoff, cancellable, rerun when a chain edit makes it
// stale and the tab is shown), the named planners and the current plan marked on it, and a device
// capacity (typed, or the chart's line dragged) that picks the cheapest plan under it. A click on a
// front point asks for its plan (applyRequested); a capacity set or dropped asks for the cheapest
// plan under it (fitRequested), which the main window runs as the budget planner.
#include <QWidget>
#include <cstdint>
#include <optional>

#include "remat/memory/plan.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/tradeoff.hpp"

class QLabel;
class QLineEdit;

namespace remat::charts {
class TradeoffChart;
}

namespace remat::gui {

class Document;
class JobRunner;

// What the background job computes for one chain.
struct TradeoffResult {
  TradeoffFront front;
  std::vector<PlanReport> planners;  // compare's default planners
  double seconds = 0.0;              // the front's planning time
};

class TradeoffView : public QWidget {
  Q_OBJECT

 public:
  TradeoffView(Document* document, JobRunner* jobs, QWidget* parent = nullptr);

  charts::TradeoffChart* chart() const { return chart_; }
  QLineEdit* capacityField() const { return capacity_; }
  // The front of the document's chain, once computed (null while stale or computing).
  const TradeoffResult* result() const { return result_ ? &*result_ : nullptr; }
  bool isStale() const { return stale_; }
  QString statusText() const;
  QString fitText() const;

  // The capacity (total peak, static included; 0: none): field, line and the point it picks.
  void setCapacityBytes(std::uint64_t bytes);
  std::uint64_t capacityBytes() const { return capacityBytes_; }
  // The front point the capacity picks: the cheapest whose total peak fits; nullopt for none.
  std::optional<std::size_t> pointWithin(std::uint64_t capacityBytes) const;

 public slots:
  void compute();  // starts the background computation of the front

 signals:
  void applyRequested(const Plan& plan, const QString& source);
  void fitRequested(std::uint64_t capacityBytes);
  void statusMessage(const QString& text);

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  QWidget* buildControls();
  void connectChart();
  void showResult();
  void updateCurrent();
  void updateFit();
  void readCapacityField();

  Document* document_;
  JobRunner* jobs_;
  charts::TradeoffChart* chart_;
  QLabel* status_;
  QLabel* fit_;
  QLineEdit* capacity_;
  std::optional<TradeoffResult> result_;
  std::uint64_t capacityBytes_ = 0;
  bool stale_ = true;
};

}  // namespace remat::gui
