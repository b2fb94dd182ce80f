// layernorm (nn.LayerNorm over the last axis of [N, F]): its operator-table entry and shape rule,
// its chain-file field (epsilon) read, written and refused when out of bounds, and the CPU backend
// (oneDNN layer_normalization) against PyTorch: forward, input gradient and weight / bias gradients
// within 1e-4 (reference values made by scripts/make-layernorm-reference.py with Debian's torch,
// tests/data/layernorm/torch_reference.json), the bytes autograd saved equal to the model's E, and
// an MLP with layernorm run under every planner's plan with the measured footprint predicted op by op.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/operators.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

const json& reference() { return test::torchReference("layernorm"); }

json chainWith(const json& layers, std::vector<std::int64_t> shape = {4, 8}) {
  return {{"format", "remat-chain/1"},
          {"name", "ln"},
          {"input", {{"shape", shape}, {"dtype", "float32"}}},
          {"layers", layers}};
}

TEST(LayerNormOperator, TableDescribesPyTorchsNativeLayerNorm) {
  const OperatorInfo* info = findOperator("layernorm");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->kind, LayerKind::LayerNorm);
  EXPECT_EQ(info->family, OperatorFamily::Primitive);
  EXPECT_EQ(info->onnxOp, "LayerNormalization");
  EXPECT_EQ(findOnnxOperator("LayerNormalization"), info);
  EXPECT_EQ(info->torchOp, "native_layer_norm");
  ASSERT_EQ(info->fields.size(), 1u);
  EXPECT_EQ(info->fields[0].name, "epsilon");
  EXPECT_EQ(info->fields[0].type, FieldType::Real);
  EXPECT_EQ(info->blockOp, BlockOpKind::LayerNorm);  // over the channels inside a block (ConvNeXt)
  EXPECT_EQ(kindName(LayerKind::LayerNorm), "layernorm");
}

TEST(LayerNormOperator, ShapeRuleKeepsInputAndFloat32RowStatistics) {
  auto chain = parseChain(chainWith({{{"name", "n"}, {"kind", "layernorm"}}}, {6, 32}).dump(), "ln");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const ChainLayer& layer = chain->layers[0];
  EXPECT_EQ(layer.outputShape, (Shape{6, 32}));
  EXPECT_EQ(layer.paramCount, 64u);  // weight and bias [32]
  EXPECT_EQ(layer.numbers.outBytes, 6u * 32 * 4);
  EXPECT_TRUE(layer.numbers.needsInput);
  EXPECT_FALSE(layer.numbers.needsOutput);
  EXPECT_EQ(layer.numbers.extraBytes, 6u * 2 * 4);  // mean and rstd [6] each, float32
  // bfloat16: E stays float32 (the statistics' type on CUDA; docs/memory-model.md 5.1).
  json half = chainWith({{{"name", "n"}, {"kind", "layernorm"}}}, {6, 32});
  half["input"]["dtype"] = "bfloat16";
  auto bf16 = parseChain(half.dump(), "ln");
  ASSERT_TRUE(bf16.isOk()) << bf16.status().message();
  EXPECT_EQ(bf16->layers[0].numbers.outBytes, 6u * 32 * 2);
  EXPECT_EQ(bf16->layers[0].numbers.extraBytes, 6u * 2 * 4);
}

TEST(LayerNormOperator, ChainFileRoundTripKeepsEpsilon) {
  auto spec = parseChainSpec(chainWith({{{"name", "n"}, {"kind", "layernorm"}, {"epsilon", 0.001}}}).dump(), "ln");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->layers[0].epsilon, 0.001);
  const std::string text = chainSpecToText(*spec);
  auto again = parseChainSpec(text, "again");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->layers[0].epsilon, 0.001);
  EXPECT_EQ(chainSpecToText(*again), text);
  // Absent: PyTorch's default.
  auto plain = parseChainSpec(chainWith({{{"name", "n"}, {"kind", "layernorm"}}}).dump(), "ln");
  ASSERT_TRUE(plain.isOk());
  EXPECT_EQ(plain->layers[0].epsilon, 1e-5);
}

std::string chainError(const json& layer, std::vector<std::int64_t> shape = {4, 8}) {
  auto chain = parseChain(chainWith(json::array({layer}), std::move(shape)).dump(), "bad.json");
  EXPECT_FALSE(chain.isOk());
  return chain ? "" : chain.status().message();
}

void expectContains(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in: " << message;
}

TEST(LayerNormOperator, HostileFieldsAndShapesAreRefusedWithTheirPlace) {
  const json ln = {{"name", "n"}, {"kind", "layernorm"}};
  auto with = [&](const json& epsilon) {
    json l = ln;
    l["epsilon"] = epsilon;
    return l;
  };
  expectContains(chainError(with(-1e-5)), {"bad.json", "epsilon"});
  expectContains(chainError(with(1.0)), {"epsilon", "below 1"});
  expectContains(chainError(with(1e300)), {"epsilon"});
  expectContains(chainError(with("nan")), {"epsilon"});
  expectContains(chainError(with(nullptr)), {"epsilon"});
  // JSON has no NaN: nlohmann writes it as null, refused above. [N, F] or NCHW (over the channels,
  // ConvNeXt's LayerNorm2d): a 3-D input is neither.
  expectContains(chainError(ln, {2, 3, 4}), {"layer 1 ('n', layernorm)", "[N, F]", "[N, C, H, W]"});
  json extra = ln;
  extra["out_features"] = 3;
  expectContains(chainError(extra), {"out_features"});
}

std::vector<float> floats(const json& values) { return values.get<std::vector<float>>(); }

// flatten: the layer reads a flattened [4, 2, 2, 2] input, whose features the CPU keeps in (h, w, c)
// order: the weight and bias must follow them (ParamSegment::FeatureVector).
void checkAgainstTorch(const std::string& name, bool flatten) {
  const json& ref = reference();
  const json& want = ref["cases"][name];
  const json layer = {{"name", "n"}, {"kind", "layernorm"}, {"epsilon", want["epsilon"]}};
  const std::vector<std::int64_t> shape =
      flatten ? std::vector<std::int64_t>{4, 2, 2, 2} : std::vector<std::int64_t>{4, 8};
  testing::LayerHarness h(shape, layer, flatten);
  ASSERT_EQ(h.error(), "");
  const std::vector<float> y = h.forward(floats(ref["x"]), floats(want["params"]), /*keep=*/true);
  test::expectCloseToTorch(y, want["y"], name + " y");
  const auto g = h.backward(floats(ref["r"]));
  test::expectCloseToTorch(g.dx, want["dx"], name + " dx");
  test::expectCloseToTorch(g.dparams, want["dparams"], name + " d(weight, bias)");
}

TEST(LayerNormVsTorch, ForwardAndGradientsMatchPyTorch) {
  ASSERT_TRUE(reference()["cases"].is_object());
  for (const char* name : {"default", "epsilon_0.5"}) {
    SCOPED_TRACE(name);
    checkAgainstTorch(name, false);
  }
}

TEST(LayerNormVsTorch, AfterAChannelsLastFlattenTheParametersFollowTheFeatures) { checkAgainstTorch("default", true); }

TEST(LayerNormVsTorch, ModelKeepsWhatPyTorchsAutogradSaved) {
  const json& saved = reference()["cases"]["default"]["saved"];
  EXPECT_EQ(saved["node"], "NativeLayerNormBackward0");
  testing::LayerHarness h({4, 8}, {{"name", "n"}, {"kind", "layernorm"}});
  ASSERT_EQ(h.error(), "");
  EXPECT_EQ(h.numbers().needsInput, saved["input_is_x"].get<bool>());
  EXPECT_EQ(h.numbers().needsOutput, saved["keeps_output"].get<bool>());
  EXPECT_EQ(h.numbers().extraBytes, saved["statistics_bytes"].get<std::uint64_t>());
  EXPECT_EQ(saved["mean"]["dtype"], "float32");
  EXPECT_EQ(saved["rstd"]["dtype"], "float32");
}

// conv -> flatten -> linear -> layernorm -> gelu -> linear -> silu -> layernorm -> linear: every
// planner's plan measured op by op against the simulator, gradients equal to store-all's.
TEST(LayerNormRun, MeasuredFootprintEqualsPredictionUnderEveryPlan) {
  const json j = chainWith({{{"name", "conv"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 3}, {"padding", 1}},
                            {{"name", "flat"}, {"kind", "flatten"}},
                            {{"name", "fc1"}, {"kind", "linear"}, {"out_features", 24}},
                            {{"name", "norm1"}, {"kind", "layernorm"}},
                            {{"name", "act1"}, {"kind", "gelu"}},
                            {{"name", "fc2"}, {"kind", "linear"}, {"out_features", 16}},
                            {{"name", "act2"}, {"kind", "silu"}},
                            {{"name", "norm2"}, {"kind", "layernorm"}, {"epsilon", 0.01}},
                            {{"name", "fc3"}, {"kind", "linear"}, {"out_features", 5}}},
                           {2, 3, 6, 6});
  testing::expectEveryPlanOnCpu(parseChain(j.dump(), "layernorm-mlp"), 13);
}

// A layernorm right after a channels-last flatten as layer 2, and one as layer 1 (no input gradient).
TEST(LayerNormRun, FirstLayerAndAfterFlattenRunAsPredicted) {
  for (const json& j : {chainWith({{{"name", "norm"}, {"kind", "layernorm"}},
                                   {{"name", "fc"}, {"kind", "linear"}, {"out_features", 3}}},
                                  {3, 10}),
                        chainWith({{{"name", "conv"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 1}},
                                   {{"name", "flat"}, {"kind", "flatten"}},
                                   {{"name", "norm"}, {"kind", "layernorm"}},
                                   {{"name", "fc"}, {"kind", "linear"}, {"out_features", 3}}},
                                  {2, 3, 4, 4})}) {
    testing::expectEveryPlanOnCpu(parseChain(j.dump(), "ln"), 17);
  }
}

}  // namespace
}  // namespace remat
