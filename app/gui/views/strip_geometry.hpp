#pragma once
// Geometry of the checkpoint strip: value <-> pixel along the chain, and snapping to layer
// boundaries. A pure value type (no widgets) so it has its own tests.
//
// Cell l (1..n) spans [boundaryX(l-1), boundaryX(l)); the boundary after layer b is boundaryX(b), and a
// checkpoint c is drawn on boundary c (its output x(c) is kept).
#include <cstddef>
#include <optional>
#include <vector>

namespace remat::gui {

class StripGeometry {
 public:
  StripGeometry() = default;
  // n cells of equal width from left to left + width.
  static StripGeometry uniform(std::size_t layers, double left, double width);
  // Widths proportional to weights (e.g. bytes), but no cell narrower than minCellPx; uniform when
  // all weights are zero or n * minCellPx does not fit.
  static StripGeometry proportional(const std::vector<double>& weights, double left, double width, double minCellPx);

  std::size_t layerCount() const { return edges_.empty() ? 0 : edges_.size() - 1; }
  double left() const { return edges_.empty() ? 0.0 : edges_.front(); }
  double right() const { return edges_.empty() ? 0.0 : edges_.back(); }
  double boundaryX(std::size_t boundary) const;  // 0..n, clamped
  double cellLeft(std::size_t layer) const { return boundaryX(layer - 1); }
  double cellRight(std::size_t layer) const { return boundaryX(layer); }
  double cellCenter(std::size_t layer) const { return (cellLeft(layer) + cellRight(layer)) / 2.0; }

  // The layer whose cell holds x; nullopt left of the first or right of the last cell.
  std::optional<std::size_t> layerAt(double x) const;
  // The boundary in [lo, hi] nearest to x (drag snapping); nullopt when lo > hi or no cells.
  std::optional<std::size_t> snapBoundary(double x, std::size_t lo, std::size_t hi) const;
  // The boundary among `boundaries` within tolerancePx of x, the nearest one; nullopt when none.
  std::optional<std::size_t> handleAt(double x, const std::vector<std::size_t>& boundaries, double tolerancePx) const;

 private:
  std::vector<double> edges_;  // n + 1 increasing x positions
};

// Neighbouring pixel columns of the strip painted alike: [left, right) with one cell value.
struct CellRun {
  int left = 0;
  int right = 0;  // exclusive
  int value = 0;
  bool operator==(const CellRun&) const = default;
};

// The cells as they are painted one after another, cell l (1..n) from pixel edges[l - 1] to
// edges[l] and at least one pixel wide, a later cell over an earlier one; merged into runs of equal
// value. One fill per run paints the same pixels as one per cell: a thousand cells in a few hundred
// pixels cost a few dozen fills, and a cell narrower than a pixel still shows when it is painted
// last there. edges: n + 1 non-decreasing pixels; values: n.
std::vector<CellRun> cellRuns(const std::vector<int>& edges, const std::vector<int>& values);

}  // namespace remat::gui
