#include "views/strip_geometry.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace remat::gui {

StripGeometry StripGeometry::uniform(std::size_t layers, double left, double width) {
  StripGeometry g;
  if (layers == 0) return g;
  g.edges_.resize(layers + 1);
  for (std::size_t i = 0; i <= layers; ++i)
    g.edges_[i] = left + width * static_cast<double>(i) / static_cast<double>(layers);
  return g;
}

StripGeometry StripGeometry::proportional(const std::vector<double>& weights, double left, double width,
                                          double minCellPx) {
  const std::size_t n = weights.size();
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  const double free = width - static_cast<double>(n) * minCellPx;
  if (n == 0 || !(total > 0.0) || free < 0.0) return uniform(n, left, width);
  StripGeometry g;
  g.edges_.resize(n + 1);
  g.edges_[0] = left;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += std::max(weights[i], 0.0);
    // From the running sum, so rounding never drifts: the last edge is exactly left + width.
    g.edges_[i + 1] = left + static_cast<double>(i + 1) * minCellPx + free * (sum / total);
  }
  g.edges_[n] = left + width;
  return g;
}

double StripGeometry::boundaryX(std::size_t boundary) const {
  if (edges_.empty()) return 0.0;
  return edges_[std::min(boundary, edges_.size() - 1)];
}

std::optional<std::size_t> StripGeometry::layerAt(double x) const {
  if (edges_.size() < 2 || x < edges_.front() || x > edges_.back()) return std::nullopt;
  const auto it = std::upper_bound(edges_.begin(), edges_.end(), x);
  const auto index = static_cast<std::size_t>(std::distance(edges_.begin(), it));
  return std::clamp<std::size_t>(index, 1, layerCount());
}

std::optional<std::size_t> StripGeometry::snapBoundary(double x, std::size_t lo, std::size_t hi) const {
  if (edges_.empty() || lo > hi || lo > layerCount()) return std::nullopt;
  hi = std::min(hi, layerCount());
  std::size_t best = lo;
  for (std::size_t b = lo + 1; b <= hi; ++b)
    if (std::abs(edges_[b] - x) < std::abs(edges_[best] - x)) best = b;
  return best;
}

std::optional<std::size_t> StripGeometry::handleAt(double x, const std::vector<std::size_t>& boundaries,
                                                   double tolerancePx) const {
  std::optional<std::size_t> best;
  double bestDistance = tolerancePx;
  for (std::size_t b : boundaries) {
    if (b > layerCount()) continue;
    const double distance = std::abs(boundaryX(b) - x);
    if (distance <= bestDistance) {
      bestDistance = distance;
      best = b;
    }
  }
  return best;
}

std::vector<CellRun> cellRuns(const std::vector<int>& edges, const std::vector<int>& values) {
  std::vector<CellRun> runs;
  const std::size_t n = std::min(values.size(), edges.empty() ? 0 : edges.size() - 1);
  for (std::size_t l = 0; l < n; ++l) {
    const int left = edges[l];
    const int right = std::max(edges[l + 1], left + 1);
    // This cell covers whatever earlier cells painted from its left edge on.
    while (!runs.empty() && runs.back().left >= left) runs.pop_back();
    if (!runs.empty()) runs.back().right = std::min(runs.back().right, left);
    if (!runs.empty() && runs.back().value == values[l] && runs.back().right == left)
      runs.back().right = right;
    else
      runs.push_back({left, right, values[l]});
  }
  return runs;
}

}  // namespace remat::gui
