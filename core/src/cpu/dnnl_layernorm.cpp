// Layer normalization over the last axis of [N, F] on oneDNN's layer_normalization, in training
// mode: the forward writes the mean and variance of each row ([N] float32 each: E, the same bytes as
// the mean and rstd PyTorch's native_layer_norm saves), the backward reads them with the input, as
// derivatives.yaml's native_layer_norm_backward does. Weight and bias are one [2][F] buffer
// (PyTorch's parameter order, oneDNN's scale-shift). In bfloat16 (pure bf16, and a bf16-mixed
// ConvNeXt block's inner layer norm with its float32 weights, as PyTorch 2's CPU runs it;
// memory-model.md 11.7) the data is bf16 and the statistics stay float32, as oneDNN 2.6's layer
// normalization takes them (and as the model counts them); its scale-shift is float32 only, so pure
// bf16's bfloat16 weight and bias are widened into the scratch and their gradients rounded into the
// bfloat16 buffer.
#include <algorithm>

#include "dnnl_layers.hpp"

namespace remat::cpu {

using dnnl::memory;
using tag = memory::format_tag;

Result<LayerNormOp> LayerNormOp::create(const DnnlContext& context, Index rows, Index features, float epsilon,
                                        InputGrad grad, const std::string& label, memory::data_type type,
                                        bool halfParams) {
  LayerNormOp op;
  op.halfParams_ = halfParams;
  op.rows_ = rows;
  op.features_ = features;
  op.grad_ = grad;
  op.label_ = label;
  op.data_ = memory::desc({rows, features}, type, tag::ab);
  op.statistic_ = floatDesc({rows}, tag::a);
  op.weightBias_ = floatDesc({2, features}, tag::ab);
  Status made = dnnlTry(label + ", layer normalization", [&] {
    using namespace dnnl;
    const auto flags = normalization_flags::use_scale_shift;
    const layer_normalization_forward::primitive_desc forward(
        layer_normalization_forward::desc(prop_kind::forward_training, op.data_, op.statistic_, epsilon, flags),
        primitiveAttributes(), context.engine);
    ScratchLayout f, b;
    // A discard-mode forward (no E) writes its statistics here.
    op.forwardStatsOffset_ = f.add(2 * op.statistic_.get_size());
    if (halfParams) op.forwardParamsOffset_ = f.add(op.weightBias_.get_size());
    op.forward_ = makeStep<layer_normalization_forward>(forward, f);
    op.forwardBytes_ = f.bytes();
    const layer_normalization_backward::primitive_desc backward(
        layer_normalization_backward::desc(prop_kind::backward, op.data_, op.data_, op.statistic_, epsilon, flags),
        primitiveAttributes(), context.engine, forward);
    // Parameter gradients are added into the layer's; oneDNN overwrites, so it writes them here first.
    op.gradParamsOffset_ = b.add(op.weightBias_.get_size());
    if (halfParams) op.backwardParamsOffset_ = b.add(op.weightBias_.get_size());
    // oneDNN always writes d(input): into the scratch when nobody wants it or it is added.
    if (grad != InputGrad::Write) op.dxOffset_ = b.add(op.data_.get_size());
    op.backward_ = makeStep<layer_normalization_backward>(backward, b);
    op.backwardBytes_ = b.bytes();
  });
  if (!made) return made;
  return op;
}

// Pure bf16's parameters as the float32 scale-shift oneDNN takes; float32 ones as they are.
const float* LayerNormOp::widenedParams(const float* weightBias, std::byte* at) const {
  if (!halfParams_) return weightBias;
  auto* widened = reinterpret_cast<float*>(at);
  castToFloat(2 * features_, reinterpret_cast<const BFloat16*>(weightBias), widened);
  return widened;
}

Status LayerNormOp::forward(const DnnlContext& context, const float* x, const float* weightBias, float* y, float* stats,
                            std::byte* scratch) const {
  float* mean = stats != nullptr ? stats : reinterpret_cast<float*>(scratch + forwardStatsOffset_);
  weightBias = widenedParams(weightBias, scratch + forwardParamsOffset_);
  return execute(context, forward_,
                 {{DNNL_ARG_SRC, &data_, x},
                  {DNNL_ARG_SCALE_SHIFT, &weightBias_, weightBias},
                  {DNNL_ARG_DST, &data_, y},
                  {DNNL_ARG_MEAN, &statistic_, mean},
                  {DNNL_ARG_VARIANCE, &statistic_, mean + rows_}},
                 scratch, label_);
}

Status LayerNormOp::backward(const DnnlContext& context, const float* x, const float* dy, const float* weightBias,
                             const float* stats, float* dx, float* dWeightBias, std::byte* scratch) const {
  auto* gradParams = reinterpret_cast<float*>(scratch + gradParamsOffset_);
  float* target = grad_ == InputGrad::Write ? dx : reinterpret_cast<float*>(scratch + dxOffset_);
  weightBias = widenedParams(weightBias, scratch + backwardParamsOffset_);
  REMAT_RETURN_IF_ERROR(execute(context, backward_,
                                {{DNNL_ARG_SRC, &data_, x},
                                 {DNNL_ARG_DIFF_DST, &data_, dy},
                                 {DNNL_ARG_SCALE_SHIFT, &weightBias_, weightBias},
                                 {DNNL_ARG_MEAN, &statistic_, stats},
                                 {DNNL_ARG_VARIANCE, &statistic_, stats + rows_},
                                 {DNNL_ARG_DIFF_SRC, &data_, target},
                                 {DNNL_ARG_DIFF_SCALE_SHIFT, &weightBias_, gradParams}},
                                scratch, label_));
  if (halfParams_)
    addFloatIntoHalf(2 * features_, gradParams, reinterpret_cast<BFloat16*>(dWeightBias));
  else
    copyOrAdd(2 * features_, gradParams, dWeightBias, true);
  if (grad_ != InputGrad::Add) return Status::ok();
  if (data_.data_type() == memory::data_type::bf16)  // an inner op of a bfloat16 block
    copyOrAdd(rows_ * features_, reinterpret_cast<const BFloat16*>(target), reinterpret_cast<BFloat16*>(dx), true);
  else
    copyOrAdd(rows_ * features_, target, dx, true);
  return Status::ok();
}

}  // namespace remat::cpu
