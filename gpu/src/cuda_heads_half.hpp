#pragma once
// lm_head under bf16-mixed on the GPU (cuda_heads_half.cpp): the CPU's run_heads_half.cpp. ln_f
// in float32 (its statistics in E; it reads x(l-1)), the projection from ln_f's output's bfloat16
// cast and the table's bfloat16 copy (both saved in E, cuda_transformer_half_layout.hpp's
// HalfHeadLayout; a tied head's table is layer 1's), bfloat16 logits cast to float32 (autocast runs
// cross entropy in float32) and log_softmax into x(n) as in float32. The backward: log_softmax's
// float32 d(logits), its bfloat16 cast, the projection's backward (the table's bfloat16 gradient
// added into the float32 master, layer 1's when tied; ln_f's d(output) cast to float32), then
// ln_f's.
// cls_head under bf16-mixed (the CPU's run_vit_half.cpp; ViT's head, BERT's pooler): the LayerNorm
// in float32 (its statistics in E; it reads x(l-1)), token 0's rows gathered and cast to bfloat16
// for the linear (the cast and the weights' bfloat16 copy saved in E after the statistics), the
// bfloat16 logits, BERT's tanh in bfloat16 (x(l) kept: its backward reads it). x(l) is bfloat16:
// the loss reads half logits, as after a linear. The backward: tanh's in bfloat16, the linear's,
// d(token 0) cast to float32 and scattered into a zero [N, S, d], then the LayerNorm's.
// Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct HalfLmHeadState;
struct HalfClsHeadState;

Status prepareHalfClsHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);
Status forwardHalfClsHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardHalfClsHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

Status prepareHalfLmHead(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                         LayerState& state);
Status forwardHalfLmHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardHalfLmHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

}  // namespace remat::gpu
