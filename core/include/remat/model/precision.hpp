#pragma once
// The step's precision applied to a chain's numbers (docs/memory-model.md section 11.7): the pure
// half modes rebuild the chain in half (its file's dtype field), the mixed modes follow autocast's
// per-op dtypes (PyTorch's CUDA lists): conv2d, linear and blocks in half, layernorm in float32,
// every other kind in its input's dtype; input casts and half weight copies are saved per layer
// (E), the half weight gradient is backward scratch, parameters and static memory stay float32.
#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/step_options.hpp"

namespace remat {

// The dtype autocast runs a layer of `kind` in when its input has dtype `input` (memory-model.md
// 11.7): under a mixed precision conv2d, linear and residual blocks run in the precision's half
// dtype, layer norm in float32, every other kind in its input's dtype; otherwise `input`. The one
// cast policy the model counts with; the backends run each layer in the dtype it says. (The
// transformer kinds run several of autocast's lists inside one layer, section 12.10: their rule is
// transformer_mixed.cpp's, not this.)
DType autocastComputeDType(LayerKind kind, DType input, Precision precision);

// What a chain file's dtype alone means: float32 -> fp32, bfloat16 -> bf16, float16 -> fp16.
Precision precisionOfDType(DType dtype);

// The step options a chain has when nobody set them: core's defaults in the file's precision.
StepOptions defaultStepOptions(DType dtype);
// The chain's dtypes in words: "float32", "bfloat16", or "float32 weights, bf16-mixed (autocast)".
std::string describeChainDTypes(const Chain& chain);

// The chain rebuilt from chain.spec under `precision` (step.precision set, the other step options
// kept). Under fp32, bf16 and fp16 the file's dtype is replaced by float32, bfloat16, float16.
// Errors are buildChain's (a half chain whose bytes overflow).
Result<Chain> withPrecision(const Chain& chain, Precision precision);

// chain.step = options, rebuilding the numbers when the precision changes.
Result<Chain> withStepOptions(Chain chain, const StepOptions& options);

// The half weight copies autocast saves, summed over the chain's layers (part of their E under a
// mixed precision; 0 otherwise): for reports.
std::uint64_t autocastWeightCopyBytes(const Chain& chain);

}  // namespace remat
