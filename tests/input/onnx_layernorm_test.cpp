// LayerNorm through the ONNX importer: torch 1.13's training-mode exports of an MLP
// (Linear-LayerNorm-GELU-Linear-SiLU-Linear; tests/data/onnx/layernorm, made by
// scripts/make-layernorm-onnx.py) at opset 13 (LayerNorm decomposed into ReduceMean, Sub, Pow,
// ReduceMean, Add, Sqrt, Div, Mul, Add) and 17 (LayerNormalization), with and without weights, import
// as the ops torch ran with torch's parameter count and run on the CPU under every planner's plan
// with the measured footprint predicted op by op; models built here cover the attributes, weights
// and half-matched patterns the importer refuses, each message naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "executor_helpers.hpp"
#include "onnx_builder.hpp"
#include "onnx_exports.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/onnx/onnx_import.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::OnnxBuilder;
using Ints = std::vector<std::int64_t>;
using Names = std::vector<std::string>;

const std::string kFolder = std::string(REMAT_TEST_DATA_DIR) + "/onnx/layernorm/";

std::vector<json> manifest() { return testing::exportManifest(kFolder + "manifest.json"); }

Chain importedChain(const std::string& path, std::int64_t batch) { return testing::importedExport(path, batch); }

TEST(OnnxLayerNorm, TorchExportsImportAsTheOpsTorchRan) {
  const std::vector<json> models = manifest();
  ASSERT_EQ(models.size(), 4u);
  for (const json& m : models) {
    SCOPED_TRACE(m.dump());
    const Chain chain = importedChain(kFolder + m.at("file").get<std::string>(), 2);
    std::vector<std::string> kinds;
    for (const ChainLayer& l : chain.layers) kinds.emplace_back(kindName(l.kind));
    EXPECT_EQ(kinds, m.at("kinds").get<std::vector<std::string>>());
    EXPECT_EQ(chain.paramCount(), m.at("torch_parameters").get<std::uint64_t>());
    ASSERT_EQ(chain.size(), 6u);
    EXPECT_EQ(chain.layers[1].name, "norm");  // named after its module, as torch's scope says
    // torch writes 1e-5 as a float32 constant (decomposed) or attribute (opset 17).
    EXPECT_NEAR(chain.spec.layers[1].epsilon, 1e-5, 1e-12);
  }
}

TEST(OnnxLayerNorm, TorchExportsRunWithTheMeasuredFootprintPredicted) {
  for (const json& m : manifest()) {
    SCOPED_TRACE(m.at("file").get<std::string>());
    cpu::CpuDevice device({.poisonMemory = true});
    const std::int64_t batch = m.at("batch").is_null() ? 3 : 2;  // the symbolic batch takes another
    const Chain chain = testing::fittedTo(importedChain(kFolder + m.at("file").get<std::string>(), batch), device);
    testing::expectEveryPlanReproducesStoreAll(chain, device, 19);
  }
}

// x [2, 12] -> Gemm(16) -> [middle] -> Gemm(4): the middle is the op under test.
std::string mlpWith(const std::function<std::string(OnnxBuilder&, const std::string&)>& middle,
                    std::int64_t opset = 13) {
  OnnxBuilder b(opset);
  std::string t = b.input("x", {2, 12});
  t = b.node("Gemm", {t, b.weight("fc1.weight", {16, 12})}, "fc1", {{"transB", std::int64_t{1}}});
  t = middle(b, t);
  b.output(b.node("Gemm", {t, b.weight("fc2.weight", {4, 16})}, "fc2", {{"transB", std::int64_t{1}}}));
  return b.bytes();
}

// What each step of torch's decomposed LayerNorm may be changed into by a test.
struct Decomposed {
  float exponent = 2.0F;
  float epsilon = 1e-5F;
  Ints varianceAxes = {-1};
  std::int64_t meanKeepDims = 1;
  bool sqrt = true;
  bool affine = true;
  Ints biasShape = {16};
  bool subReadElsewhere = false;
};

std::string decomposed(const Decomposed& d) {
  return mlpWith([d](OnnxBuilder& b, const std::string& x) {
    const std::string mean = b.node("ReduceMean", {x}, "norm", {{"axes", Ints{-1}}, {"keepdims", d.meanKeepDims}});
    const std::string centred = b.node("Sub", {x, mean}, "norm");
    const std::string pow = b.node("Pow", {centred, b.constantFloat(d.exponent)}, "norm");
    const std::string variance = b.node("ReduceMean", {pow}, "norm", {{"axes", d.varianceAxes}});
    std::string std = b.node("Add", {variance, b.constantFloat(d.epsilon)}, "norm");
    if (d.sqrt) std = b.node("Sqrt", {std}, "norm");
    std::string t = b.node("Div", {centred, std}, "norm");
    if (d.subReadElsewhere) t = b.node("Add", {t, centred}, "other");
    if (!d.affine) return t;
    t = b.node("Mul", {t, b.weight("norm.weight", {16})}, "norm");
    return b.node("Add", {t, b.weight("norm.bias", d.biasShape)}, "norm");
  });
}

std::vector<std::string> importedKinds(const std::string& bytes) {
  auto imported = importOnnxModel(bytes, "ln.onnx", OnnxImportOptions{.batch = 2});
  EXPECT_TRUE(imported.isOk()) << imported.status().message();
  std::vector<std::string> kinds;
  if (imported)
    for (const LayerSpec& l : imported->spec.layers) kinds.emplace_back(kindName(l.kind));
  return kinds;
}

std::string importError(const std::string& bytes) {
  auto imported = importOnnxModel(bytes, "bad.onnx", OnnxImportOptions{.batch = 2});
  EXPECT_FALSE(imported.isOk());
  return imported ? "" : imported.status().message();
}

void expectContains(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in: " << message;
}

TEST(OnnxLayerNorm, DecomposedFormIsOneLayerNormWithItsEpsilon) {
  EXPECT_EQ(importedKinds(decomposed({})), (Names{"linear", "layernorm", "linear"}));
  Decomposed wide;
  wide.epsilon = 0.25F;
  auto imported = importOnnxModel(decomposed(wide), "ln.onnx", OnnxImportOptions{.batch = 2});
  ASSERT_TRUE(imported.isOk()) << imported.status().message();
  EXPECT_EQ(imported->spec.layers[1].epsilon, 0.25);
}

TEST(OnnxLayerNorm, HalfMatchedDecompositionsAreRefusedWhereTheyDepart) {
  Decomposed cube;
  cube.exponent = 3.0F;
  expectContains(importError(decomposed(cube)), {"bad.onnx", "/norm/Pow", "decomposed LayerNorm", "exponent"});
  Decomposed noSqrt;
  noSqrt.sqrt = false;
  expectContains(importError(decomposed(noSqrt)), {"/norm/Div", "Sqrt"});
  Decomposed otherAxis;
  otherAxis.varianceAxes = {0};
  expectContains(importError(decomposed(otherAxis)), {"/norm/ReduceMean", "last axis"});
  Decomposed dropped;
  dropped.meanKeepDims = 0;
  expectContains(importError(decomposed(dropped)), {"/norm/ReduceMean", "keepdims 0"});
  Decomposed plain;
  plain.affine = false;
  expectContains(importError(decomposed(plain)), {"decomposed LayerNorm", "weight and bias"});
  Decomposed shared;
  shared.subReadElsewhere = true;
  expectContains(importError(decomposed(shared)), {"/norm/Sub", "read outside the pattern"});
  Decomposed badBias;
  badBias.biasShape = {8};
  expectContains(importError(decomposed(badBias)), {"/norm/ReduceMean", "bias", "norm.bias", "[16]"});
  Decomposed hugeEpsilon;
  hugeEpsilon.epsilon = 1e30F;
  expectContains(importError(decomposed(hugeEpsilon)), {"/norm/ReduceMean", "epsilon", "[0, 1)"});
  Decomposed nanEpsilon;
  nanEpsilon.epsilon = std::nanf("");
  expectContains(importError(decomposed(nanEpsilon)), {"/norm/ReduceMean", "epsilon nan"});
}

std::string fused(std::initializer_list<testing::OnnxAttr> attributes, Ints weightShape = {16}, bool bias = true,
                  bool meanUsed = false) {
  return mlpWith(
      [=](OnnxBuilder& b, const std::string& x) {
        std::vector<std::string> inputs = {x, b.weight("norm.weight", weightShape)};
        if (bias) inputs.push_back(b.weight("norm.bias", {16}));
        const std::vector<std::string> outputs = {"y", meanUsed ? "mean" : ""};
        const std::string y = b.node("LayerNormalization", inputs, "norm", attributes, outputs);
        return meanUsed ? b.node("Add", {y, "mean"}, "shift") : y;  // the saved mean read by a node
      },
      17);
}

TEST(OnnxLayerNorm, LayerNormalizationOpIsReadWithItsAttributesBounded) {
  EXPECT_EQ(importedKinds(fused({})), (Names{"linear", "layernorm", "linear"}));
  EXPECT_EQ(importedKinds(fused({{"axis", std::int64_t{1}}, {"epsilon", 1e-3}})),
            (Names{"linear", "layernorm", "linear"}));
  expectContains(importError(fused({{"epsilon", std::nan("")}})),
                 {"bad.onnx", "/norm/LayerNormalization", "epsilon nan"});
  expectContains(importError(fused({{"epsilon", -1e-5}})), {"/norm/LayerNormalization", "epsilon", "[0, 1)"});
  expectContains(importError(fused({{"epsilon", 1e30}})), {"/norm/LayerNormalization", "epsilon"});
  expectContains(importError(fused({{"axis", std::int64_t{0}}})), {"/norm/LayerNormalization", "axis 0", "last axis"});
  expectContains(importError(fused({{"epsilon", std::int64_t{1}}})), {"/norm/LayerNormalization", "epsilon"});
  expectContains(importError(fused({}, {8})), {"/norm/LayerNormalization", "weight", "[16]"});
  expectContains(importError(fused({}, {16}, false)), {"/norm/LayerNormalization", "no bias"});
  expectContains(importError(fused({}, {16}, true, true)), {"/norm/LayerNormalization", "output 1"});
}

}  // namespace
}  // namespace remat
