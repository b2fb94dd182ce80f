#include "document/plan_insight.hpp"

#include <algorithm>

#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/op_times.hpp"
#include "remat/model/token_input.hpp"

namespace remat::gui {
namespace {

QString layerName(const Chain& chain, std::size_t layer) {
  return layer >= 1 && layer <= chain.size() ? QString::fromStdString(chain.layers[layer - 1].name) : QString();
}

QString tensorText(const Chain& chain, const TensorLife& tensor) {
  QString text = QString::fromStdString(tensorName(tensor));
  const QString name = layerName(chain, tensor.layer);
  if (!name.isEmpty()) text += QStringLiteral(" (%1)").arg(name);
  return text;
}

// "B(12) conv4_3" or "SEED": core's label with the layer names the simulation recorded.
QString opText(const Simulation& simulation, const Op& op) {
  return QString::fromStdString(opLabel(op, simulation.timeline.layerNames));
}

}  // namespace

QStringList savedPartLines(const Chain& chain, std::size_t layer) {
  if (layer < 1 || layer > chain.size()) return {};
  std::vector<SavedPart> parts = chain.layers[layer - 1].extraParts;
  std::stable_sort(parts.begin(), parts.end(),
                   [](const SavedPart& a, const SavedPart& b) { return a.bytes > b.bytes; });
  QStringList lines;
  for (const SavedPart& part : parts)
    lines.push_back(QStringLiteral("%1  %2").arg(QString::fromStdString(part.name), ui::formatBytes(part.bytes)));
  return lines;
}

std::size_t peakLayer(const Chain& chain, const Simulation& simulation) {
  const auto& entries = simulation.timeline.entries;
  if (simulation.peakOpIndex >= entries.size()) return 0;
  const Op& op = entries[simulation.peakOpIndex].op;
  return !op.hasLayer() ? chain.size() : op.layer;
}

QString peakDescription(const Chain& chain, const Simulation& simulation, const LivenessTrace& trace,
                        std::size_t maxTensors) {
  const auto& entries = simulation.timeline.entries;
  if (entries.empty() || simulation.peakOpIndex >= entries.size()) return {};
  const std::size_t op = simulation.peakOpIndex;
  QString text = QObject::tr("Peak %1 = static %2 + dynamic %3\nat op %4: %5 (%6)")
                     .arg(ui::formatBytes(simulation.peakBytes()), ui::formatBytes(simulation.staticBytes),
                          ui::formatBytes(simulation.dynamicPeakBytes))
                     .arg(op)
                     .arg(opText(simulation, entries[op].op), ui::toQString(phaseName(entries[op].op.phase())));
  if (trace.ops.size() != entries.size()) return text;  // no trace of this plan
  // The tensors alive and the op's workspace, one list, largest first.
  struct Item {
    QString what;
    std::uint64_t bytes = 0;
    QStringList parts;  // E(l) of a kind that names what it holds (attention, MLP, norms), largest first
  };
  const std::vector<std::size_t> alive = trace.aliveDuring(op);
  std::vector<Item> items;
  for (const std::size_t index : alive) {
    const TensorLife& t = trace.tensors[index];
    const bool checkpoint =
        t.kind == TensorLife::Kind::Activation &&
        std::binary_search(simulation.plan.checkpoints.begin(), simulation.plan.checkpoints.end(), t.layer);
    items.push_back({tensorText(chain, t) + (checkpoint ? QObject::tr(" (checkpoint)") : QString()), t.bytes,
                     t.kind == TensorLife::Kind::Extra ? savedPartLines(chain, t.layer) : QStringList()});
  }
  if (op < trace.scratchBytes.size() && trace.scratchBytes[op] > 0)
    items.push_back({QObject::tr("the op's workspace"), trace.scratchBytes[op], {}});
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  text += QObject::tr("\nalive during it (%1 tensors), largest first:").arg(alive.size());
  std::uint64_t restBytes = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i >= maxTensors) {
      restBytes += items[i].bytes;
      continue;
    }
    text += QStringLiteral("\n  %1  %2").arg(items[i].what, ui::formatBytes(items[i].bytes));
    for (const QString& part : items[i].parts) text += QStringLiteral("\n      %1").arg(part);
  }
  if (items.size() > maxTensors)
    text += QObject::tr("\n  ... %1 more, %2").arg(items.size() - maxTensors).arg(ui::formatBytes(restBytes));
  return text;
}

std::vector<charts::StaticPart> staticParts(const Chain& chain) {
  const StaticBreakdown parts = staticBreakdown(chain);
  // One band for the batch: x0 and the loss's labels. A token chain's x0 is int64 ids
  // (memory-model.md 12.9): the band says so.
  const QString input =
      hasTokenIds(chain) ? QObject::tr("input (int64 token ids) and labels") : QObject::tr("input and labels");
  return {{input, parts.inputBytes + parts.labelBytes, ui::PaletteRole::StaticInput},
          {QObject::tr("weights"), parts.weightBytes, ui::PaletteRole::Static},
          {QObject::tr("gradients"), parts.gradientBytes, ui::PaletteRole::StaticGradients},
          {QObject::tr("optimizer state"), parts.optimizerStateBytes, ui::PaletteRole::StaticOptimizer}};
}

charts::ChartData chartData(const Chain& chain, const Simulation& simulation, const LivenessTrace& trace,
                            const std::optional<Timeline>& measured, const QString& title) {
  charts::ChartData data;
  data.predicted = simulation.timeline;
  data.measured = measured;
  data.title = title;
  data.peakText = peakDescription(chain, simulation, trace);
  data.predictedClock = QString::fromStdString(describeOpTimeModel(chain));
  // Core's default step (no optimizer, static gradients) keeps one static band: the legend then
  // fits beside a small window's chart (docs/gui.md).
  if (chain.step != StepOptions{}) data.staticParts = staticParts(chain);
  if (chain.size() == 0 || simulation.timeline.entries.empty() ||
      trace.ops.size() != simulation.timeline.entries.size())
    return data;
  if (chain.step.grads != GradMode::InPlace)  // made on backward, or each backward's fresh one
    data.weightGradientBytes = trace.bytesAlivePerOp(TensorLife::Kind::WeightGradient);
  for (const CheckpointLife& life : checkpointLives(trace, simulation.plan)) {
    const QString layer = QStringLiteral("x%1 (%2), %3")
                              .arg(life.layer)
                              .arg(layerName(chain, life.layer), ui::formatBytes(chain.outBytes(life.layer)));
    data.checkpointStored.push_back({life.storedOp, QObject::tr("checkpoint %1\nstored by op %2: %3")
                                                        .arg(layer)
                                                        .arg(life.storedOp)
                                                        .arg(opText(simulation, trace.ops[life.storedOp]))});
    data.checkpointFreed.push_back({life.freedOp, QObject::tr("checkpoint %1\nfreed after op %2: %3")
                                                      .arg(layer)
                                                      .arg(life.freedOp)
                                                      .arg(opText(simulation, trace.ops[life.freedOp]))});
  }
  return data;
}

QString recomputeCostText(CostUnit unit, double cost) {
  return QStringLiteral("%1 %2").arg(cost, 0, 'g', 4).arg(ui::toQString(costUnitSymbol(unit)));
}

QString recomputeCostText(const Chain& chain, double cost) { return recomputeCostText(chainCostUnit(chain), cost); }

QString recomputeCostWithShare(CostUnit unit, double cost, double share) {
  return QStringLiteral("%1 (%2%)").arg(recomputeCostText(unit, cost)).arg(100.0 * share, 0, 'f', 1);
}

QString recomputeCostWithShare(const Chain& chain, double cost) {
  return recomputeCostWithShare(chainCostUnit(chain), cost, recomputeShare(chain, cost));
}

QString recomputeUnitDescription(const Chain& chain) {
  return QObject::tr("%1; one forward pass costs %2")
      .arg(QString::fromStdString(costUnitDescription(chain)), recomputeCostText(chain, forwardCost(chain)));
}

}  // namespace remat::gui
