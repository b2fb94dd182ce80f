#include "document/document.hpp"

#include <QUndoCommand>
#include <algorithm>

#include "remat/model/precision.hpp"

namespace remat::gui {
namespace {

class PlanCommand : public QUndoCommand {
 public:
  PlanCommand(Document* doc, Plan after, QString afterSource, const QString& text)
      : QUndoCommand(text),
        doc_(doc),
        before_(doc->plan()),
        beforeSource_(doc->planner()),
        after_(std::move(after)),
        afterSource_(std::move(afterSource)) {}
  void undo() override { doc_->restorePlan(before_, beforeSource_); }
  void redo() override { doc_->restorePlan(after_, afterSource_); }

 private:
  Document* doc_;
  Plan before_;
  QString beforeSource_;
  Plan after_;
  QString afterSource_;
};

class ChainCommand : public QUndoCommand {
 public:
  ChainCommand(Document* doc, Chain after, Plan afterPlan, QString afterSource, std::uint64_t afterRevision,
               const QString& text)
      : QUndoCommand(text),
        doc_(doc),
        before_(doc->chain()),
        beforePlan_(doc->plan()),
        beforeSource_(doc->planner()),
        beforeRevision_(doc->chainRevision()),
        after_(std::move(after)),
        afterPlan_(std::move(afterPlan)),
        afterSource_(std::move(afterSource)),
        afterRevision_(afterRevision) {}
  void undo() override { doc_->restoreChain(before_, beforePlan_, beforeSource_, beforeRevision_); }
  void redo() override { doc_->restoreChain(after_, afterPlan_, afterSource_, afterRevision_); }

 private:
  Document* doc_;
  Chain before_;
  Plan beforePlan_;
  QString beforeSource_;
  std::uint64_t beforeRevision_;
  Chain after_;
  Plan afterPlan_;
  QString afterSource_;
  std::uint64_t afterRevision_;
};

// "layer 22 (features.21)": the number the strip and the table's # column show, then the name.
QString layerLabel(const Chain& chain, std::size_t layer) {
  return QObject::tr("layer %1 (%2)").arg(layer).arg(QString::fromStdString(chain.layers[layer - 1].name));
}

}  // namespace

Document::Document(QObject* parent) : QObject(parent) {
  undoStack_.setUndoLimit(500);
  chain_.step = kPyTorchDefaultStep;  // the step bar's first value
}

bool Document::isCheckpoint(std::size_t layer) const {
  return std::binary_search(plan_.checkpoints.begin(), plan_.checkpoints.end(), layer);
}

Status Document::setStepOptions(const StepOptions& step) {
  if (step == chain_.step) return Status::ok();
  if (!hasChain_) {
    chain_.step = step;
    return Status::ok();
  }
  auto stepped = withStepOptions(chain_, step);  // a new precision rebuilds the layer numbers
  if (!stepped) return stepped.status();
  Chain next = std::move(stepped).value();
  const QString text = tr("Set the step to %1").arg(QString::fromStdString(describeStepOptions(step)));
  undoStack_.push(new ChainCommand(this, std::move(next), plan_, planner_, ++lastRevision_, text));
  return Status::ok();
}

void Document::resetChain(Chain chain, const QString& filePath, const Plan& plan, const QString& source) {
  undoStack_.clear();
  // The step carries over to the new chain, its precision only when mixed: fp32, bf16 and fp16 are
  // a chain file's dtype, which the new chain brings (as on the command line without --precision).
  StepOptions step = chain_.step;
  if (!isMixedPrecision(step.precision)) step.precision = chain.step.precision;
  auto stepped = withStepOptions(chain, step);
  chain_ = stepped ? std::move(stepped).value() : std::move(chain);
  hasChain_ = true;
  plan_ = validatePlan(plan, chain_.size()).isOk() ? plan : Plan{};
  planner_ = source;
  chainRevision_ = ++lastRevision_;
  measured_.reset();
  measuredOrigin_ = {};
  setFilePath(filePath);
  resimulate();
  emit chainChanged();
  emit chainReplaced();
  emit measuredChanged();
  emit simulationChanged();
}

Status Document::toggleCheckpoint(std::size_t layer) {
  if (!hasChain_) return Status::invalid("no chain is loaded");
  const std::size_t n = chain_.size();
  if (layer == n) {
    return Status::invalid(layerLabel(chain_, layer).toStdString() +
                           " cannot be a checkpoint: it is the last layer, whose output is always kept (the loss reads "
                           "it); checkpoints are layers 1.." +
                           std::to_string(n - 1));
  }
  if (layer < 1 || layer > n) {
    return Status::invalid("layer " + std::to_string(layer) + " cannot be a checkpoint: checkpoints are layers 1.." +
                           std::to_string(n - 1));
  }
  Plan next = plan_;
  auto it = std::lower_bound(next.checkpoints.begin(), next.checkpoints.end(), layer);
  const bool removing = it != next.checkpoints.end() && *it == layer;
  if (removing) {
    next.checkpoints.erase(it);
  } else {
    next.checkpoints.insert(it, layer);
  }
  const QString text =
      (removing ? tr("Remove the checkpoint at %1") : tr("Add a checkpoint at %1")).arg(layerLabel(chain_, layer));
  undoStack_.push(new PlanCommand(this, std::move(next), QStringLiteral("manual"), text));
  return Status::ok();
}

Status Document::moveCheckpoint(std::size_t from, std::size_t to) {
  if (!hasChain_) return Status::invalid("no chain is loaded");
  if (!isCheckpoint(from)) return Status::invalid("layer " + std::to_string(from) + " is not a checkpoint");
  if (to == from) return Status::ok();
  if (to < 1 || to >= chain_.size())
    return Status::invalid("a checkpoint cannot move to layer " + std::to_string(to) + " (valid: 1.." +
                           std::to_string(chain_.size() - 1) + ")");
  if (isCheckpoint(to)) return Status::invalid("layer " + std::to_string(to) + " is already a checkpoint");
  Plan next = plan_;
  std::replace(next.checkpoints.begin(), next.checkpoints.end(), from, to);
  std::sort(next.checkpoints.begin(), next.checkpoints.end());
  const QString text = tr("Move checkpoint from %1 to %2").arg(layerLabel(chain_, from), layerLabel(chain_, to));
  undoStack_.push(new PlanCommand(this, std::move(next), QStringLiteral("manual"), text));
  return Status::ok();
}

Status Document::applyPlan(const Plan& plan, const QString& source, std::optional<PlanResults> computed) {
  if (!hasChain_) return Status::invalid("no chain is loaded");
  REMAT_RETURN_IF_ERROR(validatePlan(plan, chain_.size()));
  if (plan == plan_ && source == planner_) return Status::ok();
  offered_ = std::move(computed);
  undoStack_.push(new PlanCommand(this, plan, source, tr("Apply plan (%1)").arg(source)));
  offered_.reset();
  return Status::ok();
}

Status Document::setOpeningPlan(const Plan& plan, const QString& source, std::optional<PlanResults> computed) {
  if (!hasChain_) return Status::invalid("no chain is loaded");
  if (undoStack_.count() > 0) return applyPlan(plan, source, std::move(computed));
  REMAT_RETURN_IF_ERROR(validatePlan(plan, chain_.size()));
  offered_ = std::move(computed);
  restorePlan(plan, source);
  offered_.reset();
  return Status::ok();
}

Status Document::editChain(const ChainSpec& spec, const QString& description, const SpecRemap& remap) {
  if (!hasChain_) return Status::invalid("no chain is loaded");
  Result<Chain> spelled = buildChain(spec);
  if (!spelled) return spelled.status();
  auto built = withStepOptions(std::move(spelled).value(), chain_.step);  // not in the spec
  if (!built) return built.status();
  Plan plan = remapPlan(chain_, *built, plan_, remap);
  const QString source = plan == plan_ ? planner_ : QStringLiteral("manual");
  undoStack_.push(
      new ChainCommand(this, std::move(built).value(), std::move(plan), source, ++lastRevision_, description));
  return Status::ok();
}

Plan Document::remapPlan(const Chain& before, const Chain& after, const Plan& plan, const SpecRemap& remap) {
  Plan out;
  for (std::size_t c : plan.checkpoints) {
    if (c < 1 || c > before.size()) continue;
    const std::size_t oldSpec = before.layers[c - 1].specIndex;
    const std::optional<std::size_t> newSpec = remap ? remap(oldSpec) : std::optional<std::size_t>(oldSpec);
    if (!newSpec) continue;
    for (std::size_t l = 1; l < after.size(); ++l) {  // checkpoints are 1..n-1
      if (after.layers[l - 1].specIndex == *newSpec) {
        out.checkpoints.push_back(l);
        break;
      }
    }
  }
  std::sort(out.checkpoints.begin(), out.checkpoints.end());
  out.checkpoints.erase(std::unique(out.checkpoints.begin(), out.checkpoints.end()), out.checkpoints.end());
  return out;
}

bool Document::measuredIsCurrent() const {
  return measured_ && measuredOrigin_.plan && *measuredOrigin_.plan == plan_ &&
         measuredOrigin_.chainRevision == chainRevision_;
}

void Document::setMeasured(std::optional<Timeline> timeline) {
  measured_ = std::move(timeline);
  measuredOrigin_ = measured_ ? currentOrigin() : MeasuredOrigin{};
  emit measuredChanged();
}

void Document::setMeasured(Timeline timeline, const MeasuredOrigin& origin) {
  measured_ = std::move(timeline);
  measuredOrigin_ = origin;
  emit measuredChanged();
}

void Document::setFilePath(const QString& path) {
  if (path == filePath_) return;
  filePath_ = path;
  emit filePathChanged(path);
}

void Document::restorePlan(const Plan& plan, const QString& source) {
  plan_ = plan;
  planner_ = source;
  resimulate();
  emit simulationChanged();
}

void Document::restoreChain(const Chain& chain, const Plan& plan, const QString& source, std::uint64_t revision) {
  chain_ = chain;
  plan_ = plan;
  planner_ = source;
  chainRevision_ = revision;
  resimulate();
  emit chainChanged();
  emit simulationChanged();
}

void Document::resimulate() {
  if (offered_ && offered_->chainRevision == chainRevision_ && offered_->simulation.plan == plan_) {
    results_ = std::move(*offered_);  // the planner job's simulation of this very plan and chain
  } else {
    // Every stored plan was validated against its chain, so simulate only fails on a bug; show an
    // empty timeline then rather than crash.
    Result<Simulation> sim = simulateWithLiveness(chain_, plan_, results_.liveness);
    results_.simulation = sim ? std::move(sim).value() : Simulation{};
    results_.chainRevision = chainRevision_;
  }
  offered_.reset();
  results_.simulation.timeline.planner = planner_.toStdString();
}

}  // namespace remat::gui
