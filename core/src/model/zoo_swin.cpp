// torchvision's swin_t (torchvision 0.14: patch 4, embed_dim 96, depths 2, 2, 6, 2, heads 3, 6, 12,
// 24, window 7, stochastic depth 0.2 rising linearly over the blocks) as a chain: the patch
// embedding, each SwinTransformerBlock, each PatchMerging and the head are one layer each; the
// residual stream [N, H, W, C] between them is the cut. Layer names are torchvision's module paths.
#include "zoo_swin.hpp"

#include <string>

#include "layers_common.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {
namespace {

constexpr std::int64_t kPatch = 4, kWindow = 7, kEmbedDim = 96, kMlpRatio = 4;
constexpr std::int64_t kDepths[] = {2, 2, 6, 2};
constexpr std::int64_t kHeads[] = {3, 6, 12, 24};
constexpr double kStochasticDepth = 0.2;
// The smallest image whose last stage is still a whole window: 196 / 4 = 49, then 25, 13, 7 (the
// merges round up, padding odd sides).
constexpr std::int64_t kMinResolution = 196;

LayerSpec layer(std::string name, LayerKind kind) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  return l;
}

ChainSpec swinT(const ZooOptions& o) {
  ChainSpec spec;
  spec.input.shape = {o.batch, 3, o.resolution, o.resolution};
  LayerSpec emb = layer("features.0", LayerKind::SwinEmbedding);
  emb.kernel = kPatch;
  emb.width = kEmbedDim;
  spec.layers.push_back(emb);
  std::int64_t totalBlocks = 0;
  for (std::int64_t depth : kDepths) totalBlocks += depth;
  std::int64_t blockId = 0, width = kEmbedDim;
  for (std::size_t stage = 0; stage < std::size(kDepths); ++stage) {
    const std::string prefix = "features." + std::to_string(1 + 2 * stage) + ".";
    for (std::int64_t i = 0; i < kDepths[stage]; ++i, ++blockId) {
      LayerSpec b = layer(prefix + std::to_string(i), LayerKind::SwinBlock);
      b.heads = kHeads[stage];
      b.hidden = kMlpRatio * width;
      b.window = kWindow;
      b.shift = i % 2 == 0 ? 0 : kWindow / 2;
      // SwinTransformer.__init__: sd_prob = stochastic_depth_prob * block_id / (total_blocks - 1).
      b.stochasticDepth = kStochasticDepth * static_cast<double>(blockId) / static_cast<double>(totalBlocks - 1);
      spec.layers.push_back(std::move(b));
    }
    if (stage + 1 < std::size(kDepths)) {
      spec.layers.push_back(layer("features." + std::to_string(2 + 2 * stage), LayerKind::PatchMerging));
      width *= 2;
    }
  }
  LayerSpec head = layer("norm+avgpool+head", LayerKind::SwinHead);
  head.outFeatures = o.numClasses;
  spec.layers.push_back(head);
  return spec;
}

}  // namespace

std::vector<ZooEntry> swinZooModels() {
  return {{"swin_t",
           "Swin-T: 4x4 patch embedding, 12 shifted-window transformer blocks in 4 stages with patch merging, "
           "28.3M parameters",
           kMinResolution, false}};
}

std::optional<Result<ChainSpec>> swinZooChain(std::string_view name, const ZooOptions& options) {
  if (name != "swin_t") return std::nullopt;
  const std::string label = "zoo model 'swin_t'";
  REMAT_RETURN_IF_ERROR(checkPositiveField("batch", options.batch).withContext(label));
  REMAT_RETURN_IF_ERROR(checkPositiveField("resolution", options.resolution).withContext(label));
  REMAT_RETURN_IF_ERROR(checkPositiveField("num_classes", options.numClasses).withContext(label));
  if (options.sequence > 0)
    return Status::invalid(label + ": a sequence length applies to the token models (gpt2, bert_base)");
  if (options.resolution < kMinResolution)
    return Status::invalid(label + ": resolution " + std::to_string(options.resolution) + " is below its minimum " +
                           std::to_string(kMinResolution) + " (the last stage must hold one 7x7 window)");
  ChainSpec spec = swinT(options);
  spec.name = "swin_t";
  spec.input.dtype = options.dtype;
  auto chain = buildChain(spec);
  if (!chain)
    return chain.status().withContext(label + " at batch " + std::to_string(options.batch) + ", resolution " +
                                      std::to_string(options.resolution));
  return spec;
}

}  // namespace remat::detail
