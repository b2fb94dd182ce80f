#pragma once
// bf16-mixed and fp16-mixed on the GPU (docs/memory-model.md section 11.7, docs/gpu.md), one
// layout for both (bfloat16 and float16 are two bytes; "bfloat16" below is either): which dtype
// each layer runs in, taken from the model's cast policy (autocastComputeDType, precision.hpp),
// never decided here, and the check that what the GPU's bfloat16 layout saves per layer is the model's E: the
// cast copy of a float32 input, the weights' bfloat16 copies, a layer norm's float32 copy of a
// bfloat16 input, a residual block's bfloat16 arenas and its inner convolutions' weight copies.
// Internal to gpu/.
#include <cstddef>
#include <vector>

#include "half_type.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/model/block.hpp"
#include "remat/model/chain.hpp"

namespace remat::gpu {

// How layer l runs under a mixed precision.
struct HalfMode {
  bool half = false;           // computes in bfloat16: its output x(l) is bfloat16
  bool castsInput = false;     // a bfloat16 layer reading a float32 input casts it (conv2d, linear, blocks)
  bool castsFromHalf = false;  // a float32 layer (layer norm) reading a bfloat16 input casts it to float32
  bool floatOutput = false;    // a bfloat16 block whose output type promotion makes float32 (ConvNeXt's)
  bool outputHalf() const { return half && !floatOutput; }
  bool inputHalf = false;  // x(l-1) is bfloat16
};

// A bfloat16 block's inner graph under bf16-mixed: half tensors, float32 where type promotion
// widens (BlockAutocast; `floatInput`: x(l-1) is float32, read through the first conv's cast).
Result<BlockGraph> halfBlockGraph(const LayerSpec& spec, const Shape& input, bool floatInput);

// fp16 and fp16-mixed: float16; every other precision: bfloat16 (float32 chains launch no half kernel).
HalfType halfTypeOf(Precision precision);

// The mode of layer l after a layer whose output is half (`inputHalf`). Float32 precisions give
// the all-false mode; the kinds without a half layout on the GPU (the Swin kinds) are refused
// naming the layer (check's label) and the precision.
Result<HalfMode> halfModeOf(const Chain& chain, const ChainLayer& layer, bool inputHalf, const LayerChecks& check);

// Autocast's copies a layer of this mode saves in E (layer_checks.hpp): what the GPU's kernels lay
// out, [input's cast copy][weight copy] for conv2d and linear, the float32 copy after a layer
// norm's statistics.
AutocastCasts autocastCastsOf(const ChainLayer& layer, const LayerSpec& spec, const HalfMode& mode);

// The chain's numbers for a layer that runs under bf16-mixed equal what the GPU's bfloat16 layout
// saves and reads (parameters, in / out flags, E); a residual block's inner ops are the ones with
// bfloat16 kernels (convolutions, batch norms, the residual add, the activations, contiguous).
Status checkHalfLayer(const Chain& chain, std::size_t l, const HalfMode& mode, const LayerChecks& check);

// Every layer of a bf16-mixed chain through halfModeOf, LayerChecks::realLayer (a = 2 bytes per
// element for a bfloat16 output) and checkHalfLayer, in order: the modes of layers 1..L ([0] is the
// input batch, float32), or the first layer whose numbers the GPU's layout does not match.
Result<std::vector<HalfMode>> checkHalfChain(const Chain& chain);

}  // namespace remat::gpu
