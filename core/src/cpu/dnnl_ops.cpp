// Linear layers (oneDNN matmul), pooling, batch normalisation and relu / relu6 on oneDNN.
//
// Linear: y = x W^T + b, d(x) = d(y) W, d(W) += d(y)^T x. The weight gradient is a matmul with a
// sum post-op straight into the parameter gradients, so the backward needs no copy of the weights
// (oneDNN's inner product would overwrite them, and its gemm allocates packing buffers of its own,
// which the model could not count); the bias gradient is an own reduction.
#include <algorithm>

#include "dnnl_layers.hpp"
#include "remat/model/operators.hpp"

namespace remat::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// d(input) added into a gradient another reader wrote first, in the data's dtype (bfloat16 inside
// a block under bf16-mixed).
void addGradient(const memory::desc& data, Index count, const void* from, void* to) {
  if (data.data_type() == memory::data_type::bf16)
    copyOrAdd(count, static_cast<const BFloat16*>(from), static_cast<BFloat16*>(to), true);
  else
    copyOrAdd(count, static_cast<const float*>(from), static_cast<float*>(to), true);
}

}  // namespace

Result<LinearOp> LinearOp::create(const DnnlContext& context, Index batch, Index inFeatures, Index outFeatures,
                                  bool bias, InputGrad grad, const std::string& label) {
  LinearOp op;
  op.batch_ = batch;
  op.outFeatures_ = outFeatures;
  op.bias_ = bias;
  op.grad_ = grad;
  op.label_ = label;
  op.x_ = floatDesc({batch, inFeatures}, tag::ab);
  op.y_ = floatDesc({batch, outFeatures}, tag::ab);
  op.dy_ = op.y_;
  op.dx_ = op.x_;
  op.weights_ = floatDesc({outFeatures, inFeatures}, tag::ab);
  op.weightsT_ = floatDesc({inFeatures, outFeatures}, tag::ba);  // W^T over W's memory
  op.dyT_ = floatDesc({outFeatures, batch}, tag::ba);            // d(y)^T over d(y)'s memory
  if (bias) op.biasDesc_ = floatDesc({1, outFeatures}, tag::ab);
  Status made = dnnlTry(label + ", matmul", [&] {
    using dnnl::matmul;
    ScratchLayout f, data, weights;
    const matmul::primitive_desc forward(
        bias ? matmul::desc(op.x_, op.weightsT_, op.biasDesc_, op.y_) : matmul::desc(op.x_, op.weightsT_, op.y_),
        primitiveAttributes(), context.engine);
    op.forward_ = makeStep<matmul>(forward, f);
    if (grad != InputGrad::None) {
      const matmul::primitive_desc backward(matmul::desc(op.dy_, op.weights_, op.dx_),
                                            primitiveAttributes(grad == InputGrad::Add), context.engine);
      op.backwardData_ = makeStep<matmul>(backward, data);
    }
    const matmul::primitive_desc gradient(matmul::desc(op.dyT_, op.x_, op.weights_), primitiveAttributes(true),
                                          context.engine);
    op.backwardWeights_ = makeStep<matmul>(gradient, weights);
    op.backwardBytes_ = std::max(data.bytes(), weights.bytes());
  });
  if (!made) return made;
  return op;
}

Status LinearOp::forward(const DnnlContext& context, const float* x, const float* w, const float* b, float* y,
                         std::byte* scratch) const {
  if (bias_)
    return execute(context, forward_,
                   {{DNNL_ARG_SRC, &x_, x},
                    {DNNL_ARG_WEIGHTS, &weightsT_, w},
                    {DNNL_ARG_BIAS, &biasDesc_, b},
                    {DNNL_ARG_DST, &y_, y}},
                   scratch, label_);
  return execute(context, forward_, {{DNNL_ARG_SRC, &x_, x}, {DNNL_ARG_WEIGHTS, &weightsT_, w}, {DNNL_ARG_DST, &y_, y}},
                 scratch, label_);
}

Status LinearOp::backward(const DnnlContext& context, const float* x, const float* dy, const float* w, float* dx,
                          float* dw, float* db, std::byte* scratch) const {
  if (grad_ != InputGrad::None)
    REMAT_RETURN_IF_ERROR(execute(
        context, backwardData_, {{DNNL_ARG_SRC, &dy_, dy}, {DNNL_ARG_WEIGHTS, &weights_, w}, {DNNL_ARG_DST, &dx_, dx}},
        scratch, label_));
  REMAT_RETURN_IF_ERROR(execute(context, backwardWeights_,
                                {{DNNL_ARG_SRC, &dyT_, dy}, {DNNL_ARG_WEIGHTS, &x_, x}, {DNNL_ARG_DST, &weights_, dw}},
                                scratch, label_));
  if (bias_) addBiasGradient(batch_, outFeatures_, dy, db);
  return Status::ok();
}

Result<PoolOp> PoolOp::create(const DnnlContext& context, const PoolGeometry& g, bool max, const std::string& label,
                              memory::data_type type) {
  PoolOp op;
  op.max_ = max;
  op.label_ = label;
  op.x_ = memory::desc({g.batch, g.channels, g.inHeight, g.inWidth}, type, tag::nhwc);
  op.y_ = memory::desc({g.batch, g.channels, g.outHeight, g.outWidth}, type, tag::nhwc);
  Status made = dnnlTry(label + ", pooling", [&] {
    using namespace dnnl;
    const memory::dims strides = {g.stride, g.stride}, kernel = {g.kernel, g.kernel};
    const memory::dims left = {g.padding, g.padding}, right = {g.paddingBottom(), g.paddingRight()};
    const algorithm kind = max ? algorithm::pooling_max : algorithm::pooling_avg_include_padding;
    // Max pooling's forward needs no oneDNN workspace: our own kernel writes PyTorch's indices.
    const pooling_forward::primitive_desc forward(
        pooling_forward::desc(max ? prop_kind::forward_inference : prop_kind::forward_training, kind, op.x_, op.y_,
                              strides, kernel, left, right),
        primitiveAttributes(), context.engine);
    ScratchLayout f, b;
    op.forward_ = makeStep<pooling_forward>(forward, f);
    if (max) return;
    const pooling_backward::primitive_desc backward(
        pooling_backward::desc(kind, op.x_, op.y_, strides, kernel, left, right), primitiveAttributes(), context.engine,
        forward);
    op.backward_ = makeStep<pooling_backward>(backward, b);
  });
  if (!made) return made;
  return op;
}

Status PoolOp::forward(const DnnlContext& context, const void* x, void* y, std::byte* scratch) const {
  return execute(context, forward_, {{DNNL_ARG_SRC, &x_, x}, {DNNL_ARG_DST, &y_, y}}, scratch, label_);
}

Status PoolOp::backward(const DnnlContext& context, const void* dy, void* dx, std::byte* scratch) const {
  if (max_) return Status::internal(label_ + ": max pooling's backward is not a oneDNN primitive here");
  return execute(context, backward_, {{DNNL_ARG_DIFF_DST, &y_, dy}, {DNNL_ARG_DIFF_SRC, &x_, dx}}, scratch, label_);
}

Result<BatchNormOp> BatchNormOp::create(const DnnlContext& context, const memory::desc& data, Index channels,
                                        InputGrad grad, const std::string& label, bool halfParams) {
  BatchNormOp op;
  op.halfParams_ = halfParams;
  op.channels_ = channels;
  op.count_ = 1;
  for (const memory::dim d : data.dims()) op.count_ *= d;
  op.grad_ = grad;
  op.label_ = label;
  op.data_ = data;
  op.statistic_ = floatDesc({channels}, tag::x);
  op.gammaBeta_ = floatDesc({2, channels}, tag::nc);
  Status made = dnnlTry(label + ", batch normalization", [&] {
    using namespace dnnl;
    constexpr float kEpsilon = 1e-5f;  // PyTorch's default
    const auto flags = normalization_flags::use_scale_shift;
    const batch_normalization_forward::primitive_desc forward(
        batch_normalization_forward::desc(prop_kind::forward_training, data, kEpsilon, flags), primitiveAttributes(),
        context.engine);
    ScratchLayout f, b;
    op.forwardStatsOffset_ = f.add(2 * op.statistic_.get_size());
    if (halfParams) op.forwardParamsOffset_ = f.add(op.gammaBeta_.get_size());
    op.forward_ = makeStep<batch_normalization_forward>(forward, f);
    op.forwardBytes_ = f.bytes();
    const batch_normalization_backward::primitive_desc backward(
        batch_normalization_backward::desc(prop_kind::backward, data, data, kEpsilon, flags), primitiveAttributes(),
        context.engine, forward);
    op.gradParamsOffset_ = b.add(op.gammaBeta_.get_size());
    if (halfParams) op.backwardParamsOffset_ = b.add(op.gammaBeta_.get_size());
    // oneDNN always writes d(input): into the scratch when nobody wants it or it is added.
    if (grad != InputGrad::Write) op.dxOffset_ = b.add(data.get_size());
    op.backward_ = makeStep<batch_normalization_backward>(backward, b);
    op.backwardBytes_ = b.bytes();
  });
  if (!made) return made;
  return op;
}

Status BatchNormOp::forward(const DnnlContext& context, const void* x, const float* gammaBeta, void* y, float* stats,
                            std::byte* scratch) const {
  float* mean = stats != nullptr ? stats : reinterpret_cast<float*>(scratch + forwardStatsOffset_);
  if (halfParams_) {
    auto* widened = reinterpret_cast<float*>(scratch + forwardParamsOffset_);
    castToFloat(2 * channels_, reinterpret_cast<const BFloat16*>(gammaBeta), widened);
    gammaBeta = widened;
  }
  return execute(context, forward_,
                 {{DNNL_ARG_SRC, &data_, x},
                  {DNNL_ARG_SCALE_SHIFT, &gammaBeta_, gammaBeta},
                  {DNNL_ARG_DST, &data_, y},
                  {DNNL_ARG_MEAN, &statistic_, mean},
                  {DNNL_ARG_VARIANCE, &statistic_, mean + channels_}},
                 scratch, label_);
}

Status BatchNormOp::backward(const DnnlContext& context, const void* x, const void* dy, const float* gammaBeta,
                             const float* stats, void* dx, float* dGammaBeta, std::byte* scratch) const {
  auto* gradParams = reinterpret_cast<float*>(scratch + gradParamsOffset_);
  if (halfParams_) {
    auto* widened = reinterpret_cast<float*>(scratch + backwardParamsOffset_);
    castToFloat(2 * channels_, reinterpret_cast<const BFloat16*>(gammaBeta), widened);
    gammaBeta = widened;
  }
  void* target = grad_ == InputGrad::Write ? dx : scratch + dxOffset_;
  REMAT_RETURN_IF_ERROR(execute(context, backward_,
                                {{DNNL_ARG_SRC, &data_, x},
                                 {DNNL_ARG_DIFF_DST, &data_, dy},
                                 {DNNL_ARG_SCALE_SHIFT, &gammaBeta_, gammaBeta},
                                 {DNNL_ARG_MEAN, &statistic_, stats},
                                 {DNNL_ARG_VARIANCE, &statistic_, stats + channels_},
                                 {DNNL_ARG_DIFF_SRC, &data_, target},
                                 {DNNL_ARG_DIFF_SCALE_SHIFT, &gammaBeta_, gradParams}},
                                scratch, label_));
  if (halfParams_)
    addFloatIntoHalf(2 * channels_, gradParams, reinterpret_cast<BFloat16*>(dGammaBeta));
  else
    copyOrAdd(2 * channels_, gradParams, dGammaBeta, true);
  if (grad_ == InputGrad::Add) addGradient(data_, count_, target, dx);  // inner ops of blocks
  return Status::ok();
}

namespace {

// oneDNN's algorithm for a pointwise kind, or none where our own kernel runs (relu6, hardsigmoid).
// The *_use_dst_for_bwd ones compute the gradient from y, the others from x: each matches what the
// kind's description says PyTorch keeps.
struct EltwiseAlgorithm {
  bool ownKernel = false;
  dnnl::algorithm algorithm = dnnl::algorithm::eltwise_relu;
  float alpha = 0.0f, beta = 0.0f;
};

Result<EltwiseAlgorithm> eltwiseAlgorithm(LayerKind kind, const std::string& label) {
  using dnnl::algorithm;
  switch (kind) {
    case LayerKind::Relu: return EltwiseAlgorithm{false, algorithm::eltwise_relu_use_dst_for_bwd, 0.0f, 0.0f};
    case LayerKind::Sigmoid: return EltwiseAlgorithm{false, algorithm::eltwise_logistic_use_dst_for_bwd, 0.0f, 0.0f};
    case LayerKind::Tanh: return EltwiseAlgorithm{false, algorithm::eltwise_tanh_use_dst_for_bwd, 0.0f, 0.0f};
    case LayerKind::Silu: return EltwiseAlgorithm{false, algorithm::eltwise_swish, 1.0f, 0.0f};  // x * sigmoid(1 x)
    case LayerKind::HardSwish: return EltwiseAlgorithm{false, algorithm::eltwise_hardswish, 0.0f, 0.0f};
    case LayerKind::Gelu: return EltwiseAlgorithm{false, algorithm::eltwise_gelu_erf, 0.0f, 0.0f};
    // relu6's forward is oneDNN's clip; its backward our kernel (see above).
    case LayerKind::Relu6: return EltwiseAlgorithm{false, algorithm::eltwise_clip_v2, 0.0f, 6.0f};
    case LayerKind::HardSigmoid: return EltwiseAlgorithm{true, algorithm::eltwise_relu, 0.0f, 0.0f};
    default: break;
  }
  return Status::internal(label + ": '" + std::string(kindName(kind)) + "' is not a pointwise kind");
}

}  // namespace

Result<EltwiseOp> EltwiseOp::create(const DnnlContext& context, Index count, LayerKind kind, InputGrad grad,
                                    const std::string& label, memory::data_type type) {
  auto chosen = eltwiseAlgorithm(kind, label);
  if (!chosen) return chosen.status();
  EltwiseOp op;
  op.count_ = count;
  op.grad_ = grad;
  op.kind_ = kind;
  op.ownKernel_ = chosen->ownKernel;
  op.savedIsOutput_ = operatorInfo(kind).backwardReads == BackwardReads::Output;
  op.label_ = label;
  op.data_ = memory::desc({count}, type, tag::x);  // element-wise: the layout does not matter
  if (op.ownKernel_) return op;
  const bool ownBackward = kind == LayerKind::Relu6;
  Status made = dnnlTry(label + ", eltwise", [&] {
    using namespace dnnl;
    // An SE activation on [N, C, 1, 1] runs on one thread (dnnl_support.hpp).
    const ThreadScope threads(count <= kSingleThreadElements / 2 ? 1 : currentThreads());
    const algorithm alg = chosen->algorithm;
    const float alpha = chosen->alpha, beta = chosen->beta;
    const eltwise_forward::primitive_desc forward(
        eltwise_forward::desc(prop_kind::forward_training, alg, op.data_, alpha, beta), primitiveAttributes(),
        context.engine);
    ScratchLayout f, b;
    op.forward_ = makeStep<eltwise_forward>(forward, f);
    if (grad == InputGrad::Add && !ownBackward) op.dxOffset_ = b.add(op.data_.get_size());
    if (grad != InputGrad::None && !ownBackward) {
      const eltwise_backward::primitive_desc backward(eltwise_backward::desc(alg, op.data_, op.data_, alpha, beta),
                                                      primitiveAttributes(), context.engine, forward);
      op.backward_ = makeStep<eltwise_backward>(backward, b);
    }
    op.backwardBytes_ = b.bytes();
  });
  if (!made) return made;
  return op;
}

// relu6's and hardsigmoid's own backward, in the data's dtype.
void EltwiseOp::ownBackward(const void* saved, const void* dy, void* dx) const {
  const bool accumulate = grad_ == InputGrad::Add;
  if (data_.data_type() == memory::data_type::bf16) {
    const auto* x = static_cast<const BFloat16*>(saved);
    const auto* d = static_cast<const BFloat16*>(dy);
    auto* out = static_cast<BFloat16*>(dx);
    if (kind_ == LayerKind::Relu6)
      relu6Backward(count_, x, d, out, accumulate);
    else
      hardSigmoidBackward(count_, x, d, out, accumulate);
    return;
  }
  const auto* x = static_cast<const float*>(saved);
  const auto* d = static_cast<const float*>(dy);
  auto* out = static_cast<float*>(dx);
  if (kind_ == LayerKind::Relu6)
    relu6Backward(count_, x, d, out, accumulate);
  else
    hardSigmoidBackward(count_, x, d, out, accumulate);
}

Status EltwiseOp::forward(const DnnlContext& context, const void* x, void* y, std::byte* scratch) const {
  if (ownKernel_) {
    if (data_.data_type() == memory::data_type::bf16)
      hardSigmoidForward(count_, static_cast<const BFloat16*>(x), static_cast<BFloat16*>(y));
    else
      hardSigmoidForward(count_, static_cast<const float*>(x), static_cast<float*>(y));
    return Status::ok();
  }
  return execute(context, forward_, {{DNNL_ARG_SRC, &data_, x}, {DNNL_ARG_DST, &data_, y}}, scratch, label_);
}

Status EltwiseOp::backward(const DnnlContext& context, const void* saved, const void* dy, void* dx,
                           std::byte* scratch) const {
  if (grad_ == InputGrad::None) return Status::ok();
  if (kind_ == LayerKind::Relu6 || kind_ == LayerKind::HardSigmoid) {
    ownBackward(saved, dy, dx);
    return Status::ok();
  }
  void* target = grad_ == InputGrad::Add ? scratch + dxOffset_ : dx;
  const int savedArg = savedIsOutput_ ? DNNL_ARG_DST : DNNL_ARG_SRC;
  REMAT_RETURN_IF_ERROR(
      execute(context, backward_,
              {{savedArg, &data_, saved}, {DNNL_ARG_DIFF_DST, &data_, dy}, {DNNL_ARG_DIFF_SRC, &data_, target}},
              scratch, label_));
  if (grad_ == InputGrad::Add) addGradient(data_, count_, target, dx);
  return Status::ok();
}

}  // namespace remat::cpu
