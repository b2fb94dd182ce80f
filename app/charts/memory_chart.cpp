#include "memory_chart.hpp"

#include <QBuffer>
#include <QLegendMarker>
#include <QPainter>
#include <QSvgGenerator>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "common/palette.hpp"
#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "image_file.hpp"
#include "memory_chart_parts.hpp"

namespace remat::charts {
namespace {

constexpr int kXTicks = 8;  // about this many labelled ticks across the x axis

// 1, 2 or 5 times a power of ten, at least value: readable tick steps.
double niceStep(double value) {
  if (!(value > 0.0)) return 1.0;
  const double power = std::pow(10.0, std::floor(std::log10(value)));
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * power >= value) return factor * power;
  return 10.0 * power;
}

QList<QPointF> scaledY(const QList<QPointF>& points, double divisor) {
  QList<QPointF> out;
  out.reserve(points.size());
  for (const QPointF& p : points) out.append({p.x(), p.y() / divisor});
  return out;
}

QLineSeries* makeLine(QObject* parent, const QColor& color, double width, Qt::PenStyle style = Qt::SolidLine) {
  auto* series = new QLineSeries(parent);
  QPen pen(color, width, style);
  pen.setCosmetic(true);
  series->setPen(pen);
  return series;
}

// Markers are painted by ChartPaintItem; these empty series give them their legend entries.
QAreaSeries* areaLegend(QChart* chart, const QColor& color) {
  auto* legend = new QAreaSeries(new QLineSeries(chart));
  legend->setColor(color);
  legend->setBorderColor(color.darker(120));
  return legend;
}

QScatterSeries* legendEntry(QObject* parent, const QString& name, QScatterSeries::MarkerShape shape,
                            const QColor& color) {
  auto* series = new QScatterSeries(parent);
  series->setName(name);
  series->setMarkerShape(shape);
  series->setMarkerSize(9.0);
  series->setColor(color);
  series->setBorderColor(color.darker(150));
  return series;
}

}  // namespace

void MemoryChart::Parts::createChart() {
  chart = new QChart();
  chart->setTheme(QChart::ChartThemeLight);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(Qt::AlignBottom);
  QFont legendFont = chart->legend()->font();
  legendFont.setPointSizeF(legendFont.pointSizeF() * 0.9);
  chart->legend()->setFont(legendFont);
  axisX = new QValueAxis(chart);
  axisY = new QValueAxis(chart);
  for (QValueAxis* axis : {axisX, axisY}) {
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickInterval(1.0);
  }
  chart->addAxis(axisX, Qt::AlignBottom);
  chart->addAxis(axisY, Qt::AlignLeft);
}

void MemoryChart::Parts::createSeries() {
  for (QAreaSeries*& legend : staticLegends) legend = areaLegend(chart, ui::paletteColor(ui::PaletteRole::Static));
  for (Phase phase : {Phase::Forward, Phase::Recompute, Phase::Backward, Phase::Step}) {
    QAreaSeries*& legend = phaseLegend[static_cast<std::size_t>(phase)];
    legend = areaLegend(chart, ui::phaseColor(phase, 170));
    legend->setName(phase == Phase::Step ? MemoryChart::tr("optimizer step") : ui::toQString(phaseName(phase)));
    legend->setBorderColor(ui::phaseColor(phase));
  }
  gradientsLegend = areaLegend(chart, ui::paletteColor(ui::PaletteRole::WeightGradients, 200));
  gradientsLegend->setName(MemoryChart::tr("weight gradients"));
  // The footprint series holds no points: it maps axis units for the paint items.
  footprint = makeLine(chart, ui::paletteColor(ui::PaletteRole::Outline), 1.2);
  footprint->setName(MemoryChart::tr("footprint"));
  measuredLine = makeLine(chart, ui::paletteColor(ui::PaletteRole::Measured), 1.8);
  capacity = makeLine(chart, ui::paletteColor(ui::PaletteRole::Peak), 1.5, Qt::DashLine);
  recomputeLegend = legendEntry(chart, MemoryChart::tr("recompute op"), QScatterSeries::MarkerShapeRectangle,
                                ui::paletteColor(ui::PaletteRole::RecomputeMark));
  storedLegend = legendEntry(chart, MemoryChart::tr("checkpoint stored"), QScatterSeries::MarkerShapeTriangle,
                             ui::paletteColor(ui::PaletteRole::Checkpoint));
  freedLegend = legendEntry(chart, MemoryChart::tr("checkpoint freed"), QScatterSeries::MarkerShapeRotatedRectangle,
                            ui::paletteColor(ui::PaletteRole::CheckpointFreed));
  peakLegend = legendEntry(chart, MemoryChart::tr("peak"), QScatterSeries::MarkerShapeCircle,
                           ui::paletteColor(ui::PaletteRole::Peak));
  for (QAbstractSeries* series : all()) {
    chart->addSeries(series);
    series->attachAxis(axisX);
    series->attachAxis(axisY);
  }
  fills = new ChartPaintItem(chart, footprint, &painted, ChartPaintItem::Layer::Fills);
  markers = new ChartPaintItem(chart, footprint, &painted, ChartPaintItem::Layer::Markers);
}

std::vector<StaticPart> MemoryChart::Parts::staticBands() const {
  std::vector<StaticPart> bands;
  for (const StaticPart& part : data.staticParts)
    if (part.bytes > 0 && bands.size() < kStaticLegends) bands.push_back(part);
  if (bands.empty() && data.predicted.staticBytes > 0)
    bands.push_back({MemoryChart::tr("static"), data.predicted.staticBytes, ui::PaletteRole::Static});
  return bands;
}

void MemoryChart::Parts::updateAreaLegends(bool hasPrediction) {
  const std::vector<StaticPart> bands = staticBands();
  for (std::size_t i = 0; i < staticLegends.size(); ++i) {
    QAreaSeries* legend = staticLegends[i];
    legend->setVisible(hasPrediction && predicted.base > 0.0 && i < bands.size());
    if (i >= bands.size()) continue;
    legend->setName(bands[i].name);
    legend->setColor(ui::paletteColor(bands[i].role));
    legend->setBorderColor(ui::paletteColor(bands[i].role).darker(120));
  }
  for (QAreaSeries* area : phaseLegend) area->setVisible(hasPrediction);
  const bool hasStep = hasPrediction && data.predicted.entries.back().op.kind == OpKind::Step;
  phaseLegend[static_cast<std::size_t>(Phase::Step)]->setVisible(hasStep);
  const std::vector<std::uint64_t>& gradients = data.weightGradientBytes;
  gradientsLegend->setVisible(
      hasPrediction && std::any_of(gradients.begin(), gradients.end(), [](std::uint64_t bytes) { return bytes > 0; }));
}

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent), parts_(std::make_unique<Parts>()) {
  Parts& p = *parts_;
  p.createChart();
  p.createSeries();
  connect(p.chart, &QChart::plotAreaChanged, this, [this]() {
    parts_->fills->refresh();
    parts_->markers->refresh();
  });
  p.view = new QChartView(p.chart, this);
  // Step lines and bars are axis-aligned: antialiasing would only blur them (the markers turn it on).
  p.view->setRenderHint(QPainter::Antialiasing, false);
  p.view->setMinimumSize(320, 200);
  p.view->viewport()->setMouseTracking(true);
  p.view->viewport()->installEventFilter(this);
  p.tooltip = std::make_unique<ChartTooltip>(p.view, [this](const QPoint& at) { return hoverTextAt(at); });
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(p.view);
  rebuild();
}

MemoryChart::~MemoryChart() = default;

void MemoryChart::setData(ChartData data) {
  parts_->data = std::move(data);
  rebuild();
}

const ChartData& MemoryChart::data() const { return parts_->data; }

void MemoryChart::setOptions(const ChartOptions& options) {
  // A zoom is in the old axis' units (ops or ms): another axis starts from the whole step.
  const bool axisChanged = options.xAxis != parts_->options.xAxis;
  parts_->options = options;
  if (axisChanged && parts_->zoom) {
    parts_->zoom.reset();
    rebuild();
    emit zoomChanged(std::nullopt);
    return;
  }
  rebuild();
}

const ChartOptions& MemoryChart::options() const { return parts_->options; }

ChartRanges MemoryChart::naturalRanges() const { return parts_->natural; }

void MemoryChart::setSharedRanges(std::optional<ChartRanges> ranges) {
  parts_->shared = ranges;
  applyRanges();
}

ChartRanges MemoryChart::displayedRanges() const { return parts_->displayed; }

namespace {

// Decimals enough to tell ticks `step` apart: 0 for whole steps, 1 for 0.5 or 0.2, 2 for 0.05, ...
QString labelFormatFor(double step) {
  const int decimals = step >= 1.0 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return QStringLiteral("%.%1f").arg(decimals);
}

// Dynamic ticks every `step` from 0, over [from, to]. Only what changed is set: an edit usually
// keeps the axes, and Qt Charts makes the axis' labels again on every setLabelFormat. The interval
// goes before the range: a wide range with the old fine interval would create thousands of tick
// items for a moment.
void setTicks(QValueAxis& axis, double step, double from, double to) {
  if (axis.tickType() != QValueAxis::TicksDynamic) axis.setTickType(QValueAxis::TicksDynamic);
  axis.setTickAnchor(0.0);
  axis.setTickInterval(step);
  const QString format = labelFormatFor(step);
  if (axis.labelFormat() != format) axis.setLabelFormat(format);
  axis.setRange(from, to);
}

}  // namespace

void MemoryChart::rebuild() {
  Parts& p = *parts_;
  const ChartData& d = p.data;
  const bool timeMode = p.options.xAxis == XAxisMode::Time;
  // A stale run's clock is another plan's: on a time axis it would set the axis' extent (a 1.6 s run
  // squashing a 0.5 ms prediction against x = 0), so there it is not drawn; the axis follows what is.
  const bool hasMeasured = d.measured.has_value() && !d.measured->entries.empty() && !(timeMode && d.measuredStale);
  p.measuredEdges = hasMeasured ? opEdges(*d.measured, p.options.xAxis) : std::vector<double>{};
  // In time mode the prediction follows the measured clock when that measured the same plan;
  // otherwise it keeps its modelled op durations.
  const bool measuredClock =
      hasMeasured && !d.measuredStale && d.measured->entries.size() == d.predicted.entries.size();
  p.predictedEdges = timeMode && measuredClock ? p.measuredEdges : opEdges(d.predicted, p.options.xAxis);
  p.predicted = buildTimelineSeries(d.predicted, p.predictedEdges, p.options, d.weightGradientBytes);
  p.measured = hasMeasured ? buildTimelineSeries(*d.measured, p.measuredEdges, p.options) : TimelineSeries{};
  p.storedPoints.clear();
  p.freedPoints.clear();
  for (const ChartMarker& m : d.checkpointStored)
    p.storedPoints.push_back(opPoint(d.predicted, p.predictedEdges, m.opIndex, p.predicted.base));
  for (const ChartMarker& m : d.checkpointFreed)
    p.freedPoints.push_back(opPoint(d.predicted, p.predictedEdges, m.opIndex, p.predicted.base));
  p.natural.xMax = std::max({p.predicted.xMax, p.measured.xMax, timeMode ? 0.0 : 1.0});
  p.natural.yMaxBytes = std::max(
      {p.predicted.yMax, p.measured.yMax, static_cast<double>(p.options.capacityBytes), p.predicted.base, 1.0});

  const bool hasPrediction = !d.predicted.entries.empty();
  // QChart::setTitle lays the whole chart out again (axes, legend) even when the text is the same.
  const QString title = hasPrediction || !d.title.isEmpty() ? d.title : tr("No plan to show");
  if (p.chart->title() != title) p.chart->setTitle(title);
  if (!timeMode) {
    p.axisX->setTitleText(tr("op (forward, then backward)"));
  } else if (measuredClock) {
    p.axisX->setTitleText(tr("time (ms, measured on %1)").arg(QString::fromStdString(d.measured->source)));
  } else {
    p.axisX->setTitleText(d.predictedClock.isEmpty() ? tr("modelled time (ms)")
                                                     : tr("modelled time (ms; %1)").arg(d.predictedClock));
  }
  if (hasMeasured) p.measuredLine->setName(measuredLegend());
  p.measuredLine->setColor(
      ui::paletteColor(d.measuredStale ? ui::PaletteRole::MeasuredStale : ui::PaletteRole::Measured));
  p.capacity->setName(tr("capacity %1").arg(ui::formatBytes(p.options.capacityBytes)));
  p.updateAreaLegends(hasPrediction);
  p.footprint->setVisible(hasPrediction);
  p.peakLegend->setVisible(hasPrediction);
  p.measuredLine->setVisible(hasMeasured);
  p.capacity->setVisible(p.options.capacityBytes > 0);
  p.recomputeLegend->setVisible(!p.predicted.recomputeMarks.isEmpty());
  p.storedLegend->setVisible(!p.storedPoints.empty());
  p.freedLegend->setVisible(!p.freedPoints.empty());
  applyRanges();
  // Legend entries follow visibility; the footprint outline needs none (the phases name it).
  for (QAbstractSeries* series : p.all())
    for (QLegendMarker* marker : p.chart->legend()->markers(series))
      marker->setVisible(series->isVisible() && series != p.footprint);
  placeLegend();
}

// Under the plot when its entries fit in one row, else beside it: Qt Charts elides a row that is
// too narrow ("reco...", "check..." at 1,024 x 700), and a column keeps every name readable.
void MemoryChart::placeLegend() {
  QLegend* legend = parts_->chart->legend();
  const QFontMetrics metrics(legend->font());
  int rowWidth = 16;  // the legend's own margins
  for (QLegendMarker* marker : legend->markers())
    if (marker->isVisible()) rowWidth += metrics.horizontalAdvance(marker->label()) + 2 * metrics.height() + 4;
  const Qt::Alignment alignment = rowWidth > width() ? Qt::AlignRight : Qt::AlignBottom;
  if (legend->alignment() != alignment) legend->setAlignment(alignment);
}

bool MemoryChart::legendBeside() const { return parts_->chart->legend()->alignment() == Qt::AlignRight; }

void MemoryChart::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  placeLegend();
}

// The measured line's legend: its device, run and plan, and whether it still belongs to this one.
QString MemoryChart::measuredLegend() const {
  const ChartData& d = parts_->data;
  const QString plan =
      ui::readablePlannerName(d.measuredPlan.isEmpty() ? QString::fromStdString(d.measured->planner) : d.measuredPlan);
  const QString source = QString::fromStdString(d.measured->source);
  // Short: the legend gives each entry one line.
  if (d.measuredStale) return tr("measured (%1), plan %2: stale").arg(source, plan);
  return tr("measured (%1), plan %2: peak %3")
      .arg(source, plan, ui::formatBytes(static_cast<std::uint64_t>(parts_->measured.yMax)));
}

void MemoryChart::applyRanges() {
  Parts& p = *parts_;
  p.displayed = p.shared ? *p.shared : p.natural;
  if (!(p.displayed.xMax > 0.0)) p.displayed.xMax = 1.0;
  p.zoom = p.clampZoom(p.zoom);
  p.unit = ui::byteUnitFor(p.displayed.yMaxBytes);
  const double div = p.unit.divisor;
  const XRange visible = visibleXRange();
  // Axes first: every later replace() then lays out against the final ranges once. Op numbers are
  // whole: their ticks are too.
  double xStep = niceStep((visible.to - visible.from) / kXTicks);
  if (p.options.xAxis == XAxisMode::OpIndex) xStep = std::max(xStep, 1.0);
  const double yStep = niceStep(p.displayed.yMaxBytes * 1.05 / div / 6.0);
  setTicks(*p.axisX, xStep, visible.from, visible.to);
  setTicks(*p.axisY, yStep, 0.0, std::ceil(p.displayed.yMaxBytes * 1.05 / div / yStep) * yStep);
  p.axisY->setTitleText(tr("memory (%1)").arg(p.unit.name));

  const double capacity = static_cast<double>(p.options.capacityBytes) / div;
  const QList<QPointF> capacityLine = {{0.0, capacity}, {p.displayed.xMax, capacity}};
  if (p.capacity->points() != capacityLine) p.capacity->replace(capacityLine);
  updatePaintedContent();
}

// What the paint items draw, in axis units.
void MemoryChart::updatePaintedContent() {
  Parts& p = *parts_;
  const double div = p.unit.divisor;
  PaintedContent& c = p.painted;
  c.base = p.predicted.base / div;
  c.drawStatic = p.options.includeStatic;
  c.staticBands.clear();
  double top = 0.0;
  for (const StaticPart& part : p.staticBands()) {
    top += static_cast<double>(part.bytes) / div;
    c.staticBands.push_back({std::min(top, c.base), ui::paletteColor(part.role)});
  }
  ++c.generation;
  c.outline = scaledY(p.predicted.footprint, div);
  c.measured = scaledY(p.measured.footprint, div);
  c.measuredStale = p.data.measuredStale;
  c.bars = p.predicted.bars;
  for (PhaseBar& bar : c.bars) {
    bar.y /= div;
    bar.gradientY /= div;
  }
  c.recomputeX.clear();
  for (const QPointF& mark : p.predicted.recomputeMarks) c.recomputeX.push_back(mark.x());
  c.stored.clear();
  for (const QPointF& v : p.storedPoints) c.stored.push_back({v.x(), v.y() / div});
  c.freed.clear();
  for (const QPointF& v : p.freedPoints) c.freed.push_back({v.x(), v.y() / div});
  c.peak.reset();
  c.peakLabel.clear();
  if (!p.data.predicted.entries.empty()) {
    c.peak = QPointF(p.predicted.peak.x(), p.predicted.peak.y() / div);
    const auto drawn = static_cast<std::uint64_t>(p.predicted.peak.y());
    // Without the static memory under it, the marker stands at the dynamic peak: say so, and the
    // total the title and the cards show.
    c.peakLabel = p.options.includeStatic
                      ? tr("peak %1").arg(ui::formatBytes(drawn))
                      : tr("dynamic peak %1 (total %2)")
                            .arg(ui::formatBytes(drawn), ui::formatBytes(drawn + p.data.predicted.staticBytes));
  }
  p.fills->refresh();
  p.markers->refresh();
}

QStringList MemoryChart::xAxisLabels() const {
  const QValueAxis& axis = *parts_->axisX;
  const double step = axis.tickInterval();
  QStringList labels;
  if (!(step > 0.0)) return labels;
  const double anchor = axis.tickAnchor();
  const QByteArray format = axis.labelFormat().toLatin1();
  for (double k = std::ceil((axis.min() - anchor) / step - 1e-9);; k += 1.0) {
    const double value = anchor + k * step;
    if (value > axis.max() + step * 1e-9) break;
    labels << QString::asprintf(format.constData(), value);
  }
  return labels;
}

QString MemoryChart::xAxisTitle() const { return parts_->axisX->titleText(); }

QString MemoryChart::peakLabel() const { return parts_->painted.peakLabel; }

QPoint MemoryChart::viewportPosition(const QPointF& value) const {
  const Parts& p = *parts_;
  const QPointF chartPosition = p.markers->toPosition({value.x(), value.y() / p.unit.divisor});
  return p.view->mapFromScene(p.chart->mapToScene(chartPosition));
}

QWidget* MemoryChart::viewport() const { return parts_->view->viewport(); }

QList<QPointF> MemoryChart::footprintPoints() const { return parts_->predicted.footprint; }

QPointF MemoryChart::peakPoint() const { return parts_->predicted.peak; }

QStringList MemoryChart::visibleSeriesNames() const {
  QStringList names;
  for (QAbstractSeries* series : parts_->all())
    if (series->isVisible()) names << series->name();
  return names;
}

QImage MemoryChart::renderImage(QSize size) const {
  auto* self = const_cast<MemoryChart*>(this);  // a hidden chart is laid out at the asked size
  if (size.isEmpty()) size = (width() >= 200 && height() >= 150) ? this->size() : QSize(1200, 600);
  if (!isVisible() && size != this->size()) self->resize(size);
  return self->grab().toImage();
}

Status MemoryChart::exportPng(const QString& path, const WriteOptions& options) const {
  return writePngFile(renderImage(), path, options);
}

Status MemoryChart::exportSvg(const QString& path, const WriteOptions& options) const {
  auto* self = const_cast<MemoryChart*>(this);
  if (!isVisible() && (width() < 200 || height() < 150)) self->resize(1200, 600);
  QByteArray bytes;
  QBuffer buffer(&bytes);
  if (!buffer.open(QIODevice::WriteOnly)) return Status::internal("no memory for the chart SVG");
  QSvgGenerator generator;
  generator.setOutputDevice(&buffer);
  generator.setSize(size());
  generator.setViewBox(QRect(QPoint(0, 0), size()));
  generator.setTitle(parts_->data.title.isEmpty() ? tr("Memory over a training step") : parts_->data.title);
  generator.setDescription(tr("Remat Explorer memory chart"));
  QPainter painter;
  if (!painter.begin(&generator))
    return Status::internal("the chart SVG for '" + path.toStdString() + "' could not be drawn");
  self->render(&painter);
  painter.end();
  return writeBytesFile(bytes, path, options);
}

}  // namespace remat::charts
