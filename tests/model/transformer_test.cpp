// The transformer kinds (docs/memory-model.md section 12): the zoo's parameter counts against the
// reference implementations, one block's numbers against a hand computation of the rule, math
// against fused attention, every planner on GPT-2 small, and bad fields as located errors.
#include <gtest/gtest.h>

#include <string>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/token_input.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"

namespace remat {
namespace {

using testing::zooBuilt;

// A lone block over the residual stream [2, 8, 16]: 4 heads, MLP width 64, dropout 0.1.
ChainSpec oneBlock(bool fused, std::int64_t heads = 4, Shape input = {2, 8, 16}) {
  ChainSpec spec;
  spec.name = "block";
  spec.input.shape = std::move(input);
  LayerSpec b;
  b.name = "h.0";
  b.kind = LayerKind::TransformerBlock;
  b.heads = heads;
  b.hidden = 64;
  b.causal = true;
  b.fusedAttention = fused;
  b.dropoutP = 0.1;
  spec.layers.push_back(b);
  return spec;
}

TEST(TransformerZoo, ParameterCountsEqualTheReferences) {
  ZooOptions small;
  small.batch = 1;
  small.sequence = 16;
  // Hugging Face gpt2 (tied wte / lm_head), bert-base-uncased's BertModel with its pooler,
  // torchvision's vit_b_16.
  EXPECT_EQ(zooBuilt("gpt2", small).paramCount(), 124439808u);
  EXPECT_EQ(zooBuilt("bert_base", small).paramCount(), 109482240u);
  ZooOptions image;
  image.batch = 1;
  EXPECT_EQ(zooBuilt("vit_b_16", image).paramCount(), 86567656u);
  // One GPT-2 block: ln_1 1,536 + c_attn 1,771,776 + c_proj 590,592 + ln_2 1,536 + c_fc 2,362,368 +
  // mlp.c_proj 2,360,064.
  EXPECT_EQ(zooBuilt("gpt2", small).layers[1].paramCount, 7087872u);
}

TEST(TransformerZoo, ShapesFollowTheSequence) {
  ZooOptions o;
  o.batch = 2;
  o.sequence = 128;
  const Chain gpt2 = zooBuilt("gpt2", o);
  ASSERT_EQ(gpt2.size(), 14u);
  EXPECT_EQ(gpt2.layers[0].outputShape, (Shape{2, 128, 768}));
  EXPECT_EQ(gpt2.layers[13].outputShape, (Shape{2, 128, 50257}));
  ZooOptions image;
  image.batch = 2;
  const Chain vit = zooBuilt("vit_b_16", image);
  EXPECT_EQ(vit.layers[0].outputShape, (Shape{2, 197, 768}));
  EXPECT_EQ(vit.layers.back().outputShape, (Shape{2, 1000}));
}

TEST(TransformerBlock, NumbersEqualTheRuleByHand) {
  // T = N S = 16 tokens, d = 16, H = 64, 4-byte floats, A = N heads S^2 = 512 probabilities.
  const std::uint64_t common = 2 * 2 * 16 * 4     // two LayerNorms' mean and rstd, float32
                               + 4 * 16 * 16 * 4  // ln1, merged heads, the residual sum, ln2
                               + 2 * 16 * 64 * 4  // fc's output (GELU's input), GELU's output
                               + 2 * 16 * 16;     // the two residual dropouts' masks, a byte each
  auto fused = buildChain(oneBlock(true));
  ASSERT_TRUE(fused.isOk()) << fused.status().message();
  const LayerNumbers& f = fused->at(1);
  EXPECT_EQ(fused->layers[0].paramCount, 3280u);  // 4 d^2 + 2 d H + 9 d + H
  EXPECT_EQ(f.outBytes, 16u * 16 * 4);
  EXPECT_TRUE(f.needsInput);
  EXPECT_FALSE(f.needsOutput);
  // SDPA: q, k, v (the qkv projection), its output, the [2, 4, 8] float32 log-sum-exp.
  EXPECT_EQ(f.extraBytes, common + 4 * 16 * 16 * 4 + 2 * 4 * 8 * 4);
  EXPECT_EQ(f.fwdWorkspaceBytes, 0u);
  EXPECT_EQ(f.bwdWorkspaceBytes, 2u * 16 * 64 * 4);  // the MLP's two gradients outweigh dq, dk, dv, dout
  // 2 T (4 d^2 + 2 d H) + 4 N S^2 d + 5 A + 8 T H + 12 T d flops.
  EXPECT_DOUBLE_EQ(f.fwdCost, (98304.0 + 8192.0 + 2560.0 + 8192.0 + 3072.0) / 1e9);

  auto math = buildChain(oneBlock(false));
  ASSERT_TRUE(math.isOk()) << math.status().message();
  const LayerNumbers& m = math->at(1);
  // The copies of q, k, v, softmax's result, dropout's mask and the dropped probabilities.
  EXPECT_EQ(m.extraBytes, common + 3 * 16 * 16 * 4 + 512 * 4 + 512 * (4 + 1));
  EXPECT_EQ(m.fwdWorkspaceBytes, 3u * 16 * 16 * 4 + 2 * 512 * 4);  // qkv; the scores and their scaled copy
  EXPECT_EQ(m.bwdWorkspaceBytes, 2u * 16 * 64 * 4);
  EXPECT_EQ(m.fwdCost, f.fwdCost);
}

TEST(TransformerBlock, MathKeepsTheProbabilitiesFusedDoesNot) {
  ZooOptions o;
  o.batch = 1;
  o.sequence = 64;
  const Chain fused = zooBuilt("gpt2", o);
  o.fusedAttention = false;
  const Chain math = zooBuilt("gpt2", o);
  const std::uint64_t probs = 1 * 12 * 64 * 64, tokenBytes = 64 * 768 * 4, lse = 12 * 64 * 4;
  for (std::size_t l = 2; l <= 13; ++l) {
    // math - fused = A (2 s + 1) - T d s - 4 N heads S (section 12.3)
    EXPECT_EQ(math.at(l).extraBytes - fused.at(l).extraBytes, probs * 9 - tokenBytes - lse) << l;
  }
  EXPECT_EQ(math.at(1), fused.at(1));
  EXPECT_EQ(math.at(14), fused.at(14));
  EXPECT_EQ(math.paramCount(), fused.paramCount());
}

std::uint64_t partsSum(const ChainLayer& layer) {
  std::uint64_t sum = 0;
  for (const SavedPart& part : layer.extraParts) sum += part.bytes;
  return sum;
}

std::uint64_t partBytes(const ChainLayer& layer, const std::string& name) {
  for (const SavedPart& part : layer.extraParts)
    if (part.name == name) return part.bytes;
  return 0;
}

// Every transformer layer names what its e holds (the explorer's peak tooltip and the layer table
// show it): the parts add up to e, under both attention rules and under autocast.
TEST(TransformerBlock, NamedPartsAddUpToE) {
  for (const bool fused : {true, false}) {
    for (const char* model : {"gpt2", "bert_base", "vit_b_16"}) {
      ZooOptions o;
      o.batch = 2;
      if (std::string(model) != "vit_b_16") o.sequence = 32;  // ViT's is its image's patches
      o.fusedAttention = fused;
      const Chain chain = zooBuilt(model, o);
      for (const ChainLayer& layer : chain.layers) {
        SCOPED_TRACE(std::string(model) + " " + layer.name);
        EXPECT_EQ(partsSum(layer), layer.numbers.extraBytes);
        if (layer.numbers.extraBytes > 0) {
          EXPECT_FALSE(layer.extraParts.empty());
        }
      }
    }
  }
  // The block of NumbersEqualTheRuleByHand: A = 512 probabilities, T = 16 tokens, d = 16.
  auto math = buildChain(oneBlock(false));
  ASSERT_TRUE(math.isOk()) << math.status().message();
  const ChainLayer& block = math->layers[0];
  EXPECT_EQ(partBytes(block, "attention (math): probabilities [N, h, S, S]"), 512u * 4);
  EXPECT_EQ(partBytes(block, "attention (math): dropout mask, dropped probabilities"), 512u * 5);
  EXPECT_EQ(partBytes(block, "MLP: fc's input, GELU's input and output"), 16u * 16 * 4 + 2 * 16 * 64 * 4);
  auto fused = buildChain(oneBlock(true));
  ASSERT_TRUE(fused.isOk());
  EXPECT_EQ(partBytes(fused->layers[0], "attention (fused): q, k, v, output, log-sum-exp"),
            4u * 16 * 16 * 4 + 2 * 4 * 8 * 4);
  EXPECT_EQ(partBytes(fused->layers[0], "attention (math): probabilities [N, h, S, S]"), 0u);
  // Autocast names what it adds beside the half layer's own parts.
  ZooOptions o;
  o.batch = 2;
  o.sequence = 32;
  auto mixed = withPrecision(zooBuilt("gpt2", o), Precision::Bf16Mixed);
  ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
  for (const ChainLayer& layer : mixed->layers) {
    SCOPED_TRACE(layer.name);
    EXPECT_EQ(partsSum(layer), layer.numbers.extraBytes);
  }
}

TEST(TransformerHead, KeepsTheLogProbabilities) {
  ZooOptions o;
  o.batch = 8;
  o.sequence = 1024;
  const Chain gpt2 = zooBuilt("gpt2", o);
  const LayerNumbers& head = gpt2.at(gpt2.size());
  const std::uint64_t logits = 8ull * 1024 * 50257 * 4;
  EXPECT_EQ(head.outBytes, logits);  // log_softmax's result, which cross entropy keeps
  EXPECT_TRUE(head.needsOutput);
  EXPECT_EQ(head.fwdWorkspaceBytes, logits);  // the logits themselves
  EXPECT_EQ(head.bwdWorkspaceBytes, logits + 8ull * 1024 * 768 * 4);
  EXPECT_EQ(gpt2.layers.back().paramCount, 1536u);  // ln_f; the projection is wte's table
  // The largest tensor of the step: more than a whole block keeps, even with math attention.
  for (std::size_t l = 1; l < gpt2.size(); ++l) EXPECT_GT(head.outBytes, gpt2.at(l).outBytes + gpt2.at(l).extraBytes);
}

// BERT's embedding (memory-model.md 12.2): the position and type ids, the LayerNorm's statistics
// and input, the mask (p = 0.1); the three lookups; the norm's backward makes d(input) beside
// dropout's d(output), where GPT-2's embedding backward needs no workspace.
TEST(TransformerEmbedding, BertsNumbersEqualTheRuleByHand) {
  ZooOptions o;
  o.batch = 2;
  o.sequence = 16;
  const std::uint64_t tokens = 32, d = 768, seq = 16;
  const LayerNumbers& bert = zooBuilt("bert_base", o).at(1);
  EXPECT_EQ(bert.extraBytes, 8 * seq + 8 * seq + 8 * tokens + tokens * d * 4 + tokens * d);
  EXPECT_EQ(bert.fwdWorkspaceBytes, tokens * d * 4 + seq * d * 4 + tokens * d * 4);
  EXPECT_EQ(bert.bwdWorkspaceBytes, 2 * tokens * d * 4);
  EXPECT_EQ(zooBuilt("gpt2", o).at(1).bwdWorkspaceBytes, 0u);
}

// Token ids are PyTorch's torch.long [N, S] (memory-model.md 12.9): x0 of a token chain is N·S·8
// bytes whatever the chain's dtype, and shows as int64; an image or residual-stream input keeps its
// dtype's size.
TEST(TransformerEmbedding, TokenIdsAreInt64InTheStaticBlock) {
  ZooOptions o;
  o.batch = 3;
  o.sequence = 40;
  for (const char* name : {"gpt2", "bert_base"}) {
    const Chain chain = zooBuilt(name, o);
    EXPECT_TRUE(hasTokenIds(chain)) << name;
    EXPECT_EQ(chain.inputBytes, 3u * 40u * 8u) << name;
    EXPECT_EQ(staticBreakdown(chain).inputBytes, 3u * 40u * 8u) << name;
    EXPECT_EQ(inputDTypeName(chain), "int64") << name;
  }
  // The loss's int64 labels sit beside the input: one per token after lm_head, one per sample else.
  EXPECT_EQ(staticBreakdown(zooBuilt("gpt2", o)).labelBytes, 3u * 40u * 8u);
  EXPECT_EQ(staticBreakdown(zooBuilt("resnet18", {.batch = 3})).labelBytes, 3u * 8u);
  auto half = zooChain("gpt2", o);
  ASSERT_TRUE(half.isOk()) << half.status().message();
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    half->input.dtype = dtype;
    auto built = buildChain(*half);
    ASSERT_TRUE(built.isOk()) << built.status().message();
    EXPECT_EQ(built->inputBytes, 3u * 40u * 8u);
    EXPECT_EQ(inputDTypeName(*built), "int64");
  }
  auto block = buildChain(oneBlock(false));
  ASSERT_TRUE(block.isOk()) << block.status().message();
  EXPECT_FALSE(hasTokenIds(*block));
  EXPECT_EQ(block->inputBytes, 2u * 8u * 16u * 4u);
  EXPECT_EQ(inputDTypeName(*block), "float32");
}

// PyTorch's autograd holds the head's gradient of the tied table (V x d) from the head's backward
// until the embedding's adds its own (memory-model.md 12.2, measured in 12.5): every op from B(n)
// to B(1) holds V·d·s more than the untied chain, and B(1)'s workspace is at least V·d·s.
TEST(TransformerHead, TiedTableGradientLivesFromTheHeadToTheEmbedding) {
  ZooOptions o;
  o.batch = 1;
  o.sequence = 64;
  auto spec = zooChain("gpt2", o);
  ASSERT_TRUE(spec.isOk());
  ASSERT_TRUE(spec->layers.back().tied);
  auto tied = buildChain(*spec);
  spec->layers.back().tied = false;
  auto untied = buildChain(*spec);
  ASSERT_TRUE(tied.isOk() && untied.isOk());
  const std::uint64_t table = 50257ull * 768 * 4, n = tied->size();
  EXPECT_EQ(tied->at(n).sharedGradBytes, table);
  EXPECT_EQ(untied->at(n).sharedGradBytes, 0u);
  const std::uint64_t wb1 = tied->at(1).bwdWorkspaceBytes;
  ASSERT_LT(wb1, table);
  auto a = simulate(*tied, Plan{});
  auto b = simulate(*untied, Plan{});
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_EQ(a->timeline.entries.size(), b->timeline.entries.size());
  bool backward = false;
  for (std::size_t i = 0; i < a->timeline.entries.size(); ++i) {
    const Op& op = a->timeline.entries[i].op;
    backward = backward || op.kind == OpKind::B;
    const std::uint64_t extra = !backward ? 0 : table + (op.layer == 1 ? table - wb1 : 0);
    EXPECT_EQ(a->timeline.entries[i].footprintBytes, b->timeline.entries[i].footprintBytes + extra) << i;
  }
  // The planners' tables count it as the simulator does.
  for (const char* planner : {"optimal", "linear", "dp"}) {
    auto report = runPlanner(*tied, planner);
    ASSERT_TRUE(report.isOk()) << planner;
    auto simulation = simulate(*tied, report->plan);
    ASSERT_TRUE(simulation.isOk());
    EXPECT_EQ(simulation->dynamicPeakBytes, report->dynamicPeakBytes) << planner;
  }
}

TEST(TransformerPlanners, EveryPlannerPlansGpt2) {
  ZooOptions o;
  o.batch = 8;
  o.sequence = 1024;
  for (bool fusedAttention : {true, false}) {
    o.fusedAttention = fusedAttention;
    const Chain gpt2 = zooBuilt("gpt2", o);
    auto optimal = runPlanner(gpt2, "optimal");
    ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
    auto storeAll = runPlanner(gpt2, "none");
    ASSERT_TRUE(storeAll.isOk());
    EXPECT_LT(optimal->dynamicPeakBytes, storeAll->dynamicPeakBytes);
    std::vector<std::string> names = defaultComparePlanners(gpt2.size());
    names.push_back("budget:" + std::to_string(storeAll->dynamicPeakBytes));
    for (const std::string& name : names) {
      auto report = runPlanner(gpt2, name);
      ASSERT_TRUE(report.isOk()) << name << ": " << report.status().message();
      EXPECT_LE(optimal->dynamicPeakBytes, report->dynamicPeakBytes) << name;
      auto simulation = simulate(gpt2, report->plan);
      ASSERT_TRUE(simulation.isOk());
      EXPECT_EQ(simulation->dynamicPeakBytes, report->dynamicPeakBytes) << name;
    }
  }
}

TEST(TransformerErrors, BadFieldsAreLocated) {
  auto heads = buildChain(oneBlock(true, 5));
  ASSERT_FALSE(heads.isOk());
  EXPECT_NE(
      heads.status().message().find("layer 1 ('h.0', transformer_block): heads 5 does not divide the width d = 16"),
      std::string::npos)
      << heads.status().message();
  auto empty = buildChain(oneBlock(true, 4, {2, 0, 16}));
  ASSERT_FALSE(empty.isOk());
  EXPECT_NE(empty.status().message().find("input.shape[1] is 0"), std::string::npos) << empty.status().message();
  // S x S probabilities of 2^31 - 1 tokens: past 2^64 bytes, said, not wrapped.
  auto huge = buildChain(oneBlock(false, 4, {1, 2147483647, 16}));
  ASSERT_FALSE(huge.isOk());
  EXPECT_NE(huge.status().message().find("layer 1 ('h.0', transformer_block): the block's parameters and saved "
                                         "tensors overflow 64-bit bytes"),
            std::string::npos)
      << huge.status().message();
  ZooOptions tooLong;
  tooLong.batch = 1;
  tooLong.sequence = 600;
  auto bert = zooChain("bert_base", tooLong);
  ASSERT_FALSE(bert.isOk());
  EXPECT_NE(bert.status().message().find("longer than the position table (positions 512)"), std::string::npos)
      << bert.status().message();
  ZooOptions cnn;
  cnn.sequence = 16;
  EXPECT_FALSE(zooChain("resnet18", cnn).isOk());
}

}  // namespace
}  // namespace remat
