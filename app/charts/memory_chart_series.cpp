#include "memory_chart_series.hpp"

#include <algorithm>

#include "downsample.hpp"

namespace remat::charts {

std::vector<double> opEdges(const Timeline& timeline, XAxisMode mode) {
  std::vector<double> edges(timeline.entries.size() + 1, 0.0);
  for (std::size_t i = 0; i < timeline.entries.size(); ++i) {
    const double width = mode == XAxisMode::OpIndex ? 1.0 : std::max(0.0, timeline.entries[i].timeUs) / 1000.0;
    edges[i + 1] = edges[i] + width;
  }
  return edges;
}

TimelineSeries buildTimelineSeries(const Timeline& timeline, const std::vector<double>& edges,
                                   const ChartOptions& options, const std::vector<std::uint64_t>& gradientBytes) {
  TimelineSeries series;
  const std::size_t count = timeline.entries.size();
  series.base = options.includeStatic ? static_cast<double>(timeline.staticBytes) : 0.0;
  if (count == 0 || edges.size() != count + 1) return series;
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = series.base + static_cast<double>(timeline.entries[i].footprintBytes);
  const std::vector<Bucket> buckets = downsampleMax(values, options.maxBuckets);
  series.bucketCount = buckets.size();
  series.bars.reserve(buckets.size());
  series.footprint.reserve(static_cast<qsizetype>(2 * buckets.size()));
  for (const Bucket& bucket : buckets) {
    const double x0 = edges[bucket.first];
    const double x1 = edges[bucket.last + 1];
    series.footprint.append({x0, bucket.maxValue});
    series.footprint.append({x1, bucket.maxValue});
    const double gradients =
        bucket.maxIndex < gradientBytes.size() ? static_cast<double>(gradientBytes[bucket.maxIndex]) : 0.0;
    series.bars.push_back({x0, x1, bucket.maxValue, static_cast<int>(timeline.entries[bucket.maxIndex].op.phase()),
                           series.base + gradients});
    bool recompute = false;
    for (std::size_t i = bucket.first; i <= bucket.last && !recompute; ++i)
      recompute = timeline.entries[i].op.phase() == Phase::Recompute;
    if (recompute) series.recomputeMarks.append({(x0 + x1) / 2.0, bucket.maxValue});
  }
  series.peakOp = timeline.peakIndex();
  series.peak = opPoint(timeline, edges, series.peakOp, series.base);
  series.xMax = edges.back();
  series.yMax = series.peak.y();
  return series;
}

QPointF opPoint(const Timeline& timeline, const std::vector<double>& edges, std::size_t op, double base) {
  if (op >= timeline.entries.size() || op + 1 >= edges.size()) return {};
  return {(edges[op] + edges[op + 1]) / 2.0, base + static_cast<double>(timeline.entries[op].footprintBytes)};
}

std::optional<std::size_t> opAt(const std::vector<double>& edges, double x) {
  if (edges.size() < 2 || x < edges.front() || x > edges.back()) return std::nullopt;
  // The last edge <= x starts the op; ops of zero width are skipped by upper_bound.
  const auto it = std::upper_bound(edges.begin(), edges.end(), x);
  const auto index = static_cast<std::size_t>(std::distance(edges.begin(), it));
  return std::min(index == 0 ? 0 : index - 1, edges.size() - 2);
}

}  // namespace remat::charts
