// The strip's pure geometry: value <-> pixel and snapping to layer boundaries.
#include "views/strip_geometry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace remat::gui {
namespace {

TEST(StripGeometry, UniformCellsSplitTheWidthEvenly) {
  const StripGeometry g = StripGeometry::uniform(4, 10.0, 400.0);
  ASSERT_EQ(g.layerCount(), 4u);
  EXPECT_DOUBLE_EQ(g.left(), 10.0);
  EXPECT_DOUBLE_EQ(g.right(), 410.0);
  for (std::size_t b = 0; b <= 4; ++b) EXPECT_DOUBLE_EQ(g.boundaryX(b), 10.0 + 100.0 * static_cast<double>(b));
  EXPECT_DOUBLE_EQ(g.cellLeft(2), 110.0);
  EXPECT_DOUBLE_EQ(g.cellRight(2), 210.0);
  EXPECT_DOUBLE_EQ(g.cellCenter(2), 160.0);
  EXPECT_DOUBLE_EQ(g.boundaryX(99), 410.0);  // clamped
}

TEST(StripGeometry, PixelToLayerAndBack) {
  const StripGeometry g = StripGeometry::uniform(10, 0.0, 100.0);
  EXPECT_EQ(g.layerAt(-0.5), std::nullopt);
  EXPECT_EQ(g.layerAt(100.5), std::nullopt);
  EXPECT_EQ(g.layerAt(0.0), 1u);
  EXPECT_EQ(g.layerAt(9.99), 1u);
  EXPECT_EQ(g.layerAt(10.0), 2u);  // a boundary belongs to the cell on its right
  EXPECT_EQ(g.layerAt(100.0), 10u);
  for (std::size_t l = 1; l <= 10; ++l) EXPECT_EQ(g.layerAt(g.cellCenter(l)), l);
}

TEST(StripGeometry, ProportionalWidthsFollowWeightsWithAMinimum) {
  const std::vector<double> weights = {1.0, 3.0, 0.0, 4.0};
  const StripGeometry g = StripGeometry::proportional(weights, 0.0, 100.0, 2.0);
  ASSERT_EQ(g.layerCount(), 4u);
  EXPECT_DOUBLE_EQ(g.right(), 100.0);
  // free = 100 - 4 * 2 = 92, shared 1:3:0:4.
  EXPECT_NEAR(g.cellRight(1) - g.cellLeft(1), 2.0 + 92.0 / 8.0, 1e-9);
  EXPECT_NEAR(g.cellRight(2) - g.cellLeft(2), 2.0 + 92.0 * 3.0 / 8.0, 1e-9);
  EXPECT_NEAR(g.cellRight(3) - g.cellLeft(3), 2.0, 1e-9);  // a zero-byte layer stays clickable
  EXPECT_NEAR(g.cellRight(4) - g.cellLeft(4), 2.0 + 92.0 * 4.0 / 8.0, 1e-9);
  for (std::size_t l = 1; l <= 4; ++l) EXPECT_GT(g.cellRight(l), g.cellLeft(l));
}

TEST(StripGeometry, ProportionalFallsBackToUniform) {
  const StripGeometry zero = StripGeometry::proportional({0.0, 0.0}, 0.0, 10.0, 1.0);
  EXPECT_DOUBLE_EQ(zero.boundaryX(1), 5.0);
  // 3 cells of at least 50 px do not fit in 100 px.
  const StripGeometry tight = StripGeometry::proportional({1.0, 100.0, 1.0}, 0.0, 100.0, 50.0);
  EXPECT_NEAR(tight.boundaryX(1), 100.0 / 3.0, 1e-9);
  EXPECT_EQ(StripGeometry::proportional({}, 0.0, 100.0, 1.0).layerCount(), 0u);
}

TEST(StripGeometry, SnapsToTheNearestAllowedBoundary) {
  const StripGeometry g = StripGeometry::uniform(10, 0.0, 100.0);
  EXPECT_EQ(g.snapBoundary(31.0, 1, 9), 3u);
  EXPECT_EQ(g.snapBoundary(36.0, 1, 9), 4u);
  EXPECT_EQ(g.snapBoundary(-50.0, 1, 9), 1u);  // dragged past the left end
  EXPECT_EQ(g.snapBoundary(500.0, 1, 9), 9u);  // past the right end: the last checkpoint boundary
  EXPECT_EQ(g.snapBoundary(50.0, 6, 9), 6u);   // clamped to the range
  EXPECT_EQ(g.snapBoundary(50.0, 5, 4), std::nullopt);
  EXPECT_EQ(StripGeometry().snapBoundary(0.0, 0, 1), std::nullopt);
}

TEST(StripGeometry, HandleHitTestUsesATolerance) {
  const StripGeometry g = StripGeometry::uniform(10, 0.0, 100.0);
  const std::vector<std::size_t> handles = {3, 4, 8};
  EXPECT_EQ(g.handleAt(30.0, handles, 5.0), 3u);
  EXPECT_EQ(g.handleAt(34.0, handles, 5.0), 3u);
  EXPECT_EQ(g.handleAt(36.0, handles, 5.0), 4u);  // nearest of two in range
  EXPECT_EQ(g.handleAt(55.0, handles, 5.0), std::nullopt);
  EXPECT_EQ(g.handleAt(80.0, {}, 5.0), std::nullopt);
}

// The strip's cells painted one by one (each at least a pixel wide, later over earlier), as the
// widget painted them before runs: the pixels the runs must reproduce. -1: unpainted.
std::vector<int> paintedCells(const std::vector<int>& edges, const std::vector<int>& values, int width) {
  std::vector<int> pixels(static_cast<std::size_t>(width), -1);
  for (std::size_t l = 0; l < values.size(); ++l)
    for (int x = edges[l]; x < std::max(edges[l + 1], edges[l] + 1); ++x)
      pixels[static_cast<std::size_t>(x)] = values[l];
  return pixels;
}

std::vector<int> paintedRuns(const std::vector<CellRun>& runs, int width) {
  std::vector<int> pixels(static_cast<std::size_t>(width), -1);
  for (const CellRun& run : runs)
    for (int x = run.left; x < run.right; ++x) pixels[static_cast<std::size_t>(x)] = run.value;
  return pixels;
}

TEST(CellRuns, RunsPaintTheSamePixelsAsOneFillPerCell) {
  for (std::size_t layers : {1u, 7u, 300u, 1000u, 5000u}) {
    for (double width : {50.0, 400.0, 1400.0}) {
      const StripGeometry g = StripGeometry::uniform(layers, 10.0, width);
      std::vector<int> edges(layers + 1);
      for (std::size_t b = 0; b <= layers; ++b) edges[b] = static_cast<int>(std::lround(g.boundaryX(b)));
      // Mostly one value, checkpoints (value 2) every 25 layers and the kept tail (value 1).
      std::vector<int> values(layers, 0);
      for (std::size_t l = 0; l < layers; ++l) values[l] = l % 25 == 24 ? 2 : (l > layers * 3 / 4 ? 1 : 0);
      const std::vector<CellRun> runs = cellRuns(edges, values);
      const int pixels = static_cast<int>(width) + 20;
      EXPECT_EQ(paintedRuns(runs, pixels), paintedCells(edges, values, pixels)) << layers << " in " << width;
      for (std::size_t r = 1; r < runs.size(); ++r) {
        EXPECT_LE(runs[r - 1].right, runs[r].left);                                             // apart, in order
        EXPECT_FALSE(runs[r - 1].right == runs[r].left && runs[r - 1].value == runs[r].value);  // merged
      }
      if (layers >= 1000 && width <= 400.0) {
        EXPECT_LT(runs.size(), layers / 4) << layers << " in " << width;  // runs, not cells
      }
    }
  }
}

TEST(CellRuns, ALoneCheckpointNarrowerThanAPixelStillShows) {
  // Ten cells in three pixels; the seventh (a checkpoint) is the last one painted in its pixel.
  const std::vector<int> edges = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3};
  const std::vector<int> values = {0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
  EXPECT_EQ(cellRuns(edges, values), (std::vector<CellRun>{{0, 1, 0}, {1, 2, 2}, {2, 3, 0}}));
  EXPECT_EQ(paintedRuns(cellRuns(edges, values), 3), paintedCells(edges, values, 3));
  EXPECT_TRUE(cellRuns({}, {}).empty());
}

}  // namespace
}  // namespace remat::gui
