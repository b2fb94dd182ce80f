// Math attention on oneDNN (dnnl_attention.hpp). Forward: S = scale * Q K^T (matmul with an output
// scale), the bias and causal mask added in place, P = softmax(S) in place, the dropout, O = Z V.
// Backward: dZ = dO V^T, through the dropout's mask, dS = softmax_backward(P, dP) in place, then
// dV = Z^T dO, dQ = scale * dS K and dK = scale * dS^T Q written straight into the token rows.
#include "dnnl_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace remat::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

float scaleOf(const AttentionGeometry& g) { return 1.0f / std::sqrt(static_cast<float>(g.headDim)); }

dnnl::primitive_attr scaledAttributes(float scale) {
  dnnl::primitive_attr attributes = primitiveAttributes();
  attributes.set_output_scales(0, {scale});
  return attributes;
}

// A matmul step with its own scratchpad at offset 0 of the op's oneDNN region.
Step matmulStep(const DnnlContext& context, const memory::desc& src, const memory::desc& weights,
                const memory::desc& dst, const dnnl::primitive_attr& attributes) {
  ScratchLayout layout;
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), attributes, context.engine);
  return makeStep<dnnl::matmul>(pd, layout);
}

// The additive bias and the causal mask on the scores, in place (none: nothing to do).
void maskScores(const AttentionGeometry& g, const ScoreBias& bias, float* scores) {
  const bool biased = bias.perHead != nullptr || bias.perWindow != nullptr;
  if (!biased && !g.causal) return;
  const Index S = g.seq;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static)
  for (Index nh = 0; nh < g.batch * g.heads; ++nh) {
    const float* perHead = bias.perHead != nullptr ? bias.perHead + (nh % g.heads) * S * S : nullptr;
    const float* perWindow =
        bias.perWindow != nullptr ? bias.perWindow + ((nh / g.heads) % bias.windows) * S * S : nullptr;
    for (Index i = 0; i < S; ++i) {
      float* row = scores + (nh * S + i) * S;
      if (perHead != nullptr)
        for (Index j = 0; j < S; ++j) row[j] += perHead[i * S + j];
      if (perWindow != nullptr)
        for (Index j = 0; j < S; ++j) row[j] += perWindow[i * S + j];
      if (g.causal) std::fill(row + i + 1, row + S, kNegInf);
    }
  }
}

// Probabilities below e^-64 set to 0: below float32's resolution of their row's sum by 21 orders
// of magnitude, and the subnormal numbers Swin's shift mask (-100) gives would cost ~100 cycles per
// operation in every later product (the shifted blocks' forward ran 4 times slower).
void flushTiny(Index count, float* probs) {
  const float tiny = std::exp(-64.0f);
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i)
    if (probs[i] < tiny) probs[i] = 0.0f;
}

// PyTorch's dropout of the probabilities: the mask and the dropped probabilities (index = the
// element's own, the fused rule's draw).
void dropProbabilities(Index count, const AttentionDropout& drop, const float* probs) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const bool keep = drop.draw.keep(static_cast<std::uint64_t>(i));
    drop.mask[i] = keep ? 1 : 0;
    drop.dropped[i] = keep ? probs[i] * drop.draw.scale : 0.0f;
  }
}

}  // namespace

Result<MathAttentionOp> MathAttentionOp::create(const DnnlContext& context, const AttentionGeometry& g,
                                                const std::string& label) {
  MathAttentionOp op;
  op.g_ = g;
  op.label_ = label + ", attention";
  const Index N = g.batch, h = g.heads, S = g.seq, dh = g.headDim, stride = 3 * g.width();
  op.heads_ = floatDesc({N, h, S, dh}, tag::abcd);
  op.headsT_ = floatDesc({N, h, dh, S}, tag::abdc);  // K^T / V^T over the heads' memory
  op.square_ = floatDesc({N, h, S, S}, tag::abcd);
  op.squareT_ = floatDesc({N, h, S, S}, tag::abdc);  // P^T / dS^T over the square's memory
  op.rows_ = memory::desc({N, h, S, dh}, memory::data_type::f32, memory::dims{S * stride, dh, stride, 1});
  Status made = dnnlTry(op.label_, [&] {
    using namespace dnnl;
    const float scale = scaleOf(g);
    op.scores_ = matmulStep(context, op.heads_, op.headsT_, op.square_, scaledAttributes(scale));
    ScratchLayout softmaxLayout, backwardLayout;
    const softmax_forward::primitive_desc softmax(softmax_forward::desc(prop_kind::forward_training, op.square_, 3),
                                                  primitiveAttributes(), context.engine);
    op.softmax_ = makeStep<softmax_forward>(softmax, softmaxLayout);
    op.pv_ = matmulStep(context, op.square_, op.heads_, op.heads_, primitiveAttributes());
    op.dZ_ = matmulStep(context, op.heads_, op.headsT_, op.square_, primitiveAttributes());
    const softmax_backward::primitive_desc backward(softmax_backward::desc(op.square_, op.square_, 3),
                                                    primitiveAttributes(), context.engine, softmax);
    op.softmaxBackward_ = makeStep<softmax_backward>(backward, backwardLayout);
    op.dV_ = matmulStep(context, op.squareT_, op.heads_, op.rows_, primitiveAttributes());
    op.dQ_ = matmulStep(context, op.square_, op.heads_, op.rows_, scaledAttributes(scale));
    op.dK_ = matmulStep(context, op.squareT_, op.heads_, op.rows_, scaledAttributes(scale));
  });
  if (!made) return made;
  for (const Step* step :
       {&op.scores_, &op.softmax_, &op.pv_, &op.dZ_, &op.softmaxBackward_, &op.dV_, &op.dQ_, &op.dK_})
    op.scratchBytes_ = std::max<std::uint64_t>(op.scratchBytes_, step->scratchpad.get_size());
  return op;
}

Status MathAttentionOp::forward(const DnnlContext& context, const float* q, const float* k, const float* v,
                                float* probs, const AttentionDropout& drop, float* out, const ScoreBias& bias,
                                std::byte* scratch) const {
  REMAT_RETURN_IF_ERROR(execute(
      context, scores_, {{DNNL_ARG_SRC, &heads_, q}, {DNNL_ARG_WEIGHTS, &headsT_, k}, {DNNL_ARG_DST, &square_, probs}},
      scratch, label_));
  maskScores(g_, bias, probs);
  REMAT_RETURN_IF_ERROR(
      execute(context, softmax_, {{DNNL_ARG_SRC, &square_, probs}, {DNNL_ARG_DST, &square_, probs}}, scratch, label_));
  const Index count = g_.batch * g_.heads * g_.seq * g_.seq;
  if (bias.perWindow != nullptr) flushTiny(count, probs);
  const float* z = probs;
  if (drop.draw.active()) {
    dropProbabilities(count, drop, probs);
    z = drop.dropped;
  }
  return execute(context, pv_,
                 {{DNNL_ARG_SRC, &square_, z}, {DNNL_ARG_WEIGHTS, &heads_, v}, {DNNL_ARG_DST, &heads_, out}}, scratch,
                 label_);
}

Status MathAttentionOp::backward(const DnnlContext& context, const float* q, const float* k, const float* v,
                                 const float* probs, const AttentionDropout& drop, const float* dOut, float* dProbs,
                                 float* dqkv, std::byte* scratch) const {
  const Index count = g_.batch * g_.heads * g_.seq * g_.seq, width = g_.width();
  REMAT_RETURN_IF_ERROR(execute(
      context, dZ_, {{DNNL_ARG_SRC, &heads_, dOut}, {DNNL_ARG_WEIGHTS, &headsT_, v}, {DNNL_ARG_DST, &square_, dProbs}},
      scratch, label_));
  if (drop.draw.active()) dropoutFlatBackward(count, drop.draw, drop.mask, dProbs, dProbs);  // dZ -> dP
  // dV = Z^T dO first: it reads the (dropped) probabilities, not dProbs, which the softmax's
  // backward then overwrites with d(scores).
  const float* z = drop.draw.active() ? drop.dropped : probs;
  REMAT_RETURN_IF_ERROR(execute(
      context, dV_,
      {{DNNL_ARG_SRC, &squareT_, z}, {DNNL_ARG_WEIGHTS, &heads_, dOut}, {DNNL_ARG_DST, &rows_, dqkv + 2 * width}},
      scratch, label_));
  REMAT_RETURN_IF_ERROR(execute(
      context, softmaxBackward_,
      {{DNNL_ARG_DST, &square_, probs}, {DNNL_ARG_DIFF_DST, &square_, dProbs}, {DNNL_ARG_DIFF_SRC, &square_, dProbs}},
      scratch, label_));
  REMAT_RETURN_IF_ERROR(execute(
      context, dQ_, {{DNNL_ARG_SRC, &square_, dProbs}, {DNNL_ARG_WEIGHTS, &heads_, k}, {DNNL_ARG_DST, &rows_, dqkv}},
      scratch, label_));
  return execute(
      context, dK_,
      {{DNNL_ARG_SRC, &squareT_, dProbs}, {DNNL_ARG_WEIGHTS, &heads_, q}, {DNNL_ARG_DST, &rows_, dqkv + width}},
      scratch, label_);
}

}  // namespace remat::cpu
