// Swin's kinds under bf16-mixed (docs/memory-model.md 12.10, "Swin under autocast"), against the
// rule worked by hand from PyTorch 2's CPU autocast lists: the stream turns bfloat16 at the patch
// embedding (its LayerNorm follows the conv's half output) and stays so; every linear and the conv
// save their weights' half copy; the embedding saves the image's cast instead of the image; the
// block's scores are promoted to float32 by the bias table's add, so softmax saves float32
// probabilities and P @ v their half cast; the master weights stay float32.
#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

// Image [2, 3, 16, 16], patch 2, C = 16: stream [2, 8, 8, 16]; a shifted block (window 4, shift 2,
// 2 heads, H = 64); a merge to [2, 4, 4, 32]; a head of 10 classes.
ChainSpec smallSwin() {
  ChainSpec spec;
  spec.name = "swin";
  spec.input.shape = {2, 3, 16, 16};
  LayerSpec emb;
  emb.name = "features.0";
  emb.kind = LayerKind::SwinEmbedding;
  emb.kernel = 2;
  emb.width = 16;
  spec.layers.push_back(emb);
  LayerSpec block;
  block.name = "features.1.0";
  block.kind = LayerKind::SwinBlock;
  block.heads = 2;
  block.hidden = 64;
  block.window = 4;
  block.shift = 2;
  spec.layers.push_back(block);
  LayerSpec merge;
  merge.name = "features.2";
  merge.kind = LayerKind::PatchMerging;
  spec.layers.push_back(merge);
  LayerSpec head;
  head.name = "head";
  head.kind = LayerKind::SwinHead;
  head.outFeatures = 10;
  spec.layers.push_back(head);
  return spec;
}

Chain mixedOf(const ChainSpec& spec) {
  auto fp32 = buildChain(spec);
  EXPECT_TRUE(fp32.isOk()) << fp32.status().message();
  if (!fp32) return Chain{};
  auto mixed = withPrecision(*fp32, Precision::Bf16Mixed);
  EXPECT_TRUE(mixed.isOk()) << mixed.status().message();
  return mixed.isOk() ? std::move(mixed).value() : Chain{};
}

std::uint64_t partsSum(const ChainLayer& layer) {
  std::uint64_t sum = 0;
  for (const SavedPart& part : layer.extraParts) sum += part.bytes;
  return sum;
}

constexpr std::uint64_t T = 2 * 8 * 8, C = 16, H = 64, A = 2 * 4 * 2 * 16 * 16;  // A: [N nW, h, L, L]

TEST(SwinMixed, TheEmbeddingSavesTheImagesCastAndWritesHalf) {
  const ChainLayer& e = mixedOf(smallSwin()).layers[0];
  EXPECT_FALSE(e.numbers.needsInput);  // the conv keeps the image's cast, not the image
  // The norm's half input (the conv's output) and float32 statistics, the image's cast, the kernel's copy.
  EXPECT_EQ(e.numbers.extraBytes, T * C * 2 + T * 8 + 2u * 3 * 16 * 16 * 2 + C * 3 * 2 * 2 * 2);
  EXPECT_EQ(e.numbers.outBytes, T * C * 2);
  EXPECT_EQ(e.numbers.paramBytes, (C * 3 * 4 + C + 2 * C) * 4);  // float32 masters
  EXPECT_EQ(partsSum(e), e.numbers.extraBytes);
}

TEST(SwinMixed, TheBlockKeepsFloat32ProbabilitiesBesideTheirHalfCast) {
  const Chain mixed = mixedOf(smallSwin());
  const ChainLayer& b = mixed.layers[1];
  EXPECT_TRUE(b.numbers.needsInput);               // norm1 keeps x(l-1), now bfloat16
  const std::uint64_t halfKept = 2 * T * 8         // both norms' float32 statistics
                                 + 5 * T * C * 2   // windowed input, q * scale, k^T, v, merged heads
                                 + A * 2           // P @ v's half cast of the probabilities
                                 + 2 * T * C * 2   // norm2's input and output
                                 + 2 * T * H * 2;  // fc1's and GELU's outputs
  const std::uint64_t copies = (4 * C * C + 2 * C * H) * 2;
  EXPECT_EQ(b.numbers.extraBytes, halfKept + A * 4 + copies);  // + softmax's float32 result
  EXPECT_EQ(b.numbers.outBytes, T * C * 2);
  EXPECT_EQ(partsSum(b), b.numbers.extraBytes);
  // float32 keeps A * 4 of probabilities and no copies.
  const Chain fp32 = *buildChain(smallSwin());
  EXPECT_EQ(fp32.layers[1].numbers.extraBytes, 2 * T * 8 + 5 * T * C * 4 + A * 4 + 2 * T * C * 4 + 2 * T * H * 4);
}

TEST(SwinMixed, MergingAndHeadSaveTheirLinearsCopies) {
  const Chain mixed = mixedOf(smallSwin());
  const ChainLayer& m = mixed.layers[2];
  const std::uint64_t merged = 2 * 4 * 4;
  EXPECT_FALSE(m.numbers.needsInput);
  EXPECT_EQ(m.numbers.extraBytes, 2 * merged * 4 * C * 2 + merged * 8 + 2 * C * 4 * C * 2);
  const ChainLayer& h = mixed.layers[3];
  EXPECT_TRUE(h.numbers.needsInput);
  // Statistics, avgpool's saved normalised map, the pooled [N, 2C], the head's weight copy.
  EXPECT_EQ(h.numbers.extraBytes, merged * 8 + merged * 2 * C * 2 + 2 * 2 * C * 2 + 2 * C * 10 * 2);
  EXPECT_EQ(h.numbers.outBytes, 2u * 10 * 2);  // half logits; cross entropy casts them (the loss's)
  EXPECT_EQ(autocastWeightCopyBytes(mixed),
            C * 3 * 2 * 2 * 2 + (4 * C * C + 2 * C * H) * 2 + 2 * C * 4 * C * 2 + 2 * C * 10 * 2);
}

TEST(SwinMixed, SwinTsCopiesAreHalfItsLinearAndConvWeights) {
  ZooOptions o;
  o.batch = 2;
  const Chain fp32 = testing::zooBuilt("swin_t", o);
  auto mixed = withPrecision(fp32, Precision::Bf16Mixed);
  ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
  std::uint64_t weights = 96 * 3 * 4 * 4 + 768 * 1000;  // the patch conv's kernel, the head's
  for (const ChainLayer& layer : fp32.layers) {
    const auto c = static_cast<std::uint64_t>(layer.inputShape.size() == 4 ? layer.inputShape[3] : 0);
    if (layer.kind == LayerKind::SwinBlock) weights += 4 * c * c + 2 * c * 4 * c;  // qkv, proj, fc1, fc2
    if (layer.kind == LayerKind::PatchMerging) weights += 8 * c * c;               // reduction [2C, 4C]
  }
  EXPECT_EQ(autocastWeightCopyBytes(*mixed), weights * 2);
  EXPECT_EQ(mixed->paramBytes(), fp32.paramBytes());
  for (const ChainLayer& layer : mixed->layers) EXPECT_EQ(partsSum(layer), layer.numbers.extraBytes) << layer.name;
  // Every activation between layers is half: x(l) halves against float32's.
  for (std::size_t l = 0; l < fp32.size(); ++l)
    EXPECT_EQ(mixed->layers[l].numbers.outBytes * 2, fp32.layers[l].numbers.outBytes) << l;
  EXPECT_GT(dynamicPeak(*mixed, Plan{}), 0u);
}

}  // namespace
}  // namespace remat
