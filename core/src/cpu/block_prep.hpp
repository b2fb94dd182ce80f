// What the CPU layers' prepare functions share across precisions (float32, bf16-mixed, pure bf16:
// run_transformer*.cpp, run_swin*.cpp, run_vit*.cpp, run_patch_half.cpp), written once so that the
// three precisions read the chain's numbers alike: byte sizes, transformer_block's geometry and
// parameter offsets, the chain's flag checks, patch_embedding's and cls_head's parameter layouts.
// Included by those .cpp files only (the size helpers live in remat::cpu).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "attention.hpp"
#include "device_impl.hpp"
#include "window.hpp"

namespace remat::cpu {

inline std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }
inline std::uint64_t halves(Index n) { return static_cast<std::uint64_t>(n) * 2; }
// A scratch region's bytes rounded up to whole cache lines.
inline std::uint64_t aligned(std::uint64_t bytes) { return (bytes + 63) / 64 * 64; }

// transformer_block's shape and options, as every precision reads them from the chain.
struct BlockGeometry {
  AttentionGeometry g;
  Index tokens = 0, width = 0, hidden = 0;
  bool tanhGelu = false, fused = false, postNorm = false;
  double dropoutP = 0.0;
};

// GPT-2's gelu(approximate='tanh') comes with its causal mask; BERT's and ViT's use the exact (erf)
// form.
inline void setBlockGeometry(BlockGeometry& t, const Shape& in, const LayerSpec& spec) {
  t.g = AttentionGeometry{in[0], in[1], spec.heads, in[2] / spec.heads, spec.causal, currentThreads()};
  t.tokens = in[0] * in[1];
  t.width = in[2];
  t.hidden = spec.hidden;
  t.tanhGelu = spec.causal;
  t.fused = spec.fusedAttention;
  t.postNorm = !spec.preNorm;
  t.dropoutP = spec.dropoutP;
}

// transformer_block's and swin_block's parameter offsets in PyTorch's order (elements: floats, or
// bfloat16 ones under pure bf16): ln_1, Swin's relative-position bias table (tableElements; none
// in transformer_block), qkv (weight [3d, d], bias), the output projection, ln_2, fc1 ([H, d],
// bias), fc2.
struct BlockParams {
  Index ln1P = 0, table = 0, qkvW = 0, qkvB = 0, projW = 0, projB = 0, ln2P = 0, fc1W = 0, fc1B = 0, fc2W = 0, fc2B = 0;
  Index end = 0;  // the parameter count
  // The node (a norm's weight and bias, a linear's, Swin's table) whose parameters include `offset`:
  // its first parameter and count. PyTorch's backward makes one node's gradients at a time.
  std::pair<Index, Index> nodeOf(Index offset) const {
    Index first = 0, next = end;
    for (const Index start : {ln1P, table, qkvW, projW, ln2P, fc1W, fc2W}) {
      if (start <= offset) first = std::max(first, start);
      if (start > offset) next = std::min(next, start);
    }
    return {first, next - first};
  }
};

inline Status setBlockParams(BlockParams& t, Index d, Index H, std::uint64_t paramCount, const LayerChecks& check,
                             Index tableElements = 0) {
  Index at = 0;
  auto take = [&at](Index n) {
    const Index start = at;
    at += n;
    return start;
  };
  t.ln1P = take(2 * d);
  t.table = take(tableElements);
  t.qkvW = take(3 * d * d);
  t.qkvB = take(3 * d);
  t.projW = take(d * d);
  t.projB = take(d);
  t.ln2P = take(2 * d);
  t.fc1W = take(H * d);
  t.fc1B = take(H);
  t.fc2W = take(d * H);
  t.fc2B = take(d);
  t.end = at;
  return check.expectParams(paramCount, static_cast<std::uint64_t>(at));
}

// --grads static for a block kind whose backward makes its parameter gradients node by node
// (memory-model.md 11.2): at(offset) is where the gradient of parameter `offset` is written (added
// into). Without a fresh buffer that is G(l) itself; with one, the node holding `offset` gets the
// buffer, zeroed, and the node held before is added into G(l) first, as PyTorch's AccumulateGrad
// adds each node's fresh gradient before the next node's backward runs; close() adds the last.
// A node's pointers are taken right before its kernel runs. T: float, or BFloat16 (pure bf16).
template <typename T>
class NodeGradients {
 public:
  NodeGradients(const BlockParams& layout, T* grads, std::byte* fresh)
      : layout_(layout), grads_(grads), fresh_(fresh) {}
  NodeGradients(const NodeGradients&) = delete;
  NodeGradients& operator=(const NodeGradients&) = delete;
  ~NodeGradients() { close(); }

  T* at(Index offset) {
    if (fresh_ == nullptr) return grads_ + offset;
    const auto [first, count] = layout_.nodeOf(offset);
    if (first != first_ || count_ == 0) {
      close();
      first_ = first;
      count_ = count;
      std::memset(fresh_, 0, static_cast<std::size_t>(count) * sizeof(T));
    }
    return reinterpret_cast<T*>(fresh_) + (offset - first_);
  }
  void close() {
    if (fresh_ == nullptr || count_ == 0) return;
    const T* node = reinterpret_cast<const T*>(fresh_);
    if constexpr (std::is_same_v<T, BFloat16>)
      addHalfIntoHalf(count_, node, grads_ + first_);
    else
      addInto(count_, node, grads_ + first_);
    count_ = 0;
  }

 private:
  const BlockParams& layout_;
  T* grads_;
  std::byte* fresh_;
  Index first_ = 0, count_ = 0;
};

// swin_block's windows and options, as every precision reads them from the chain: the attention
// runs over the N*nW windows (its batch) of L = area tokens each.
struct SwinGeometry {
  WindowGeometry w;
  AttentionGeometry g;  // batch N*nW, seq L
  Index hidden = 0;
  double stochasticDepth = 0.0;
  bool single = false;  // N*nW = 1
};

inline void setSwinGeometry(SwinGeometry& t, const Shape& in, const LayerSpec& spec) {
  t.w = windowGeometry(in[0], in[1], in[2], in[3], spec.window, spec.shift);
  t.g = AttentionGeometry{in[0] * t.w.windows(), t.w.area(), spec.heads, in[3] / spec.heads, false, currentThreads()};
  t.hidden = spec.hidden;
  t.stochasticDepth = spec.stochasticDepth;
  t.single = t.g.batch == 1;
}

// Its parameters (BlockParams with the bias table of (2 * side - 1)^2 * heads elements).
inline Status setSwinParams(BlockParams& t, const SwinGeometry& s, Index heads, std::uint64_t paramCount,
                            const LayerChecks& check) {
  const Index side = 2 * s.w.side - 1;
  return setBlockParams(t, s.w.channels, s.hidden, paramCount, check, side * side * heads);
}

// The largest oneDNN scratch of a block's four linears and two norms (its forward's or backward's).
template <typename Prep>
std::uint64_t maxLinearNormScratch(const Prep& t, bool forward) {
  std::uint64_t m = 0;
  for (const auto* op : {&t.qkv, &t.proj, &t.fc1, &t.fc2})
    m = std::max(m, forward ? op->forwardScratchBytes() : op->backwardScratchBytes());
  for (const LayerNormOp* op : {&t.ln1, &t.ln2})
    m = std::max(m, forward ? op->forwardScratchBytes() : op->backwardScratchBytes());
  return m;
}

// A made op into its place in a prep, or the error that refused it.
template <typename Op, typename Into>
Status assign(Result<Op> made, Into& op) {
  if (!made) return made.status();
  op = std::move(made).value();
  return Status::ok();
}

// Parameter (or gradient) element `offset` of a layer whose float pointers carry either precision's
// parameters: a float32 master's, or pure bf16's bfloat16 one.
template <typename F>
F* paramAt(F* base, Index offset, bool pure) {
  using Byte = std::conditional_t<std::is_const_v<F>, const std::byte, std::byte>;
  return pure ? reinterpret_cast<F*>(reinterpret_cast<Byte*>(base) + offset * 2) : base + offset;
}

// A layer normalization over `rows` rows of `width` into `op`, labelled "<label>, <name>".
inline Status createNorm(const DnnlContext& context, Index rows, Index width, float epsilon, InputGrad grad,
                         const std::string& label, const char* name, LayerNormOp& op) {
  return assign(LayerNormOp::create(context, rows, width, epsilon, grad, label + ", " + name), op);
}

// The chain's needs_input as the layer's rule keeps x(l-1), and needs_output.
inline Status expectKeptFlags(const ChainLayer& layer, const LayerChecks& check, bool needsInput,
                              bool needsOutput = false) {
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, needsInput, "needs_input"));
  return check.expectFlag(layer.numbers.needsOutput, needsOutput, "needs_output");
}

// The layer's parameters as one plain segment (no packed or cast copies).
inline void addPlainParams(const ChainLayer& layer, PreparedLayer& prepared) {
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
}

// A block's last preparation steps, after its ops (whose scratch the workspaces hold, and whose
// bf16-mixed cast copies E may hold): E laid out and checked against the chain's extra bytes, the
// workspaces, the parameters.
template <typename Prep>
Status layOutCheckedE(Prep& t, const ChainLayer& layer, const LayerChecks& check, PreparedLayer& prepared,
                      std::uint64_t (*layOutSaved)(Prep&), void (*layOutScratch)(Prep&, PreparedLayer&)) {
  t.savedBytes = layOutSaved(t);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, t.savedBytes));
  layOutScratch(t, prepared);
  addPlainParams(layer, prepared);
  return Status::ok();
}

// A bfloat16 block's tensors at run time: E (or a discard-mode workspace's start), the scratch
// after it, the layer's dropout draw (inactive when p = 0).
struct HalfBlockTensors {
  std::byte* saved;
  std::byte* scratch;
  DropoutDraw drop;
  std::uint8_t* bytes(std::uint64_t offset) const { return reinterpret_cast<std::uint8_t*>(saved + offset); }
  template <typename T = BFloat16>
  T* at(std::uint64_t offset) const {
    return reinterpret_cast<T*>(saved + offset);
  }
  template <typename T = BFloat16>
  T* work(std::uint64_t offset) const {
    return reinterpret_cast<T*>(scratch + offset);
  }
};

// Where a layer's forward writes what its backward reads, and its scratch: E in keep mode; in
// discard mode the saved tensors at the workspace's start and the scratch `discardShift` bytes after
// them. An internal error naming the layer (`what`: "block", "head") when the workspace, or E where
// keep mode writes it (`writesE`), is missing.
struct SavedAndScratch {
  std::byte* saved;
  std::byte* scratch;
};
inline Result<SavedAndScratch> forwardRegions(const PreparedLayer& prepared, ForwardMode mode, const ForwardBuffers& b,
                                              std::uint64_t discardShift, const char* what = "block",
                                              bool writesE = true) {
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && writesE && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the " + what + "'s forward lacks its workspace or E");
  return SavedAndScratch{keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : discardShift)};
}

// A bfloat16 block's forward tensors (forwardRegions with its dropout draw).
inline Result<HalfBlockTensors> halfForwardTensors(const PreparedLayer& prepared, ForwardMode mode,
                                                   const ForwardBuffers& b, std::uint64_t discardShift,
                                                   DropoutDraw drop = {}) {
  auto regions = forwardRegions(prepared, mode, b, discardShift);
  if (!regions) return regions.status();
  return HalfBlockTensors{regions->saved, regions->scratch, drop};
}

// Its backward's: E and the workspace (read only where the forward wrote them), x(l-1) checked
// when the backward reads it.
inline Result<HalfBlockTensors> halfBackwardTensors(const PreparedLayer& prepared, const BackwardBuffers& b,
                                                    bool readsInput, DropoutDraw drop = {}) {
  if (b.workspace == nullptr || b.extra == nullptr || (readsInput && b.x == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the block's backward lacks x(l-1), E or its workspace");
  return HalfBlockTensors{const_cast<std::byte*>(b.extra), b.workspace, drop};
}

// A patchify convolution (ViT's conv_proj, Swin's patch embedding): kernel = stride = the spec's
// kernel, no padding, one group, `channels` out over the in / kernel grid.
inline ConvGeometry patchConvGeometry(const LayerSpec& spec, const Shape& in, Index channels) {
  LayerSpec convSpec = spec;
  convSpec.stride = spec.kernel;
  convSpec.padding = 0;
  convSpec.groups = 1;
  return convGeometry(convSpec, in, Shape{in[0], channels, in[2] / spec.kernel, in[3] / spec.kernel});
}

// patch_embedding's shape and parameter offsets (the conv's weight [d, C, k, k] and bias, the class
// token [d], the position table [S, d]; elements) into any precision's prep, checked against the
// chain's parameter count; `conv` gets conv_proj's geometry (kernel = stride = patch).
template <typename Prep>
Status setPatchLayout(Prep& v, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                      ConvGeometry& conv) {
  const Shape& in = layer.inputShape;
  v.batch = in[0];
  v.seq = layer.outputShape[1];
  v.width = spec.width;
  v.patches = v.seq - 1;
  conv = patchConvGeometry(spec, in, spec.width);
  const Index weights = spec.width * in[1] * spec.kernel * spec.kernel;
  v.convBias = weights;
  v.classToken = weights + v.width;
  v.positions = v.classToken + v.width;
  return check.expectParams(layer.paramCount, static_cast<std::uint64_t>(v.positions + v.seq * v.width));
}

// Then what every precision's patch_embedding checks and records: x(l-1) kept as its conv keeps it
// (`keepsImage`: float32's and pure bf16's keep the image, bf16-mixed's a cast copy in E instead),
// its dropout. Returns the dropout mask's bytes, which E holds after any cast copies (a byte an
// element when p > 0).
template <typename Prep>
Result<std::uint64_t> checkPatchEmbedding(Prep& v, const ChainLayer& layer, const LayerSpec& spec,
                                          const LayerChecks& check, bool keepsImage, PreparedLayer& prepared,
                                          ConvGeometry& conv) {
  REMAT_RETURN_IF_ERROR(setPatchLayout(v, layer, spec, check, conv));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, keepsImage));
  prepared.dropoutP = spec.dropoutP;
  return spec.dropoutP > 0.0 ? static_cast<std::uint64_t>(v.batch * v.seq * v.width) : std::uint64_t{0};
}

// cls_head's shape and parameter offsets (the norm's [2d] when it has one, the linear's weight
// [out, d], its bias or -1) into any precision's prep, checked against the chain's count.
template <typename Prep>
Status setClsHeadLayout(Prep& v, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const Shape& in = layer.inputShape;
  v.batch = in[0];
  v.seq = in[1];
  v.width = in[2];
  v.outFeatures = spec.outFeatures;
  v.norm = spec.norm;
  v.tanhOut = spec.tanhOut;
  const Index d = v.width, out = v.outFeatures;
  v.weight = v.norm ? 2 * d : 0;
  v.bias = spec.bias ? v.weight + out * d : -1;
  return check.expectParams(layer.paramCount, static_cast<std::uint64_t>(v.weight + out * d + (spec.bias ? out : 0)));
}

}  // namespace remat::cpu
