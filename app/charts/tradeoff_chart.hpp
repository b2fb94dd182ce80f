#pragma once
// The trade-off chart: the Pareto front of peak memory against recompute cost as a step line (for
// each peak, the least recompute of any plan that fits under it), its plans as points that a click
// picks, the named planners' plans and the current plan marked, and a device capacity line that
// the mouse drags. Qt Charts stays behind this header (pimpl), as in memory_chart.hpp.
#include <QString>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace remat::charts {

// One plan on the chart: its total peak (static + E, bytes) and recompute cost (the chain's unit).
struct TradeoffMark {
  double peakBytes = 0.0;
  double cost = 0.0;
  QString label;  // the tooltip; for planners also the text drawn beside the mark
};

struct TradeoffChartData {
  std::vector<TradeoffMark> front;     // rising peak, falling cost
  std::vector<TradeoffMark> planners;  // the named planners' plans
  std::optional<TradeoffMark> current;
  QString costTitle;  // the vertical axis: "recompute (GFLOP)"
};

class TradeoffChart : public QWidget {
  Q_OBJECT

 public:
  explicit TradeoffChart(QWidget* parent = nullptr);
  ~TradeoffChart() override;

  void setData(TradeoffChartData data);
  const TradeoffChartData& data() const;
  // The capacity line at this many bytes of total peak; 0 hides it.
  void setCapacityBytes(std::uint64_t bytes);
  std::uint64_t capacityBytes() const;
  // The front point drawn ringed (what the capacity picks); nullopt for none.
  void setHighlighted(std::optional<std::size_t> frontIndex);
  std::optional<std::size_t> highlighted() const;

  // For tests: the step line's corners (bytes, cost); where a value (bytes, cost) is drawn, in
  // viewport() coordinates; the viewport, which takes the mouse.
  QList<QPointF> stepPoints() const;
  QPoint viewportPosition(const QPointF& value) const;
  QWidget* viewport() const;

 signals:
  void pointClicked(std::size_t frontIndex);
  void capacityDragged(std::uint64_t bytes);  // while the line follows the mouse
  void capacityDropped(std::uint64_t bytes);  // when it is let go

 private:
  struct Parts;
  void rebuild();
  void placeCapacity();
  void placeLabels();
  bool eventFilter(QObject* watched, QEvent* event) override;
  bool press(const QPointF& chartPosition);
  std::uint64_t bytesAt(const QPointF& chartPosition) const;
  QString tooltipAt(const QPointF& chartPosition) const;
  std::unique_ptr<Parts> parts_;
};

}  // namespace remat::charts
