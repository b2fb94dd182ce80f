#pragma once
// What the explorer shows: a chain, a plan on it, the plan's simulation and, optionally, a measured
// timeline. Every edit of the plan or the chain is an undo command; chain edits are made on a copy
// of the ChainSpec and accepted only when buildChain succeeds, so the chain is never corrupted.
#include <QObject>
#include <QString>
#include <QUndoStack>
#include <functional>
#include <optional>

#include "remat/base/status.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui {

// What a measured timeline measured: the plan (nullopt when it came from a file whose ops are not
// those of the plan shown then), that plan's name, and the chain's revision.
struct MeasuredOrigin {
  std::optional<Plan> plan;
  QString planner;
  std::uint64_t chainRevision = 0;
};

// What the views show of the current plan, computed once per edit from one op sequence (or accepted
// from the planner job that computed it): the simulation and the liveness trace.
struct PlanResults {
  Simulation simulation;
  LivenessTrace liveness;
  std::uint64_t chainRevision = 0;  // of the chain they were computed on
};

// Maps an old spec layer index to its index after an edit (nullopt: the layer is gone).
using SpecRemap = std::function<std::optional<std::size_t>(std::size_t)>;

class Document : public QObject {
  Q_OBJECT

 public:
  explicit Document(QObject* parent = nullptr);

  bool hasChain() const { return hasChain_; }
  const Chain& chain() const { return chain_; }
  const Plan& plan() const { return plan_; }
  const QString& planner() const { return planner_; }  // "manual", "dp", "linear", ...
  const Simulation& simulation() const { return results_.simulation; }
  // Which tensors are alive during each op of the current plan (what the peak is made of).
  const LivenessTrace& liveness() const { return results_.liveness; }
  const std::optional<Timeline>& measured() const { return measured_; }
  // A measured timeline belongs to the plan it measured: it is current while that plan is shown on
  // the chain it ran on (undoing back to it makes it current again). A stale one is drawn grey and
  // never exported next to a prediction of another plan.
  bool measuredIsCurrent() const;
  const MeasuredOrigin& measuredOrigin() const { return measuredOrigin_; }
  // The chain's state: a new number for every opened chain and every chain edit; undo restores it.
  std::uint64_t chainRevision() const { return chainRevision_; }
  MeasuredOrigin currentOrigin() const { return {plan_, planner_, chainRevision_}; }
  QUndoStack* undoStack() { return &undoStack_; }
  const QString& filePath() const { return filePath_; }  // empty for zoo models and new chains
  bool isCheckpoint(std::size_t layer) const;

  // What the training step does besides forward and backward (optimizer, foreach, gradients;
  // memory-model.md section 11): a setting of the explorer that every chain opened takes.
  const StepOptions& stepOptions() const { return chain_.step; }
  // Undoable with a chain loaded (the plan stays; its simulation and every planner's score change).
  Status setStepOptions(const StepOptions& step);

  // Starts over with a new chain (open, zoo, new) under the step options shown; clears the undo
  // history and the measurement, and says chainReplaced() so per-chain state elsewhere (messages,
  // capacity) starts over too.
  void resetChain(Chain chain, const QString& filePath, const Plan& plan = {}, const QString& source = "none");

  // Undoable edits. A refused edit changes nothing and says why.
  Status toggleCheckpoint(std::size_t layer);
  Status moveCheckpoint(std::size_t from, std::size_t to);
  // `computed`: the plan's results from the job that planned it, used instead of simulating again
  // when they are of this plan on the chain shown (their chainRevision).
  Status applyPlan(const Plan& plan, const QString& source, std::optional<PlanResults> computed = std::nullopt);
  Status editChain(const ChainSpec& spec, const QString& description, const SpecRemap& remap = {});
  // The plan a freshly opened chain starts with (the picked planner's), set without an undo step
  // so the opened chain stays unmodified. Once the user has edited anything it is an ordinary
  // undoable applyPlan.
  Status setOpeningPlan(const Plan& plan, const QString& source, std::optional<PlanResults> computed = std::nullopt);

  // A measured timeline shown over the prediction (not undoable: it is data, not an edit), of
  // the plan and chain shown now, or of the origin given (a run that started before an edit).
  void setMeasured(std::optional<Timeline> timeline);
  void setMeasured(Timeline timeline, const MeasuredOrigin& origin);
  void setFilePath(const QString& path);

  // The plan carried to a rebuilt chain: each checkpoint follows its layer through remap.
  static Plan remapPlan(const Chain& before, const Chain& after, const Plan& plan, const SpecRemap& remap);

  // Called by the undo commands only.
  void restorePlan(const Plan& plan, const QString& source);
  void restoreChain(const Chain& chain, const Plan& plan, const QString& source, std::uint64_t revision);

 signals:
  void chainChanged();       // a new or edited chain (the plan changed with it)
  void chainReplaced();      // after chainChanged: a different chain (open, zoo, new), not an edit
  void simulationChanged();  // the plan or the chain changed; simulation() and liveness() are current
  void measuredChanged();
  void filePathChanged(const QString& path);

 private:
  void resimulate();

  bool hasChain_ = false;
  Chain chain_;
  Plan plan_;
  QString planner_ = QStringLiteral("none");
  PlanResults results_;
  std::optional<PlanResults> offered_;  // a job's results for the plan being applied
  std::optional<Timeline> measured_;
  MeasuredOrigin measuredOrigin_;
  std::uint64_t chainRevision_ = 0;
  std::uint64_t lastRevision_ = 0;  // the newest revision handed out
  QString filePath_;
  QUndoStack undoStack_;
};

}  // namespace remat::gui
