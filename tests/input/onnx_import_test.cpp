// The ONNX importer on models built here with ONNX's own classes: every supported operator in the
// forms of every opset from 9 to 20 (attributes that became inputs, outputs that were added), with
// and without weights in the file, a fixed or a symbolic batch, against hand-written chains; and
// every error the importer reports, each naming the file and the node.
#include "remat/input/onnx/onnx_import.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "onnx_builder.hpp"
#include "onnx_errors.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/block.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::expectContains;
using testing::importError;
using testing::OnnxAttr;
using testing::OnnxBuilder;
using testing::withMiddle;
using Ints = std::vector<std::int64_t>;

constexpr std::int64_t kOpsets[] = {9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};

// Clip(0, 6): bounds as attributes before opset 11, as constant inputs from 11 on.
std::string clip6(OnnxBuilder& b, std::int64_t opset, const std::string& x, const std::string& module) {
  if (opset < 11) return b.node("Clip", {x}, module, {{"min", 0.0}, {"max", 6.0}});
  return b.node("Clip", {x, b.constantFloat(0.0f), b.constantFloat(6.0f)}, module);
}

// A zero Pad of one on H and W: pads as an attribute before 11, an input from 11, per axis from 18.
std::string pad1(OnnxBuilder& b, std::int64_t opset, const std::string& x, const std::string& module) {
  if (opset < 11) return b.node("Pad", {x}, module, {{"pads", Ints{0, 0, 1, 1, 0, 0, 1, 1}}});
  if (opset < 18) return b.node("Pad", {x, b.constantInts({0, 0, 1, 1, 0, 0, 1, 1})}, module);
  return b.node("Pad", {x, b.constantInts({1, 1, 1, 1}), b.constantFloat(0.0f), b.constantInts({2, 3})}, module);
}

// Training-mode batch norm: five outputs before opset 14 (torch's exports), three with
// training_mode = 1 from 14 on; only the first is used.
std::string batchNorm(OnnxBuilder& b, std::int64_t opset, const std::string& x, const std::string& module,
                      std::int64_t channels) {
  std::vector<std::string> in = {x};
  for (const char* p : {"weight", "bias", "running_mean", "running_var"})
    in.push_back(b.weight(module + "." + p, {channels}));
  const std::string name = OnnxBuilder::scopedName(module, "BatchNormalization");
  std::vector<std::string> outs;
  for (int i = 0; i < (opset < 14 ? 5 : 3); ++i) outs.push_back(name + "_output_" + std::to_string(i));
  if (opset < 14) return b.node("BatchNormalization", in, module, {{"epsilon", 1e-5}}, outs);
  return b.node("BatchNormalization", in, module, {{"epsilon", 1e-5}, {"training_mode", std::int64_t{1}}}, outs);
}

// Dropout in training: the ratio an attribute before 12, then ratio and training_mode inputs.
std::string dropout(OnnxBuilder& b, std::int64_t opset, const std::string& x, const std::string& module, float p) {
  const std::string name = OnnxBuilder::scopedName(module, "Dropout");
  if (opset < 12) return b.node("Dropout", {x}, module, {{"ratio", double(p)}}, {name + "_y", name + "_mask"});
  return b.node("Dropout", {x, b.constantFloat(p), b.constantBool(true)}, module, {}, {name + "_y", name + "_mask"});
}

// torch's x.view(x.size(0), -1): Shape, Gather, Unsqueeze (axes an input from 13), Concat, Reshape.
std::string viewFlatten(OnnxBuilder& b, std::int64_t opset, const std::string& x) {
  const std::string shape = b.node("Shape", {x}, "");
  const std::string n = b.node("Gather", {shape, b.constantInts({0}, true)}, "", {{"axis", std::int64_t{0}}});
  const std::string u = opset < 13 ? b.node("Unsqueeze", {n}, "", {{"axes", Ints{0}}})
                                   : b.node("Unsqueeze", {n, b.constantInts({0})}, "");
  const std::string target = b.node("Concat", {u, b.constantInts({-1})}, "", {{"axis", std::int64_t{0}}});
  return b.node("Reshape", {x, target}, "");
}

enum class Head { GlobalPoolFlatten, ReduceMean, ViewReshape };

// Every operator: conv (bias, explicit pads), batch norm, relu, clip, zero pad folded into a conv,
// max pool, a two-branch piece (1x1 and SAME 3x3 convs, add, relu, concat with the skip), average
// pool, then the head, gemm, relu, dropout and a matmul with its bias add.
std::string everyOperator(std::int64_t opset, bool weightsInFile, Head head, std::int64_t batch = 2) {
  OnnxBuilder b(opset, weightsInFile);
  std::string t = b.input("x", {batch, 3, 8, 8});
  // Eval-mode exports share equal weights through Identity nodes.
  const std::string bias = b.node("Identity", {b.weight("features.0.bias", {8})}, "");
  t = b.node("Conv", {t, b.weight("features.0.weight", {8, 3, 3, 3}), bias}, "features.0",
             {{"kernel_shape", Ints{3, 3}},
              {"pads", Ints{1, 1, 1, 1}},
              {"strides", Ints{1, 1}},
              {"dilations", Ints{1, 1}},
              {"group", std::int64_t{1}}});
  t = batchNorm(b, opset, t, "features.1", 8);
  t = b.node("Relu", {t}, "features.2");
  t = clip6(b, opset, t, "features.3");
  t = pad1(b, opset, t, "features.4");
  t = b.node("Conv", {t, b.weight("features.4.weight", {8, 8, 3, 3})}, "features.4");
  const std::string skip =
      b.node("MaxPool", {t}, "features.5", {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  const std::string a =
      b.node("Conv", {skip, b.weight("features.6.branch_a.weight", {8, 8, 1, 1})}, "features.6.branch_a");
  const std::string c = b.node("Conv", {skip, b.weight("features.6.branch_b.weight", {8, 8, 3, 3})},
                               "features.6.branch_b", {{"auto_pad", std::string("SAME_UPPER")}});
  t = b.node("Add", {a, c}, "features.6");
  t = b.node("Relu", {t}, "features.6.relu");
  t = b.node("Concat", {t, skip}, "features.6", {{"axis", std::int64_t{1}}});
  t = b.node("AveragePool", {t}, "features.7", {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  if (head == Head::ReduceMean) {
    t = opset < 18 ? b.node("ReduceMean", {t}, "", {{"axes", Ints{2, 3}}, {"keepdims", std::int64_t{0}}})
                   : b.node("ReduceMean", {t, b.constantInts({-2, -1})}, "", {{"keepdims", std::int64_t{0}}});
  } else {
    t = b.node("GlobalAveragePool", {t}, "avgpool");
    t = head == Head::ViewReshape ? viewFlatten(b, opset, t) : b.node("Flatten", {t}, "", {{"axis", std::int64_t{1}}});
  }
  t = b.node("Gemm", {t, b.weight("classifier.0.weight", {10, 16}), b.weight("classifier.0.bias", {10})},
             "classifier.0", {{"alpha", 1.0}, {"beta", 1.0}, {"transB", std::int64_t{1}}});
  t = b.node("Relu", {t}, "classifier.1");
  t = dropout(b, opset, t, "classifier.2", 0.25f);
  t = b.node("Identity", {t}, "");
  t = b.node("MatMul", {t, b.weight("classifier.3.weight", {10, 5})}, "classifier.3");
  t = b.node("Add", {t, b.weight("classifier.3.bias", {5})}, "classifier.3");
  b.output(t);
  return b.bytes();
}

// What everyOperator must import as, written by hand.
json expectedEveryOperator(Head head, std::int64_t batch = 2) {
  const json pool = head == Head::ReduceMean ? json{{"name", "reducemean"}, {"kind", "adaptive_avgpool"}}
                                             : json{{"name", "avgpool"}, {"kind", "adaptive_avgpool"}};
  const json flatten = head == Head::ReduceMean    ? json{{"name", "reducemean.flatten"}, {"kind", "flatten"}}
                       : head == Head::ViewReshape ? json{{"name", "reshape"}, {"kind", "flatten"}}
                                                   : json{{"name", "flatten"}, {"kind", "flatten"}};
  const json block = {{"name", "features.6"},
                      {"kind", "block"},
                      {"ops",
                       {{{"name", "branch_a"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 1}, {"bias", false}},
                        {{"name", "branch_b"},
                         {"kind", "conv2d"},
                         {"inputs", {0}},
                         {"out_channels", 8},
                         {"kernel", 3},
                         {"padding", 1},
                         {"bias", false}},
                        {{"name", "add"}, {"kind", "add"}, {"inputs", {1, 2}}},
                        {{"name", "relu"}, {"kind", "relu"}},
                        {{"name", "concat"}, {"kind", "concat"}, {"inputs", {4, 0}}}}}};
  return {{"format", "remat-chain/1"},
          {"name", "every"},
          {"input", {{"shape", {batch, 3, 8, 8}}, {"dtype", "float32"}}},
          {"layers",
           {{{"name", "features.0"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 3}, {"padding", 1}},
            {{"name", "features.1"}, {"kind", "batchnorm"}},
            {{"name", "features.2"}, {"kind", "relu"}},
            {{"name", "features.3"}, {"kind", "relu6"}},
            {{"name", "features.4"},
             {"kind", "conv2d"},
             {"out_channels", 8},
             {"kernel", 3},
             {"padding", 1},
             {"bias", false}},
            {{"name", "features.5"}, {"kind", "maxpool"}, {"kernel", 2}, {"stride", 2}},
            block,
            {{"name", "features.7"}, {"kind", "avgpool"}, {"kernel", 2}, {"stride", 2}},
            pool,
            flatten,
            {{"name", "classifier.0"}, {"kind", "linear"}, {"out_features", 10}},
            {{"name", "classifier.1"}, {"kind", "relu"}},
            {{"name", "classifier.2"}, {"kind", "dropout"}, {"p", 0.25}},
            {{"name", "classifier.3"}, {"kind", "linear"}, {"out_features", 5}}}}};
}

Result<OnnxImport> importBytes(const std::string& bytes, std::int64_t batch = 0) {
  return importOnnxModel(bytes, "every.onnx", OnnxImportOptions{.batch = batch});
}

// The imported spec equals the expected one field for field (both written out the same way), and
// its chain's numbers are the expected chain's, layer for layer.
void expectChain(const OnnxImport& imported, const json& expected) {
  auto want = chainSpecFromJson(expected, "expected.json");
  ASSERT_TRUE(want.isOk()) << want.status().message().substr(0, 400);
  EXPECT_EQ(chainSpecToJson(imported.spec).dump(1), chainSpecToJson(*want).dump(1));
  auto got = buildChain(imported.spec), wanted = buildChain(*want);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  ASSERT_TRUE(wanted.isOk()) << wanted.status().message();
  ASSERT_EQ(got->size(), wanted->size());
  for (std::size_t l = 1; l <= got->size(); ++l) EXPECT_EQ(got->at(l), wanted->at(l)) << "layer " << l;
  EXPECT_EQ(imported.summary.paramCount, wanted->paramCount());
}

class EveryOpset : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(EveryOpset, EveryOperatorImportsAsTheHandWrittenChain) {
  const std::int64_t opset = GetParam();
  for (Head head : {Head::GlobalPoolFlatten, Head::ReduceMean, Head::ViewReshape}) {
    for (bool weights : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "opset " << opset << " head " << int(head) << " weights " << weights);
      auto imported = importBytes(everyOperator(opset, weights, head));
      ASSERT_TRUE(imported.isOk()) << imported.status().message();
      expectChain(*imported, expectedEveryOperator(head));
      EXPECT_EQ(imported->summary.opset, opset);
      EXPECT_EQ(imported->summary.weightsInFile, weights);
      EXPECT_EQ(imported->summary.layers, 13u);
      EXPECT_EQ(imported->summary.blocks, 1u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Opsets9To20, EveryOpset, ::testing::ValuesIn(kOpsets));

TEST(OnnxImport, ParameterCountIsTheLayersOwn) {
  auto imported = importBytes(everyOperator(13, false, Head::GlobalPoolFlatten));
  ASSERT_TRUE(imported.isOk()) << imported.status().message();
  // conv 8*3*9+8, bn 2*8, conv 8*8*9, block convs 8*8 + 8*8*9, gemm 16*10+10, matmul 10*5+5
  EXPECT_EQ(imported->summary.paramCount, 224u + 16 + 576 + 64 + 576 + 170 + 55);
  EXPECT_EQ(imported->summary.folded, (std::vector<std::pair<std::string, std::size_t>>{
                                          {"Add", 1}, {"Constant", 5}, {"Flatten", 1}, {"Pad", 1}}));
  EXPECT_EQ(imported->summary.dropped, (std::vector<std::pair<std::string, std::size_t>>{{"Identity", 2}}));
}

TEST(OnnxImport, BatchIsFixedSymbolicOrOverridden) {
  auto fixed = importBytes(everyOperator(13, false, Head::GlobalPoolFlatten, 2));
  ASSERT_TRUE(fixed.isOk()) << fixed.status().message();
  EXPECT_EQ(fixed->spec.input.shape, (Shape{2, 3, 8, 8}));
  EXPECT_EQ(fixed->summary.batch, "2 (fixed in the model)");
  auto overridden = importBytes(everyOperator(13, false, Head::GlobalPoolFlatten, 2), 5);
  ASSERT_TRUE(overridden.isOk()) << overridden.status().message();
  expectChain(*overridden, expectedEveryOperator(Head::GlobalPoolFlatten, 5));
  EXPECT_EQ(overridden->summary.batch, "5 (--batch; the model fixes 2)");
  for (Head head : {Head::GlobalPoolFlatten, Head::ReduceMean, Head::ViewReshape}) {
    auto symbolic = importBytes(everyOperator(17, false, head, -1), 7);
    ASSERT_TRUE(symbolic.isOk()) << symbolic.status().message();
    expectChain(*symbolic, expectedEveryOperator(head, 7));
    EXPECT_EQ(symbolic->summary.batch, "7 (--batch, for the symbolic dimension 'batch')");
  }
}

// A ResNet stem and two torchvision BasicBlocks (the second with a downsample), as torch names
// them: the blocks come out as basic_block layers, exactly the zoo's.
std::string miniResnet(std::int64_t opset) {
  OnnxBuilder b(opset);
  std::string t = b.input("x", {-1, 3, 16, 16});
  t = b.node("Conv", {t, b.weight("conv1.weight", {8, 3, 3, 3})}, "conv1", {{"pads", Ints{1, 1, 1, 1}}});
  t = batchNorm(b, opset, t, "bn1", 8);
  t = b.node("Relu", {t}, "relu");
  auto basic = [&](const std::string& m, std::string in, std::int64_t cin, std::int64_t cout, std::int64_t stride) {
    std::string u = b.node("Conv", {in, b.weight(m + ".conv1.weight", {cout, cin, 3, 3})}, m + ".conv1",
                           {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{stride, stride}}});
    u = batchNorm(b, opset, u, m + ".bn1", cout);
    u = b.node("Relu", {u}, m + ".relu");
    u = b.node("Conv", {u, b.weight(m + ".conv2.weight", {cout, cout, 3, 3})}, m + ".conv2",
               {{"pads", Ints{1, 1, 1, 1}}});
    u = batchNorm(b, opset, u, m + ".bn2", cout);
    if (stride != 1 || cin != cout) {
      in = b.node("Conv", {in, b.weight(m + ".downsample.0.weight", {cout, cin, 1, 1})}, m + ".downsample.0",
                  {{"strides", Ints{stride, stride}}});
      in = batchNorm(b, opset, in, m + ".downsample.1", cout);
    }
    u = b.node("Add", {u, in}, m);
    return b.node("Relu", {u}, m + ".relu_1");
  };
  t = basic("layer1.0", t, 8, 8, 1);
  t = basic("layer2.0", t, 8, 16, 2);
  t = b.node("GlobalAveragePool", {t}, "avgpool");
  t = b.node("Flatten", {t}, "");
  t = b.node("Gemm", {t, b.weight("fc.weight", {4, 16}), b.weight("fc.bias", {4})}, "fc",
             {{"transB", std::int64_t{1}}});
  b.output(t);
  return b.bytes();
}

TEST_P(EveryOpset, ResidualBlocksBecomeTheZoosKinds) {
  auto imported = importOnnxModel(miniResnet(GetParam()), "mini.onnx", {.batch = 4});
  ASSERT_TRUE(imported.isOk()) << imported.status().message();
  const json expected = {
      {"format", "remat-chain/1"},
      {"name", "mini"},
      {"input", {{"shape", {4, 3, 16, 16}}}},
      {"layers",
       {{{"name", "conv1"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 3}, {"padding", 1}, {"bias", false}},
        {{"name", "bn1"}, {"kind", "batchnorm"}},
        {{"name", "relu"}, {"kind", "relu"}},
        {{"name", "layer1.0"}, {"kind", "basic_block"}, {"out_channels", 8}, {"stride", 1}},
        {{"name", "layer2.0"}, {"kind", "basic_block"}, {"out_channels", 16}, {"stride", 2}},
        {{"name", "avgpool"}, {"kind", "adaptive_avgpool"}},
        {{"name", "flatten"}, {"kind", "flatten"}},
        {{"name", "fc"}, {"kind", "linear"}, {"out_features", 4}}}}};
  expectChain(*imported, expected);
}

// After a block, the activation of its module joins it (torchvision's blocks end in their ReLU);
// a layer with parameters of the same module stays a layer, a place for a checkpoint.
TEST(OnnxImport, OnlyTheModulesActivationJoinsTheBlockBeforeIt) {
  OnnxBuilder b;
  const std::string x = b.input("x", {2, 4, 4, 4});
  std::string t = b.node("Conv", {x, b.weight("m.a.weight", {4, 4, 1, 1})}, "m.a");
  t = b.node("Add", {x, t}, "m");
  t = b.node("Relu", {t}, "m.relu");
  b.output(b.node("Conv", {t, b.weight("m.proj.weight", {4, 4, 1, 1})}, "m.proj"));
  auto imported = importOnnxModel(b.bytes(), "tail.onnx");
  ASSERT_TRUE(imported.isOk()) << imported.status().message();
  const json expected = {
      {"format", "remat-chain/1"},
      {"name", "tail"},
      {"input", {{"shape", {2, 4, 4, 4}}}},
      {"layers",
       {{{"name", "m"},
         {"kind", "block"},
         {"ops",
          {{{"name", "a"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 1}, {"bias", false}},
           {{"name", "add"}, {"kind", "add"}, {"inputs", {0, 1}}},
           {{"name", "relu"}, {"kind", "relu"}}}}},
        {{"name", "m.proj"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 1}, {"bias", false}}}}};
  expectChain(*imported, expected);
}

TEST(OnnxImportErrors, NoArticulationPoint) {
  OnnxBuilder b;
  const std::string x = b.input("x", {2, 3, 4, 4});
  const std::string a = b.node("Conv", {x, b.weight("a.weight", {3, 3, 1, 1})}, "a");
  const std::string c = b.node("Relu", {x}, "c");
  b.output(b.node("Add", {a, c}, "m"));
  expectContains(importError(b.bytes()), {"bad.onnx: no articulation point"});
}

TEST(OnnxImportErrors, NotOnnxTruncatedOrEmpty) {
  expectContains(importError("{\"format\": \"remat-chain/1\"}"), {"bad.onnx: not an ONNX model"});
  expectContains(importError("plain text, not a model"), {"bad.onnx: not an ONNX model"});
  expectContains(importError(""), {"bad.onnx: the file is empty"});
  const std::string whole = everyOperator(13, true, Head::GlobalPoolFlatten);
  for (std::size_t cut : {whole.size() / 3, whole.size() / 2, whole.size() - 7})
    expectContains(importError(whole.substr(0, cut)), {"bad.onnx: not an ONNX model, or a truncated one"});
  OnnxBuilder old(8);
  old.output(old.node("Relu", {old.input("x", {2, 3})}, "a"));
  expectContains(importError(old.bytes()), {"opset 8 is older than 9"});
}

TEST(OnnxImport, FilesAreReadAndRecognised) {
  EXPECT_TRUE(isOnnxPath("model.onnx"));
  EXPECT_TRUE(isOnnxPath("/a/b/MODEL.ONNX"));
  EXPECT_FALSE(isOnnxPath("chain.json"));
  EXPECT_FALSE(isOnnxPath("onnx"));
  auto missing = importOnnxFile("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), ErrorCode::IoError);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.onnx: cannot open"), std::string::npos);
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace remat