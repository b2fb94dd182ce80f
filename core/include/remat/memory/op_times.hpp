#pragma once
// A clock for predicted timelines: each op's modelled duration, from the chain's costs, so a
// prediction can be drawn and exported on a time axis. It is an estimate, not part of the memory
// model (docs/memory-model.md section 9): no byte count depends on it, and a measured timeline's
// time_us is the executor's wall time instead.
//
// A layer's costs (LayerNumbers::fwdCost, bwdCost) are read by their origin (layerCostOrigin in
// remat/model/costs.hpp, docs/formats.md) as one of two units:
//   - milliseconds: measured by `remat profile` (LayerSpec::hasMeasuredCost), or stated for an
//     abstract layer (read as milliseconds);
//   - GFLOP: estimated from shapes for the other real layers, turned into time at an assumed
//     device speed, OpTimeModel::gflopPerSecond.
// F, R and RE take the layer's forward cost, B its backward cost, SEED none.
#include <cstddef>
#include <string>

#include "remat/base/status.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/costs.hpp"

namespace remat {

// The assumed speed for GFLOP costs: 10 TFLOP/s, about what a current GPU sustains on float32
// convolutions. Stated wherever modelled times are shown (axis labels, docs).
inline constexpr double kDefaultGflopPerSecond = 10000.0;

struct OpTimeModel {
  double gflopPerSecond = kDefaultGflopPerSecond;
};

// The modelled duration of op, in microseconds. The op's layer must be in 1..n (SEED: 0 us).
double opMicroseconds(const Chain& chain, const Op& op, const OpTimeModel& model = {});

// Sets every entry's timeUs to its modelled duration. A timeline whose ops name layers outside
// 1..n (another chain's) is refused and left unchanged; so is a speed that is not positive.
Status modelOpTimes(const Chain& chain, Timeline& timeline, const OpTimeModel& model = {});

// How the chain's times are modelled, for labels: "GFLOP at 10 TFLOP/s", "profiled ms",
// "stated costs as ms", joined with " + " when the chain mixes them.
std::string describeOpTimeModel(const Chain& chain, const OpTimeModel& model = {});

}  // namespace remat
