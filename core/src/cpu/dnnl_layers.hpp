#pragma once
// The layer kinds the CPU backend runs on oneDNN primitives, one class per kind: convolution,
// linear (matmul), average and max pooling's forward, batch normalisation in training mode, and
// relu / relu6. Each is created once per layer (or inner op of a block) by prepare, with the
// device's thread count, and says how much scratch its forward and backward take: what the
// interpreter must allocate as wf / wb. Internal to core/src/cpu.
//
// Contract of every forward / backward: the pointers are the op's buffers in the CPU layouts
// (kernels.hpp); `scratch` holds at least forwardScratchBytes() / backwardScratchBytes() bytes and
// is the only memory used besides them (oneDNN's scratchpads, reordered weights, statistics of a
// discard-mode batch norm, temporaries). Parameter gradients are ADDED into; the input gradient is
// handled as the InputGrad the op was created with says.
#include <string>

#include "dnnl_support.hpp"
#include "kernels.hpp"
#include "remat/model/chain.hpp"

namespace remat::cpu {

// What a backward does with the input gradient d(l-1).
enum class InputGrad {
  None,   // layer 1: the input needs no gradient (dx is null)
  Write,  // overwrite dx
  Add,    // add into dx (an inner op of a block whose input feeds two ops)
};

class ConvOp {
 public:
  static Result<ConvOp> create(const DnnlContext& context, const ConvGeometry& g, bool bias, InputGrad grad,
                               const std::string& label);
  std::uint64_t forwardScratchBytes() const { return forwardBytes_; }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  // w: PyTorch's [out][in/groups][kh][kw]; b null without bias.
  Status forward(const DnnlContext& context, const float* x, const float* w, const float* b, float* y,
                 std::byte* scratch) const;
  Status backward(const DnnlContext& context, const float* x, const float* dy, const float* w, float* dx, float* dw,
                  float* db, std::byte* scratch) const;

  // Weights in the layout a primitive chose, reordered from PyTorch's into the scratch (not
  // needed when the primitive takes PyTorch's layout as it is).
  struct Weights {
    bool reordered = false;
    dnnl::memory::desc desc;
    std::uint64_t offset = 0;
    Step reorder;
  };

 private:
  Status backwardData(const DnnlContext& context, const float* dy, const float* w, float* dx, std::byte* scratch) const;
  Status backwardWeights(const DnnlContext& context, const float* x, const float* dy, float* dw, float* db,
                         std::byte* scratch) const;

  InputGrad grad_ = InputGrad::Write;
  bool bias_ = false;
  bool ownWeightGradient_ = false;  // depthwise, where oneDNN has no depthwise kernel (dnnl_conv.cpp)
  ConvGeometry geometry_;
  Index outChannels_ = 0, inputCount_ = 0;
  std::string label_;
  dnnl::memory::desc x_, y_, weightsPlain_, biasDesc_;
  Weights forwardWeights_, dataWeights_;
  Step forward_, backwardData_, backwardWeights_, addWeightGradients_;
  std::uint64_t dxOffset_ = 0;  // InputGrad::Add: d(input) before it is added
  dnnl::memory::desc diffWeights_;
  std::uint64_t diffWeightsOffset_ = 0, diffBiasOffset_ = 0;
  std::uint64_t forwardBytes_ = 0, backwardBytes_ = 0;
};

// y[n][o] = b[o] + sum_i w[o][i] x[n][i] on oneDNN's matmul, whose weight gradient accumulates
// into the parameter gradients (a sum post-op) and needs no copy of them.
class LinearOp {
 public:
  static Result<LinearOp> create(const DnnlContext& context, Index batch, Index inFeatures, Index outFeatures,
                                 bool bias, InputGrad grad, const std::string& label);
  std::uint64_t forwardScratchBytes() const { return forward_.scratchpad.get_size(); }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  Status forward(const DnnlContext& context, const float* x, const float* w, const float* b, float* y,
                 std::byte* scratch) const;
  Status backward(const DnnlContext& context, const float* x, const float* dy, const float* w, float* dx, float* dw,
                  float* db, std::byte* scratch) const;

 private:
  Index batch_ = 0, outFeatures_ = 0;
  bool bias_ = false;
  InputGrad grad_ = InputGrad::Write;
  std::string label_;
  dnnl::memory::desc x_, y_, dy_, weightsT_, weights_, biasDesc_, dyT_, dx_;
  Step forward_, backwardData_, backwardWeights_;
  std::uint64_t backwardBytes_ = 0;
};

// oneDNN pooling forward (max: inference, no indices; average: count_include_pad when every window
// lies inside the padding) and average pooling's backward. Max pooling's backward is kernels.hpp's.
class PoolOp {
 public:
  // type: the activations' (f32, or bf16 under bf16-mixed).
  static Result<PoolOp> create(const DnnlContext& context, const PoolGeometry& g, bool max, const std::string& label,
                               dnnl::memory::data_type type = dnnl::memory::data_type::f32);
  std::uint64_t forwardScratchBytes() const { return forward_.scratchpad.get_size(); }
  std::uint64_t backwardScratchBytes() const { return max_ ? 0 : backward_.scratchpad.get_size(); }
  Status forward(const DnnlContext& context, const void* x, void* y, std::byte* scratch) const;
  // Average pooling only; dx is written.
  Status backward(const DnnlContext& context, const void* dy, void* dx, std::byte* scratch) const;

 private:
  bool max_ = false;
  std::string label_;
  dnnl::memory::desc x_, y_;
  Step forward_, backward_;
};

// Batch norm in training mode over rows x channels (channels innermost): batch statistics, saved as
// mean [C] then variance [C] (oneDNN's own), gamma and beta as one [2][C] buffer (PyTorch's
// parameter order). A discard-mode forward keeps its statistics in the scratch. The data may be
// bfloat16 (bf16-mixed: `data`'s type), with float32 statistics, gamma and beta as cuDNN's and
// PyTorch's half batch norms keep them.
class BatchNormOp {
 public:
  // halfParams: pure bf16, gammaBeta and dGammaBeta are bfloat16 (widened to float32 in the scratch
  // for oneDNN; the gradient rounded once as it is added).
  static Result<BatchNormOp> create(const DnnlContext& context, const dnnl::memory::desc& data, Index channels,
                                    InputGrad grad, const std::string& label, bool halfParams = false);
  std::uint64_t forwardScratchBytes() const { return forwardBytes_; }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  // stats: E's 2*C floats in keep mode, null in discard mode.
  Status forward(const DnnlContext& context, const void* x, const float* gammaBeta, void* y, float* stats,
                 std::byte* scratch) const;
  Status backward(const DnnlContext& context, const void* x, const void* dy, const float* gammaBeta, const float* stats,
                  void* dx, float* dGammaBeta, std::byte* scratch) const;

 private:
  Index channels_ = 0, count_ = 0;
  InputGrad grad_ = InputGrad::Write;
  std::string label_;
  dnnl::memory::desc data_, statistic_, gammaBeta_;
  Step forward_, backward_;
  std::uint64_t forwardStatsOffset_ = 0, forwardBytes_ = 0;
  std::uint64_t gradParamsOffset_ = 0, dxOffset_ = 0, backwardBytes_ = 0;
  bool halfParams_ = false;
  std::uint64_t forwardParamsOffset_ = 0, backwardParamsOffset_ = 0;  // halfParams: the float32 gammaBeta
};

// Layer norm in training mode over the last axis of [rows][features] (dnnl_layernorm.cpp):
// statistics saved as mean [rows] then variance [rows], weight and bias as one [2][features] buffer.
// A discard-mode forward keeps its statistics in the scratch.
class LayerNormOp {
 public:
  // `type` bf16: bfloat16 data (float32 statistics, oneDNN's); `halfParams`: pure bf16's bfloat16
  // weight and bias, widened to float32 in the scratch, their gradients rounded into bfloat16.
  static Result<LayerNormOp> create(const DnnlContext& context, Index rows, Index features, float epsilon,
                                    InputGrad grad, const std::string& label,
                                    dnnl::memory::data_type type = dnnl::memory::data_type::f32,
                                    bool halfParams = false);
  std::uint64_t forwardScratchBytes() const { return forwardBytes_; }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  // stats: E's 2*rows floats in keep mode, null in discard mode.
  Status forward(const DnnlContext& context, const float* x, const float* weightBias, float* y, float* stats,
                 std::byte* scratch) const;
  Status backward(const DnnlContext& context, const float* x, const float* dy, const float* weightBias,
                  const float* stats, float* dx, float* dWeightBias, std::byte* scratch) const;

 private:
  Index rows_ = 0, features_ = 0;
  InputGrad grad_ = InputGrad::Write;
  std::string label_;
  dnnl::memory::desc data_, statistic_, weightBias_;
  Step forward_, backward_;
  std::uint64_t forwardStatsOffset_ = 0, forwardBytes_ = 0;
  std::uint64_t gradParamsOffset_ = 0, dxOffset_ = 0, backwardBytes_ = 0;
  bool halfParams_ = false;
  std::uint64_t forwardParamsOffset_ = 0, backwardParamsOffset_ = 0;  // halfParams: the float32 weightBias
  const float* widenedParams(const float* weightBias, std::byte* at) const;
};

// The pointwise activations (operators.hpp): oneDNN's eltwise forward and backward, from the
// tensor the kind's description says PyTorch's backward keeps (the *_use_dst_for_bwd algorithms
// for relu, sigmoid and tanh); relu6 and hardsigmoid run our own kernels from x (oneDNN 2.6's clip
// passes the gradient at x = 6 and has no hardsigmoid).
class EltwiseOp {
 public:
  // type: the activations' (f32, or bf16 under bf16-mixed; the own kernels have both).
  static Result<EltwiseOp> create(const DnnlContext& context, Index count, LayerKind kind, InputGrad grad,
                                  const std::string& label,
                                  dnnl::memory::data_type type = dnnl::memory::data_type::f32);
  std::uint64_t forwardScratchBytes() const { return ownKernel_ ? 0 : forward_.scratchpad.get_size(); }
  std::uint64_t backwardScratchBytes() const { return backwardBytes_; }
  Status forward(const DnnlContext& context, const void* x, void* y, std::byte* scratch) const;
  // saved: y when the kind's backward reads its output, else x (savedIsOutput()).
  Status backward(const DnnlContext& context, const void* saved, const void* dy, void* dx, std::byte* scratch) const;
  bool ownKernel() const { return ownKernel_ || kind_ == LayerKind::Relu6; }  // not oneDNN's alone
  bool savedIsOutput() const { return savedIsOutput_; }

 private:
  void ownBackward(const void* saved, const void* dy, void* dx) const;

  Index count_ = 0;
  InputGrad grad_ = InputGrad::Write;
  LayerKind kind_ = LayerKind::Relu;
  bool ownKernel_ = false;
  bool savedIsOutput_ = false;
  std::string label_;
  dnnl::memory::desc data_;
  Step forward_, backward_;
  std::uint64_t dxOffset_ = 0, backwardBytes_ = 0;
};

}  // namespace remat::cpu
