#pragma once
// The memory chart: a training step's footprint over its op sequence (or over time: measured, or
// the prediction's modelled op durations), forward / recompute / backward shaded, recompute ops and
// checkpoints marked, the peak marked with a tooltip, an optional capacity line and a measured
// timeline on top (grey when it is stale). Zoom and pan along x with the mouse. Qt Charts stays
// behind this header (pimpl), so only app/charts includes it.
#include <QImage>
#include <QStringList>
#include <QWidget>
#include <memory>
#include <optional>

#include "memory_chart_series.hpp"
#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"

namespace remat::charts {

// Axis extents in data units (x: ops or ms; y: bytes), so two charts can share them.
struct ChartRanges {
  double xMax = 0.0;
  double yMaxBytes = 0.0;
};

// A stretch of the x axis in data units (ops or ms), from < to: what a zoomed chart shows.
struct XRange {
  double from = 0.0;
  double to = 0.0;
  bool operator==(const XRange&) const = default;
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

  // Zoom along x (the y axis keeps the whole step, so heights stay comparable). The user drags
  // across the plot to zoom into a stretch, turns the wheel to zoom around the pointer, pans with
  // Shift+drag, the middle button or a horizontal wheel, and double-clicks to see everything;
  // each of these emits zoomChanged. setZoom does the same from code and emits nothing (so two
  // charts can follow each other). A range is clamped to the data; one covering it all is none.
  std::optional<XRange> zoom() const;
  void setZoom(std::optional<XRange> range);
  XRange visibleXRange() const;  // the zoom, or the whole axis
  static QString zoomHelp();     // the gestures, for tooltips
  // The x axis' tick labels as drawn and its title, and the peak marker's label (for tests).
  QStringList xAxisLabels() const;
  QString xAxisTitle() const;
  QString peakLabel() const;

  // Renders the chart at size (the widget's size when empty, 1200x600 when it has none).
  QImage renderImage(QSize size = {}) const;
  // Written with writeFileAtomically (image_file.hpp).
  Status exportPng(const QString& path, const WriteOptions& options = {}) const;
  Status exportSvg(const QString& path, const WriteOptions& options = {}) const;

  // For tests and tooltips: the drawn footprint points (data units), the peak marker, legend names.
  QList<QPointF> footprintPoints() const;
  QPointF peakPoint() const;
  QStringList visibleSeriesNames() const;
  bool legendBeside() const;          // the legend stands right of the plot (too narrow a chart for a row)
  QString tooltipAt(double x) const;  // what hovering over the footprint at x shows (data units)
  // Where a data point (x, bytes) is drawn, in the coordinates of viewport(); and that viewport,
  // which takes the mouse.
  QPoint viewportPosition(const QPointF& value) const;
  QWidget* viewport() const;

 public slots:
  void resetZoom();  // the whole axis again (emits zoomChanged when it was zoomed)

 signals:
  void opHovered(std::size_t opIndex);
  void zoomChanged(std::optional<remat::charts::XRange> range);

 private:
  struct Parts;
  void rebuild();
  void applyRanges();
  void updatePaintedContent();
  void placeLegend();
  void resizeEvent(QResizeEvent* event) override;
  QString measuredLegend() const;
  bool eventFilter(QObject* watched, QEvent* event) override;
  // The mouse on the plot (memory_chart_input.cpp): hover text, zoom and pan.
  bool handleMouse(QEvent* event);
  bool handleWheel(QEvent* event);
  // What the tooltip says at a point of the viewport (the chart_tooltip mechanism shows it); says
  // which op is hovered.
  QString hoverTextAt(const QPoint& viewportPosition);
  void zoomByUser(std::optional<XRange> range);
  double valueAtViewportX(double x) const;
  QRectF plotInViewport() const;
  QString markerTooltipAt(const QPointF& chartPosition) const;
  std::unique_ptr<Parts> parts_;
};

}  // namespace remat::charts
