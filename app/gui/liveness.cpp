#include "liveness.hpp"

#include "remat/simulator.hpp"

namespace remat::gui {
namespace {
constexpr std::size_t kNone = static_cast<std::size_t>(-1);
}

LivenessTrace traceLiveness(const Chain& chain, const Plan& plan) {
  LivenessTrace trace;
  const std::size_t n = chain.size();
  trace.ops = buildOpSequence(chain, plan);
  trace.scratchBytes.assign(trace.ops.size(), 0);
  const std::size_t lastSegmentStart = plan.checkpoints.empty() ? 0 : plan.checkpoints.back();
  // Newest version of x(l), E(l), d(l) as an index into tensors; x0 is static and never a tensor.
  std::vector<std::size_t> x(n + 1, kNone), extra(n + 1, kNone), grad(n + 1, kNone);
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const Op& op = trace.ops[i];
    const std::size_t l = op.layer;
    auto write = [&](TensorLife::Kind kind, std::size_t layer, std::uint64_t bytes) {
      trace.tensors.push_back({kind, layer, bytes, i, std::nullopt});
      return trace.tensors.size() - 1;
    };
    auto read = [&](std::size_t tensor) {
      if (tensor != kNone) trace.tensors[tensor].lastReader = i;
    };
    switch (op.kind) {
      case OpKind::F:
      case OpKind::R: {
        const LayerNumbers& m = chain.at(l);
        read(x[l - 1]);
        x[l] = write(TensorLife::Kind::Activation, l, m.outBytes);
        const bool keep = op.kind == OpKind::R || l > lastSegmentStart;
        if (keep && m.extraBytes > 0) extra[l] = write(TensorLife::Kind::Extra, l, m.extraBytes);
        trace.scratchBytes[i] = m.fwdWorkspaceBytes;
        break;
      }
      case OpKind::RE: {
        const LayerNumbers& m = chain.at(l);
        read(x[l - 1]);
        extra[l] = write(TensorLife::Kind::Extra, l, m.extraBytes);
        trace.scratchBytes[i] = m.fwdWorkspaceBytes + m.outBytes;
        break;
      }
      case OpKind::Seed:
        read(x[n]);
        grad[n] = write(TensorLife::Kind::Gradient, n, chain.at(n).outBytes);
        break;
      case OpKind::B: {
        const LayerNumbers& m = chain.at(l);
        read(grad[l]);
        if (m.needsInput) read(x[l - 1]);
        if (m.needsOutput) read(x[l]);
        if (m.extraBytes > 0) read(extra[l]);
        if (l > 1) grad[l - 1] = write(TensorLife::Kind::Gradient, l - 1, chain.at(l - 1).outBytes);
        trace.scratchBytes[i] = m.bwdWorkspaceBytes;
        break;
      }
    }
  }
  return trace;
}

std::vector<std::size_t> LivenessTrace::aliveDuring(std::size_t op) const {
  std::vector<std::size_t> alive;
  for (std::size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].writer <= op && tensors[t].freedAfter() >= op) alive.push_back(t);
  return alive;
}

std::uint64_t LivenessTrace::footprint(std::size_t op) const {
  std::uint64_t bytes = op < scratchBytes.size() ? scratchBytes[op] : 0;
  for (std::size_t t : aliveDuring(op)) bytes += tensors[t].bytes;
  return bytes;
}

std::string tensorName(const TensorLife& tensor) {
  const std::string layer = std::to_string(tensor.layer);
  switch (tensor.kind) {
    case TensorLife::Kind::Activation: return "x" + layer;
    case TensorLife::Kind::Gradient: return "dx" + layer;
    case TensorLife::Kind::Extra: return "E" + layer;
  }
  return "?";
}

std::vector<CheckpointLife> checkpointLives(const LivenessTrace& trace, const Plan& plan) {
  std::vector<CheckpointLife> lives;
  for (std::size_t c : plan.checkpoints) {
    // A checkpoint's output is written once, by F(c): recomputation never rewrites a segment's end.
    for (const TensorLife& t : trace.tensors) {
      if (t.kind == TensorLife::Kind::Activation && t.layer == c) {
        lives.push_back({c, t.writer, t.freedAfter()});
        break;
      }
    }
  }
  return lives;
}

}  // namespace remat::gui
