// The transformer kinds under bf16-mixed (docs/memory-model.md 12.10), against the rule worked by
// hand from PyTorch 1.13's CPU autocast: the residual stream and every layer norm stay float32, the
// linears, the attention's matmuls, softmax and GELU run in bfloat16, each linear saves its weight's
// half copy, cross entropy runs on the logits' float32 cast, and the master weights stay float32.
#include <gtest/gtest.h>

#include <algorithm>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

// T = N S = 2 * 8 = 16 tokens, d = 16, 4 heads, H = 64, vocabulary 50, no dropout.
LayerSpec blockSpec(bool fused, bool preNorm) {
  LayerSpec b;
  b.name = "h.0";
  b.kind = LayerKind::TransformerBlock;
  b.heads = 4;
  b.hidden = 64;
  b.causal = true;
  b.preNorm = preNorm;
  b.fusedAttention = fused;
  b.dropoutP = 0.0;
  return b;
}

ChainSpec gptSpec(bool fused, bool preNorm = true) {
  ChainSpec spec;
  spec.name = "gpt";
  spec.input.shape = {2, 8};
  LayerSpec emb;
  emb.name = "wte";
  emb.kind = LayerKind::TokenEmbedding;
  emb.vocab = 50;
  emb.positions = 8;
  emb.width = 16;
  emb.dropoutP = 0.0;
  spec.layers.push_back(emb);
  spec.layers.push_back(blockSpec(fused, preNorm));
  LayerSpec head;
  head.name = "lm_head";
  head.kind = LayerKind::LmHead;
  head.vocab = 50;
  head.tied = true;
  spec.layers.push_back(head);
  return spec;
}

Chain mixedOf(const ChainSpec& spec) {
  auto fp32 = buildChain(spec);
  EXPECT_TRUE(fp32.isOk()) << fp32.status().message();
  auto mixed = withPrecision(*fp32, Precision::Bf16Mixed);
  EXPECT_TRUE(mixed.isOk()) << mixed.status().message();
  return mixed.isOk() ? std::move(mixed).value() : Chain{};
}

constexpr std::uint64_t T = 16, D = 16, H = 64, V = 50, A = 2 * 4 * 8 * 8;

TEST(TransformerMixed, TheEmbeddingStaysFloat32) {
  const Chain fp32 = *buildChain(gptSpec(false));
  const Chain mixed = mixedOf(gptSpec(false));
  EXPECT_EQ(mixed.layers[0].numbers, fp32.layers[0].numbers);  // embedding, add, dropout: no list
  EXPECT_EQ(mixed.layers[0].numbers.outBytes, T * D * 4);
}

TEST(TransformerMixed, APreNormMathBlockByHand) {
  const Chain fp32 = *buildChain(gptSpec(false));
  const Chain mixed = mixedOf(gptSpec(false));
  const LayerNumbers& m = mixed.layers[1].numbers;
  const std::uint64_t saved = 2 * 2 * T * 4                   // both norms' mean and rstd
                              + T * D * 4                     // ln_2's float32 input h1
                              + 2 * T * D * 2                 // qkv's half cast of ln_1's output, the merged heads
                              + T * D * 2                     // fc's half cast of ln_2's output
                              + 2 * T * H * 2                 // GELU's half input and output
                              + 3 * T * D * 2                 // q, k, v copies
                              + A * 2                         // softmax's half probabilities (CPU: no list)
                              + (4 * D * D + 2 * D * H) * 2;  // the four weights' half copies
  EXPECT_EQ(m.extraBytes, saved);
  EXPECT_TRUE(m.needsInput);  // ln_1 keeps the float32 x(l-1)
  EXPECT_EQ(m.outBytes, T * D * 4);
  EXPECT_EQ(m.paramBytes, fp32.layers[1].numbers.paramBytes);  // float32 masters
  EXPECT_EQ(m.fwdWorkspaceBytes, 3 * T * D * 2 + 2 * A * 2 + T * D * 4);
  EXPECT_EQ(m.bwdWorkspaceBytes, std::max(2 * A * 2 + 3 * T * D * 2, 2 * T * H * 2) + T * D * 6 + (D * H + H) * 2);
}

TEST(TransformerMixed, APostNormBlockSavesItsInputsCast) {
  const Chain preChain = mixedOf(gptSpec(true, true));
  const Chain postChain = mixedOf(gptSpec(true, false));
  const LayerNumbers& pre = preChain.layers[1].numbers;
  const LayerNumbers& post = postChain.layers[1].numbers;
  EXPECT_FALSE(post.needsInput);                           // the qkv linear saves x(l-1)'s half cast
  EXPECT_EQ(post.extraBytes, pre.extraBytes + T * D * 4);  // ln_1's float32 input beside ln_2's
}

TEST(TransformerMixed, TheHeadCastsTheLogitsBackForCrossEntropy) {
  const Chain fp32 = *buildChain(gptSpec(false));
  const Chain mixed = mixedOf(gptSpec(false));
  const LayerNumbers& m = mixed.layers[2].numbers;
  EXPECT_EQ(m.outBytes, T * V * 4);  // log_softmax of the float32 cast
  EXPECT_EQ(m.extraBytes, 2 * T * 4 + T * D * 2 + V * D * 2);
  EXPECT_EQ(m.fwdWorkspaceBytes, T * V * 6 + T * D * 4);
  EXPECT_EQ(m.bwdWorkspaceBytes, std::max({T * V * 4, T * V * 2 + T * D * 2 + V * D * 2, T * D * 6 + V * D * 2}));
  EXPECT_EQ(m.sharedGradBytes, fp32.layers[2].numbers.sharedGradBytes);  // the float32 table gradient
  EXPECT_EQ(m.sharedGradBytes, V * D * 4);
}

TEST(TransformerMixed, ViTsEndsCastTheImageAndToken0) {
  ChainSpec spec;
  spec.name = "vit";
  spec.input.shape = {2, 3, 32, 32};
  LayerSpec patch;
  patch.name = "patch";
  patch.kind = LayerKind::PatchEmbedding;
  patch.kernel = 16;
  patch.width = 16;
  patch.dropoutP = 0.0;
  spec.layers.push_back(patch);
  spec.layers.push_back(blockSpec(false, true));
  LayerSpec head;
  head.name = "head";
  head.kind = LayerKind::ClsHead;
  head.outFeatures = 10;
  spec.layers.push_back(head);
  const Chain mixed = mixedOf(spec);
  const LayerNumbers& p = mixed.layers[0].numbers;
  EXPECT_FALSE(p.needsInput);
  EXPECT_EQ(p.extraBytes, 2u * 3 * 32 * 32 * 2 + 16u * 3 * 16 * 16 * 2);  // the image's cast, the kernel's
  EXPECT_EQ(p.outBytes, 2u * 5 * 16 * 4);                                 // cat with the class token: float32
  const LayerNumbers& h = mixed.layers[2].numbers;
  EXPECT_TRUE(h.needsInput);
  EXPECT_EQ(h.extraBytes, 2u * 10 * 4 + 2u * 16 * 2 + 16u * 10 * 2);  // stats, token 0's cast, the weight's
  EXPECT_EQ(h.outBytes, 2u * 10 * 2);                                 // half logits
  EXPECT_EQ(autocastWeightCopyBytes(mixed), 16u * 3 * 16 * 16 * 2 + (4 * D * D + 2 * D * H) * 2 + 16u * 10 * 2);
}

TEST(TransformerMixed, StaticIsFloat32AndTheStepSimulates) {
  const Chain fp32 = *buildChain(gptSpec(false));
  const Chain mixed = mixedOf(gptSpec(false));
  EXPECT_EQ(mixed.paramBytes(), fp32.paramBytes());
  EXPECT_EQ(autocastWeightCopyBytes(mixed), (4 * D * D + 2 * D * H) * 2 + V * D * 2);
  EXPECT_GT(dynamicPeak(mixed, Plan{}), 0u);
  EXPECT_LT(dynamicPeak(mixed, Plan{}), dynamicPeak(fp32, Plan{}) * 2);
}

// GPT-2 small at batch 8, sequence 1,024 (memory-model.md 12.10): autocast's bfloat16 attention and
// MLP tensors outweigh its weight copies, under both attention rules.
TEST(TransformerMixed, Gpt2AtItsContextSavesUnderAutocast) {
  ZooOptions o;
  o.batch = 8;
  o.sequence = 1024;
  for (bool fused : {false, true}) {
    o.fusedAttention = fused;
    const Chain fp32 = testing::zooBuilt("gpt2", o);
    auto mixed = withPrecision(fp32, Precision::Bf16Mixed);
    ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
    EXPECT_LT(dynamicPeak(*mixed, Plan{}), dynamicPeak(fp32, Plan{}) / 20 * (fused ? 17 : 14)) << "fused " << fused;
    EXPECT_EQ(autocastWeightCopyBytes(*mixed), 12 * (4u * 768 * 768 + 2u * 768 * 3072) * 2 + 50257u * 768 * 2);
  }
}

}  // namespace
}  // namespace remat
