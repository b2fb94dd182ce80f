// Convolution on oneDNN: channels-last (nhwc) activations as the interpreter holds them, weights in
// PyTorch's layout in the parameter buffer and, for each primitive, reordered into the layout that
// primitive prefers in the op's scratch (oneDNN's fast kernels want blocked weights, and a blocked
// layout may pad channels, so the parameter buffer, which has exactly the model's p bytes, keeps
// the plain one). The weight gradient is computed into the scratch and added into the parameter
// gradients by a reorder with a sum post-op.
//
// Scratch of the forward: [reordered weights][reorder's scratchpad][convolution's scratchpad].
// Scratch of the backward: the larger of its two phases, which run one after the other:
//   data:    [reordered weights][reorder's scratchpad][d(input) when added into][scratchpad];
//   weights: [weight gradient][bias gradient][scratchpad][the adding reorder's scratchpad]; none
//            for a depthwise convolution whose weight gradient is our kernel (kernels_depthwise.cpp).
#include <algorithm>
#include <string_view>

#include "dnnl_layers.hpp"

namespace remat::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvDescs {
  memory::desc x, y, weightsAny, weightsPlain, bias;
  memory::dims strides, paddingLeft, paddingRight;
};

ConvDescs descsOf(const ConvGeometry& g, bool bias) {
  ConvDescs d;
  d.x = floatDesc({g.batch, g.inChannels, g.inHeight, g.inWidth}, tag::nhwc);
  d.y = floatDesc({g.batch, g.outChannels, g.outHeight, g.outWidth}, tag::nhwc);
  if (g.groups == 1) {
    const memory::dims dims = {g.outChannels, g.inChannels, g.kernel, g.kernelW};
    d.weightsAny = floatDesc(dims, tag::any);
    d.weightsPlain = floatDesc(dims, tag::oihw);
  } else {
    // [groups][out/groups][in/groups][kh][kw]: the same memory as PyTorch's [out][in/groups][kh][kw].
    const memory::dims dims = {g.groups, g.outChannels / g.groups, g.inChannels / g.groups, g.kernel, g.kernelW};
    d.weightsAny = floatDesc(dims, tag::any);
    d.weightsPlain = floatDesc(dims, tag::goihw);
  }
  if (bias) d.bias = floatDesc({g.outChannels}, tag::x);
  d.strides = {g.stride, g.strideW};
  d.paddingLeft = {g.padding, g.paddingW};
  d.paddingRight = {g.padding, g.paddingW};
  return d;
}

// Where the weights a primitive takes come from: the parameter buffer when it takes PyTorch's
// layout, else a region of the scratch that a reorder fills.
ConvOp::Weights weightsFor(const DnnlContext& context, const memory::desc& chosen, const memory::desc& plain,
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

// Squeeze-and-Excitation's 1x1 convolutions on [N, C, 1, 1] run on one thread (dnnl_support.hpp).
bool isSmall(const ConvGeometry& g) {
  const Index elements = g.batch * (g.inChannels * g.inHeight * g.inWidth + g.outChannels * g.outHeight * g.outWidth);
  const Index macs = g.batch * g.outHeight * g.outWidth * g.outChannels * (g.inChannels / g.groups) * g.taps();
  return elements <= kSingleThreadElements && macs <= kSingleThreadMacs;
}

// A depthwise convolution whose weight gradient oneDNN computes without a depthwise kernel (its
// implementation's name lacks "dw": 5x5 and 7x7 in oneDNN 2.6) takes ours (kernels_depthwise.cpp).
bool ownDepthwiseWeightGradient(const ConvGeometry& g, const char* oneDnnImplementation) {
  return depthwiseWeightGradientFits(g) && std::string_view(oneDnnImplementation).find("dw") == std::string_view::npos;
}

}  // namespace

Result<ConvOp> ConvOp::create(const DnnlContext& context, const ConvGeometry& g, bool bias, InputGrad grad,
                              const std::string& label) {
  ConvOp op;
  op.grad_ = grad;
  op.bias_ = bias;
  op.outChannels_ = g.outChannels;
  op.inputCount_ = g.batch * g.inChannels * g.inHeight * g.inWidth;
  op.label_ = label;
  op.geometry_ = g;
  const ConvDescs d = descsOf(g, bias);
  op.x_ = d.x;
  op.y_ = d.y;
  op.weightsPlain_ = d.weightsPlain;
  op.biasDesc_ = d.bias;
  Status made = dnnlTry(label + ", convolution", [&] {
    using namespace dnnl;
    const ThreadScope threads(isSmall(g) ? 1 : currentThreads());
    const auto direct = algorithm::convolution_direct;
    const convolution_forward::primitive_desc forward(
        bias ? convolution_forward::desc(prop_kind::forward_training, direct, d.x, d.weightsAny, d.bias, d.y, d.strides,
                                         d.paddingLeft, d.paddingRight)
             : convolution_forward::desc(prop_kind::forward_training, direct, d.x, d.weightsAny, d.y, d.strides,
                                         d.paddingLeft, d.paddingRight),
        primitiveAttributes(), context.engine);
    ScratchLayout f;
    op.forwardWeights_ = weightsFor(context, forward.weights_desc(), d.weightsPlain, f);
    op.forward_ = makeStep<convolution_forward>(forward, f);
    op.forwardBytes_ = f.bytes();

    ScratchLayout data;
    if (grad != InputGrad::None) {
      const convolution_backward_data::primitive_desc backward(
          convolution_backward_data::desc(direct, d.x, d.weightsAny, d.y, d.strides, d.paddingLeft, d.paddingRight),
          primitiveAttributes(), context.engine, forward);
      op.dataWeights_ = weightsFor(context, backward.weights_desc(), d.weightsPlain, data);
      if (grad == InputGrad::Add) op.dxOffset_ = data.add(d.x.get_size());
      op.backwardData_ = makeStep<convolution_backward_data>(backward, data);
    }

    ScratchLayout weights;
    const convolution_backward_weights::primitive_desc backward(
        bias ? convolution_backward_weights::desc(direct, d.x, d.weightsAny, d.bias, d.y, d.strides, d.paddingLeft,
                                                  d.paddingRight)
             : convolution_backward_weights::desc(direct, d.x, d.weightsAny, d.y, d.strides, d.paddingLeft,
                                                  d.paddingRight),
        primitiveAttributes(), context.engine, forward);
    op.ownWeightGradient_ = ownDepthwiseWeightGradient(g, backward.impl_info_str());
    op.backwardBytes_ = data.bytes();
    if (op.ownWeightGradient_) return;  // kernels_depthwise.cpp: no scratch of its own
    op.diffWeights_ = backward.diff_weights_desc();
    op.diffWeightsOffset_ = weights.add(op.diffWeights_.get_size());
    if (bias) op.diffBiasOffset_ = weights.add(d.bias.get_size());
    op.backwardWeights_ = makeStep<convolution_backward_weights>(backward, weights);
    const reorder::primitive_desc adding(context.engine, op.diffWeights_, context.engine, d.weightsPlain,
                                         primitiveAttributes(true));
    op.addWeightGradients_ = makeStep<reorder>(adding, weights);
    op.backwardBytes_ = std::max(data.bytes(), weights.bytes());
  });
  if (!made) return made;
  return op;
}

Status ConvOp::forward(const DnnlContext& context, const float* x, const float* w, const float* b, float* y,
                       std::byte* scratch) const {
  const void* weights = w;
  if (forwardWeights_.reordered) {
    weights = scratch + forwardWeights_.offset;
    REMAT_RETURN_IF_ERROR(execute(context, forwardWeights_.reorder,
                                  {{DNNL_ARG_FROM, &weightsPlain_, w}, {DNNL_ARG_TO, &forwardWeights_.desc, weights}},
                                  scratch, label_));
  }
  if (bias_)
    return execute(context, forward_,
                   {{DNNL_ARG_SRC, &x_, x},
                    {DNNL_ARG_WEIGHTS, &forwardWeights_.desc, weights},
                    {DNNL_ARG_BIAS, &biasDesc_, b},
                    {DNNL_ARG_DST, &y_, y}},
                   scratch, label_);
  return execute(context, forward_,
                 {{DNNL_ARG_SRC, &x_, x}, {DNNL_ARG_WEIGHTS, &forwardWeights_.desc, weights}, {DNNL_ARG_DST, &y_, y}},
                 scratch, label_);
}

Status ConvOp::backward(const DnnlContext& context, const float* x, const float* dy, const float* w, float* dx,
                        float* dw, float* db, std::byte* scratch) const {
  if (grad_ != InputGrad::None) REMAT_RETURN_IF_ERROR(backwardData(context, dy, w, dx, scratch));
  return backwardWeights(context, x, dy, dw, db, scratch);
}

Status ConvOp::backwardData(const DnnlContext& context, const float* dy, const float* w, float* dx,
                            std::byte* scratch) const {
  const void* weights = w;
  if (dataWeights_.reordered) {
    weights = scratch + dataWeights_.offset;
    REMAT_RETURN_IF_ERROR(execute(context, dataWeights_.reorder,
                                  {{DNNL_ARG_FROM, &weightsPlain_, w}, {DNNL_ARG_TO, &dataWeights_.desc, weights}},
                                  scratch, label_));
  }
  float* target = grad_ == InputGrad::Add ? reinterpret_cast<float*>(scratch + dxOffset_) : dx;
  REMAT_RETURN_IF_ERROR(execute(
      context, backwardData_,
      {{DNNL_ARG_DIFF_DST, &y_, dy}, {DNNL_ARG_WEIGHTS, &dataWeights_.desc, weights}, {DNNL_ARG_DIFF_SRC, &x_, target}},
      scratch, label_));
  if (grad_ == InputGrad::Add) copyOrAdd(inputCount_, target, dx, true);
  return Status::ok();
}

Status ConvOp::backwardWeights(const DnnlContext& context, const float* x, const float* dy, float* dw, float* db,
                               std::byte* scratch) const {
  if (ownWeightGradient_) {
    depthwiseWeightGradient(geometry_, x, dy, dw, db);
    return Status::ok();
  }
  std::byte* diffWeights = scratch + diffWeightsOffset_;
  auto* diffBias = reinterpret_cast<float*>(scratch + diffBiasOffset_);
  if (bias_) {
    REMAT_RETURN_IF_ERROR(execute(context, backwardWeights_,
                                  {{DNNL_ARG_SRC, &x_, x},
                                   {DNNL_ARG_DIFF_DST, &y_, dy},
                                   {DNNL_ARG_DIFF_WEIGHTS, &diffWeights_, diffWeights},
                                   {DNNL_ARG_DIFF_BIAS, &biasDesc_, diffBias}},
                                  scratch, label_));
  } else {
    REMAT_RETURN_IF_ERROR(execute(
        context, backwardWeights_,
        {{DNNL_ARG_SRC, &x_, x}, {DNNL_ARG_DIFF_DST, &y_, dy}, {DNNL_ARG_DIFF_WEIGHTS, &diffWeights_, diffWeights}},
        scratch, label_));
  }
  REMAT_RETURN_IF_ERROR(execute(context, addWeightGradients_,
                                {{DNNL_ARG_FROM, &diffWeights_, diffWeights}, {DNNL_ARG_TO, &weightsPlain_, dw}},
                                scratch, label_));
  if (bias_) copyOrAdd(outChannels_, diffBias, db, true);
  return Status::ok();
}

}  // namespace remat::cpu
