#pragma once
// conv2d and linear under bf16-mixed (docs/memory-model.md section 11.7), as torch.autocast runs
// them: the float32 weights cast to a bfloat16 copy, the input cast to bfloat16 when it is float32
// (the input batch), the op in bfloat16 with float32 accumulation (oneDNN's bf16 primitives, AMX or
// AVX-512 BF16 on this CPU), a bfloat16 output; the backward from the saved copies, its weight
// gradient in bfloat16 and then added into the float32 master gradient (ToCopyBackward,
// AccumulateGrad). Internal to core/src/cpu.
//
// What the keep-mode forward saves, E(l) as the model counts it: [input's cast copy, when it
// casts][weight copy]; the backward reads both from there (the model's in(l) is false when it
// casts). A discard-mode forward (no E) makes both in its scratch, which is part of its workspace.
#include <string>

#include "dnnl_layers.hpp"

namespace remat::cpu {

// Where autocast's copies lie in a half layer's E, and what the forward's scratch holds for a
// discard-mode forward.
struct HalfCopies {
  bool castsInput = false;

  Index inputCount = 0;   // elements of x(l-1)
  Index weightCount = 0;  // the weights (not the bias: autograd does not save its copy)
  bool pure = false;      // pure bf16: the parameters are bfloat16 themselves, no copy is made
  std::uint64_t inputCastBytes() const { return castsInput ? static_cast<std::uint64_t>(inputCount) * 2 : 0; }
  std::uint64_t weightCopyBytes() const { return pure ? 0 : static_cast<std::uint64_t>(weightCount) * 2; }
  std::uint64_t weightCopyOffset() const { return inputCastBytes(); }
};

class HalfConvOp {
 public:
  static Result<HalfConvOp> create(const DnnlContext& context, const ConvGeometry& g, bool bias, bool castsInput,
                                   InputGrad grad, const std::string& label, bool pure = false);
  const HalfCopies& copies() const { return copies_; }
  std::uint64_t forwardScratchBytes() const { return forwardBytes_; }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  // x: float32 when it casts, else bfloat16; w, b: float32 masters; y: bfloat16; extra: E (null in
  // discard mode).
  Status forward(const DnnlContext& context, const void* x, const float* w, const float* b, void* y, std::byte* extra,
                 std::byte* scratch) const;
  // x: bfloat16 (null when it casts: the copy in E is read); dy: bfloat16; dx: bfloat16, float32
  // when it casts (a float32 input's gradient, through the cast); dw, db: float32.
  // Pure bf16 (copies().pure): w, b, dw, db point at bfloat16 parameters and gradients; the
  // backward reads the weights from `pureWeights` (the parameters) instead of a copy in E.
  Status backward(const DnnlContext& context, const void* x, const void* dy, const std::byte* extra, void* dx,
                  float* dw, float* db, std::byte* scratch, const void* pureWeights = nullptr) const;

 private:
  HalfCopies copies_;
  bool bias_ = false;
  InputGrad grad_ = InputGrad::Write;
  Index outChannels_ = 0;
  std::string label_;
  dnnl::memory::desc x_, y_, weightsPlain_, weightsGradPlain_, biasDesc_;
  ConvOp::Weights forwardWeights_, dataWeights_;
  Step forward_, backwardData_, backwardWeights_, addWeightGradients_;
  dnnl::memory::desc diffWeights_;
  std::uint64_t castOffset_ = 0, copyOffset_ = 0;  // the discard-mode forward's copies in its scratch
  std::uint64_t diffWeightsOffset_ = 0, diffBiasOffset_ = 0;
  std::uint64_t dxOffset_ = 0;  // InputGrad::Add (inside a block) or a float32 input: d(input) in bfloat16
  std::uint64_t forwardBytes_ = 0, backwardBytes_ = 0;
};

// y = x W^T + b on oneDNN's bf16 matmul; W's half copy keeps the parameter buffer's [out][in].
class HalfLinearOp {
 public:
  static Result<HalfLinearOp> create(const DnnlContext& context, Index batch, Index inFeatures, Index outFeatures,
                                     bool bias, bool castsInput, InputGrad grad, const std::string& label,
                                     bool pure = false);
  const HalfCopies& copies() const { return copies_; }
  std::uint64_t forwardScratchBytes() const { return forwardBytes_; }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  Status forward(const DnnlContext& context, const void* x, const float* w, const float* b, void* y, std::byte* extra,
                 std::byte* scratch) const;
  // Pure bf16 (copies().pure): w, b, dw, db point at bfloat16 parameters and gradients; the
  // backward reads the weights from `pureWeights` (the parameters) instead of a copy in E.
  Status backward(const DnnlContext& context, const void* x, const void* dy, const std::byte* extra, void* dx,
                  float* dw, float* db, std::byte* scratch, const void* pureWeights = nullptr) const;

 private:
  HalfCopies copies_;
  Index batch_ = 0, outFeatures_ = 0;
  bool bias_ = false;
  InputGrad grad_ = InputGrad::Write;
  std::string label_;
  dnnl::memory::desc x_, y_, weightsT_, weights_, biasDesc_, dyT_;
  Step forward_, backwardData_, backwardWeights_;
  std::uint64_t castOffset_ = 0, copyOffset_ = 0, forwardBytes_ = 0;
  std::uint64_t gradientOffset_ = 0, backwardBytes_ = 0;  // the half weight gradient in the backward's scratch
  std::uint64_t dxOffset_ = 0;                            // a float32 input's: d(input) in bfloat16 before its cast
};

}  // namespace remat::cpu
