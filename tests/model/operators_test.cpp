// The operator table (operators.hpp): every kind described once, spellings unique and read back,
// the pointwise kinds' backward-read rules PyTorch's (tools/autograd/derivatives.yaml), inner-op
// kinds and layer kinds mapped both ways, and the numbers shape inference takes from it.
#include "remat/model/operators.hpp"

#include <gtest/gtest.h>

#include <set>

#include "remat/model/block.hpp"

namespace remat {
namespace {

TEST(Operators, EveryKindIsDescribedOnceUnderAUniqueName) {
  std::set<LayerKind> kinds;
  std::set<std::string_view> names;
  for (const OperatorInfo& info : operatorTable()) {
    EXPECT_TRUE(kinds.insert(info.kind).second) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(&operatorInfo(info.kind), &info);
    EXPECT_EQ(findOperator(info.name), &info);
    EXPECT_EQ(kindName(info.kind), info.name);
  }
  // Every enumerator up to the last one added.
  EXPECT_EQ(kinds.size(), static_cast<std::size_t>(LayerKind::SwinHead) + 1);
  EXPECT_EQ(findOperator("softplus"), nullptr);
}

TEST(Operators, BackwardReadsFollowPyTorchsDerivatives) {
  // derivatives.yaml: relu, sigmoid, tanh use `result`; hardtanh (relu6), silu, hardswish,
  // hardsigmoid, gelu use `self`.
  const std::pair<LayerKind, BackwardReads> rules[] = {
      {LayerKind::Relu, BackwardReads::Output},       {LayerKind::Sigmoid, BackwardReads::Output},
      {LayerKind::Tanh, BackwardReads::Output},       {LayerKind::Relu6, BackwardReads::Input},
      {LayerKind::Silu, BackwardReads::Input},        {LayerKind::HardSwish, BackwardReads::Input},
      {LayerKind::HardSigmoid, BackwardReads::Input}, {LayerKind::Gelu, BackwardReads::Input}};
  for (const auto& [kind, reads] : rules) {
    SCOPED_TRACE(std::string(kindName(kind)));
    const OperatorInfo& info = operatorInfo(kind);
    EXPECT_EQ(info.family, OperatorFamily::Pointwise);
    EXPECT_TRUE(isPointwise(kind));
    EXPECT_EQ(info.backwardReads, reads);
    EXPECT_TRUE(info.fields.empty());
    EXPECT_GT(info.flopPerElement, 0.0);
    ASSERT_TRUE(info.blockOp.has_value());
    EXPECT_EQ(blockOpInfo(*info.blockOp).layer, kind);
  }
  EXPECT_EQ(backwardReadsName(BackwardReads::Output), "output");
}

TEST(Operators, InnerOpKindsMapToLayerKindsAndBack) {
  std::set<BlockOpKind> seen;
  for (const BlockOpInfo& op : blockOpTable()) {
    EXPECT_TRUE(seen.insert(op.kind).second) << op.name;
    EXPECT_EQ(blockOpKindName(op.kind), op.name);
    auto parsed = parseBlockOpKind(op.name);
    ASSERT_TRUE(parsed.isOk()) << op.name;
    EXPECT_EQ(*parsed, op.kind);
    if (op.layer) {
      EXPECT_EQ(operatorInfo(*op.layer).blockOp, op.kind);
      // global_avgpool is adaptive_avgpool pooled to 1x1: the one inner op spelled otherwise.
      if (op.kind != BlockOpKind::GlobalAvgPool) EXPECT_EQ(kindName(*op.layer), op.name);
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(BlockOpKind::Div) + 1);  // Div: the last kind
  // The pool branches' pools: the layer kinds' fields (kernel, stride, padding, ceil_mode).
  EXPECT_EQ(blockOpInfo(BlockOpKind::MaxPool).layer, LayerKind::MaxPool);
  EXPECT_EQ(blockOpInfo(BlockOpKind::AvgPool).fields.size(), operatorInfo(LayerKind::AvgPool).fields.size());
  EXPECT_FALSE(blockOpInfo(BlockOpKind::Add).layer.has_value());
  EXPECT_FALSE(blockOpInfo(BlockOpKind::Mul).layer.has_value());
  // ShuffleNetV2's channel ops: block-only, with their own fields, a backward that reads nothing.
  for (BlockOpKind kind : {BlockOpKind::Slice, BlockOpKind::ChannelShuffle}) {
    EXPECT_FALSE(blockOpInfo(kind).layer.has_value());
    EXPECT_FALSE(blockOpInfo(kind).fields.empty());
    EXPECT_EQ(blockOpInfo(kind).backwardReads, BackwardReads::Nothing);
  }
  EXPECT_EQ(blockOpInfo(BlockOpKind::Conv2d).fields.size(), operatorInfo(LayerKind::Conv2d).fields.size());
  EXPECT_EQ(blockOpInfo(BlockOpKind::GlobalAvgPool).layer, LayerKind::AdaptiveAvgPool);
}

TEST(Operators, OnnxOpsMapOntoTheirKinds) {
  const std::pair<const char*, LayerKind> maps[] = {
      {"Relu", LayerKind::Relu},           {"Sigmoid", LayerKind::Sigmoid},         {"Tanh", LayerKind::Tanh},
      {"HardSwish", LayerKind::HardSwish}, {"HardSigmoid", LayerKind::HardSigmoid}, {"Gelu", LayerKind::Gelu}};
  for (const auto& [op, kind] : maps) {
    const OperatorInfo* info = findOnnxOperator(op);
    ASSERT_NE(info, nullptr) << op;
    EXPECT_EQ(info->kind, kind);
  }
  EXPECT_EQ(findOnnxOperator(""), nullptr);  // SiLU has no ONNX op of its own: Sigmoid and Mul
  EXPECT_EQ(findOnnxOperator("Erf"), nullptr);
}

// Shape inference reads the description: same shape, no parameters, no E, flops per element.
TEST(Operators, PointwiseNumbersComeFromTheDescription) {
  for (const OperatorInfo& info : operatorTable()) {
    if (info.family != OperatorFamily::Pointwise) continue;
    SCOPED_TRACE(std::string(info.name));
    ChainSpec spec;
    spec.name = "p";
    spec.input.shape = {2, 3, 5, 5};
    spec.input.bytes = 2 * 3 * 5 * 5 * 4;
    LayerSpec layer;
    layer.name = "act";
    layer.kind = info.kind;
    spec.layers = {layer};
    auto chain = buildChain(spec);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    const ChainLayer& l = chain->layers[0];
    EXPECT_EQ(l.outputShape, (Shape{2, 3, 5, 5}));
    EXPECT_EQ(l.paramCount, 0u);
    EXPECT_EQ(l.numbers.outBytes, 2u * 3 * 5 * 5 * 4);
    EXPECT_EQ(l.numbers.extraBytes, 0u);
    EXPECT_EQ(l.numbers.needsInput, info.backwardReads == BackwardReads::Input);
    EXPECT_EQ(l.numbers.needsOutput, info.backwardReads == BackwardReads::Output);
    EXPECT_DOUBLE_EQ(l.numbers.fwdCost, info.flopPerElement * 150 / 1e9);
  }
}

}  // namespace
}  // namespace remat
