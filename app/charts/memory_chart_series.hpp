#pragma once
// What the memory chart draws, as plain point lists in data units (x: op index or milliseconds;
// y: bytes). Built from a Timeline without Qt Charts so it can be tested on its own.
#include <QList>
#include <QPointF>
#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/palette.hpp"
#include "remat/memory/timeline.hpp"

namespace remat::charts {

enum class XAxisMode { OpIndex, Time };

// A marked op (a checkpoint stored or freed) with the text its tooltip shows.
struct ChartMarker {
  std::size_t opIndex = 0;
  QString text;
};

// A part of static memory (memory-model.md section 11.1): its band under the ops, stacked from 0 in
// the order given, and its legend entry.
struct StaticPart {
  QString name;  // "input and labels", "weights", "gradients", "optimizer state"
  std::uint64_t bytes = 0;
  ui::PaletteRole role = ui::PaletteRole::Static;
};

// Everything one chart shows: a predicted timeline and, optionally, a measured one on top.
struct ChartData {
  Timeline predicted;
  std::optional<Timeline> measured;
  bool measuredStale = false;  // measured is of another plan or chain than predicted: drawn grey, apart
  QString measuredPlan;        // the plan measured measured, for its legend (empty: its planner field)
  QString predictedClock;      // how predicted's op times are modelled, for the time axis ("GFLOP at ...")
  std::vector<ChartMarker> checkpointStored;
  std::vector<ChartMarker> checkpointFreed;
  QString peakText;  // tooltip of the peak marker: the op and what is alive
  QString title;
  // Static memory by part; empty: predicted.staticBytes as one "static" band. The parts add up to
  // predicted.staticBytes.
  std::vector<StaticPart> staticParts;
  // Per predicted op, the bytes of weight gradients alive (--grads on-backward: they grow during
  // the backward pass), drawn at the bottom of each bar; empty when there are none.
  std::vector<std::uint64_t> weightGradientBytes;
};

struct ChartOptions {
  bool includeStatic = true;        // draw static memory (input, parameters, gradients) under the ops
  std::uint64_t capacityBytes = 0;  // device capacity line; 0 hides it
  XAxisMode xAxis = XAxisMode::OpIndex;
  std::size_t maxBuckets = 1500;  // longer timelines are downsampled keeping each bucket's maximum
};

// The x coordinate of each op's start, plus the end of the last op (size = ops + 1). Op-index mode:
// 0, 1, 2, ...; time mode: cumulative timeUs in milliseconds.
std::vector<double> opEdges(const Timeline& timeline, XAxisMode mode);

// One bucket drawn as a bar from the base up to its maximum, coloured by the phase of the op at
// that maximum. Units as the series (bytes until the chart scales them).
struct PhaseBar {
  double x0 = 0.0;
  double x1 = 0.0;
  double y = 0.0;
  int phase = 0;           // remat::Phase as an int
  double gradientY = 0.0;  // top of the weight gradients at the bucket's maximum; base when none
};

struct TimelineSeries {
  QList<QPointF> footprint;       // step line over the buckets
  std::vector<PhaseBar> bars;     // one per bucket
  QList<QPointF> recomputeMarks;  // one per bucket holding R or RE ops, at the bucket's max
  QPointF peak;                   // the peak op's centre and value
  std::size_t peakOp = 0;
  std::size_t bucketCount = 0;
  double base = 0.0;  // static bytes when they are drawn, else 0
  double xMax = 0.0;
  double yMax = 0.0;
};

// Downsamples timeline (values = footprint + base) to at most options.maxBuckets buckets.
// gradientBytes: per op, the weight gradients within the footprint (empty: none).
TimelineSeries buildTimelineSeries(const Timeline& timeline, const std::vector<double>& edges,
                                   const ChartOptions& options, const std::vector<std::uint64_t>& gradientBytes = {});

// The value drawn for op i (footprint plus static when drawn) and its position, for markers.
QPointF opPoint(const Timeline& timeline, const std::vector<double>& edges, std::size_t op, double base);

// The op under x (edges from opEdges); nullopt outside.
std::optional<std::size_t> opAt(const std::vector<double>& edges, double x);

}  // namespace remat::charts
