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
#include "remat/memory/plan.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui {

// What a measured timeline measured: the plan (nullopt when it came from a file whose ops are not
// those of the plan shown then), that plan's name, and the chain's revision.
struct MeasuredOrigin {
  std::optional<Plan> plan;
  QString planSource;
  std::uint64_t chainRevision = 0;
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
  const QString& planSource() const { return planSource_; }  // "manual", "dp", "linear", ...
  const Simulation& simulation() const { return simulation_; }
  const std::optional<Timeline>& measured() const { return measured_; }
  // A measured timeline belongs to the plan it measured: it is current while that plan is shown on
  // the chain it ran on (undoing back to it makes it current again). A stale one is drawn grey and
  // never exported next to a prediction of another plan.
  bool measuredIsCurrent() const;
  const MeasuredOrigin& measuredOrigin() const { return measuredOrigin_; }
  // The chain's state: a new number for every opened chain and every chain edit; undo restores it.
  std::uint64_t chainRevision() const { return chainRevision_; }
  MeasuredOrigin currentOrigin() const { return {plan_, planSource_, chainRevision_}; }
  QUndoStack* undoStack() { return &undoStack_; }
  const QString& filePath() const { return filePath_; }  // empty for zoo models and new chains
  bool isCheckpoint(std::size_t layer) const;

  // Starts over with a new chain (open, zoo, new); clears the undo history and the measurement,
  // and says chainReplaced() so per-chain state elsewhere (messages, capacity) starts over too.
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
  MeasuredOrigin measuredOrigin_;
  std::uint64_t chainRevision_ = 0;
  std::uint64_t lastRevision_ = 0;  // the newest revision handed out
  QString filePath_;
  QUndoStack undoStack_;
};

}  // namespace remat::gui
