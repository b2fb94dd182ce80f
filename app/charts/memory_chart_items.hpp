#pragma once
// What the memory chart paints itself instead of through chart series: the phase-shaded footprint
// at one column per pixel (fill_columns.hpp; an area series' polygon fill costs O(edges x
// scanlines), which made a 500-layer chain's redraw take 100+ ms, and a fillRect per bucket wakes
// Qt's fill threads each time), drawn as one cached image on screen, the recompute rug, the checkpoint markers and the
// peak. Two items share one content: fills under the series' lines, markers above them. Qt Charts
// series stay in the chart for the legend and the lines.
#include <QColor>
#include <QGraphicsItem>
#include <QImage>
#include <QPointF>
#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "fill_columns.hpp"
#include "memory_chart_series.hpp"

class QChart;
class QAbstractSeries;

namespace remat::charts {

// In axis units (x: ops or ms; y: bytes divided by the axis unit).
struct PaintedContent {
  double base = 0.0;  // where the dynamic bars start (static bytes when drawn)
  bool drawStatic = false;
  // The static parts' bands, stacked from 0: each one's top and colour (the last top is base).
  struct Band {
    double top = 0.0;
    QColor colour;
  };
  std::vector<Band> staticBands;
  std::vector<PhaseBar> bars;
  std::vector<double> recomputeX;  // a rug mark at each bucket holding recompute ops
  std::vector<QPointF> stored;     // checkpoint stored / freed markers
  std::vector<QPointF> freed;
  std::optional<QPointF> peak;
  QString peakLabel;
  QList<QPointF> outline;        // the footprint's step line
  QList<QPointF> measured;       // the measured timeline's step line (empty when none)
  bool measuredStale = false;    // of another plan: grey and dashed
  std::uint64_t generation = 0;  // bumped whenever the rest changes: what cached drawings are of
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
  // The fills of one content at one mapping, drawn once and blitted on every repaint until either
  // changes (hovering, the tooltip and the markers repaint without redrawing them).
  struct FillsImage {
    std::uint64_t generation = ~std::uint64_t{0};
    PixelMapping mapping;
    int plotLeft = 0;
    int plotRight = 0;
    QPoint topLeft;
    QImage image;
  };
  const FillsImage& fillsImage(const PixelMapping& mapping, int plotLeft, int plotRight) const;
  void paintFills(QPainter* painter) const;
  void paintMarkers(QPainter* painter) const;
  void paintMeasured(QPainter* painter) const;
  // A filled, outlined shape (pixels around the marker's point) at each point (axis units).
  void paintShapes(QPainter* painter, const std::vector<QPointF>& values, const QList<QPointF>& shape,
                   const QColor& colour) const;
  void paintLine(QPainter* painter, const QList<QPointF>& points, const QPen& pen) const;

  QChart* chart_;
  QAbstractSeries* reference_;
  const PaintedContent* content_;
  Layer layer_;
  mutable FillsImage fillsCache_;
};

}  // namespace remat::charts
