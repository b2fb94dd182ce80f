#pragma once
// Words and chart data for a plan: what the peak is made of, when each checkpoint lives, and the
// numbers of the summary bar. Built from core value types; no widgets.
#include <QObject>
#include <QString>
#include <QStringList>
#include <optional>

#include "charts/memory_chart_series.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/costs.hpp"

namespace remat::gui {

// "name  size" per named part of layer l's e (ChainLayer::extraParts: a transformer layer's
// attention, MLP, norms and masks), largest first; empty for kinds that name none.
QStringList savedPartLines(const Chain& chain, std::size_t layer);

// Multi-line: the peak op, static + dynamic, then the tensors alive during it (largest first, at
// most maxTensors listed, an E(l) followed by its named parts), and the op's workspace. `liveness` is the trace of the
// simulation's plan (the Document's, or simulate()'s of a compared plan): nothing here builds an op sequence again.
QString peakDescription(const Chain& chain, const Simulation& simulation, const LivenessTrace& liveness,
                        std::size_t maxTensors = 12);

// The layer whose op sets the peak (0 for SEED, which belongs to layer n's gradient).
std::size_t peakLayer(const Chain& chain, const Simulation& simulation);

// Static memory by part, bottom up as the chart stacks them: input, weights, gradients (under
// --grads static), optimizer state.
std::vector<charts::StaticPart> staticParts(const Chain& chain);

// The chart's input: the simulation's timeline, its checkpoint events and peak text, static memory
// by part, the weight gradients' growth (--grads on-backward) and measured.
charts::ChartData chartData(const Chain& chain, const Simulation& simulation, const LivenessTrace& liveness,
                            const std::optional<Timeline>& measured, const QString& title);

// A recompute cost with its unit: "130.4 GFLOP", "12 cost units" (core's costUnitSymbol).
QString recomputeCostText(CostUnit unit, double cost);
QString recomputeCostText(const Chain& chain, double cost);
// The same with its share of one forward pass: "130.4 GFLOP (6.6%)".
QString recomputeCostWithShare(CostUnit unit, double cost, double share);
QString recomputeCostWithShare(const Chain& chain, double cost);
// What the unit is and how big one forward pass is, for tooltips: "GFLOP (estimated from shapes);
// one forward pass costs 1982 GFLOP".
QString recomputeUnitDescription(const Chain& chain);

}  // namespace remat::gui
