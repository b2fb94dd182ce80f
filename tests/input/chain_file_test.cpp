// Chain files: round trips, and one test per kind of malformed input. Every rejection names the
// file, the layer (index and name) and the field; nothing is ever half-loaded.
#include "remat/input/chain_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "golden.hpp"
#include "remat/model/operators.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json abstractChain() {
  return json::parse(R"({"format": "remat-chain/1", "name": "toy", "input": {"bytes": 4096},
    "layers": [{"name": "l1", "kind": "abstract", "out_bytes": 1024},
               {"name": "l2", "kind": "abstract", "out_bytes": 2048, "needs_input": false, "needs_output": true,
                "extra_bytes": 16, "fwd_workspace_bytes": 32, "bwd_workspace_bytes": 64, "param_bytes": 128,
                "fwd_cost": 1.5, "bwd_cost": 3.0}]})");
}

// Expects a rejection whose message contains every needle.
void expectRejected(const json& j, std::initializer_list<std::string> needles) {
  auto chain = parseChain(j.dump(), "bad.json");
  ASSERT_FALSE(chain.isOk()) << "accepted: " << j.dump();
  EXPECT_EQ(chain.status().code(), ErrorCode::InvalidInput);
  for (const auto& needle : needles)
    EXPECT_NE(chain.status().message().find(needle), std::string::npos)
        << "message '" << chain.status().message() << "' lacks '" << needle << "'";
}

TEST(ChainFile, AbstractFieldsAndDefaults) {
  auto chain = parseChain(abstractChain().dump(), "toy.json");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  ASSERT_EQ(chain->size(), 2u);
  EXPECT_EQ(chain->inputBytes, 4096u);
  const LayerNumbers& l1 = chain->at(1);
  EXPECT_EQ(l1.outBytes, 1024u);
  EXPECT_TRUE(l1.needsInput);
  EXPECT_FALSE(l1.needsOutput);
  EXPECT_EQ(l1.extraBytes, 0u);
  EXPECT_DOUBLE_EQ(l1.fwdCost, 1.0);
  EXPECT_DOUBLE_EQ(l1.bwdCost, 2.0);
  const LayerNumbers& l2 = chain->at(2);
  EXPECT_FALSE(l2.needsInput);
  EXPECT_TRUE(l2.needsOutput);
  EXPECT_EQ(l2.extraBytes, 16u);
  EXPECT_EQ(l2.fwdWorkspaceBytes, 32u);
  EXPECT_EQ(l2.bwdWorkspaceBytes, 64u);
  EXPECT_EQ(l2.paramBytes, 128u);
  EXPECT_DOUBLE_EQ(l2.fwdCost, 1.5);
  EXPECT_EQ(chain->staticBytes(), 4096u + 256u);
}

TEST(ChainFile, SaveLoadRoundTripOfEveryGoldenChain) {
  const fs::path folder = fs::temp_directory_path() / "remat_chain_file_test";
  fs::create_directories(folder);
  for (const auto& example : testing::goldenExamples()) {
    auto spec = chainSpecFromJson(example["chain"], "golden.json");
    ASSERT_TRUE(spec.isOk()) << spec.status().message();
    const std::string path = (folder / (spec->name + ".json")).string();
    ASSERT_TRUE(saveChainFile(*spec, path).isOk());
    auto loaded = loadChainFile(path);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
    EXPECT_EQ(chainSpecToJson(loaded->spec), chainSpecToJson(*spec));
    EXPECT_EQ(chainSpecToJson(loaded->spec)["layers"], example["chain"]["layers"]);
  }
  // No temporary files are left behind.
  for (const auto& entry : fs::directory_iterator(folder))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  fs::remove_all(folder);
}

TEST(ChainFile, RealKindsRoundTrip) {
  const json j = json::parse(R"({"format": "remat-chain/1", "name": "real",
    "input": {"shape": [2, 3, 8, 8], "dtype": "float16"},
    "layers": [{"name": "c", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1, "bias": false},
               {"name": "p", "kind": "maxpool", "kernel": 2, "ceil_mode": true},
               {"name": "f", "kind": "flatten"},
               {"name": "d", "kind": "dropout", "p": 0.25},
               {"name": "fc", "kind": "linear", "out_features": 10,
                "fwd_workspace_bytes": 7, "bwd_workspace_bytes": 9, "fwd_cost": 0.5, "bwd_cost": 1.0}]})");
  auto spec = chainSpecFromJson(j, "real.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->input.dtype, DType::Float16);
  EXPECT_EQ(spec->input.bytes, 2u * 3 * 8 * 8 * 2);
  EXPECT_EQ(spec->layers[1].stride, 2);  // pools default to stride = kernel, like PyTorch
  EXPECT_TRUE(spec->layers[4].hasMeasuredWorkspace);
  auto again = parseChainSpec(chainSpecToText(*spec), "again.json");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(chainSpecToJson(*again), chainSpecToJson(*spec));
}

// Squeeze-and-Excitation's inner ops: global_avgpool (no fields: pooled to 1x1) and mul with its two
// inputs, written back as read; a field on them is refused.
TEST(ChainFile, SqueezeExcitationRoundTrip) {
  const json j = json::parse(R"({"format": "remat-chain/1", "name": "se",
    "input": {"shape": [2, 8, 5, 5]},
    "layers": [{"name": "se", "kind": "block", "ops": [
                 {"name": "avgpool", "kind": "global_avgpool"},
                 {"name": "fc1", "kind": "conv2d", "out_channels": 2, "kernel": 1},
                 {"name": "activation", "kind": "silu"},
                 {"name": "fc2", "kind": "conv2d", "out_channels": 8, "kernel": 1},
                 {"name": "scale_activation", "kind": "sigmoid"},
                 {"name": "mul", "kind": "mul", "inputs": [5, 0]}]}]})");
  auto spec = chainSpecFromJson(j, "se.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->layers[0].ops[0].kind, BlockOpKind::GlobalAvgPool);
  EXPECT_EQ(spec->layers[0].ops[5].kind, BlockOpKind::Mul);
  const json written = chainSpecToJson(*spec);
  EXPECT_EQ(written["layers"][0]["ops"][0], json::parse(R"({"name": "avgpool", "kind": "global_avgpool"})"));
  EXPECT_EQ(written["layers"][0]["ops"][5]["inputs"], json({5, 0}));
  auto again = parseChainSpec(chainSpecToText(*spec), "again.json");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(chainSpecToJson(*again), written);
  auto chain = buildChain(*again);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->paramCount(), 8u * 2 + 2 + 2 * 8 + 8);  // fc1, fc2 with their biases
  json bad = j;
  bad["layers"][0]["ops"][0]["output_height"] = 2;
  expectRejected(bad, {"output_height"});
  bad = j;
  bad["layers"][0]["ops"][5]["inputs"] = json({5});
  expectRejected(bad, {"inner op 5 ('mul', mul)", "mul takes two inputs, it has 1"});
}

// ShuffleNetV2's inner ops: slice with its begin and out_channels, channel_shuffle with its groups,
// written back as read; a missing or out-of-range field, or a conv's field on them, is refused.
TEST(ChainFile, ChannelSplitAndShuffleRoundTrip) {
  const json j = json::parse(R"({"format": "remat-chain/1", "name": "shuffle",
    "input": {"shape": [2, 8, 4, 4]},
    "layers": [{"name": "b", "kind": "block", "ops": [
                 {"name": "slice", "kind": "slice", "begin": 0, "out_channels": 4},
                 {"name": "slice_1", "kind": "slice", "begin": 4, "out_channels": 4, "inputs": [0]},
                 {"name": "concat", "kind": "concat", "inputs": [2, 1]},
                 {"name": "channel_shuffle", "kind": "channel_shuffle", "groups": 2}]}]})");
  auto spec = chainSpecFromJson(j, "shuffle.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->layers[0].ops[1].layer.channelBegin, 4);
  EXPECT_EQ(spec->layers[0].ops[3].layer.groups, 2);
  const json written = chainSpecToJson(*spec);
  EXPECT_EQ(written["layers"][0]["ops"], j["layers"][0]["ops"]);
  auto again = parseChainSpec(chainSpecToText(*spec), "again.json");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(chainSpecToJson(*again), written);
  ASSERT_TRUE(buildChain(*again).isOk());
  json bad = j;
  bad["layers"][0]["ops"][0].erase("begin");
  expectRejected(bad, {"inner op 0", "begin"});
  bad = j;
  bad["layers"][0]["ops"][1]["begin"] = -1;
  expectRejected(bad, {"inner op 1", "begin"});
  bad = j;
  bad["layers"][0]["ops"][3]["groups"] = 0;
  expectRejected(bad, {"inner op 3", "groups"});
  bad = j;
  bad["layers"][0]["ops"][3]["kernel"] = 3;
  expectRejected(bad, {"inner op 3", "kernel"});
}

// The pointwise activations as chain layers and as inner ops: spelled as operators.cpp says, no
// fields of their own, the measured numbers of `remat profile` kept.
TEST(ChainFile, ActivationsRoundTrip) {
  const json j = json::parse(R"({"format": "remat-chain/1", "name": "acts",
    "input": {"shape": [2, 4, 6, 6]},
    "layers": [{"name": "s", "kind": "sigmoid"}, {"name": "t", "kind": "tanh"}, {"name": "si", "kind": "silu"},
               {"name": "hs", "kind": "hardswish", "fwd_cost": 0.25, "bwd_cost": 0.5},
               {"name": "hsig", "kind": "hardsigmoid"}, {"name": "g", "kind": "gelu"},
               {"name": "b", "kind": "block", "ops": [
                 {"name": "a", "kind": "silu"}, {"name": "b", "kind": "sigmoid", "inputs": [0]},
                 {"name": "m", "kind": "add", "inputs": [1, 2]}, {"name": "c", "kind": "tanh"},
                 {"name": "d", "kind": "hardswish"}, {"name": "e", "kind": "hardsigmoid"},
                 {"name": "f", "kind": "gelu"}]}]})");
  auto spec = chainSpecFromJson(j, "acts.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const LayerKind kinds[] = {LayerKind::Sigmoid,   LayerKind::Tanh,        LayerKind::Silu,
                             LayerKind::HardSwish, LayerKind::HardSigmoid, LayerKind::Gelu};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(spec->layers[i].kind, kinds[i]);
  EXPECT_TRUE(spec->layers[3].hasMeasuredCost);
  EXPECT_EQ(spec->layers[6].ops[0].kind, BlockOpKind::Silu);
  EXPECT_EQ(spec->layers[6].ops[6].kind, BlockOpKind::Gelu);
  const json written = chainSpecToJson(*spec);
  EXPECT_EQ(written["layers"][5], json::parse(R"({"name": "g", "kind": "gelu"})"));
  auto again = parseChainSpec(chainSpecToText(*spec), "again.json");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(chainSpecToJson(*again), written);
  auto chain = buildChain(*again);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  // sigmoid and tanh keep their output, the others their input (PyTorch's derivatives.yaml).
  EXPECT_TRUE(chain->layers[0].numbers.needsOutput && !chain->layers[0].numbers.needsInput);
  EXPECT_TRUE(chain->layers[1].numbers.needsOutput && !chain->layers[1].numbers.needsInput);
  for (std::size_t i = 2; i < 6; ++i)
    EXPECT_TRUE(chain->layers[i].numbers.needsInput && !chain->layers[i].numbers.needsOutput) << i;
  json bad = j;
  bad["layers"][0]["alpha"] = 1.0;
  expectRejected(bad, {"layer 1 ('s')", "alpha", "not a field of sigmoid layers"});
}

// Every field the operator table describes is read with its bounds: a value below its minimum (or a
// real at its maximum), or of the wrong type, is refused with the layer and the field named.
TEST(ChainFileErrors, EveryDescribedFieldIsBounded) {
  std::size_t checked = 0;
  for (const OperatorInfo& info : operatorTable()) {
    for (const FieldInfo& f : info.fields) {
      if (f.integer == nullptr && f.flag == nullptr && f.real == nullptr) continue;  // abstract's, block's
      SCOPED_TRACE(std::string(info.name) + "." + std::string(f.name));
      json layer = {{"name", "x"}, {"kind", std::string(info.name)}};
      for (const FieldInfo& g : info.fields)  // the required ones, valid
        if (g.required) layer[std::string(g.name)] = g.real != nullptr ? json(0.0) : json(2);  // a transformer's p
      const std::string field(f.name);
      const json chain = {{"format", "remat-chain/1"}, {"input", {{"shape", {2, 3, 8, 8}}}}, {"layers", {layer}}};
      json bad = chain;
      if (f.integer != nullptr) bad["layers"][0][field] = f.minimum - 1;
      if (f.flag != nullptr) bad["layers"][0][field] = 1;
      if (f.real != nullptr) bad["layers"][0][field] = f.realMaximum;
      expectRejected(bad, {"layer 1 ('x')", field});
      bad["layers"][0][field] = "big";
      expectRejected(bad, {"layer 1 ('x')", field});
      ++checked;
    }
  }
  EXPECT_GE(checked, 20u);
}

json blockChain() {
  return json::parse(R"({"format": "remat-chain/1", "name": "fire",
    "input": {"shape": [2, 4, 6, 6]},
    "layers": [{"name": "features.3", "kind": "block", "ops": [
                 {"name": "expand1x1", "kind": "conv2d", "out_channels": 4, "kernel": 1},
                 {"name": "expand1x1_activation", "kind": "relu"},
                 {"name": "expand3x3", "kind": "conv2d", "inputs": [0], "out_channels": 4, "kernel": 3, "padding": 1},
                 {"name": "expand3x3_activation", "kind": "relu"},
                 {"name": "concat", "kind": "concat", "inputs": [2, 4]}]}]})");
}

// A block's inner ops: inputs default to the tensor just before, and are written only otherwise.
TEST(ChainFile, BlockRoundTrip) {
  auto spec = chainSpecFromJson(blockChain(), "fire.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const LayerSpec& block = spec->layers[0];
  ASSERT_EQ(block.ops.size(), 5u);
  EXPECT_EQ(block.ops[1].inputs, (std::vector<std::size_t>{1}));
  EXPECT_EQ(block.ops[2].inputs, (std::vector<std::size_t>{0}));
  EXPECT_EQ(block.ops[4].kind, BlockOpKind::Concat);
  EXPECT_TRUE(block.ops[0].layer.bias);
  const json written = chainSpecToJson(*spec);
  EXPECT_FALSE(written["layers"][0]["ops"][1].contains("inputs"));
  EXPECT_EQ(written["layers"][0]["ops"][4]["inputs"], json({2, 4}));
  auto again = parseChainSpec(chainSpecToText(*spec), "again.json");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(chainSpecToJson(*again), written);
  auto chain = buildChain(*again);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->layers[0].outputShape, (Shape{2, 8, 6, 6}));
}

TEST(ChainFileErrors, BlockOps) {
  json j = blockChain();
  j["layers"][0].erase("ops");
  expectRejected(j, {"layer 1 ('features.3')", "ops", "missing"});
  j["layers"][0]["ops"] = json::array();
  expectRejected(j, {"ops", "empty"});
  j = blockChain();
  j["layers"][0]["ops"][4]["inputs"] = {2, 5};
  expectRejected(j, {"layer 1 ('features.3'), inner op 4 ('concat')", "inputs", "lists number '5'", "up to 4"});
  j["layers"][0]["ops"][4]["inputs"] = {2, -1};
  expectRejected(j, {"inner op 4", "lists number '-1'"});
  j["layers"][0]["ops"][4]["inputs"] = json::array();
  expectRejected(j, {"inner op 4", "non-empty array"});
  j = blockChain();
  j["layers"][0]["ops"][1]["kind"] = "softplus";
  expectRejected(j, {"inner op 1", "unknown inner op kind 'softplus'",
                     "conv2d, batchnorm, relu, relu6, add, concat, sigmoid, tanh, silu, hardswish, hardsigmoid, gelu"});
  j = blockChain();
  j["layers"][0]["ops"][1]["kind"] = "gelu";
  j["layers"][0]["ops"][1]["approximate"] = "tanh";
  expectRejected(j, {"inner op 1 ('expand1x1_activation')", "approximate", "not a field of gelu inner ops"});
  j = blockChain();
  j["layers"][0]["ops"][1]["kernel"] = 3;
  expectRejected(j, {"inner op 1 ('expand1x1_activation')", "kernel", "not a field of relu inner ops"});
  j = blockChain();
  j["layers"][0]["ops"][4]["inputs"] = {3, 4};
  expectRejected(j,
                 {"features.3", "the output of inner op 1 ('features.3.expand1x1_activation') is read by no later op"});
}

TEST(ChainFileErrors, NotJson) { expectRejected(json("x"), {"bad.json"}); }

TEST(ChainFileErrors, BrokenJsonText) {
  auto chain = parseChain("{\"format\": \"remat-chain/1\", \"layers\": [", "broken.json");
  ASSERT_FALSE(chain.isOk());
  // Placed at the end of the text, where the JSON stops (issue 15: every message has its place).
  EXPECT_NE(chain.status().message().find("broken.json:1:40: not valid JSON"), std::string::npos)
      << chain.status().message();
}

TEST(ChainFileErrors, WrongFormat) {
  json j = abstractChain();
  j["format"] = "remat-chain/2";
  expectRejected(j, {"bad.json", "format", "remat-chain/1"});
  j.erase("format");
  expectRejected(j, {"format", "missing"});
}

TEST(ChainFileErrors, UnknownTopLevelField) {
  json j = abstractChain();
  j["lauers"] = json::array();
  expectRejected(j, {"lauers", "not a field"});
}

TEST(ChainFileErrors, MissingOrEmptyLayers) {
  json j = abstractChain();
  j["layers"] = json::array();
  expectRejected(j, {"layers", "empty"});
  j.erase("layers");
  expectRejected(j, {"layers", "missing"});
  j["layers"] = json::object();
  expectRejected(j, {"layers", "array"});
}

TEST(ChainFileErrors, MissingRequiredLayerField) {
  json j = abstractChain();
  j["layers"][1].erase("out_bytes");
  expectRejected(j, {"bad.json", "layer 2", "'l2'", "out_bytes", "missing"});
}

TEST(ChainFileErrors, UnknownLayerField) {
  json j = abstractChain();
  j["layers"][0]["kernel"] = 3;
  expectRejected(j, {"layer 1", "'l1'", "kernel", "not a field of abstract"});
}

TEST(ChainFileErrors, UnknownKind) {
  json j = abstractChain();
  j["layers"][1]["kind"] = "transformer";
  expectRejected(j, {"layer 2", "kind", "transformer"});
}

TEST(ChainFileErrors, WrongTypes) {
  json j = abstractChain();
  j["layers"][0]["out_bytes"] = "1024";
  expectRejected(j, {"layer 1", "out_bytes", "integer"});
  j = abstractChain();
  j["layers"][0]["needs_input"] = 1;
  expectRejected(j, {"needs_input", "true or false"});
  j = abstractChain();
  j["layers"][0]["name"] = 5;
  expectRejected(j, {"layer 1", "name", "string"});
  j = abstractChain();
  j["layers"][0] = json::array();
  expectRejected(j, {"layer 1", "object"});
  j = abstractChain();
  j["layers"][0]["out_bytes"] = 10.5;
  expectRejected(j, {"out_bytes", "integer"});
}

TEST(ChainFileErrors, NegativeSizes) {
  json j = abstractChain();
  j["layers"][1]["extra_bytes"] = -16;
  expectRejected(j, {"layer 2", "'l2'", "extra_bytes", "non-negative"});
  j = abstractChain();
  j["input"]["bytes"] = -1;
  expectRejected(j, {"input", "bytes"});
}

TEST(ChainFileErrors, SizesThatOverflow64Bits) {
  auto chain = parseChain(R"({"format": "remat-chain/1", "name": "big", "input": {"bytes": 1},
    "layers": [{"name": "huge", "kind": "abstract", "out_bytes": 18446744073709551616}]})",
                          "big.json");
  ASSERT_FALSE(chain.isOk());
  EXPECT_NE(chain.status().message().find("out_bytes"), std::string::npos) << chain.status().message();
  EXPECT_NE(chain.status().message().find("64 bits"), std::string::npos) << chain.status().message();
  // Each value fits, but their sum does not.
  json j = abstractChain();
  j["layers"][0]["out_bytes"] = 18446744073709551615ull;
  j["layers"][1]["out_bytes"] = 18446744073709551615ull;
  expectRejected(j, {"2^64"});
}

TEST(ChainFileErrors, ImpossibleShapes) {
  const json j = json::parse(R"({"format": "remat-chain/1", "name": "s", "input": {"shape": [1, 3, 4, 4]},
    "layers": [{"name": "big", "kind": "conv2d", "out_channels": 4, "kernel": 7}]})");
  expectRejected(j, {"layer 1", "'big'"});
  json zero = j;
  zero["input"]["shape"][2] = 0;
  expectRejected(zero, {"input", "shape", "positive"});
}

TEST(ChainFileErrors, RealKindWithoutShape) {
  json j = abstractChain();
  j["layers"][1] = json::parse(R"({"name": "r", "kind": "relu"})");
  expectRejected(j, {"layer 2", "'r'", "input shape"});
}

TEST(ChainFileErrors, InconsistentInput) {
  json j = json::parse(R"({"format": "remat-chain/1", "input": {"shape": [2, 2], "bytes": 3},
    "layers": [{"kind": "relu"}]})");
  expectRejected(j, {"input", "bytes"});
  j["input"] = json::parse(R"({"dtype": "float64", "shape": [2, 2]})");
  expectRejected(j, {"dtype", "float64"});
  j["input"] = json::object();
  expectRejected(j, {"input", "shape"});
}

TEST(ChainFileErrors, MissingFileIsAnIoError) {
  auto chain = loadChainFile("/nonexistent/folder/chain.json");
  ASSERT_FALSE(chain.isOk());
  EXPECT_EQ(chain.status().code(), ErrorCode::IoError);
  EXPECT_NE(chain.status().message().find("/nonexistent/folder/chain.json"), std::string::npos);
}

TEST(ChainFile, AMillionLayersLoad) {
  std::string text = R"({"format": "remat-chain/1", "name": "long", "input": {"bytes": 8}, "layers": [)";
  const std::size_t n = 1000000;
  text.reserve(n * 48);
  for (std::size_t i = 0; i < n; ++i) {
    text += R"({"kind": "abstract", "out_bytes": )" + std::to_string(1024 + i % 7) + "}";
    text += i + 1 < n ? "," : "]}";
  }
  auto chain = parseChain(text, "long.json");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->size(), n);
  EXPECT_EQ(chain->layers.back().name, "layer999999");
}

TEST(ChainFile, WriteFailureLeavesNothingBehind) {
  const Status status = saveChainFile(ChainSpec{}, "/nonexistent/folder/out.json");
  EXPECT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::IoError);
  EXPECT_FALSE(fs::exists("/nonexistent/folder/out.json"));
}

}  // namespace
}  // namespace remat
