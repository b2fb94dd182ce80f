// Downsampling keeps each bucket's maximum, so a chart never loses the peak.
#include "charts/downsample.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "charts/memory_chart_series.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"

namespace remat::charts {
namespace {

std::vector<double> pseudoRandom(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> values(count);
  for (double& v : values) v = static_cast<double>(rng.below(1000000));
  return values;
}

TEST(Downsample, ShortSeriesAreKeptAsTheyAre) {
  const std::vector<double> values = {3, 1, 4, 1, 5};
  const auto buckets = downsampleMax(values, 10);
  ASSERT_EQ(buckets.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(buckets[i], (Bucket{i, i, i, values[i]}));
  EXPECT_TRUE(downsampleMax({}, 10).empty());
}

TEST(Downsample, BucketsCoverEveryIndexOnceAndKeepTheirMaximum) {
  for (std::size_t count : {7u, 100u, 1001u, 4096u, 10007u}) {
    for (std::size_t maxBuckets : {0u, 1u, 3u, 64u, 1000u}) {
      const std::vector<double> values = pseudoRandom(count, count * 31 + maxBuckets);
      const auto buckets = downsampleMax(values, maxBuckets);
      ASSERT_EQ(buckets.size(), std::min(count, std::max<std::size_t>(maxBuckets, 1)));
      std::size_t next = 0;
      std::size_t smallest = count;
      std::size_t largest = 0;
      for (const Bucket& b : buckets) {
        ASSERT_EQ(b.first, next);
        ASSERT_GE(b.last, b.first);
        next = b.last + 1;
        smallest = std::min(smallest, b.last - b.first + 1);
        largest = std::max(largest, b.last - b.first + 1);
        const auto begin = values.begin() + static_cast<std::ptrdiff_t>(b.first);
        const auto end = values.begin() + static_cast<std::ptrdiff_t>(b.last + 1);
        const auto max = std::max_element(begin, end);  // the first maximum
        EXPECT_EQ(b.maxValue, *max);
        EXPECT_EQ(b.maxIndex, static_cast<std::size_t>(max - values.begin()));
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(largest - smallest, 1u);
    }
  }
}

TEST(Downsample, TheGlobalPeakIsNeverLost) {
  std::vector<double> values(100000, 1.0);
  values[73421] = 99.0;  // a single-op spike
  const auto buckets = downsampleMax(values, 500);
  const auto best = std::max_element(buckets.begin(), buckets.end(),
                                     [](const Bucket& a, const Bucket& b) { return a.maxValue < b.maxValue; });
  EXPECT_EQ(best->maxValue, 99.0);
  EXPECT_EQ(best->maxIndex, 73421u);
}

TEST(TimelineSeries, ALongTimelineIsDownsampledAroundItsPeak) {
  const Chain chain = makeRandomChain({.layers = 3000, .seed = 11});
  Plan plan;
  for (std::size_t c = 50; c < chain.size(); c += 50) plan.checkpoints.push_back(c);
  Result<Simulation> sim = simulate(chain, plan);
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  ChartOptions chartOptions;
  chartOptions.maxBuckets = 400;
  const Timeline& t = sim->timeline;
  const std::vector<double> edges = opEdges(t, XAxisMode::OpIndex);
  ASSERT_EQ(edges.size(), t.entries.size() + 1);
  const TimelineSeries series = buildTimelineSeries(t, edges, chartOptions);
  EXPECT_EQ(series.bucketCount, 400u);
  EXPECT_EQ(series.footprint.size(), 800);  // two points per bucket: a step line
  const double expectedPeak = static_cast<double>(sim->staticBytes + sim->dynamicPeakBytes);
  double drawnPeak = 0.0;
  for (const QPointF& p : series.footprint) drawnPeak = std::max(drawnPeak, p.y());
  EXPECT_EQ(drawnPeak, expectedPeak);
  EXPECT_EQ(series.peak.y(), expectedPeak);
  EXPECT_EQ(series.peakOp, sim->peakOpIndex);
  EXPECT_DOUBLE_EQ(series.peak.x(), static_cast<double>(sim->peakOpIndex) + 0.5);
  EXPECT_DOUBLE_EQ(series.xMax, static_cast<double>(t.entries.size()));
  EXPECT_FALSE(series.recomputeMarks.isEmpty());
  // One bar per bucket, under the step line, coloured by the phase of the op at its maximum.
  ASSERT_EQ(series.bars.size(), 400u);
  for (std::size_t b = 0; b < series.bars.size(); ++b) {
    const PhaseBar& bar = series.bars[b];
    EXPECT_EQ(bar.y, series.footprint[static_cast<qsizetype>(2 * b)].y());
    EXPECT_EQ(bar.x0, series.footprint[static_cast<qsizetype>(2 * b)].x());
    EXPECT_EQ(bar.x1, series.footprint[static_cast<qsizetype>(2 * b + 1)].x());
  }
  EXPECT_EQ(series.bars[series.bars.size() - 1].phase, static_cast<int>(Phase::Backward));
  EXPECT_EQ(series.bars[0].phase, static_cast<int>(Phase::Forward));
}

TEST(TimelineSeries, TimeAxisUsesCumulativeMilliseconds) {
  Timeline t;
  t.entries.resize(3);
  t.entries[0].timeUs = 1000.0;
  t.entries[1].timeUs = 500.0;
  t.entries[2].timeUs = 2500.0;
  const std::vector<double> edges = opEdges(t, XAxisMode::Time);
  EXPECT_EQ(edges, (std::vector<double>{0.0, 1.0, 1.5, 4.0}));
  EXPECT_EQ(opAt(edges, 0.2), 0u);
  EXPECT_EQ(opAt(edges, 1.2), 1u);
  EXPECT_EQ(opAt(edges, 4.0), 2u);
  EXPECT_EQ(opAt(edges, 4.5), std::nullopt);
  EXPECT_EQ(opAt(edges, -1.0), std::nullopt);
}

}  // namespace
}  // namespace remat::charts
