#pragma once
// The memory chart: a training step's footprint over its op sequence (or over time for measured
// runs), forward / recompute / backward shaded, recompute ops and checkpoints marked, the peak
// marked with a tooltip, an optional capacity line and a measured timeline on top. Qt Charts stays
// behind this header (pimpl), so only app/charts includes it.
#include <QImage>
#include <QStringList>
#include <QWidget>
#include <memory>
#include <optional>

#include "memory_chart_series.hpp"
#include "remat/base/status.hpp"
#include "remat/io/atomic_file.hpp"

namespace remat::charts {

// Axis extents in data units (x: ops or ms; y: bytes), so two charts can share them.
struct ChartRanges {
  double xMax = 0.0;
  double yMaxBytes = 0.0;
};

class MemoryChart : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  ~MemoryChart() override;

  void setData(ChartData data);
  const ChartData& data() const;
  void setOptions(const ChartOptions& options);
  const ChartOptions& options() const;

  // What this chart's data needs, and an override so side-by-side charts use the same axes.
  ChartRanges naturalRanges() const;
  void setSharedRanges(std::optional<ChartRanges> ranges);
  ChartRanges displayedRanges() const;

  // Renders the chart at size (the widget's size when empty, 1200x600 when it has none).
  QImage renderImage(QSize size = {}) const;
  // Written with writeFileAtomically (image_file.hpp).
  Status exportPng(const QString& path, const WriteOptions& options = {}) const;
  Status exportSvg(const QString& path, const WriteOptions& options = {}) const;

  // For tests and tooltips: the drawn footprint points (data units), the peak marker, legend names.
  QList<QPointF> footprintPoints() const;
  QPointF peakPoint() const;
  QStringList visibleSeriesNames() const;
  QString tooltipAt(double x) const;  // what hovering over the footprint at x shows (data units)
  // Where a data point (x, bytes) is drawn, in the coordinates of viewport(); and that viewport,
  // which takes the mouse.
  QPoint viewportPosition(const QPointF& value) const;
  QWidget* viewport() const;

 signals:
  void opHovered(std::size_t opIndex);

 private:
  struct Parts;
  void rebuild();
  void applyRanges();
  bool eventFilter(QObject* watched, QEvent* event) override;
  QString markerTooltipAt(const QPointF& chartPosition) const;
  std::unique_ptr<Parts> parts_;
};

}  // namespace remat::charts
