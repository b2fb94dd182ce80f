#pragma once
// CpuDevice's state: the prepared chain, one PreparedLayer per layer (layouts, oneDNN primitives,
// parameter segments) and the helpers the per-kind dispatch files share. Internal to core/src/cpu.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "dnnl_half.hpp"
#include "dnnl_layers.hpp"
#include "kernels.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/device_calls.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/model/block.hpp"

namespace remat::cpu {

// A run of float32 parameters inside a layer's parameter buffer and how its canonical (PyTorch)
// order maps onto the CPU's order (convolution weights keep PyTorch's order: Plain).
struct ParamSegment {
  enum class Type { Plain, LinearWeight, FeatureVector };
  Type type = Type::Plain;
  Index offset = 0;  // in floats
  Index count = 0;
  Index outFeatures = 0;    // LinearWeight
  ActivationLayout layout;  // LinearWeight (its input) and FeatureVector
};

// The oneDNN primitives of a layer or of an inner op of a block; monostate for the kinds that run
// own kernels only (dropout, adaptive average pooling, the residual add, abstract layers).
using KindOp = std::variant<std::monostate, ConvOp, LinearOp, PoolOp, BatchNormOp, EltwiseOp, LayerNormOp, HalfConvOp,
                            HalfLinearOp>;

// One inner op of a block with its primitives.
struct PreparedBlockOp {
  KindOp op;
  Index count = 0;                     // elements of the output (Add)
  Index rows = 0;                      // Concat: N*H*W
  Index channels = 0;                  // Concat: the output's
  Index weightOffset = 0;              // in floats inside the block's parameters (conv weight, bn gamma)
  Index biasOffset = -1;               // Conv2d: where its bias follows the weights; -1: none
  PoolGeometry pool;                   // MaxPool, AvgPool: the own kernels' geometry
  std::uint64_t weightCopyOffset = 0;  // Conv2d in a half block: autocast's weight copy in E (bytes)
  bool halfParams = false;             // pure bf16: the offsets count bfloat16 elements
  // The parameters (or gradients) at `offset` elements: floats, or bfloat16 under pure bf16.
  template <typename T>
  T* at(T* base, Index offset) const {
    if (!halfParams) return base + offset;
    using Byte = std::conditional_t<std::is_const_v<T>, const std::byte, std::byte>;
    return reinterpret_cast<T*>(reinterpret_cast<Byte*>(base) + offset * 2);
  }
};

struct TransformerBlockPrep;  // run_transformer.cpp
struct LmHeadPrep;            // run_heads.cpp
struct HalfBlockPrep;         // run_transformer_half.cpp (bf16-mixed)
struct PureBlockPrep;         // run_transformer_pure.cpp (pure bf16)
struct PureLmHeadPrep;        // run_heads_pure.cpp (pure bf16)
struct PureVitPrep;           // run_vit_pure.cpp (pure bf16)
struct HalfLmHeadPrep;        // run_heads_half.cpp (bf16-mixed)
struct HalfClsHeadPrep;       // run_vit_half.cpp (bf16-mixed)
struct HalfPatchPrep;         // run_patch_half.cpp (bf16-mixed)
struct VitPrep;               // run_vit.cpp
struct SwinBlockPrep;         // run_swin.cpp
struct SwinEndPrep;           // run_swin_ends.cpp
struct HalfSwinBlockPrep;     // run_swin_half.cpp (bf16-mixed)
struct HalfSwinEndPrep;       // run_swin_ends_half.cpp (bf16-mixed)

// The token kinds' sizes (token_embedding, lm_head).
struct TransformerEnds {
  Index batch = 0, seq = 0, tokens = 0, width = 0, vocab = 0;
  Index positionTable = 0;  // token_embedding: where wpe starts in the parameters (floats)
  // BERT's token_embedding: where the token type table and the LayerNorm's weight and bias start
  // (floats; 0: none), and its E's layout (bytes from its start).
  Index typeTable = 0, normParams = 0;
  std::uint64_t typeIdsAt = 0, statsAt = 0, normInputAt = 0, maskAt = 0;
  // Its workspaces: the type lookup and the LayerNorm's scratch (forward); d(sum) and the scratch
  // after d(norm) (backward).
  std::uint64_t typesAt = 0, fScratchAt = 0, dSumAt = 0, bScratchAt = 0;
};

// Pure bf16 (the model cast with .to(torch.bfloat16)): the CPU runs a bfloat16 chain whose step
// precision is bf16; float16 stays refused (layer_checks.cpp).
inline bool isPureHalf(const Chain& chain) {
  return chain.step.precision == Precision::Bf16 && chain.dtype == DType::BFloat16;
}

struct PreparedLayer {
  LayerKind kind = LayerKind::Abstract;
  std::string label;  // "layer 3 ('conv1', conv2d)" for messages
  bool real = false;  // x(l) holds float32 activations laid out as `out`
  bool half = false;  // bf16-mixed: x(l) is bfloat16 instead (run_half.cpp runs the layer)
  // Pure bf16 (the model cast with .to(torch.bfloat16)): the parameters and gradients are bfloat16
  // too (half is set as well); the float pointers of the calls carry bfloat16.
  bool halfParams = false;
  // bf16-mixed: a float32 layer (layer norm, on autocast's fp32 list) reading a bfloat16 x(l-1)
  // through its float32 cast copy: in E after the layer's statistics at castOffset (keep mode),
  // else at the start of the forward workspace; the backward's float32 d(l-1) at the start of its
  // workspace before its bfloat16 cast. The op's own scratch follows at castScratchBytes.
  bool castsFromHalf = false;
  std::uint64_t castOffset = 0, castScratchBytes = 0;
  ActivationLayout in;   // x(l-1) as this layer reads it (real layers)
  ActivationLayout out;  // x(l)
  KindOp op;
  Index biasOffset = -1;    // conv2d, linear: where the bias starts in the parameters (floats); -1: none
  PoolGeometry pool;        // pools: the own kernels' geometry
  bool ownAvgPool = false;  // avgpool whose ceil-mode windows reach past the padding (kernels.hpp)
  double dropoutP = 0.0;
  std::optional<BlockGraph> block;
  std::vector<PreparedBlockOp> blockOps;
  std::uint64_t blockFwdScratchOffset = 0;  // where the inner ops' scratch starts in a block's workspaces
  std::uint64_t blockBwdScratchOffset = 0;
  std::shared_ptr<const TransformerBlockPrep> transformer;  // transformer_block: primitives and tensor offsets
  std::shared_ptr<const LmHeadPrep> lmHead;
  std::shared_ptr<const HalfBlockPrep> halfBlock;      // bf16-mixed: transformer_block's autocast kernels
  std::shared_ptr<const PureBlockPrep> pureBlock;      // pure bf16: transformer_block's bfloat16 kernels
  std::shared_ptr<const PureLmHeadPrep> pureLmHead;    // pure bf16: lm_head's
  std::shared_ptr<const PureVitPrep> pureVit;          // pure bf16: patch_embedding's, cls_head's
  std::shared_ptr<const HalfLmHeadPrep> halfLmHead;    // bf16-mixed: lm_head's
  std::shared_ptr<const HalfClsHeadPrep> halfClsHead;  // bf16-mixed: cls_head's
  std::shared_ptr<const HalfPatchPrep> halfPatch;      // bf16-mixed: patch_embedding's
  std::shared_ptr<const VitPrep> vit;                  // patch_embedding, cls_head
  std::shared_ptr<const SwinBlockPrep> swinBlock;
  std::shared_ptr<const SwinEndPrep> swinEnd;              // swin_embedding, patch_merging, swin_head
  std::shared_ptr<const HalfSwinBlockPrep> halfSwinBlock;  // bf16-mixed: swin_block's autocast kernels
  std::shared_ptr<const HalfSwinEndPrep> halfSwinEnd;      // bf16-mixed: the other Swin kinds'
  TransformerEnds ends;
  std::vector<ParamSegment> params;
  std::uint64_t requiredFwdWorkspace = 0;
  std::uint64_t requiredBwdWorkspace = 0;
};

// The geometry of a conv2d layer (or inner op) from its fields and NCHW shapes.
ConvGeometry convGeometry(const LayerSpec& spec, const Shape& in, const Shape& out);
PoolGeometry poolGeometry(const LayerSpec& spec, const Shape& in, const Shape& out);

// Builds the preparation of layer l of a chain whose layers 1..l-1 are already prepared (layers[0] is the
// input). Errors name the layer.
Status prepareLayer(const DnnlContext& context, const Chain& chain, std::size_t l, std::vector<PreparedLayer>& layers);

// Parameter conversion between canonical and CPU order; `toCanonical` picks the direction.
void convertParams(const std::vector<ParamSegment>& segments, const float* from, float* to, bool toCanonical);
void convertParams(const std::vector<ParamSegment>& segments, const BFloat16* from, BFloat16* to, bool toCanonical);
// Activation conversion (channels-last <-> NCHW), per sample.
void convertActivation(const ActivationLayout& layout, const float* from, float* to, bool toCanonical);
// A bfloat16 activation (bf16-mixed): the same permutation of 2-byte elements; its canonical form
// is NCHW bfloat16.
void convertActivation(const ActivationLayout& layout, const BFloat16* from, BFloat16* to, bool toCanonical);

// The kernels of each kind, given resolved pointers (device_calls.hpp); null pointers for absent buffers.
Status forwardLayer(const DnnlContext& context, const PreparedLayer& prepared, std::size_t l, ForwardMode mode,
                    std::uint64_t seed, const ForwardBuffers& b);
// dropoutKey: the layer's dropout stream of the step (rng::streamKey(seed, Purpose::Dropout, l)),
// which the fused attention's backward redraws its mask from.
Status backwardLayer(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                     const BackwardBuffers& b);
// The layers that run in bfloat16 under bf16-mixed (prepared.half; run_half.cpp): the buffers'
// activations are bfloat16 (the float pointers only carry them), parameters and their gradients
// float32. forwardLayer and backwardLayer hand over those of hasOwnHalfDispatch's kinds.
Status forwardHalfLayer(const DnnlContext& context, const PreparedLayer& prepared, std::size_t l, ForwardMode mode,
                        std::uint64_t seed, const ForwardBuffers& b);
Status backwardHalfLayer(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// The kinds run_half.cpp dispatches in bfloat16 (conv2d, linear, the pools, dropout); a half
// layer of any other kind runs forwardLayer's float32 calls, which take bfloat16 data as well.
bool hasOwnHalfDispatch(LayerKind kind);
// A layer norm reading a bfloat16 input (prepared.castsFromHalf; run_half.cpp).
Status forwardCastLayerNorm(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                            const ForwardBuffers& b);
Status backwardCastLayerNorm(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// Blocks (run_blocks.cpp): their inner ops prepared, and their forward and backward.
// prepared.half: every inner op in bfloat16 (bf16-mixed), the inner convolutions' weight copies in
// E after the graph's saved tensors.
Status prepareBlockOps(const DnnlContext& context, const BlockGraph& graph, bool firstLayer, PreparedLayer& prepared);
// dropoutKey: the layer's dropout stream; an inner dropout draws on its own stream within it.
Status forwardBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                    std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardBlock(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);

// Transformer blocks (run_transformer.cpp): the primitives and where each saved tensor lies in E
// (checked against the chain's numbers; errors name the layer), and their forward and backward.
Status prepareTransformerBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                               const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                               std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                                const BackwardBuffers& b);

// A number as a message shows it: 0.1, not 0.100000.
std::string shortNumber(double value);

// token_embedding (run_embeddings.cpp) and lm_head (run_heads.cpp).
Status prepareTokenEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                             const LayerChecks& check, std::size_t l, PreparedLayer& prepared);
Status forwardTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                             std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareLmHead(const DnnlContext& context, const Chain& chain, const ChainLayer& layer, const LayerSpec& spec,
                     const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardLmHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                     const ForwardBuffers& b);
Status backwardLmHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// log_softmax over rows and its backward from its result (run_heads.cpp).
void logSoftmaxRows(Index rows, Index width, const float* logits, float* out);
void logSoftmaxBackwardRows(Index rows, Index width, const float* y, const float* dy, float* dx);
// bf16-mixed (docs/memory-model.md 12.10): GPT's kinds as PyTorch 1.13's CPU autocast runs them.
// transformer_block and lm_head have kernels (their float32 x(l) unchanged, half tensors in E),
// cls_head and patch_embedding too (cls_head's x(l) bfloat16); token_embedding runs its float32
// kernels.
bool hasHalfTransformerKernels(LayerKind kind);
Status prepareHalfTransformerBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                   const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardHalfTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                   std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardHalfTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                                    const BackwardBuffers& b);
// Pure bf16 (run_transformer_pure.cpp): the block on bfloat16 x, parameters and gradients.
Status preparePureTransformerBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                   const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardPureTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                   std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardPureTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                                    const BackwardBuffers& b);
Status preparePureLmHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                         const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardPureLmHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                         const ForwardBuffers& b);
Status backwardPureLmHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status preparePurePatchEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                 const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardPurePatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                 std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardPurePatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status preparePureClsHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                          const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardPureClsHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                          const ForwardBuffers& b);
Status backwardPureClsHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareHalfLmHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                         const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardHalfLmHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                         const ForwardBuffers& b);
Status backwardHalfLmHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareHalfClsHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                          const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardHalfClsHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                          const ForwardBuffers& b);
Status backwardHalfClsHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareHalfPatchEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                 const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardHalfPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                 std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardHalfPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// patch_embedding and cls_head (run_vit.cpp).
Status preparePatchEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                             const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                             std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareClsHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                      const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardClsHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                      const ForwardBuffers& b);
Status backwardClsHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// Swin's kinds (run_swin.cpp: the block; run_swin_ends.cpp: the embedding, merging and head).
// Their x(l) is the residual stream [N, H, W, C] in canonical order.
Status prepareSwinBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                        const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                        std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareSwinEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                            const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                            const ForwardBuffers& b);
Status backwardSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status preparePatchMerging(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                           const LayerChecks& check, PreparedLayer& prepared);
Status forwardPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                           const ForwardBuffers& b);
Status backwardPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareSwinHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                       const LayerChecks& check, bool firstLayer, PreparedLayer& prepared);
Status forwardSwinHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                       const ForwardBuffers& b);
Status backwardSwinHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// Swin's kinds under bf16-mixed and pure bf16 (run_swin_half.cpp, run_swin_ends_half.cpp): the bfloat16 stream;
// the float32 entry points above dispatch to them when the layer was prepared half.
Status prepareHalfSwinBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                            const LayerChecks& check, bool pure, PreparedLayer& prepared);
Status forwardHalfSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                            std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardHalfSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareHalfSwinEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                const LayerChecks& check, bool firstLayer, bool pure, PreparedLayer& prepared);
Status forwardHalfSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                const ForwardBuffers& b);
Status backwardHalfSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareHalfPatchMerging(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                               const LayerChecks& check, bool pure, PreparedLayer& prepared);
Status forwardHalfPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                               const ForwardBuffers& b);
Status backwardHalfPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
Status prepareHalfSwinHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                           const LayerChecks& check, bool pure, PreparedLayer& prepared);
Status forwardHalfSwinHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                           const ForwardBuffers& b);
Status backwardHalfSwinHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);
// The seed of a chain ending in lm_head: nll_loss's backward (mean over the N*S tokens) into d(n).
void nllLossBackward(Index tokens, Index vocab, const std::int64_t* labels, float* grad);
void nllLossBackward(Index tokens, Index vocab, const std::int64_t* labels, BFloat16* grad);  // pure bf16

// Abstract layers: synthetic kernels that read every input byte and write deterministic bytes
// into every output, extra and workspace byte (cpu_device_abstract.cpp).
struct ByteSpan {
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
};
struct ConstByteSpan {
  const std::byte* data = nullptr;
  std::uint64_t bytes = 0;
};
void abstractForward(std::uint64_t key, ConstByteSpan x, ConstByteSpan params, ByteSpan y, ByteSpan extra,
                     ByteSpan workspace);
// dxIsFloat: x(l-1) holds float32 activations of a real layer, so d(l-1) gets floats in [-1, 1).
void abstractBackward(std::uint64_t key, ConstByteSpan dy, ConstByteSpan x, ConstByteSpan y, ConstByteSpan extra,
                      ConstByteSpan params, ByteSpan dx, bool dxIsFloat, ByteSpan workspace, ByteSpan paramGrads);
void abstractSeed(std::uint64_t key, ConstByteSpan logits, ByteSpan grad);

struct CpuDevice::Impl {
  explicit Impl(CpuDeviceOptions o)
      : options(o), threads(o.threads > 0 ? o.threads : everyCoreThreads()), allocator(o) {}
  CpuDeviceOptions options;
  int threads;                      // every primitive is created and run with this many
  std::optional<DnnlContext> dnnl;  // made by the first prepare(), which can report its failure
  CpuAllocator allocator;
  std::optional<Chain> chain;
  std::vector<cpu::PreparedLayer> layers;  // [0] = the input x0

  // The whole of a buffer that upload, download, fill or checksum (`what`) is given.
  Result<std::byte*> memory(DeviceBuffer buffer, const char* what) const;
  Status requirePrepared(std::size_t layer) const;
};

}  // namespace remat::cpu
