// conv2d and linear under bf16-mixed (dnnl_half.hpp): autocast's casts in our own loops
// (kernels_half.cpp), the convolutions and matmuls on oneDNN's bf16 primitives.
//
// Convolution scratch. Forward: [input's cast copy][weight copy] (used by a discard-mode forward
// only; a keep-mode one writes them into E) [weights reordered for the primitive][reorder's
// scratchpad][convolution's scratchpad]. Backward, the larger of its two phases: data:
// [reordered weights][reorder's scratchpad][scratchpad]; weights: [bf16 weight gradient][bf16 bias
// gradient][scratchpad][the adding reorder's scratchpad].
#include "dnnl_half.hpp"

#include <algorithm>

namespace remat::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The half weights a primitive takes: the copy itself, or the copy reordered into the layout the
// primitive chose (a region of the scratch).
ConvOp::Weights halfWeightsFor(const DnnlContext& context, const memory::desc& chosen, const memory::desc& plain,
                               ScratchLayout& layout) {
  ConvOp::Weights w;
  w.desc = chosen;
  w.reordered = chosen != plain;
  if (!w.reordered) return w;
  w.offset = layout.add(chosen.get_size());
  const dnnl::reorder::primitive_desc pd(context.engine, plain, context.engine, chosen, primitiveAttributes());
  w.reorder = makeStep<dnnl::reorder>(pd, layout);
  return w;
}

const void* reorderedWeights(const DnnlContext& context, const ConvOp::Weights& w, const memory::desc& plain,
                             const void* copy, std::byte* scratch, const std::string& label, Status& status) {
  if (!w.reordered) return copy;
  void* target = scratch + w.offset;
  status = execute(context, w.reorder, {{DNNL_ARG_FROM, &plain, copy}, {DNNL_ARG_TO, &w.desc, target}}, scratch, label);
  return target;
}

// Where the cast input and the weight copy go: E in keep mode, the scratch in discard mode.
struct CopyTargets {
  BFloat16* input = nullptr;
  BFloat16* weights = nullptr;
};

CopyTargets copyTargets(const HalfCopies& copies, std::byte* extra, std::byte* scratch, std::uint64_t castOffset,
                        std::uint64_t copyOffset) {
  if (extra != nullptr)
    return {reinterpret_cast<BFloat16*>(extra), reinterpret_cast<BFloat16*>(extra + copies.weightCopyOffset())};
  return {reinterpret_cast<BFloat16*>(scratch + castOffset), reinterpret_cast<BFloat16*>(scratch + copyOffset)};
}

// Autocast's casts before a half op: the weights always, the input when it is float32.
const void* castForward(const HalfCopies& copies, const void* x, const float* w, const CopyTargets& to) {
  if (!copies.pure) castToHalf(copies.weightCount, w, to.weights);
  if (!copies.castsInput) return x;
  castToHalf(copies.inputCount, static_cast<const float*>(x), to.input);
  return to.input;
}

// d(input) from the bfloat16 one the primitive wrote into the scratch: through the input cast's
// backward (ToCopyBackward) to a float32 input, or added into a gradient another inner op of a
// block wrote.
void inputGradient(const HalfCopies& copies, InputGrad grad, const void* computed, void* dx) {
  const auto* half = static_cast<const BFloat16*>(computed);
  if (copies.castsInput && grad == InputGrad::Add)  // x(l-1) of a block, read by another op as well
    addHalfInto(copies.inputCount, half, static_cast<float*>(dx));
  else if (copies.castsInput)
    castToFloat(copies.inputCount, half, static_cast<float*>(dx));
  else if (grad == InputGrad::Add)
    copyOrAdd(copies.inputCount, half, static_cast<BFloat16*>(dx), true);
}

// PyTorch's weight order: [out][in/groups][kh][kw], with the groups split off first when grouped
// (kh != kw: Inception-v3's 1x7 and 7x1).
memory::dims weightDims(const ConvGeometry& g) {
  if (g.groups > 1) return {g.groups, g.outChannels / g.groups, g.inChannels / g.groups, g.kernel, g.kernelW};
  return {g.outChannels, g.inChannels, g.kernel, g.kernelW};
}

}  // namespace

Result<HalfConvOp> HalfConvOp::create(const DnnlContext& context, const ConvGeometry& g, bool bias, bool castsInput,
                                      InputGrad grad, const std::string& label, bool pure) {
  HalfConvOp op;
  op.copies_ = {castsInput, g.batch * g.inChannels * g.inHeight * g.inWidth,
                g.outChannels * (g.inChannels / g.groups) * g.taps(), pure};
  const dt paramType = pure ? dt::bf16 : dt::f32;
  op.bias_ = bias;
  op.grad_ = grad;
  op.outChannels_ = g.outChannels;
  op.label_ = label;
  op.x_ = memory::desc({g.batch, g.inChannels, g.inHeight, g.inWidth}, dt::bf16, tag::nhwc);
  op.y_ = memory::desc({g.batch, g.outChannels, g.outHeight, g.outWidth}, dt::bf16, tag::nhwc);
  const memory::dims dims = weightDims(g);
  const tag plain = g.groups > 1 ? tag::goihw : tag::oihw;
  op.weightsPlain_ = memory::desc(dims, dt::bf16, plain);
  op.weightsGradPlain_ = memory::desc(dims, paramType, plain);
  const memory::desc weightsAny(dims, dt::bf16, tag::any);
  op.biasDesc_ = memory::desc({g.outChannels}, paramType, tag::x);
  const memory::desc biasGrad({g.outChannels}, dt::bf16, tag::x);
  const memory::dims strides = {g.stride, g.strideW}, padding = {g.padding, g.paddingW};
  Status made = dnnlTry(label + ", bf16 convolution", [&] {
    using namespace dnnl;
    const auto direct = algorithm::convolution_direct;
    const convolution_forward::primitive_desc forward(
        bias ? convolution_forward::desc(prop_kind::forward_training, direct, op.x_, weightsAny, op.biasDesc_, op.y_,
                                         strides, padding, padding)
             : convolution_forward::desc(prop_kind::forward_training, direct, op.x_, weightsAny, op.y_, strides,
                                         padding, padding),
        primitiveAttributes(), context.engine);
    ScratchLayout f, data, weights;
    op.castOffset_ = f.add(op.copies_.inputCastBytes());
    op.copyOffset_ = f.add(op.copies_.weightCopyBytes());
    op.forwardWeights_ = halfWeightsFor(context, forward.weights_desc(), op.weightsPlain_, f);
    op.forward_ = makeStep<convolution_forward>(forward, f);
    op.forwardBytes_ = f.bytes();
    if (grad != InputGrad::None) {
      const convolution_backward_data::primitive_desc backward(
          convolution_backward_data::desc(direct, op.x_, weightsAny, op.y_, strides, padding, padding),
          primitiveAttributes(), context.engine, forward);
      // d(input) in bfloat16 before it is added, or cast to a float32 input's dtype.
      if (grad == InputGrad::Add || castsInput) op.dxOffset_ = data.add(op.x_.get_size());
      op.dataWeights_ = halfWeightsFor(context, backward.weights_desc(), op.weightsPlain_, data);
      op.backwardData_ = makeStep<convolution_backward_data>(backward, data);
    }
    const convolution_backward_weights::primitive_desc backward(
        bias ? convolution_backward_weights::desc(direct, op.x_, weightsAny, biasGrad, op.y_, strides, padding, padding)
             : convolution_backward_weights::desc(direct, op.x_, weightsAny, op.y_, strides, padding, padding),
        primitiveAttributes(), context.engine, forward);
    op.diffWeights_ = backward.diff_weights_desc();
    op.diffWeightsOffset_ = weights.add(op.diffWeights_.get_size());
    op.diffBiasOffset_ = weights.add(bias ? biasGrad.get_size() : 0);
    op.backwardWeights_ = makeStep<convolution_backward_weights>(backward, weights);
    const reorder::primitive_desc adding(context.engine, op.diffWeights_, context.engine, op.weightsGradPlain_,
                                         primitiveAttributes(true));
    op.addWeightGradients_ = makeStep<reorder>(adding, weights);
    op.backwardBytes_ = std::max(data.bytes(), weights.bytes());
  });
  if (!made) return made;
  return op;
}

Status HalfConvOp::forward(const DnnlContext& context, const void* x, const float* w, const float* b, void* y,
                           std::byte* extra, std::byte* scratch) const {
  const CopyTargets to = copyTargets(copies_, extra, scratch, castOffset_, copyOffset_);
  const void* input = castForward(copies_, x, w, to);
  const void* plainWeights = copies_.pure ? static_cast<const void*>(w) : to.weights;
  Status status;
  const void* weights =
      reorderedWeights(context, forwardWeights_, weightsPlain_, plainWeights, scratch, label_, status);
  REMAT_RETURN_IF_ERROR(status);
  if (bias_)
    return execute(context, forward_,
                   {{DNNL_ARG_SRC, &x_, input},
                    {DNNL_ARG_WEIGHTS, &forwardWeights_.desc, weights},
                    {DNNL_ARG_BIAS, &biasDesc_, b},
                    {DNNL_ARG_DST, &y_, y}},
                   scratch, label_);
  return execute(
      context, forward_,
      {{DNNL_ARG_SRC, &x_, input}, {DNNL_ARG_WEIGHTS, &forwardWeights_.desc, weights}, {DNNL_ARG_DST, &y_, y}}, scratch,
      label_);
}

Status HalfConvOp::backward(const DnnlContext& context, const void* x, const void* dy, const std::byte* extra, void* dx,
                            float* dw, float* db, std::byte* scratch, const void* pureWeights) const {
  const void* input = copies_.castsInput ? static_cast<const void*>(extra) : x;
  const void* copy = copies_.pure ? pureWeights : extra + copies_.weightCopyOffset();
  if (grad_ != InputGrad::None) {
    Status status;
    const void* weights = reorderedWeights(context, dataWeights_, weightsPlain_, copy, scratch, label_, status);
    REMAT_RETURN_IF_ERROR(status);
    void* target = grad_ == InputGrad::Add || copies_.castsInput ? static_cast<void*>(scratch + dxOffset_) : dx;
    REMAT_RETURN_IF_ERROR(execute(context, backwardData_,
                                  {{DNNL_ARG_DIFF_DST, &y_, dy},
                                   {DNNL_ARG_WEIGHTS, &dataWeights_.desc, weights},
                                   {DNNL_ARG_DIFF_SRC, &x_, target}},
                                  scratch, label_));
    inputGradient(copies_, grad_, target, dx);
  }
  std::byte* diffWeights = scratch + diffWeightsOffset_;
  std::byte* diffBias = scratch + diffBiasOffset_;
  const memory::desc biasGrad({outChannels_}, dt::bf16, tag::x);
  if (bias_) {
    REMAT_RETURN_IF_ERROR(execute(context, backwardWeights_,
                                  {{DNNL_ARG_SRC, &x_, input},
                                   {DNNL_ARG_DIFF_DST, &y_, dy},
                                   {DNNL_ARG_DIFF_WEIGHTS, &diffWeights_, diffWeights},
                                   {DNNL_ARG_DIFF_BIAS, &biasGrad, diffBias}},
                                  scratch, label_));
  } else {
    REMAT_RETURN_IF_ERROR(execute(
        context, backwardWeights_,
        {{DNNL_ARG_SRC, &x_, input}, {DNNL_ARG_DIFF_DST, &y_, dy}, {DNNL_ARG_DIFF_WEIGHTS, &diffWeights_, diffWeights}},
        scratch, label_));
  }
  // ToCopyBackward's cast of the half gradients to float32, added into the master gradients.
  REMAT_RETURN_IF_ERROR(execute(context, addWeightGradients_,
                                {{DNNL_ARG_FROM, &diffWeights_, diffWeights}, {DNNL_ARG_TO, &weightsGradPlain_, dw}},
                                scratch, label_));
  const auto* halfBias = reinterpret_cast<const BFloat16*>(diffBias);
  if (bias_ && copies_.pure) addHalfIntoHalf(outChannels_, halfBias, reinterpret_cast<BFloat16*>(db));
  if (bias_ && !copies_.pure) addHalfInto(outChannels_, halfBias, db);
  return Status::ok();
}

Result<HalfLinearOp> HalfLinearOp::create(const DnnlContext& context, Index batch, Index inFeatures, Index outFeatures,
                                          bool bias, bool castsInput, InputGrad grad, const std::string& label,
                                          bool pure) {
  HalfLinearOp op;
  op.copies_ = {castsInput, batch * inFeatures, inFeatures * outFeatures, pure};
  op.batch_ = batch;
  op.outFeatures_ = outFeatures;
  op.bias_ = bias;
  op.grad_ = grad;
  op.label_ = label;
  op.x_ = memory::desc({batch, inFeatures}, dt::bf16, tag::ab);
  op.y_ = memory::desc({batch, outFeatures}, dt::bf16, tag::ab);
  op.weights_ = memory::desc({outFeatures, inFeatures}, dt::bf16, tag::ab);
  op.weightsT_ = memory::desc({inFeatures, outFeatures}, dt::bf16, tag::ba);  // W^T over the copy's memory
  op.dyT_ = memory::desc({outFeatures, batch}, dt::bf16, tag::ba);            // d(y)^T over d(y)'s memory
  if (bias) op.biasDesc_ = memory::desc({1, outFeatures}, pure ? dt::bf16 : dt::f32, tag::ab);
  Status made = dnnlTry(label + ", bf16 matmul", [&] {
    using dnnl::matmul;
    ScratchLayout f, data, weights;
    op.castOffset_ = f.add(op.copies_.inputCastBytes());
    op.copyOffset_ = f.add(op.copies_.weightCopyBytes());
    const matmul::primitive_desc forward(
        bias ? matmul::desc(op.x_, op.weightsT_, op.biasDesc_, op.y_) : matmul::desc(op.x_, op.weightsT_, op.y_),
        primitiveAttributes(), context.engine);
    op.forward_ = makeStep<matmul>(forward, f);
    op.forwardBytes_ = f.bytes();
    if (grad != InputGrad::None) {
      if (castsInput) op.dxOffset_ = data.add(op.x_.get_size());  // d(input) before its float32 cast
      const matmul::primitive_desc backward(matmul::desc(op.y_, op.weights_, op.x_), primitiveAttributes(),
                                            context.engine);
      op.backwardData_ = makeStep<matmul>(backward, data);
    }
    // The half weight gradient: in the scratch before its float32 cast (bf16-mixed); pure bf16's
    // matmul adds it into the bfloat16 gradient buffer itself (a sum post-op, one rounding).
    if (!pure) op.gradientOffset_ = weights.add(static_cast<std::uint64_t>(op.copies_.weightCount) * 2);
    const matmul::primitive_desc gradient(matmul::desc(op.dyT_, op.x_, op.weights_), primitiveAttributes(pure),
                                          context.engine);
    op.backwardWeights_ = makeStep<matmul>(gradient, weights);
    op.backwardBytes_ = std::max(data.bytes(), weights.bytes());
  });
  if (!made) return made;
  return op;
}

Status HalfLinearOp::forward(const DnnlContext& context, const void* x, const float* w, const float* b, void* y,
                             std::byte* extra, std::byte* scratch) const {
  const CopyTargets to = copyTargets(copies_, extra, scratch, castOffset_, copyOffset_);
  const void* input = castForward(copies_, x, w, to);
  const void* weights = copies_.pure ? static_cast<const void*>(w) : to.weights;
  if (bias_)
    return execute(context, forward_,
                   {{DNNL_ARG_SRC, &x_, input},
                    {DNNL_ARG_WEIGHTS, &weightsT_, weights},
                    {DNNL_ARG_BIAS, &biasDesc_, b},
                    {DNNL_ARG_DST, &y_, y}},
                   scratch, label_);
  return execute(context, forward_,
                 {{DNNL_ARG_SRC, &x_, input}, {DNNL_ARG_WEIGHTS, &weightsT_, weights}, {DNNL_ARG_DST, &y_, y}}, scratch,
                 label_);
}

Status HalfLinearOp::backward(const DnnlContext& context, const void* x, const void* dy, const std::byte* extra,
                              void* dx, float* dw, float* db, std::byte* scratch, const void* pureWeights) const {
  const void* input = copies_.castsInput ? static_cast<const void*>(extra) : x;
  const void* copy = copies_.pure ? pureWeights : extra + copies_.weightCopyOffset();
  if (grad_ != InputGrad::None) {
    void* target = copies_.castsInput ? static_cast<void*>(scratch + dxOffset_) : dx;
    REMAT_RETURN_IF_ERROR(execute(
        context, backwardData_,
        {{DNNL_ARG_SRC, &y_, dy}, {DNNL_ARG_WEIGHTS, &weights_, copy}, {DNNL_ARG_DST, &x_, target}}, scratch, label_));
    inputGradient(copies_, grad_, target, dx);
  }
  auto* gradient =
      copies_.pure ? reinterpret_cast<BFloat16*>(dw) : reinterpret_cast<BFloat16*>(scratch + gradientOffset_);
  REMAT_RETURN_IF_ERROR(
      execute(context, backwardWeights_,
              {{DNNL_ARG_SRC, &dyT_, dy}, {DNNL_ARG_WEIGHTS, &x_, input}, {DNNL_ARG_DST, &weights_, gradient}}, scratch,
              label_));
  const auto* halfDy = static_cast<const BFloat16*>(dy);
  if (copies_.pure) {  // pure bf16: the weight gradient is in place; the bias's added likewise
    if (bias_) addHalfBiasGradientHalf(batch_, outFeatures_, halfDy, reinterpret_cast<BFloat16*>(db));
    return Status::ok();
  }
  addHalfInto(copies_.weightCount, gradient, dw);
  if (bias_) addHalfBiasGradient(batch_, outFeatures_, halfDy, db);
  return Status::ok();
}

}  // namespace remat::cpu
