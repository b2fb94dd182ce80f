#pragma once
// What the explorer shows: a chain, a plan on it, the plan's simulation and, optionally, a measured
// timeline. Every edit of the plan or the chain is an undo command; chain edits are made on a copy
// of the ChainSpec and accepted only when buildChain succeeds, so the chain is never corrupted.
#include <QObject>
#include <QString>
#include <QUndoStack>
#include <functional>
#include <optional>

#include "remat/model/chain.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/base/status.hpp"
#include "remat/memory/timeline.hpp"

namespace remat::gui {

// Maps an old spec layer index to its index after an edit (nullopt: the layer is gone).
using SpecRemap = std::function<std::optional<std::size_t>(std::size_t)>;

class Document : public QObject {
  Q_OBJECT

 public:
  explicit Document(QObject* parent = nullptr);

  bool hasChain() const { return hasChain_; }
  const Chain& chain() const { return chain_; }
  const Plan& plan() const { return plan_; }
  const QString& planSource() const { return planSource_; }  // "manual", "dp", "linear", ...
  const Simulation& simulation() const { return simulation_; }
  const std::optional<Timeline>& measured() const { return measured_; }
  QUndoStack* undoStack() { return &undoStack_; }
  const QString& filePath() const { return filePath_; }  // empty for zoo models and new chains
  bool isCheckpoint(std::size_t layer) const;

  // Starts over with a new chain (open, zoo, new); clears the undo history and the measurement.
  void resetChain(Chain chain, const QString& filePath, const Plan& plan = {}, const QString& source = "none");

  // Undoable edits. A refused edit changes nothing and says why.
  Status toggleCheckpoint(std::size_t layer);
  Status moveCheckpoint(std::size_t from, std::size_t to);
  Status applyPlan(const Plan& plan, const QString& source);
  Status editChain(const ChainSpec& spec, const QString& description, const SpecRemap& remap = {});
  // The plan a freshly opened chain starts with (the picked planner's), set without an undo step
  // so the opened chain stays unmodified. Once the user has edited anything it is an ordinary
  // undoable applyPlan.
  Status setOpeningPlan(const Plan& plan, const QString& source);

  // A measured timeline shown over the prediction (not undoable: it is data, not an edit).
  void setMeasured(std::optional<Timeline> timeline);
  void setFilePath(const QString& path);

  // The plan carried to a rebuilt chain: each checkpoint follows its layer through remap.
  static Plan remapPlan(const Chain& before, const Chain& after, const Plan& plan, const SpecRemap& remap);

  // Called by the undo commands only.
  void restorePlan(const Plan& plan, const QString& source);
  void restoreChain(const Chain& chain, const Plan& plan, const QString& source);

 signals:
  void chainChanged();       // a new or edited chain (the plan changed with it)
  void simulationChanged();  // the plan or the chain changed; simulation() is current
  void measuredChanged();
  void filePathChanged(const QString& path);

 private:
  void resimulate();

  bool hasChain_ = false;
  Chain chain_;
  Plan plan_;
  QString planSource_ = QStringLiteral("none");
  Simulation simulation_;
  std::optional<Timeline> measured_;
  QString filePath_;
  QUndoStack undoStack_;
};

}  // namespace remat::gui
