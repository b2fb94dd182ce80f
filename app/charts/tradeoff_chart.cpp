#include "tradeoff_chart.hpp"

#include <QChart>
#include <QChartView>
#include <QGraphicsSimpleTextItem>
#include <QLineSeries>
#include <QMouseEvent>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <memory>

#include "chart_tooltip.hpp"
#include "common/palette.hpp"
#include "common/units.hpp"

namespace remat::charts {
namespace {

constexpr double kHitPx = 8.0;       // how near a click must be to a point
constexpr double kLineGrabPx = 6.0;  // and to the capacity line to drag it

QScatterSeries* makeMarks(QObject* parent, const QString& name, QScatterSeries::MarkerShape shape, ui::PaletteRole role,
                          double size) {
  auto* series = new QScatterSeries(parent);
  series->setName(name);
  series->setMarkerShape(shape);
  series->setMarkerSize(size);
  series->setColor(ui::paletteColor(role));
  series->setBorderColor(ui::paletteColor(role).darker(150));
  return series;
}

QLineSeries* makeLine(QObject* parent, const QString& name, ui::PaletteRole role, double width, Qt::PenStyle style) {
  auto* series = new QLineSeries(parent);
  series->setName(name);
  QPen pen(ui::paletteColor(role), width, style);
  pen.setCosmetic(true);
  series->setPen(pen);
  return series;
}

}  // namespace

struct TradeoffChart::Parts {
  TradeoffChartData data;
  std::uint64_t capacityBytes = 0;
  std::optional<std::size_t> highlighted;
  ui::ByteUnit unit;
  QList<QPointF> step;  // bytes, cost
  bool dragging = false;

  QChartView* view = nullptr;
  std::unique_ptr<ChartTooltip> tooltip;
  QChart* chart = nullptr;
  QValueAxis* axisX = nullptr;
  QValueAxis* axisY = nullptr;
  QLineSeries* stepLine = nullptr;
  QScatterSeries* frontMarks = nullptr;
  QScatterSeries* plannerMarks = nullptr;
  QScatterSeries* currentMark = nullptr;
  QScatterSeries* highlightMark = nullptr;
  QLineSeries* capacity = nullptr;
  std::vector<QGraphicsSimpleTextItem*> plannerLabels;

  std::vector<QAbstractSeries*> all() const {
    return {stepLine, frontMarks, plannerMarks, currentMark, highlightMark, capacity};
  }
  // Axis units: bytes scaled to the unit of the largest peak.
  QPointF scaled(double bytes, double cost) const { return {bytes / unit.divisor, cost}; }
  QPointF positionOf(double bytes, double cost) const { return chart->mapToPosition(scaled(bytes, cost), stepLine); }
};

TradeoffChart::TradeoffChart(QWidget* parent) : QWidget(parent), parts_(std::make_unique<Parts>()) {
  Parts& p = *parts_;
  p.chart = new QChart();
  p.chart->setTheme(QChart::ChartThemeLight);
  p.chart->setMargins(QMargins(4, 4, 4, 4));
  p.chart->setAnimationOptions(QChart::NoAnimation);
  p.chart->legend()->setAlignment(Qt::AlignBottom);
  p.axisX = new QValueAxis(p.chart);
  p.axisY = new QValueAxis(p.chart);
  p.chart->addAxis(p.axisX, Qt::AlignBottom);
  p.chart->addAxis(p.axisY, Qt::AlignLeft);
  p.stepLine = makeLine(p.chart, tr("least recompute for a peak"), ui::PaletteRole::FrontStep, 2.0, Qt::SolidLine);
  p.frontMarks = makeMarks(p.chart, tr("plans on the front (click to apply)"), QScatterSeries::MarkerShapeCircle,
                           ui::PaletteRole::FrontPoint, 8.0);
  p.plannerMarks =
      makeMarks(p.chart, tr("named planners"), QScatterSeries::MarkerShapeRectangle, ui::PaletteRole::PlannerMark, 9.0);
  p.currentMark =
      makeMarks(p.chart, tr("current plan"), QScatterSeries::MarkerShapeTriangle, ui::PaletteRole::CurrentPlan, 13.0);
  p.highlightMark =
      makeMarks(p.chart, tr("fits the capacity"), QScatterSeries::MarkerShapeCircle, ui::PaletteRole::FrontPoint, 16.0);
  p.highlightMark->setColor(Qt::transparent);
  p.highlightMark->setBorderColor(ui::paletteColor(ui::PaletteRole::Peak));
  p.capacity = makeLine(p.chart, tr("device capacity (drag it)"), ui::PaletteRole::Peak, 1.5, Qt::DashLine);
  for (QAbstractSeries* series : p.all()) {
    p.chart->addSeries(series);
    series->attachAxis(p.axisX);
    series->attachAxis(p.axisY);
  }
  p.view = new QChartView(p.chart, this);
  p.view->setRenderHint(QPainter::Antialiasing);
  p.view->setMouseTracking(true);
  p.view->viewport()->installEventFilter(this);
  // The memory chart's tooltips: they stay while the pointer rests.
  p.tooltip = std::make_unique<ChartTooltip>(p.view, [this](const QPoint& at) {
    return tooltipAt(parts_->chart->mapFromScene(parts_->view->mapToScene(at)));
  });
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(p.view);
  connect(p.chart, &QChart::plotAreaChanged, this, [this]() { placeLabels(); });
  rebuild();
}

TradeoffChart::~TradeoffChart() = default;

void TradeoffChart::setData(TradeoffChartData data) {
  parts_->data = std::move(data);
  if (parts_->highlighted && *parts_->highlighted >= parts_->data.front.size()) parts_->highlighted.reset();
  rebuild();
}

const TradeoffChartData& TradeoffChart::data() const { return parts_->data; }

void TradeoffChart::setCapacityBytes(std::uint64_t bytes) {
  parts_->capacityBytes = bytes;
  placeCapacity();
}

std::uint64_t TradeoffChart::capacityBytes() const { return parts_->capacityBytes; }

void TradeoffChart::setHighlighted(std::optional<std::size_t> frontIndex) {
  Parts& p = *parts_;
  p.highlighted = frontIndex && *frontIndex < p.data.front.size() ? frontIndex : std::nullopt;
  p.highlightMark->clear();
  if (p.highlighted) {
    const TradeoffMark& mark = p.data.front[*p.highlighted];
    p.highlightMark->append(p.scaled(mark.peakBytes, mark.cost));
  }
}

std::optional<std::size_t> TradeoffChart::highlighted() const { return parts_->highlighted; }

// The step line: from each front point right to the next point's peak at its cost, then down.
void TradeoffChart::rebuild() {
  Parts& p = *parts_;
  const TradeoffChartData& d = p.data;
  double maxBytes = 1.0, maxCost = 0.0;
  for (const auto* marks : {&d.front, &d.planners})
    for (const TradeoffMark& m : *marks) {
      maxBytes = std::max(maxBytes, m.peakBytes);
      maxCost = std::max(maxCost, m.cost);
    }
  if (d.current) maxBytes = std::max(maxBytes, d.current->peakBytes);
  if (d.current) maxCost = std::max(maxCost, d.current->cost);
  const double minBytes = d.front.empty() ? 0.0 : d.front.front().peakBytes;
  const double rightBytes = maxBytes + 0.08 * (maxBytes - minBytes) + 1.0;
  p.unit = ui::byteUnitFor(rightBytes);
  p.step.clear();
  for (std::size_t i = 0; i < d.front.size(); ++i) {
    const double right = i + 1 < d.front.size() ? d.front[i + 1].peakBytes : rightBytes;
    p.step << QPointF(d.front[i].peakBytes, d.front[i].cost) << QPointF(right, d.front[i].cost);
  }
  QList<QPointF> scaledStep;
  for (const QPointF& corner : p.step) scaledStep << p.scaled(corner.x(), corner.y());
  p.stepLine->replace(scaledStep);
  const auto fill = [&p](QScatterSeries* series, const std::vector<TradeoffMark>& marks) {
    QList<QPointF> points;
    for (const TradeoffMark& m : marks) points << p.scaled(m.peakBytes, m.cost);
    series->replace(points);
  };
  fill(p.frontMarks, d.front);
  fill(p.plannerMarks, d.planners);
  fill(p.currentMark, d.current ? std::vector<TradeoffMark>{*d.current} : std::vector<TradeoffMark>{});
  p.axisX->setRange(std::max(0.0, minBytes - 0.08 * (maxBytes - minBytes)) / p.unit.divisor,
                    rightBytes / p.unit.divisor);
  p.axisY->setRange(0.0, maxCost > 0.0 ? maxCost * 1.08 : 1.0);
  p.axisX->applyNiceNumbers();
  p.axisY->applyNiceNumbers();
  p.axisX->setTitleText(tr("peak memory, static included (%1)").arg(p.unit.name));
  p.axisY->setTitleText(d.costTitle);
  for (QGraphicsSimpleTextItem* label : p.plannerLabels) delete label;
  p.plannerLabels.clear();
  for (const TradeoffMark& m : d.planners) {
    auto* label = new QGraphicsSimpleTextItem(m.label.section(QLatin1Char('\n'), 0, 0), p.chart);
    label->setBrush(ui::paletteColor(ui::PaletteRole::PlannerMark).darker(160));
    p.plannerLabels.push_back(label);
  }
  setHighlighted(p.highlighted);
  placeCapacity();
  placeLabels();
}

void TradeoffChart::placeCapacity() {
  Parts& p = *parts_;
  p.capacity->clear();
  p.capacity->setVisible(p.capacityBytes > 0);
  if (p.capacityBytes == 0) return;
  const double x = static_cast<double>(p.capacityBytes) / p.unit.divisor;
  p.capacity->append(x, p.axisY->min());
  p.capacity->append(x, p.axisY->max());
}

// Each planner's name beside its mark, moved down past the names placed before it (planners often
// share a peak, and then their marks stack).
void TradeoffChart::placeLabels() {
  Parts& p = *parts_;
  std::vector<QRectF> placed;
  for (std::size_t i = 0; i < p.plannerLabels.size() && i < p.data.planners.size(); ++i) {
    const TradeoffMark& m = p.data.planners[i];
    QRectF box = p.plannerLabels[i]->boundingRect();
    box.moveTopLeft(p.positionOf(m.peakBytes, m.cost) + QPointF(6.0, -16.0));
    for (std::size_t tries = 0; tries < placed.size(); ++tries) {
      const auto overlap =
          std::find_if(placed.begin(), placed.end(), [&](const QRectF& r) { return r.intersects(box); });
      if (overlap == placed.end()) break;
      box.moveTop(overlap->bottom() + 1.0);
    }
    p.plannerLabels[i]->setPos(box.topLeft());
    placed.push_back(box);
  }
}

QList<QPointF> TradeoffChart::stepPoints() const { return parts_->step; }

QPoint TradeoffChart::viewportPosition(const QPointF& value) const {
  const Parts& p = *parts_;
  return p.view->mapFromScene(p.chart->mapToScene(p.positionOf(value.x(), value.y())));
}

QWidget* TradeoffChart::viewport() const { return parts_->view->viewport(); }

std::uint64_t TradeoffChart::bytesAt(const QPointF& chartPosition) const {
  const Parts& p = *parts_;
  const double x = p.chart->mapToValue(chartPosition, p.stepLine).x() * p.unit.divisor;
  return x > 0.0 ? static_cast<std::uint64_t>(std::llround(x)) : 1;
}

// A press on the capacity line starts dragging it; one on a front point picks that point.
bool TradeoffChart::press(const QPointF& chartPosition) {
  Parts& p = *parts_;
  if (p.capacityBytes > 0) {
    const double lineX = p.positionOf(static_cast<double>(p.capacityBytes), 0.0).x();
    if (std::abs(lineX - chartPosition.x()) <= kLineGrabPx) {
      p.dragging = true;
      return true;
    }
  }
  std::optional<std::size_t> nearest;
  double best = kHitPx;
  for (std::size_t i = 0; i < p.data.front.size(); ++i) {
    const QPointF at = p.positionOf(p.data.front[i].peakBytes, p.data.front[i].cost);
    const double distance = std::hypot(at.x() - chartPosition.x(), at.y() - chartPosition.y());
    if (distance <= best) {
      best = distance;
      nearest = i;
    }
  }
  if (nearest) emit pointClicked(*nearest);
  return nearest.has_value();
}

QString TradeoffChart::tooltipAt(const QPointF& chartPosition) const {
  const Parts& p = *parts_;
  const auto near = [&](const TradeoffMark& m) {
    const QPointF at = p.positionOf(m.peakBytes, m.cost);
    return std::hypot(at.x() - chartPosition.x(), at.y() - chartPosition.y()) <= kHitPx;
  };
  if (p.data.current && near(*p.data.current)) return p.data.current->label;
  for (const TradeoffMark& m : p.data.planners)
    if (near(m)) return m.label;
  for (const TradeoffMark& m : p.data.front)
    if (near(m)) return m.label;
  return {};
}

bool TradeoffChart::eventFilter(QObject* watched, QEvent* event) {
  Parts& p = *parts_;
  if (watched != p.view->viewport()) return QWidget::eventFilter(watched, event);
  const auto chartPosition = [&](QMouseEvent* mouse) {
    return p.chart->mapFromScene(p.view->mapToScene(mouse->position().toPoint()));
  };
  switch (event->type()) {
    case QEvent::MouseButtonPress: {
      auto* mouse = static_cast<QMouseEvent*>(event);
      if (mouse->button() == Qt::LeftButton && press(chartPosition(mouse))) return true;
      break;
    }
    case QEvent::MouseMove: {
      auto* mouse = static_cast<QMouseEvent*>(event);
      if (p.dragging) {
        setCapacityBytes(bytesAt(chartPosition(mouse)));
        emit capacityDragged(p.capacityBytes);
        return true;
      }
      p.tooltip->showAt(mouse->position().toPoint(), mouse->globalPosition().toPoint());
      break;
    }
    case QEvent::ToolTip:
    case QEvent::Leave:
      if (p.tooltip->handle(event)) return true;
      break;
    case QEvent::MouseButtonRelease:
      if (p.dragging) {
        p.dragging = false;
        emit capacityDropped(p.capacityBytes);
        return true;
      }
      break;
    default: break;
  }
  return QWidget::eventFilter(watched, event);
}

}  // namespace remat::charts
