// MemoryChart and the mouse: what hovering shows (tooltips that stay while the pointer rests),
// zooming into a stretch of the x axis and panning it.
#include <QApplication>
#include <QMouseEvent>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "common/qt_text.hpp"
#include "memory_chart_parts.hpp"
#include "remat/base/duration.hpp"

namespace remat::charts {
namespace {

constexpr double kMarkerHitPx = 8.0;
constexpr double kMinZoomDragPx = 5.0;       // a shorter drag is a click, not a zoom
constexpr double kWheelZoomPerStep = 0.8;    // one wheel notch shows 80% of the range
constexpr double kWheelPanPerStep = 0.1;     // a sideways notch moves a tenth of it
constexpr double kWheelStepDegrees = 120.0;  // QWheelEvent::angleDelta per notch

// "850.0 us", "47.39 ms": an op's duration, as core writes every duration.
QString durationText(double microseconds) { return QString::fromStdString(remat::formatDuration(microseconds * 1e-6)); }

QString opLabel(const Timeline& timeline, std::size_t index) {
  return QString::fromStdString(remat::opLabel(timeline.entries[index].op, timeline.layerNames));
}

}  // namespace

double MemoryChart::Parts::minimumZoomWidth() const {
  return options.xAxis == XAxisMode::OpIndex ? 2.0 : displayed.xMax * 1e-4;
}

std::optional<XRange> MemoryChart::Parts::clampZoom(std::optional<XRange> range) const {
  if (!range) return std::nullopt;
  const double xMax = displayed.xMax;
  const double width = std::max(range->to - range->from, minimumZoomWidth());
  if (!(width < xMax)) return std::nullopt;
  // A range that is already valid stays bit for bit: recentring it would move its ends by an ulp on
  // every redraw, and a zoom shared between charts (the compare view) would drift apart.
  if (range->to - range->from >= minimumZoomWidth() && range->from >= 0.0 && range->to <= xMax) return range;
  const double center = (range->from + range->to) / 2.0;
  const double from = std::clamp(center - width / 2.0, 0.0, xMax - width);
  return XRange{from, from + width};
}

std::optional<XRange> MemoryChart::zoom() const { return parts_->zoom; }

void MemoryChart::setZoom(std::optional<XRange> range) {
  parts_->zoom = range;
  applyRanges();
}

XRange MemoryChart::visibleXRange() const { return parts_->zoom ? *parts_->zoom : XRange{0.0, parts_->displayed.xMax}; }

QString MemoryChart::zoomHelp() {
  return tr(
      "Drag across the chart to zoom into those ops, turn the wheel to zoom around the pointer, "
      "Shift+drag or the middle button to pan, double-click to see the whole step");
}

void MemoryChart::resetZoom() { zoomByUser(std::nullopt); }

void MemoryChart::zoomByUser(std::optional<XRange> range) {
  const std::optional<XRange> before = parts_->zoom;
  setZoom(range);
  if (parts_->zoom != before) emit zoomChanged(parts_->zoom);
}

QRectF MemoryChart::plotInViewport() const {
  const Parts& p = *parts_;
  return p.view->mapFromScene(p.chart->mapToScene(p.chart->plotArea())).boundingRect();
}

double MemoryChart::valueAtViewportX(double x) const {
  const Parts& p = *parts_;
  const QPointF chartPosition = p.chart->mapFromScene(p.view->mapToScene(QPoint(static_cast<int>(x), 0)));
  return p.chart->mapToValue(chartPosition, p.footprint).x();
}

bool MemoryChart::eventFilter(QObject* watched, QEvent* event) {
  if (watched != parts_->view->viewport()) return QWidget::eventFilter(watched, event);
  switch (event->type()) {
    case QEvent::MouseButtonPress:
    case QEvent::MouseButtonRelease:
    case QEvent::MouseButtonDblClick:
    case QEvent::MouseMove: return handleMouse(event);
    case QEvent::Wheel: return handleWheel(event);
    case QEvent::ToolTip:
    case QEvent::Leave:
      if (parts_->tooltip->handle(event)) return true;
      break;
    default: break;
  }
  return QWidget::eventFilter(watched, event);
}

bool MemoryChart::handleMouse(QEvent* event) {
  Parts& p = *parts_;
  auto* mouse = static_cast<QMouseEvent*>(event);
  const QRectF plot = plotInViewport();
  const double x = mouse->position().x();
  if (event->type() == QEvent::MouseButtonDblClick) {
    resetZoom();
    return true;
  }
  if (event->type() == QEvent::MouseButtonPress) {
    if (!plot.contains(mouse->position())) return false;
    const bool pan = mouse->button() == Qt::MiddleButton ||
                     (mouse->button() == Qt::LeftButton && (mouse->modifiers() & Qt::ShiftModifier));
    if (!pan && mouse->button() != Qt::LeftButton) return false;
    p.drag = pan ? Parts::Drag::Pan : Parts::Drag::Zoom;
    p.pressX = x;
    p.pressRange = visibleXRange();
    ChartTooltip::hide();
    return true;
  }
  if (event->type() == QEvent::MouseMove && p.drag == Parts::Drag::None) {
    p.tooltip->showAt(mouse->position().toPoint(), mouse->globalPosition().toPoint());
    return false;
  }
  if (p.drag == Parts::Drag::Pan) {
    const double perPixel = (p.pressRange.to - p.pressRange.from) / std::max(1.0, plot.width());
    const double shift = (p.pressX - x) * perPixel;
    if (p.pressRange.to - p.pressRange.from < p.displayed.xMax)
      zoomByUser(XRange{p.pressRange.from + shift, p.pressRange.to + shift});
  } else if (p.drag == Parts::Drag::Zoom) {
    const double left = std::clamp(std::min(p.pressX, x), plot.left(), plot.right());
    const double right = std::clamp(std::max(p.pressX, x), plot.left(), plot.right());
    if (event->type() == QEvent::MouseMove) {
      if (!p.band) p.band = new QRubberBand(QRubberBand::Rectangle, p.view->viewport());
      p.band->setGeometry(QRectF(left, plot.top(), right - left, plot.height()).toRect());
      p.band->show();
    } else if (right - left >= kMinZoomDragPx) {
      zoomByUser(XRange{valueAtViewportX(left), valueAtViewportX(right)});
    }
  }
  if (event->type() == QEvent::MouseButtonRelease) {
    p.drag = Parts::Drag::None;
    if (p.band) p.band->hide();
  }
  return true;
}

bool MemoryChart::handleWheel(QEvent* event) {
  auto* wheel = static_cast<QWheelEvent*>(event);
  if (!plotInViewport().contains(wheel->position()) || parts_->data.predicted.entries.empty()) return false;
  const XRange range = visibleXRange();
  const double width = range.to - range.from;
  const bool sideways = wheel->angleDelta().x() != 0 || (wheel->modifiers() & Qt::ShiftModifier);
  const int delta = wheel->angleDelta().x() != 0 ? wheel->angleDelta().x() : wheel->angleDelta().y();
  const double steps = delta / kWheelStepDegrees;
  if (sideways) {
    if (parts_->zoom)
      zoomByUser(XRange{range.from - steps * kWheelPanPerStep * width, range.to - steps * kWheelPanPerStep * width});
    return true;
  }
  // The value under the pointer stays where it is.
  const double anchor = valueAtViewportX(wheel->position().x());
  const double scale = std::pow(kWheelZoomPerStep, steps);
  zoomByUser(XRange{anchor - (anchor - range.from) * scale, anchor + (range.to - anchor) * scale});
  return true;
}

QString MemoryChart::hoverTextAt(const QPoint& viewportPosition) {
  const Parts& p = *parts_;
  const QPointF position = p.chart->mapFromScene(p.view->mapToScene(viewportPosition));
  if (!p.chart->plotArea().adjusted(-8, -8, 8, 8).contains(position) || p.data.predicted.entries.empty()) return {};
  QString text = markerTooltipAt(position);
  if (text.isEmpty()) {
    const double x = p.chart->mapToValue(position, p.footprint).x();
    if (const auto op = opAt(p.predictedEdges, x)) emit opHovered(*op);
    text = tooltipAt(x);
  }
  return text;
}

QString MemoryChart::markerTooltipAt(const QPointF& chartPosition) const {
  const Parts& p = *parts_;
  const QRectF plot = p.chart->plotArea().adjusted(-1, -1, 1, 1);
  auto near = [&](const QPointF& value) {
    const QPointF at = p.markers->toPosition(value);
    return plot.contains(at) && std::hypot(at.x() - chartPosition.x(), at.y() - chartPosition.y()) <= kMarkerHitPx;
  };
  if (p.painted.peak && near(*p.painted.peak)) return p.data.peakText;
  for (std::size_t i = 0; i < p.painted.stored.size() && i < p.data.checkpointStored.size(); ++i)
    if (near(p.painted.stored[i])) return p.data.checkpointStored[i].text;
  for (std::size_t i = 0; i < p.painted.freed.size() && i < p.data.checkpointFreed.size(); ++i)
    if (near(p.painted.freed[i])) return p.data.checkpointFreed[i].text;
  return {};
}

QString MemoryChart::tooltipAt(double x) const {
  const Parts& p = *parts_;
  const auto op = opAt(p.predictedEdges, x);
  if (!op || p.data.predicted.entries.empty()) return {};
  const Timeline& t = p.data.predicted;
  const TimelineEntry& e = t.entries[*op];
  QString text = tr("op %1: %2 (%3)\nfootprint %4, alive after %5")
                     .arg(*op)
                     .arg(opLabel(t, *op), ui::toQString(phaseName(e.op.phase())), ui::formatBytes(e.footprintBytes),
                          ui::formatBytes(e.liveAfterBytes));
  if (e.timeUs > 0.0) text += tr("\nmodelled time %1").arg(durationText(e.timeUs));
  // A stale measurement ran another plan: its op i is not this op.
  if (p.data.measured && !p.data.measuredStale && *op < p.data.measured->entries.size()) {
    const TimelineEntry& m = p.data.measured->entries[*op];
    text += tr("\nmeasured: footprint %1, %2").arg(ui::formatBytes(m.footprintBytes), durationText(m.timeUs));
  }
  return text;
}

}  // namespace remat::charts
