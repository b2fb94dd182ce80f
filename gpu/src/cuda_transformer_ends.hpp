#pragma once
// The transformer ends on the GPU (cuda_transformer_ends.cpp): token_embedding (GPT's wte + wpe, BERT's
// with token types and its LayerNorm) and lm_head (ln_f, the projection, log_softmax; tied or not),
// the CPU backend's runners (core/src/cpu/run_embeddings.cpp, run_heads.cpp) with the same E.
// Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct EndsState;

Status prepareTokenEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, std::size_t l,
                             LayerState& state);
Status forwardTokenEmbedding(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                             const LayerContext& c, const ForwardBuffers& b);
Status backwardTokenEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

Status prepareLmHead(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                     LayerState& state);
Status forwardLmHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardLmHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

// The chain ends in lm_head: one label per token, checked on the host to lie in the vocabulary,
// then d(x(n)) = the mean negative log-likelihood's gradient.
Status lmHeadLossSeed(const LayerState& last, cudaStream_t stream, const LabelIndex* labels, float* grad);

}  // namespace remat::gpu
