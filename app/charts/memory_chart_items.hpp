#pragma once
// What the memory chart paints itself instead of through chart series: the phase-shaded footprint
// as one bar per bucket (fillRect; an area series' polygon fill costs O(edges x scanlines), which
// made a 500-layer chain's redraw take 100+ ms), the recompute rug, the checkpoint markers and the
// peak. Two items share one content: fills under the series' lines, markers above them. Qt Charts
// series stay in the chart for the legend and the lines.
#include <QGraphicsItem>
#include <QPointF>
#include <QString>
#include <optional>
#include <vector>

#include "memory_chart_series.hpp"

class QChart;
class QAbstractSeries;

namespace remat::charts {

// In axis units (x: ops or ms; y: bytes divided by the axis unit).
struct PaintedContent {
  double base = 0.0;  // where the dynamic bars start (static bytes when drawn)
  bool drawStatic = false;
  std::vector<PhaseBar> bars;
  std::vector<double> recomputeX;  // a rug mark at each bucket holding recompute ops
  std::vector<QPointF> stored;     // checkpoint stored / freed markers
  std::vector<QPointF> freed;
  std::optional<QPointF> peak;
  QString peakLabel;
  QList<QPointF> outline;      // the footprint's step line
  QList<QPointF> measured;     // the measured timeline's step line (empty when none)
  bool measuredStale = false;  // of another plan: grey and dashed
};

class ChartPaintItem : public QGraphicsItem {
 public:
  enum class Layer { Fills, Markers };
  // Axis mapping comes from `reference`, a series attached to both axes.
  ChartPaintItem(QChart* chart, QAbstractSeries* reference, const PaintedContent* content, Layer layer);

  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  void refresh();  // after the content, the axes or the plot area changed

  // Chart coordinates of an axis-unit point.
  QPointF toPosition(const QPointF& value) const;

 private:
  void paintFills(QPainter* painter) const;
  void paintMarkers(QPainter* painter) const;
  void paintLine(QPainter* painter, const QList<QPointF>& points, const QPen& pen) const;

  QChart* chart_;
  QAbstractSeries* reference_;
  const PaintedContent* content_;
  Layer layer_;
};

}  // namespace remat::charts
