#include "interpreter_program.hpp"

#include <algorithm>

#include "remat/memory/simulator.hpp"

namespace remat::program {
namespace {

// Compiles the op sequence one op at a time: each op reads the newest version of x(l), E(l) and
// d(l) written before it.
class ProgramBuilder {
 public:
  ProgramBuilder(const Chain& chain, const Plan& plan)
      : chain_(chain),
        lastSegmentStart_(plan.checkpoints.empty() ? 0 : plan.checkpoints.back()),
        x_(chain.size() + 1, kNone),
        extra_(chain.size() + 1, kNone),
        grad_(chain.size() + 1, kNone),
        gradientWriter_(weightGradientWriters(chain)) {
    x_[0] = kInput;
    program_.weightGradOf.assign(chain.size() + 1, kNone);
  }

  // Internal error when the op reads a tensor no earlier op wrote (a bug in buildOpSequence).
  Status add(const Op& op) {
    OpProgram p;
    p.op = op;
    switch (op.kind) {
      case OpKind::F:
      case OpKind::R: forward(p); break;
      case OpKind::RE: recomputeExtras(p); break;
      case OpKind::Seed: seed(p); break;
      case OpKind::B: REMAT_RETURN_IF_ERROR(backward(p)); break;
      case OpKind::Step: break;  // reads the parameters, gradients and state: none is a step tensor
    }
    if (op.kind != OpKind::B && op.kind != OpKind::Step && p.input == kNone)
      return Status::internal(opLabel(op) + " reads an unwritten x");
    for (std::uint32_t id : p.reads())
      if (isTensor(id)) ++program_.tensors[id].readers;
    program_.ops.push_back(p);
    const double cost = !op.hasLayer()         ? 0.0
                        : op.kind == OpKind::B ? chain_.at(op.layer).bwdCost
                                               : chain_.at(op.layer).fwdCost;
    program_.opCost.push_back(cost);
    program_.stepCost += cost;
    return Status::ok();
  }

  Program take() && { return std::move(program_); }

 private:
  std::uint32_t tensor(std::uint64_t bytes, char kind, std::size_t layer) {
    program_.tensors.push_back({bytes, kind, layer, 0});
    return static_cast<std::uint32_t>(program_.tensors.size() - 1);
  }

  // F and R write x(l); in keep mode (R, and F in the last segment) also E(l).
  void forward(OpProgram& p) {
    const std::size_t l = p.op.layer;
    const LayerNumbers& m = chain_.at(l);
    const bool keep = p.op.kind == OpKind::R || l > lastSegmentStart_;
    p.mode = keep ? ForwardMode::Keep : ForwardMode::Discard;
    p.input = x_[l - 1];
    p.output = x_[l] = tensor(m.outBytes, 'x', l);
    if (keep && m.extraBytes > 0) p.extraOut = extra_[l] = tensor(m.extraBytes, 'E', l);
    p.workspaceBytes = m.fwdWorkspaceBytes;
  }

  // RE writes E(l); its x(l) is a new version B(l) reads when out(l), else a transient buffer
  // (memory-model.md 2.3).
  void recomputeExtras(OpProgram& p) {
    const std::size_t l = p.op.layer;
    const LayerNumbers& m = chain_.at(l);
    p.mode = ForwardMode::Keep;
    p.input = x_[l - 1];
    p.extraOut = extra_[l] = tensor(m.extraBytes, 'E', l);
    if (m.needsOutput)
      p.output = x_[l] = tensor(m.outBytes, 'x', l);
    else
      p.transientBytes = m.outBytes;
    p.workspaceBytes = m.fwdWorkspaceBytes;
  }

  void seed(OpProgram& p) {
    const std::size_t n = chain_.size();
    p.input = x_[n];
    p.output = grad_[n] = tensor(chain_.at(n).outBytes, 'd', n);
  }

  // B reads d(l) and what the layer's numbers say its backward needs; writes d(l-1) (none for l = 1).
  Status backward(OpProgram& p) {
    const std::size_t l = p.op.layer;
    const LayerNumbers& m = chain_.at(l);
    p.gradOutput = grad_[l];
    if (m.needsInput) p.bwdInput = x_[l - 1];
    if (m.needsOutput) p.bwdOutput = x_[l];
    if (m.extraBytes > 0) p.extraIn = extra_[l];
    if (l > 1) p.output = grad_[l - 1] = tensor(chain_.at(l - 1).outBytes, 'd', l - 1);
    if (chain_.step.grads == GradMode::OnBackward) {
      // The first backward to use a layer's parameters makes their gradient (memory-model.md 11.2).
      if (m.paramBytes > 0 && gradientWriter_[l] == l)
        p.weightGrad = program_.weightGradOf[l] = tensor(m.paramBytes, 'W', l);
      const std::size_t owner = sharedParamsLayer(chain_, l);
      if (owner > 0 && gradientWriter_[owner] == l && chain_.at(owner).paramBytes > 0)
        p.sharedWeightGrad = program_.weightGradOf[owner] = tensor(chain_.at(owner).paramBytes, 'W', owner);
    }
    // zero_grad(set_to_none=False): the kernels write a fresh buffer, added into the static G(l).
    if (const std::uint64_t fresh = freshGradientBytes(chain_, l); fresh > 0) {
      p.freshGrad = tensor(fresh, 'w', l);
      p.freshPerOp = fresh < m.paramBytes;
    }
    p.workspaceBytes = m.bwdWorkspaceBytes;
    if (m.sharedGradBytes > 0)
      sharedGrad_ = p.sharedGradOut = tensor(m.sharedGradBytes, 'S', l), sharedGradBytes_ = m.sharedGradBytes;
    if (l == 1 && sharedGrad_ != kNone) {  // the embedding's own table gradient beside it, as in PyTorch
      p.sharedGradIn = sharedGrad_;
      p.workspaceBytes = std::max(p.workspaceBytes, sharedGradBytes_);
    }
    if (p.gradOutput == kNone || (m.needsInput && p.bwdInput == kNone) || (m.needsOutput && p.bwdOutput == kNone) ||
        (m.extraBytes > 0 && p.extraIn == kNone))
      return Status::internal("B(" + std::to_string(l) + ") reads a tensor no earlier op wrote");
    return Status::ok();
  }

  const Chain& chain_;
  const std::size_t lastSegmentStart_;
  std::vector<std::uint32_t> x_, extra_, grad_;
  const std::vector<std::size_t> gradientWriter_;  // weightGradientWriters
  std::uint32_t sharedGrad_ = kNone;
  std::uint64_t sharedGradBytes_ = 0;
  Program program_;
};

}  // namespace

Result<Program> compile(const Chain& chain, const Plan& plan) {
  ProgramBuilder builder(chain, plan);
  for (const Op& op : buildOpSequence(chain, plan)) REMAT_RETURN_IF_ERROR(builder.add(op));
  return std::move(builder).take();
}

}  // namespace remat::program
