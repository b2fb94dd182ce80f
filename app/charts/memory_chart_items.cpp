#include "memory_chart_items.hpp"

#include <QAbstractSeries>
#include <QChart>
#include <QPaintEngine>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>

#include "common/palette.hpp"

namespace remat::charts {
namespace {
// Qt Charts stacks its series at z 4 (ChartPresenter::SeriesZValue), the grid at 2 and the legend
// at 5: fills go between grid and lines, markers between lines and legend.
constexpr double kFillsZ = 3.5;
constexpr double kMarkersZ = 4.5;

bool isRaster(const QPainter* painter) {
  return painter->paintEngine() && painter->paintEngine()->type() == QPaintEngine::Raster;
}

// One per phase, then the weight gradients' colour (index kPhaseCount).
using Fills = std::array<QColor, kPhaseCount + 1>;
Fills phaseFills() {
  return {ui::phaseColor(Phase::Forward, 150), ui::phaseColor(Phase::Recompute, 170),
          ui::phaseColor(Phase::Backward, 150), ui::phaseColor(Phase::Step, 170),
          ui::paletteColor(ui::PaletteRole::WeightGradients, 200)};
}
}  // namespace

ChartPaintItem::ChartPaintItem(QChart* chart, QAbstractSeries* reference, const PaintedContent* content, Layer layer)
    : QGraphicsItem(chart), chart_(chart), reference_(reference), content_(content), layer_(layer) {
  setZValue(layer == Layer::Fills ? kFillsZ : kMarkersZ);
  setAcceptedMouseButtons(Qt::NoButton);
  setAcceptHoverEvents(false);
}

QRectF ChartPaintItem::boundingRect() const {
  // Markers and the peak label may stand a little outside the plot area.
  return chart_->plotArea().adjusted(-12, -24, 12, 12);
}

void ChartPaintItem::refresh() {
  prepareGeometryChange();
  update();
}

QPointF ChartPaintItem::toPosition(const QPointF& value) const { return chart_->mapToPosition(value, reference_); }

void ChartPaintItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  if (!content_) return;
  painter->save();
  if (layer_ == Layer::Fills) {
    painter->setClipRect(chart_->plotArea());
    paintFills(painter);
  } else {
    painter->setRenderHint(QPainter::Antialiasing, true);
    paintMarkers(painter);
  }
  painter->restore();
}

void ChartPaintItem::paintFills(QPainter* painter) const {
  const PaintedContent& c = *content_;
  // The axes are linear: map two points once, then every bar is arithmetic.
  const QPointF origin = toPosition({0.0, 0.0});
  const QPointF unit = toPosition({1.0, 1.0});
  const double sx = unit.x() - origin.x();
  const double sy = unit.y() - origin.y();
  auto px = [&](double x) { return static_cast<int>(std::lround(origin.x() + x * sx)); };
  auto py = [&](double y) { return static_cast<int>(std::lround(origin.y() + y * sy)); };
  const QRectF plot = chart_->plotArea();
  if (c.drawStatic && c.base > 0.0 && !c.bars.empty()) {
    const int left = px(c.bars.front().x0);
    const int right = px(c.bars.back().x1);
    int bottom = py(0.0);
    for (const PaintedContent::Band& band : c.staticBands) {
      const int top = std::min(py(band.top), bottom);
      if (top < bottom) painter->fillRect(QRect(QPoint(left, top), QPoint(right - 1, bottom - 1)), band.colour);
      bottom = top;
    }
  }
  const PixelMapping mapping{origin.x(), sx, origin.y(), sy};
  const int plotLeft = static_cast<int>(std::floor(plot.left()));
  const int plotRight = static_cast<int>(std::ceil(plot.right()));
  if (isRaster(painter)) {
    // One image blit: thousands of tall fillRects each wake Qt's fill threads (tens of ms).
    const FillsImage& image = fillsImage(mapping, plotLeft, plotRight);
    if (!image.image.isNull()) painter->drawImage(image.topLeft, image.image);
  } else {
    const Fills fills = phaseFills();
    const ColumnFills columns = columnFills(c.bars, c.base, mapping, plotLeft, plotRight);
    for (const FillRun& run : fillRuns(columns)) {
      const int split = std::min(run.gradientTop, columns.baseY);
      if (split > run.top)
        painter->fillRect(QRect(run.left, run.top, run.right - run.left, split - run.top),
                          fills[static_cast<std::size_t>(run.phase)]);
      if (split < columns.baseY)
        painter->fillRect(QRect(run.left, split, run.right - run.left, columns.baseY - split), fills[kPhaseCount]);
    }
  }
  // One pixel wide: Qt's raster engine strokes wider cosmetic pens through its general stroker,
  // which cost several ms per repaint on a 1,000-layer chain.
  QPen outline(ui::paletteColor(ui::PaletteRole::Outline), 1.0);
  outline.setCosmetic(true);
  paintLine(painter, c.outline, outline);
  // The rug: a short tick at the bottom of the plot wherever recompute ops run.
  const QColor rug = ui::paletteColor(ui::PaletteRole::RecomputeMark);
  const int rugBottom = static_cast<int>(plot.bottom()) - 1;
  int lastRugX = INT_MIN;  // one tick per pixel column on screen: neighbouring buckets share pixels
  const bool raster = isRaster(painter);
  for (double x : c.recomputeX) {
    const int rugX = px(x);
    if (raster && rugX == lastRugX) continue;
    painter->fillRect(QRect(rugX - 1, rugBottom - 6, 2, 6), rug);
    lastRugX = rugX;
  }
}

const ChartPaintItem::FillsImage& ChartPaintItem::fillsImage(const PixelMapping& mapping, int plotLeft,
                                                             int plotRight) const {
  const PaintedContent& c = *content_;
  FillsImage& cache = fillsCache_;
  if (cache.generation == c.generation && cache.mapping == mapping && cache.plotLeft == plotLeft &&
      cache.plotRight == plotRight)
    return cache;
  const ColumnFills columns = columnFills(c.bars, c.base, mapping, plotLeft, plotRight);
  const int top = columns.minTop();
  cache = FillsImage{c.generation, mapping, plotLeft, plotRight, QPoint(plotLeft, top), QImage()};
  const int width = static_cast<int>(columns.columns.size());
  const int height = columns.baseY - top;
  if (width <= 0 || height <= 0) return cache;
  const Fills fills = phaseFills();
  std::array<QRgb, kPhaseCount + 1> pixels{};
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = qPremultiply(fills[i].rgba());
  QImage image(width, height, QImage::Format_ARGB32_Premultiplied);
  for (int y = 0; y < height; ++y) {
    auto* row = reinterpret_cast<QRgb*>(image.scanLine(y));
    for (int x = 0; x < width; ++x) {
      const FillColumn& column = columns.columns[static_cast<std::size_t>(x)];
      const int rowY = top + y;
      row[x] = column.top > rowY            ? 0
               : column.gradientTop <= rowY ? pixels[kPhaseCount]
                                            : pixels[static_cast<std::size_t>(column.phase)];
    }
  }
  cache.image = std::move(image);
  return cache;
}

void ChartPaintItem::paintLine(QPainter* painter, const QList<QPointF>& points, const QPen& pen) const {
  if (points.size() < 2) return;
  const QPointF origin = toPosition({0.0, 0.0});
  const QPointF unit = toPosition({1.0, 1.0});
  QPolygonF polygon;
  polygon.reserve(points.size());
  for (const QPointF& v : points)
    polygon.append({origin.x() + v.x() * (unit.x() - origin.x()), origin.y() + v.y() * (unit.y() - origin.y())});
  painter->setPen(pen);
  painter->setBrush(Qt::NoBrush);
  painter->drawPolyline(polygon);
}

void ChartPaintItem::paintMeasured(QPainter* painter) const {
  const PaintedContent& c = *content_;
  painter->save();
  painter->setClipRect(chart_->plotArea());
  painter->setRenderHint(QPainter::Antialiasing, false);
  const QColor colour = ui::paletteColor(c.measuredStale ? ui::PaletteRole::MeasuredStale : ui::PaletteRole::Measured);
  const Qt::PenStyle style = c.measuredStale ? Qt::DashLine : Qt::SolidLine;
  if (isRaster(painter)) {
    // Two one-pixel lines a pixel apart look like the 1.8-pixel pen and stay on the fast path.
    QPen pen(colour, 1.0, style);
    pen.setCosmetic(true);
    paintLine(painter, c.measured, pen);
    painter->translate(1.0, 1.0);
    paintLine(painter, c.measured, pen);
  } else {
    QPen pen(colour, 1.8, style);
    pen.setCosmetic(true);
    paintLine(painter, c.measured, pen);
  }
  painter->restore();
}

void ChartPaintItem::paintShapes(QPainter* painter, const std::vector<QPointF>& values, const QList<QPointF>& shape,
                                 const QColor& colour) const {
  const QRectF plot = chart_->plotArea().adjusted(-1, -1, 1, 1);
  const QPen outline(colour.darker(150), 1.0);
  if (!isRaster(painter)) {
    painter->setPen(outline);
    painter->setBrush(colour);
    for (const QPointF& v : values) {
      const QPointF p = toPosition(v);
      if (plot.contains(p)) painter->drawPolygon(QPolygonF(shape).translated(p));
    }
    return;
  }
  // On screen one antialiased sprite, blitted at each marker: hundreds of antialiased polygons
  // per repaint were a third of a 1,000-layer chain's repaint.
  const QRectF bounds = QPolygonF(shape).boundingRect().adjusted(-2, -2, 2, 2);
  QImage sprite(bounds.size().toSize(), QImage::Format_ARGB32_Premultiplied);
  sprite.fill(Qt::transparent);
  {
    QPainter sp(&sprite);
    sp.setRenderHint(QPainter::Antialiasing, true);
    sp.setPen(outline);
    sp.setBrush(colour);
    sp.drawPolygon(QPolygonF(shape).translated(-bounds.topLeft()));
  }
  for (const QPointF& v : values) {
    const QPointF p = toPosition(v);
    if (plot.contains(p)) painter->drawImage((p + bounds.topLeft()).toPoint(), sprite);
  }
}

void ChartPaintItem::paintMarkers(QPainter* painter) const {
  const PaintedContent& c = *content_;
  if (!c.measured.isEmpty()) paintMeasured(painter);
  const QRectF plot = chart_->plotArea().adjusted(-1, -1, 1, 1);
  const QList<QPointF> triangle = {{-5, -9}, {5, -9}, {0, 0}};  // pointing down at the op
  const QList<QPointF> diamond = {{0, -4}, {4, 0}, {0, 4}, {-4, 0}};
  paintShapes(painter, c.stored, triangle, ui::paletteColor(ui::PaletteRole::Checkpoint));
  paintShapes(painter, c.freed, diamond, ui::paletteColor(ui::PaletteRole::CheckpointFreed));
  if (c.peak && plot.contains(toPosition(*c.peak))) {  // zoomed away: no marker at the plot's edge
    const QPointF p = toPosition(*c.peak);
    painter->setPen(QPen(Qt::white, 1.5));
    painter->setBrush(ui::paletteColor(ui::PaletteRole::Peak));
    painter->drawEllipse(p, 6.0, 6.0);
    if (!c.peakLabel.isEmpty()) {
      QFont font = painter->font();
      font.setBold(true);
      painter->setFont(font);
      const QFontMetricsF metrics(font);
      const double width = metrics.horizontalAdvance(c.peakLabel);
      // Left of the marker when the right side has no room.
      const bool left = p.x() + 10 + width > chart_->plotArea().right();
      const QPointF at = left ? p + QPointF(-10 - width, -8) : p + QPointF(10, -8);
      painter->setPen(ui::paletteColor(ui::PaletteRole::Peak).darker(130));
      painter->drawText(at, c.peakLabel);
    }
  }
}

}  // namespace remat::charts
