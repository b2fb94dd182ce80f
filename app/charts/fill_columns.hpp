#pragma once
// The memory chart's phase fills at the screen's resolution: one column per device pixel, each
// holding the highest bar that touches it and that bar's phase. However many buckets a timeline
// has, the fills cost one image of the plot's size (or one rectangle per run of equal columns
// when the painter is not a raster one, e.g. an SVG export). A bar narrower than a pixel still
// claims the pixel it falls in, so a peak is never dropped between columns. Pure, no Qt.
#include <climits>
#include <vector>

#include "memory_chart_series.hpp"

namespace remat::charts {

// pixel = origin + value * scale, on each axis (the chart's axes are linear).
struct PixelMapping {
  double originX = 0.0;
  double scaleX = 1.0;
  double originY = 0.0;
  double scaleY = -1.0;
  bool operator==(const PixelMapping&) const = default;
};

struct FillColumn {
  int top = INT_MAX;          // first filled pixel row; INT_MAX: nothing in this column
  int phase = 0;              // remat::Phase as an int, of the highest bar
  int gradientTop = INT_MAX;  // first row of that bar's weight gradients (down to baseY); INT_MAX: none
  bool filled() const { return top != INT_MAX; }
  bool operator==(const FillColumn&) const = default;
};

// Columns [left, left + columns.size()), each filled from its top down to baseY (exclusive).
struct ColumnFills {
  int left = 0;
  int baseY = 0;
  std::vector<FillColumn> columns;
  int minTop() const;  // the highest filled row; baseY when nothing is filled
};

// The bars (axis units, bars' y above `base`) in pixel columns [plotLeft, plotRight). A bar covers
// the columns from its rounded left edge to its rounded right edge, at least one.
ColumnFills columnFills(const std::vector<PhaseBar>& bars, double base, const PixelMapping& mapping, int plotLeft,
                        int plotRight);

// Neighbouring columns with the same top and phase merged: what a vector painter fills.
struct FillRun {
  int left = 0;
  int right = 0;  // exclusive
  int top = 0;
  int phase = 0;
  int gradientTop = INT_MAX;
  bool operator==(const FillRun&) const = default;
};
std::vector<FillRun> fillRuns(const ColumnFills& fills);

}  // namespace remat::charts
