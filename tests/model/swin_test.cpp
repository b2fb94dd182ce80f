// The Swin Transformer kinds (docs/memory-model.md section 12.6): swin_t's parameter count and shapes
// against torchvision's, each kind's numbers against a hand computation of the rule on small
// configurations (padding, ineffective shifts, stochastic depth), chain-file round trips and
// impossible configurations as located errors.
#include <gtest/gtest.h>

#include <string>

#include "chain_helpers.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"

namespace remat {
namespace {

using testing::zooBuilt;

ChainSpec oneLayer(LayerSpec layer, Shape input) {
  ChainSpec spec;
  spec.name = "swin";
  spec.input.shape = std::move(input);
  spec.layers.push_back(std::move(layer));
  return spec;
}

LayerSpec swinBlock(std::int64_t window, std::int64_t shift, double stochasticDepth, std::int64_t heads = 4) {
  LayerSpec b;
  b.name = "b";
  b.kind = LayerKind::SwinBlock;
  b.heads = heads;
  b.hidden = 64;
  b.window = window;
  b.shift = shift;
  b.stochasticDepth = stochasticDepth;
  return b;
}

Chain built(const ChainSpec& spec) {
  auto chain = buildChain(spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? *chain : Chain{};
}

std::string errorOf(const ChainSpec& spec) {
  auto chain = buildChain(spec);
  EXPECT_FALSE(chain.isOk());
  return chain.isOk() ? std::string() : chain.status().message();
}

TEST(SwinZoo, ParameterCountAndShapesEqualTorchvision) {
  ZooOptions o;
  o.batch = 2;
  const Chain swin = zooBuilt("swin_t", o);
  EXPECT_EQ(swin.paramCount(), 28288354u);  // sum(p.numel() for p in torchvision.models.swin_t().parameters())
  ASSERT_EQ(swin.size(), 17u);
  EXPECT_EQ(swin.layers[0].paramCount, 4896u);     // features.0: conv 4x4x3x96 + 96, LayerNorm 192
  EXPECT_EQ(swin.layers[1].paramCount, 112347u);   // features.1.0 (the relative position table 169 x 3)
  EXPECT_EQ(swin.layers[3].paramCount, 74496u);    // features.2: Linear(384, 192) and LayerNorm(384)
  EXPECT_EQ(swin.layers[16].paramCount, 770536u);  // norm, head
  EXPECT_EQ(swin.layers[0].outputShape, (Shape{2, 56, 56, 96}));
  EXPECT_EQ(swin.layers[3].outputShape, (Shape{2, 28, 28, 192}));
  EXPECT_EQ(swin.layers[6].outputShape, (Shape{2, 14, 14, 384}));
  EXPECT_EQ(swin.layers[13].outputShape, (Shape{2, 7, 7, 768}));
  EXPECT_EQ(swin.layers[16].outputShape, (Shape{2, 1000}));
  // Stochastic depth rises 0.2 * k / 11 over the blocks: the first keeps no noise.
  EXPECT_EQ(swin.spec.layers[1].stochasticDepth, 0.0);
  EXPECT_DOUBLE_EQ(swin.spec.layers[15].stochasticDepth, 0.2);
  // Odd sides are padded by the merges: 232 / 4 = 58, 29, 15, 8 (two windows of 7, padded to 14).
  o.resolution = 232;
  EXPECT_EQ(zooBuilt("swin_t", o).layers[13].outputShape, (Shape{2, 8, 8, 768}));
}

// Every Swin layer names what its e holds (the explorer's peak tooltip and layer table list it):
// the parts add up to e.
TEST(SwinZoo, NamedPartsAddUpToE) {
  for (const std::int64_t batch : {1, 2}) {
    ZooOptions o;
    o.batch = batch;
    const Chain swin = zooBuilt("swin_t", o);
    for (const ChainLayer& layer : swin.layers) {
      SCOPED_TRACE(layer.name);
      std::uint64_t sum = 0;
      for (const SavedPart& part : layer.extraParts) sum += part.bytes;
      EXPECT_EQ(sum, layer.numbers.extraBytes);
      EXPECT_FALSE(layer.extraParts.empty());
    }
    // features.7.0 at batch 1 is one window in the whole batch: its matmuls keep qkv.
    const auto& parts = swin.layers[14].extraParts;
    EXPECT_EQ(parts[1].name, batch == 1 ? "attention: windowed input, q * scale, qkv, merged heads"
                                        : "attention: windowed input, q * scale, k^T and v copies, merged heads");
  }
}

TEST(SwinBlock, NumbersEqualTheRuleByHand) {
  // [2, 8, 8, 16], window 4 (4 windows of L = 16), shift 2, heads 4, hidden 64, float32:
  // T = Tp = 128 positions, A = 2 * 4 * 4 * 16 * 16 = 8192 probabilities.
  const Chain chain = built(oneLayer(swinBlock(4, 2, 0.1), {2, 8, 8, 16}));
  ASSERT_EQ(chain.size(), 1u);
  const LayerNumbers& m = chain.at(1);
  EXPECT_EQ(chain.layers[0].paramCount, 1024u + 2048 + 144 + 64 + 49 * 4);  // 4C^2 + 2CH + 9C + H + (2M-1)^2 h
  EXPECT_EQ(chain.layers[0].outputShape, (Shape{2, 8, 8, 16}));
  EXPECT_TRUE(m.needsInput);
  EXPECT_FALSE(m.needsOutput);
  EXPECT_EQ(m.extraBytes, 2u * 128 * 8            // both norms' mean and rstd
                              + 5 * 128 * 16 * 4  // windowed x, q * scale, k^T, v, merged heads
                              + 2 * 128 * 16 * 4  // norm2's input and output
                              + 2 * 128 * 64 * 4  // fc1's and GELU's outputs
                              + 8192 * 4          // softmax's result
                              + 2 * 2 * 4);       // two [N, 1, 1, 1] stochastic depth noises
  // The attention's peak (140,288 bytes) stays below what the block ends with (e + a), so wf is the
  // last residual add's other operand, T C s.
  EXPECT_EQ(m.fwdWorkspaceBytes, 128u * 16 * 4);
  EXPECT_EQ(m.bwdWorkspaceBytes, 2u * 8192 * 4 + 3 * 128 * 16 * 4);  // beats the MLP's T H s + T C s
  // 8 Tp C^2 + 4 A C / h + 4 T C H + 7 A + 8 T H + 14 T C + Tp C.
  EXPECT_DOUBLE_EQ(m.fwdCost, (262144.0 + 131072.0 + 524288.0 + 57344.0 + 65536.0 + 28672.0 + 2048.0) / 1e9);
}

TEST(SwinBlock, AttentionPeakBeyondWhatTheBlockKeepsIsWorkspace) {
  // [2, 8, 8, 4], one 8x8 window, 4 heads of width 1: A = 2 * 4 * 64 * 64 = 32,768 probabilities
  // outweigh everything else. e = 2,048 + 10,240 + 4,096 + 16,384 + 131,072; a = 2,048.
  LayerSpec b = swinBlock(8, 0, 0.0);
  b.hidden = 16;
  const LayerNumbers m = built(oneLayer(b, {2, 8, 8, 4})).at(1);
  EXPECT_EQ(m.extraBytes, 163840u);
  // Alive at the scores: norm1's statistics, the windowed input and the q * scale and k^T copies,
  // norm1's output, qkv and q * scale, the bias [4, 64, 64], two score tensors; minus e + a.
  const std::uint64_t attention = 1024u + 3 * 2048 + 2048 + 4 * 2048 + 4 * 4096 * 4 + 2 * 32768 * 4;
  EXPECT_EQ(m.fwdWorkspaceBytes, attention - 163840 - 2048);
  // Four windows per image: the shifted block's mask [4, 64, 64] is part of that peak.
  b.shift = 4;
  const LayerNumbers shifted = built(oneLayer(b, {2, 16, 16, 4})).at(1);
  b.shift = 0;
  const LayerNumbers plain = built(oneLayer(b, {2, 16, 16, 4})).at(1);
  EXPECT_EQ(shifted.fwdWorkspaceBytes - plain.fwdWorkspaceBytes, 4u * 64 * 64 * 4);
  EXPECT_EQ(shifted.extraBytes, plain.extraBytes);
}

TEST(SwinBlock, PaddingShiftsAndStochasticDepth) {
  const LayerNumbers plain = built(oneLayer(swinBlock(4, 0, 0.0), {2, 8, 8, 16})).at(1);
  const LayerNumbers shifted = built(oneLayer(swinBlock(4, 2, 0.0), {2, 8, 8, 16})).at(1);
  const LayerNumbers noisy = built(oneLayer(swinBlock(4, 2, 0.3), {2, 8, 8, 16})).at(1);
  EXPECT_EQ(shifted, plain);  // the mask is made and dropped in F, below what the block ends with
  EXPECT_EQ(noisy.extraBytes - shifted.extraBytes, 2u * 2 * 4);  // the two noises
  // A map one window wide: torchvision does not shift it, so no mask.
  const LayerNumbers whole = built(oneLayer(swinBlock(4, 2, 0.0), {2, 4, 4, 16})).at(1);
  const LayerNumbers wholePlain = built(oneLayer(swinBlock(4, 0, 0.0), {2, 4, 4, 16})).at(1);
  EXPECT_EQ(whole, wholePlain);
  // One window in the whole batch: k^T and v fold to 3-d as views of qkv, which the matmuls then
  // keep whole (T = Tp = 16, A = 1024): six [Tp, C] tensors where two windows keep five each.
  const LayerNumbers single = built(oneLayer(swinBlock(4, 0, 0.0), {1, 4, 4, 16})).at(1);
  EXPECT_EQ(single.extraBytes, 2u * 16 * 8 + 6 * 16 * 16 * 4 + 2 * 16 * 16 * 4 + 2 * 16 * 64 * 4 + 1024 * 4);
  const LayerNumbers two = built(oneLayer(swinBlock(4, 0, 0.0), {2, 4, 4, 16})).at(1);
  EXPECT_EQ(two.extraBytes, 2 * single.extraBytes - 2u * 16 * 16 * 4);
  // 6x6 pads to 8x8: the windowed tensors and the probabilities are the padded ones (Tp = 64, A = 4096),
  // the norms' and the MLP's are not (T = 36).
  const LayerNumbers padded = built(oneLayer(swinBlock(4, 0, 0.0), {1, 6, 6, 16})).at(1);
  EXPECT_EQ(padded.extraBytes, 2u * 36 * 8 + 5 * 64 * 16 * 4 + 2 * 36 * 16 * 4 + 2 * 36 * 64 * 4 + 4096 * 4);
}

TEST(SwinKinds, EmbeddingMergingAndHeadByHand) {
  LayerSpec emb;
  emb.name = "e";
  emb.kind = LayerKind::SwinEmbedding;
  emb.kernel = 4;
  emb.width = 16;
  const Chain e = built(oneLayer(emb, {2, 3, 33, 32}));
  EXPECT_EQ(e.layers[0].outputShape, (Shape{2, 8, 8, 16}));  // the conv floors 33 / 4
  EXPECT_EQ(e.layers[0].paramCount, 16u * 3 * 16 + 16 + 32);
  EXPECT_EQ(e.at(1).extraBytes, 128u * 16 * 4 + 128 * 8);  // the permuted conv output, the statistics
  EXPECT_TRUE(e.at(1).needsInput);

  LayerSpec merge;
  merge.name = "m";
  merge.kind = LayerKind::PatchMerging;
  const Chain m = built(oneLayer(merge, {1, 5, 5, 4}));
  EXPECT_EQ(m.layers[0].outputShape, (Shape{1, 3, 3, 8}));  // padded to 6x6
  EXPECT_EQ(m.layers[0].paramCount, 8u * 16 + 32);
  EXPECT_EQ(m.at(1).extraBytes, 2u * 9 * 16 * 4 + 9 * 8);  // the concatenation, the norm's output and statistics
  EXPECT_FALSE(m.at(1).needsInput);
  EXPECT_EQ(m.at(1).fwdWorkspaceBytes, 0u);               // the padded copy is gone before the norm's output
  EXPECT_EQ(m.at(1).bwdWorkspaceBytes, 2u * 9 * 16 * 4);  // d(norm output), d(concatenation)

  LayerSpec head;
  head.name = "h";
  head.kind = LayerKind::SwinHead;
  head.outFeatures = 10;
  const Chain h = built(oneLayer(head, {2, 7, 7, 32}));
  EXPECT_EQ(h.layers[0].outputShape, (Shape{2, 10}));
  EXPECT_EQ(h.layers[0].paramCount, 64u + 320 + 10);
  EXPECT_EQ(h.at(1).extraBytes, 98u * 8 + 98 * 32 * 4 + 2 * 32 * 4);  // statistics, the normalised map, the pooled
}

TEST(SwinKinds, ChainFilesRoundTrip) {
  ZooOptions o;
  o.batch = 3;
  o.resolution = 232;
  auto spec = zooChain("swin_t", o);
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const std::string text = chainSpecToText(*spec);
  EXPECT_NE(text.find("\"kind\":\"swin_block\""), std::string::npos);
  EXPECT_NE(text.find("\"stochastic_depth\""), std::string::npos);
  auto again = parseChain(text, "swin.json");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  const Chain original = built(*spec);
  ASSERT_EQ(again->size(), original.size());
  for (std::size_t l = 1; l <= original.size(); ++l) {
    EXPECT_EQ(again->at(l), original.at(l)) << l;
    EXPECT_EQ(again->spec.layers[l - 1].window, original.spec.layers[l - 1].window) << l;
    EXPECT_EQ(again->spec.layers[l - 1].shift, original.spec.layers[l - 1].shift) << l;
    EXPECT_EQ(again->spec.layers[l - 1].stochasticDepth, original.spec.layers[l - 1].stochasticDepth) << l;
  }
  EXPECT_EQ(chainSpecToText(again->spec), text);
}

TEST(SwinKinds, BadFieldsAreLocatedErrors) {
  EXPECT_NE(errorOf(oneLayer(swinBlock(7, 0, 0.0), {2, 6, 6, 16}))
                .find("layer 1 ('b', swin_block): window 7 is larger than the feature map 6x6 (H x W)"),
            std::string::npos);
  EXPECT_NE(errorOf(oneLayer(swinBlock(4, 0, 0.0, 5), {2, 8, 8, 16}))
                .find("layer 1 ('b', swin_block): heads 5 does not divide the channels C = 16"),
            std::string::npos);
  EXPECT_NE(errorOf(oneLayer(swinBlock(4, 4, 0.0), {2, 8, 8, 16})).find("shift 4 must be smaller than the window 4"),
            std::string::npos);
  EXPECT_NE(errorOf(oneLayer(swinBlock(4, 0, 0.0), {2, 8, 16})).find("swin_block needs a channels-last [N, H, W, C]"),
            std::string::npos);
  // One 65,536 x 65,536 window: L^2 = 2^64 attention entries per head, said, not wrapped.
  EXPECT_NE(errorOf(oneLayer(swinBlock(65536, 0, 0.0, 1), {1, 65536, 65536, 1}))
                .find("layer 1 ('b', swin_block): the block's parameters and saved tensors overflow 64-bit bytes"),
            std::string::npos);
  const std::string file = R"({"format": "remat-chain/1", "name": "s", "input": {"shape": [1, 8, 8, 16]},
    "layers": [{"name": "b", "kind": "swin_block", "heads": 4, "hidden": 64, "window": 4, "stochastic_depth": 1}]})";
  auto bad = parseChain(file, "s.json");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("stochastic_depth"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("must be below 1"), std::string::npos) << bad.status().message();
  ZooOptions small;
  small.resolution = 192;  // the last stage would be 6x6, smaller than a window
  auto zoo = zooChain("swin_t", small);
  ASSERT_FALSE(zoo.isOk());
  EXPECT_NE(zoo.status().message().find("resolution 192 is below its minimum 196"), std::string::npos)
      << zoo.status().message();
}

TEST(SwinPlanners, EveryPlannerPlansSwinT) {
  ZooOptions o;
  o.batch = 32;
  const Chain swin = zooBuilt("swin_t", o);
  auto storeAll = runPlanner(swin, "none");
  ASSERT_TRUE(storeAll.isOk());
  auto optimal = runPlanner(swin, "optimal");
  ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
  EXPECT_LT(optimal->dynamicPeakBytes, storeAll->dynamicPeakBytes);
  for (const std::string& name : defaultComparePlanners(swin.size())) {
    auto report = runPlanner(swin, name);
    ASSERT_TRUE(report.isOk()) << name << ": " << report.status().message();
    EXPECT_LE(optimal->dynamicPeakBytes, report->dynamicPeakBytes) << name;
  }
}

}  // namespace
}  // namespace remat
