#pragma once
// Math attention (attention.hpp's rule: the [N, h, S, S] probabilities materialised) on oneDNN
// primitives, created once per block by prepare with the device's thread count and run from F, R
// and B alike: batched matmuls over [N, h] (Q K^T, P V and the backward's four products) whose
// transposed operands and strided gradient rows are memory descriptors over the caller's memory (no
// copies), and softmax forward and backward along the last axis, the backward from the saved
// output (what PyTorch's _softmax_backward_data reads, and what the model keeps). The causal mask,
// Swin's additive bias and the probabilities' dropout stay own loops between the primitives.
// Every primitive takes scratchpad_mode::user; scratchBytes() is the largest scratchpad, which the
// caller reserves in its oneDNN region of the workspace (counted like every op's, dnnl_support.hpp).
#include <string>

#include "attention.hpp"
#include "dnnl_support.hpp"

namespace remat::cpu {

class MathAttentionOp {
 public:
  static Result<MathAttentionOp> create(const DnnlContext& context, const AttentionGeometry& g,
                                        const std::string& label);
  std::uint64_t scratchBytes() const { return scratchBytes_; }

  // mathAttentionForward's contract (attention.hpp), `scratch` the oneDNN region.
  Status forward(const DnnlContext& context, const float* q, const float* k, const float* v, float* probs,
                 const AttentionDropout& drop, float* out, const ScoreBias& bias, std::byte* scratch) const;
  // mathAttentionBackward's contract: dProbs ends holding d(scores); dq, dk, dv into dqkv's rows.
  Status backward(const DnnlContext& context, const float* q, const float* k, const float* v, const float* probs,
                  const AttentionDropout& drop, const float* dOut, float* dProbs, float* dqkv,
                  std::byte* scratch) const;

 private:
  AttentionGeometry g_;
  std::string label_;
  std::uint64_t scratchBytes_ = 0;
  // heads [N][h][S][dh], their transposes [N][h][dh][S], the squares [N][h][S][S] and their
  // transposes, and one of q | k | v inside the token rows [N*S][3d] (the gradients' destination)
  dnnl::memory::desc heads_, headsT_, square_, squareT_, rows_;
  Step scores_, softmax_, pv_, dZ_, softmaxBackward_, dV_, dQ_, dK_;
};

}  // namespace remat::cpu
