#include "memory_chart_items.hpp"

#include <QAbstractSeries>
#include <QChart>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <array>
#include <cmath>

#include "common/palette.hpp"

namespace remat::charts {
namespace {
// Qt Charts stacks its series at z 4 (ChartPresenter::SeriesZValue), the grid at 2 and the legend
// at 5: fills go between grid and lines, markers between lines and legend.
constexpr double kFillsZ = 3.5;
constexpr double kMarkersZ = 4.5;
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
  const int baseY = py(c.base);
  const QRectF plot = chart_->plotArea();
  if (c.drawStatic && c.base > 0.0 && !c.bars.empty()) {
    const int left = px(c.bars.front().x0);
    const int right = px(c.bars.back().x1);
    painter->fillRect(QRect(QPoint(left, baseY), QPoint(right - 1, py(0.0) - 1)),
                      ui::paletteColor(ui::PaletteRole::Static));
  }
  const std::array<QColor, 3> fills = {ui::phaseColor(Phase::Forward, 150), ui::phaseColor(Phase::Recompute, 170),
                                       ui::phaseColor(Phase::Backward, 150)};
  for (const PhaseBar& bar : c.bars) {
    // Integer edges from the same rounding: neighbouring bars abut without gaps or overlaps.
    const int left = px(bar.x0);
    const int right = px(bar.x1);
    const int top = py(bar.y);
    if (right <= left || top >= baseY) continue;
    painter->fillRect(QRect(left, top, right - left, baseY - top), fills[static_cast<std::size_t>(bar.phase)]);
  }
  QPen outline(ui::paletteColor(ui::PaletteRole::Outline), 1.2);
  outline.setCosmetic(true);
  paintLine(painter, c.outline, outline);
  // The rug: a short tick at the bottom of the plot wherever recompute ops run.
  const QColor rug = ui::paletteColor(ui::PaletteRole::RecomputeMark);
  const int rugBottom = static_cast<int>(plot.bottom()) - 1;
  for (double x : c.recomputeX) painter->fillRect(QRect(px(x) - 1, rugBottom - 6, 2, 6), rug);
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

void ChartPaintItem::paintMarkers(QPainter* painter) const {
  const PaintedContent& c = *content_;
  if (!c.measured.isEmpty()) {
    painter->save();
    painter->setClipRect(chart_->plotArea());
    painter->setRenderHint(QPainter::Antialiasing, false);
    QPen pen(ui::paletteColor(c.measuredStale ? ui::PaletteRole::MeasuredStale : ui::PaletteRole::Measured), 1.8,
             c.measuredStale ? Qt::DashLine : Qt::SolidLine);
    pen.setCosmetic(true);
    paintLine(painter, c.measured, pen);
    painter->restore();
  }
  const QRectF plot = chart_->plotArea().adjusted(-1, -1, 1, 1);
  painter->setPen(QPen(ui::paletteColor(ui::PaletteRole::Checkpoint).darker(150), 1.0));
  painter->setBrush(ui::paletteColor(ui::PaletteRole::Checkpoint));
  for (const QPointF& v : c.stored) {
    const QPointF p = toPosition(v);
    if (!plot.contains(p)) continue;
    const QPointF tri[3] = {p + QPointF(-5, -9), p + QPointF(5, -9), p};  // pointing down at the op
    painter->drawPolygon(tri, 3);
  }
  painter->setPen(QPen(ui::paletteColor(ui::PaletteRole::CheckpointFreed).darker(150), 1.0));
  painter->setBrush(ui::paletteColor(ui::PaletteRole::CheckpointFreed));
  for (const QPointF& v : c.freed) {
    const QPointF p = toPosition(v);
    if (!plot.contains(p)) continue;
    const QPointF diamond[4] = {p + QPointF(0, -4), p + QPointF(4, 0), p + QPointF(0, 4), p + QPointF(-4, 0)};
    painter->drawPolygon(diamond, 4);
  }
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
