#pragma once
// MemoryChart's insides, shared by memory_chart.cpp (data, axes, export) and
// memory_chart_input.cpp (hover, zoom, pan). Private to app/charts.
#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QRubberBand>
#include <QScatterSeries>
#include <QValueAxis>
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "chart_tooltip.hpp"
#include "common/units.hpp"
#include "memory_chart.hpp"
#include "memory_chart_items.hpp"

namespace remat::charts {

struct MemoryChart::Parts {
  ChartData data;
  ChartOptions options;
  std::optional<ChartRanges> shared;
  std::optional<XRange> zoom;  // clamped to displayed.xMax by applyRanges
  std::vector<double> predictedEdges;
  std::vector<double> measuredEdges;
  TimelineSeries predicted;
  TimelineSeries measured;
  ChartRanges natural;
  ChartRanges displayed;
  ui::ByteUnit unit;
  std::vector<QPointF> storedPoints;  // data units (bytes), parallel to data.checkpointStored
  std::vector<QPointF> freedPoints;
  PaintedContent painted;  // axis units, what the paint items draw

  // A mouse drag on the plot: a rubber band to zoom into, or a pan of the zoomed range.
  enum class Drag { None, Zoom, Pan };
  Drag drag = Drag::None;
  double pressX = 0.0;  // viewport pixels
  XRange pressRange;
  QRubberBand* band = nullptr;

  QChartView* view = nullptr;
  std::unique_ptr<ChartTooltip> tooltip;  // over view's viewport, with hoverTextAt's text
  QChart* chart = nullptr;
  QValueAxis* axisX = nullptr;
  QValueAxis* axisY = nullptr;
  // Legend entries of the static bands, bottom up (ChartData::staticParts; one "static" when it
  // has none), of the phases and of the weight gradients inside the bars.
  static constexpr std::size_t kStaticLegends = 4;
  std::array<QAreaSeries*, kStaticLegends> staticLegends{};
  std::array<QAreaSeries*, kPhaseCount> phaseLegend{};
  QAreaSeries* gradientsLegend = nullptr;
  QLineSeries* footprint = nullptr;
  QLineSeries* measuredLine = nullptr;
  QLineSeries* capacity = nullptr;
  QScatterSeries* recomputeLegend = nullptr;
  QScatterSeries* storedLegend = nullptr;
  QScatterSeries* freedLegend = nullptr;
  QScatterSeries* peakLegend = nullptr;
  ChartPaintItem* fills = nullptr;
  ChartPaintItem* markers = nullptr;

  void createChart();   // the chart, its legend and its axes
  void createSeries();  // the legend entries, the lines and the paint items, on both axes
  // The smallest stretch a zoom shows: two ops, or a ten-thousandth of the time axis.
  double minimumZoomWidth() const;
  // range within [0, displayed.xMax] and at least minimumZoomWidth() wide; none when it covers all.
  std::optional<XRange> clampZoom(std::optional<XRange> range) const;

  std::vector<QAbstractSeries*> all() const {
    std::vector<QAbstractSeries*> series(staticLegends.begin(), staticLegends.end());
    series.insert(series.end(), phaseLegend.begin(), phaseLegend.end());
    series.insert(series.end(), {gradientsLegend, footprint, measuredLine, capacity, recomputeLegend, storedLegend,
                                 freedLegend, peakLegend});
    return series;
  }
  // The static bands to draw and name: ChartData::staticParts without empty parts, or one "static".
  std::vector<StaticPart> staticBands() const;
  // Shows the static parts', the phases' and the weight gradients' legend entries that apply.
  void updateAreaLegends(bool hasPrediction);
};

}  // namespace remat::charts
