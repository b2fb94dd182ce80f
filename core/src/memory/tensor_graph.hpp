#pragma once
// The tensor graph of an op sequence (docs/memory-model.md sections 2-3): which tensor version each op
// reads and writes, how big each version is and which op reads it last. The simulator sweeps it
// for footprints and the liveness trace (liveness.hpp) names its tensors, so the rule that decides
// what is alive lives here once. Internal to core.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "remat/memory/liveness.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

inline constexpr std::size_t kNoReader = std::numeric_limits<std::size_t>::max();
inline constexpr std::uint32_t kNoTensor = std::numeric_limits<std::uint32_t>::max();

// One op with its tensor traffic. x0 is static and never appears as a tensor. B writes d(l-1) and,
// under GradMode::OnBackward, the weight gradients it makes (G(l); a tied head's B(n) also the
// shared table's G(1)), under GradMode::Static the fresh gradient nobody reads after it; STEP reads the G(l)
// implicitly: they are alive until the step's last op (lastReader), and the sweep frees everything after it.
struct OpTraffic {
  std::uint32_t reads[4] = {kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  std::uint32_t writes[4] = {kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  std::uint64_t scratchBytes = 0;  // workspace plus, for RE, the transient copy of x(c)
};

// Flat arrays, indexed by op and by tensor id (ids count up in allocation order): dynamicPeak()
// sweeps them millions of times in the brute-force tests.
struct TensorGraph {
  std::vector<OpTraffic> traffic;
  std::vector<std::uint64_t> tensorBytes;
  std::vector<std::size_t> lastReader;  // kNoReader: nobody reads it
};

// The start of the last segment (c_k; 0 without checkpoints): forward ops after it run in keep mode.
inline std::size_t lastSegmentStart(const Plan& plan) { return plan.checkpoints.empty() ? 0 : plan.checkpoints.back(); }

// Fills in the graph op by op, each op reading the newest versions of x(l), E(l) and d(l) written
// before it.
template <typename OnTensor>
class TensorGraphBuilder {
 public:
  TensorGraphBuilder(const Chain& chain, std::size_t lastSegmentStart, OnTensor& onTensor, TensorGraph& graph)
      : chain_(chain),
        lastSegmentStart_(lastSegmentStart),
        onTensor_(onTensor),
        graph_(graph),
        x_(chain.size() + 1, kNoTensor),
        extra_(chain.size() + 1, kNoTensor),
        grad_(chain.size() + 1, kNoTensor),
        gradientsOnBackward_(chain.step.grads == GradMode::OnBackward),
        gradientWriter_(gradientsOnBackward_ ? weightGradientWriters(chain) : std::vector<std::size_t>{}),
        stepScratchBytes_(optimizerScratchBytes(chain)) {}

  // The number of tensors the ops added so far write.
  std::size_t tensorCount() const { return tensorCount_; }
  // The weight gradients B wrote (GradMode::OnBackward): they live until the step's last op.
  const std::vector<std::uint32_t>& weightGradients() const { return weightGradients_; }

  void add(const Op& op, OpTraffic& traffic) {
    traffic_ = &traffic;
    reads_ = 0;
    writes_ = 0;
    switch (op.kind) {
      case OpKind::F:
      case OpKind::R: forward(op); break;
      case OpKind::RE: recomputeExtras(op.layer); break;
      case OpKind::Seed: seed(); break;
      case OpKind::B: backward(op.layer); break;
      case OpKind::Step: traffic_->scratchBytes = stepScratchBytes_; break;
    }
  }

 private:
  using Kind = TensorLife::Kind;

  void read(std::uint32_t id) {
    if (id != kNoTensor) traffic_->reads[reads_++] = id;
  }

  // Into tensorBytes sized for the most an op sequence can write (about two tensors per op), so that
  // this stays small enough to inline: dynamicPeak() builds graphs in the planners' inner loops.
  std::uint32_t write(Kind kind, std::size_t layer, std::uint64_t bytes) {
    onTensor_(kind, layer);
    const auto id = static_cast<std::uint32_t>(tensorCount_++);
    graph_.tensorBytes[id] = bytes;
    traffic_->writes[writes_++] = id;
    return id;
  }

  // F and R write x(l); in keep mode (R, and F in the last segment) also E(l).
  void forward(const Op& op) {
    const std::size_t l = op.layer;
    const LayerNumbers& m = chain_.at(l);
    read(x_[l - 1]);
    x_[l] = write(Kind::Activation, l, m.outBytes);
    const bool keep = op.kind == OpKind::R || l > lastSegmentStart_;
    if (keep && m.extraBytes > 0) extra_[l] = write(Kind::Extra, l, m.extraBytes);
    traffic_->scratchBytes = m.fwdWorkspaceBytes;
  }

  // RE writes E(l). Its x(l) is a new version when B(l) reads it (out(l)): PyTorch's checkpoint
  // recomputes every tensor the segment's backward reads, so B(l) reads the recomputed output, not
  // the checkpoint (memory-model.md 2.3). Otherwise that x(l) is scratch, like the workspace.
  void recomputeExtras(std::size_t l) {
    const LayerNumbers& m = chain_.at(l);
    read(x_[l - 1]);
    extra_[l] = write(Kind::Extra, l, m.extraBytes);
    if (m.needsOutput) {
      x_[l] = write(Kind::Activation, l, m.outBytes);
      traffic_->scratchBytes = m.fwdWorkspaceBytes;
    } else {
      traffic_->scratchBytes = m.fwdWorkspaceBytes + m.outBytes;
    }
  }

  void seed() {
    const std::size_t n = chain_.size();
    read(x_[n]);
    grad_[n] = write(Kind::Gradient, n, chain_.at(n).outBytes);
  }

  // B reads d(l) and what the layer's flags say; writes d(l-1), except for layer 1.
  void backward(std::size_t l) {
    const LayerNumbers& m = chain_.at(l);
    read(grad_[l]);
    if (m.needsInput) read(x_[l - 1]);
    if (m.needsOutput) read(x_[l]);
    if (m.extraBytes > 0) read(extra_[l]);
    if (l > 1) grad_[l - 1] = write(Kind::Gradient, l - 1, chain_.at(l - 1).outBytes);
    // zero_grad(set_to_none=True): the first backward to use a layer's parameters allocates their
    // gradient (section 11.2): B(l) its own, a tied head's B(n) also the shared table's.
    if (gradientsOnBackward_) {
      if (m.paramBytes > 0 && gradientWriter_[l] == l)
        weightGradients_.push_back(write(Kind::WeightGradient, l, m.paramBytes));
      const std::size_t owner = sharedParamsLayer(chain_, l);
      if (owner > 0 && gradientWriter_[owner] == l && chain_.at(owner).paramBytes > 0)
        weightGradients_.push_back(write(Kind::WeightGradient, owner, chain_.at(owner).paramBytes));
    }
    // zero_grad(set_to_none=False): B(l) makes its gradient in a fresh buffer, which AccumulateGrad
    // adds into the static G(l) and frees; nobody reads it after B(l).
    if (const std::uint64_t fresh = freshGradientBytes(chain_, l); fresh > 0) write(Kind::WeightGradient, l, fresh);
    traffic_->scratchBytes = m.bwdWorkspaceBytes;
    // A tied head's table gradient: written here, read (and freed) by B(1), whose workspace holds
    // at least the embedding's own table gradient before the two are summed (memory-model.md 12.2;
    // a profiled wb(1) has measured it).
    if (m.sharedGradBytes > 0) {
      sharedGrad_ = write(Kind::WeightGradient, l, m.sharedGradBytes);
      sharedGradBytes_ = m.sharedGradBytes;
    }
    if (l == 1 && sharedGrad_ != kNoTensor) {
      read(sharedGrad_);
      traffic_->scratchBytes = std::max(traffic_->scratchBytes, sharedGradBytes_);
    }
  }

  const Chain& chain_;
  const std::size_t lastSegmentStart_;
  OnTensor& onTensor_;
  TensorGraph& graph_;
  std::vector<std::uint32_t> x_, extra_, grad_;  // newest versions; index 0 of x is the static input
  const bool gradientsOnBackward_;
  const std::vector<std::size_t> gradientWriter_;  // weightGradientWriters, under OnBackward
  const std::uint64_t stepScratchBytes_;           // the STEP op's temporaries
  std::vector<std::uint32_t> weightGradients_;
  std::uint32_t sharedGrad_ = kNoTensor;  // a tied head's table gradient, until B(1)
  std::uint64_t sharedGradBytes_ = 0;
  std::size_t tensorCount_ = 0;
  OpTraffic* traffic_ = nullptr;  // of the op being added
  int reads_ = 0;
  int writes_ = 0;
};

// Builds the graph of `ops` (buildOpSequence of a valid plan). onTensor(kind, layer) is called
// once per new tensor, in id order, for callers that name tensors; the simulator passes a no-op,
// which the compiler removes.
template <typename OnTensor>
TensorGraph buildTensorGraph(const Chain& chain, const std::vector<Op>& ops, std::size_t lastSegmentStart,
                             OnTensor&& onTensor) {
  TensorGraph graph;
  graph.traffic.resize(ops.size());
  graph.tensorBytes.resize(2 * ops.size() + 2);  // + 2: a tied head's B(n) writes four
  TensorGraphBuilder<std::remove_reference_t<OnTensor>> builder(chain, lastSegmentStart, onTensor, graph);
  for (std::size_t i = 0; i < ops.size(); ++i) builder.add(ops[i], graph.traffic[i]);
  graph.tensorBytes.resize(builder.tensorCount());
  graph.lastReader.assign(graph.tensorBytes.size(), kNoReader);
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::uint32_t id : graph.traffic[i].reads)
      if (id != kNoTensor) graph.lastReader[id] = i;
  for (std::uint32_t id : builder.weightGradients()) graph.lastReader[id] = ops.size() - 1;
  return graph;
}

// The onTensor of a graph whose tensors a liveness trace names, in id order (null: names nothing).
inline auto nameTensorsIn(LivenessTrace* trace) {
  return [trace](TensorLife::Kind kind, std::size_t layer) {
    if (trace == nullptr) return;
    TensorLife& t = trace->tensors.emplace_back();
    t.kind = kind;
    t.layer = layer;
  };
}

// Completes a trace whose ops are set and whose tensors the graph named (nameTensorsIn): each
// tensor's writer, size and last reader, and each op's scratch (liveness.cpp).
void fillLivenessTrace(const TensorGraph& graph, LivenessTrace& trace);

}  // namespace remat::detail
