#include "fill_columns.hpp"

#include <algorithm>
#include <cmath>

namespace remat::charts {

int ColumnFills::minTop() const {
  int top = baseY;
  for (const FillColumn& column : columns)
    if (column.filled()) top = std::min(top, column.top);
  return top;
}

ColumnFills columnFills(const std::vector<PhaseBar>& bars, double base, const PixelMapping& mapping, int plotLeft,
                        int plotRight) {
  ColumnFills fills;
  fills.left = plotLeft;
  fills.baseY = static_cast<int>(std::lround(mapping.originY + base * mapping.scaleY));
  fills.columns.resize(static_cast<std::size_t>(std::max(0, plotRight - plotLeft)));
  auto px = [&](double x) { return std::lround(mapping.originX + x * mapping.scaleX); };
  for (const PhaseBar& bar : bars) {
    // Rounded edges as the vector fills had them: neighbouring bars abut without gaps.
    long left = px(bar.x0);
    long right = std::max(px(bar.x1), left + 1);
    const auto top = static_cast<int>(std::lround(mapping.originY + bar.y * mapping.scaleY));
    if (top >= fills.baseY) continue;
    const auto gradientRow = static_cast<int>(std::lround(mapping.originY + bar.gradientY * mapping.scaleY));
    const int gradientTop = gradientRow < fills.baseY ? std::max(gradientRow, top) : INT_MAX;
    left = std::max<long>(left, plotLeft);
    right = std::min<long>(right, plotRight);
    for (long x = left; x < right; ++x) {
      FillColumn& column = fills.columns[static_cast<std::size_t>(x - plotLeft)];
      if (top < column.top) column = {top, bar.phase, gradientTop};
    }
  }
  return fills;
}

std::vector<FillRun> fillRuns(const ColumnFills& fills) {
  std::vector<FillRun> runs;
  for (std::size_t i = 0; i < fills.columns.size(); ++i) {
    const FillColumn& column = fills.columns[i];
    if (!column.filled()) continue;
    const int x = fills.left + static_cast<int>(i);
    if (!runs.empty() && runs.back().right == x && runs.back().top == column.top && runs.back().phase == column.phase &&
        runs.back().gradientTop == column.gradientTop)
      ++runs.back().right;
    else
      runs.push_back({x, x + 1, column.top, column.phase, column.gradientTop});
  }
  return runs;
}

}  // namespace remat::charts
