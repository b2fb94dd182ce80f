#pragma once
// The unit of a chain's costs, and how big a recompute cost is against one forward pass: the one
// place the command line, the JSON outputs and the explorer take the words for a cost from.
//
// The recompute cost of a plan is the sum of fwd_cost over its R and RE ops (docs/memory-model.md
// section 1). What one unit of it is depends on where the layers' costs came from:
//   - real kinds (conv2d, relu, blocks, ...) without `remat profile`: GFLOP estimated from shapes;
//   - real kinds whose chain-file layer has measured costs (hasMeasuredCost): milliseconds;
//   - abstract layers: whatever the chain file states, unit-less ("cost units").
// A chain whose layers do not all agree (abstract and real layers together, or a partly profiled
// chain) has costs that do not add up to one physical quantity: it is reported as "mixed", with
// the count of layers of each origin, and its sums are still shown, in "cost units".
#include <cstddef>
#include <string>
#include <string_view>

#include "remat/model/chain.hpp"

namespace remat {

enum class CostUnit {
  Gflop,         // every layer real, costs estimated from shapes
  Milliseconds,  // every layer real and measured by `remat profile`
  Abstract,      // every layer abstract: the chain's own units
  Mixed,         // layers of different origins
};

// Where one layer's fwd_cost / bwd_cost come from.
enum class CostOrigin {
  Estimated,  // a real kind, GFLOP from shapes
  Measured,   // a real kind profiled by `remat profile`: milliseconds
  Stated,     // an abstract layer: the chain's own units
};
// The origin of layer l's costs (l in 1..n, not checked).
CostOrigin layerCostOrigin(const Chain& chain, std::size_t l);

// How many of a chain's layers have each origin.
struct CostOrigins {
  std::size_t estimated = 0;  // real kinds, GFLOP from shapes
  std::size_t measured = 0;   // real kinds, milliseconds from `remat profile`
  std::size_t stated = 0;     // abstract layers
};
CostOrigins costOrigins(const Chain& chain);

// The unit of the chain's costs (an empty chain counts as Abstract).
CostUnit chainCostUnit(const Chain& chain);

// The unit's short name, as JSON's "recompute_cost_unit" and table headings write it:
// "GFLOP", "ms", "units" (abstract), "mixed".
std::string_view costUnitName(CostUnit unit);

// The unit as a unit symbol after a number: "GFLOP", "ms", "cost units" (abstract and mixed).
std::string_view costUnitSymbol(CostUnit unit);

// One line for reports: "GFLOP (estimated from shapes)", "ms (measured by remat profile)",
// "cost units (stated by the abstract layers)", "cost units (mixed: 3 layers measured in ms,
// 10 estimated in GFLOP, 2 abstract)".
std::string costUnitDescription(const Chain& chain);

// The cost of one forward pass: the sum of fwd_cost over the chain's layers.
double forwardCost(const Chain& chain);

// cost / forwardCost(chain): the recompute cost as a share of one forward pass (0 when the
// forward pass costs nothing).
double recomputeShare(const Chain& chain, double cost);

}  // namespace remat
