// The pointwise activations through the ONNX importer: small torch exports in training mode
// (tests/data/onnx/activations, made by scripts/make-activation-onnx.py with Debian's torch 1.13)
// import layer for layer as the kinds torch ran, SiLU from its Sigmoid-Mul pair and GELU from its
// Div-Erf-Add-Mul-Mul pattern, with torch's parameter count, and run on the CPU under every
// planner's plan with the measured footprint of every op equal to the prediction; models built
// here cover the ONNX Gelu op (opset 20) and the attributes the importer refuses, each message
// naming the node.
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
using testing::withMiddle;
using Ints = std::vector<std::int64_t>;

const std::string kFolder = std::string(REMAT_TEST_DATA_DIR) + "/onnx/activations/";

std::vector<json> manifest() { return testing::exportManifest(kFolder + "manifest.json"); }

Chain importedChain(const std::string& path, std::int64_t batch) { return testing::importedExport(path, batch); }

TEST(OnnxActivations, TorchExportsImportAsTheOpsTorchRan) {
  const std::vector<json> models = manifest();
  ASSERT_EQ(models.size(), 2u);
  for (const json& m : models) {
    SCOPED_TRACE(m.dump());
    const Chain chain = importedChain(kFolder + m.at("file").get<std::string>(), 2);
    std::vector<std::string> kinds;
    for (const ChainLayer& l : chain.layers) kinds.emplace_back(kindName(l.kind));
    EXPECT_EQ(kinds, m.at("kinds").get<std::vector<std::string>>());
    EXPECT_EQ(chain.paramCount(), m.at("torch_parameters").get<std::uint64_t>());
    ASSERT_GE(chain.size(), 3u);
    EXPECT_EQ(chain.layers[2].name, "features.2");  // SiLU named after its module, as torch's scope says
  }
}

TEST(OnnxActivations, TorchExportsRunWithTheMeasuredFootprintPredicted) {
  for (const json& m : manifest()) {
    SCOPED_TRACE(m.at("file").get<std::string>());
    cpu::CpuDevice device({.poisonMemory = true});
    const Chain chain = testing::fittedTo(importedChain(kFolder + m.at("file").get<std::string>(), 2), device);
    testing::expectEveryPlanReproducesStoreAll(chain, device, 11);
  }
}

std::vector<std::string> importedKinds(const std::string& bytes) {
  auto imported = importOnnxModel(bytes, "acts.onnx", OnnxImportOptions{.batch = 2});
  EXPECT_TRUE(imported.isOk()) << imported.status().message();
  std::vector<std::string> kinds;
  if (imported)
    for (const LayerSpec& l : imported->spec.layers) kinds.emplace_back(kindName(l.kind));
  return kinds;
}

TEST(OnnxActivations, OnnxOpsAndPatternsMapOntoOneLayerEach) {
  // The Gelu op of opset 20, exact form; HardSigmoid with torch's alpha; a lone Sigmoid stays one.
  EXPECT_EQ(importedKinds(withMiddle(
                [](OnnxBuilder& b, const std::string& x) {
                  const std::string g = b.node("Gelu", {x}, "act1", {{"approximate", std::string("none")}});
                  const std::string h = b.node("HardSigmoid", {g}, "act2", {{"alpha", 1.0 / 6.0}});
                  return b.node("Sigmoid", {b.node("Tanh", {h}, "act3")}, "act4");
                },
                20)),
            (std::vector<std::string>{"conv2d", "gelu", "hardsigmoid", "tanh", "sigmoid", "flatten", "linear"}));
  // x * Sigmoid(x), in either operand order, is one SiLU.
  EXPECT_EQ(importedKinds(withMiddle([](OnnxBuilder& b, const std::string& x) {
              const std::string s = b.node("Sigmoid", {x}, "act");
              return b.node("Mul", {s, x}, "act");
            })),
            (std::vector<std::string>{"conv2d", "silu", "flatten", "linear"}));
  // x * HardSigmoid(x), torch's HardSwish below opset 14, is one HardSwish.
  EXPECT_EQ(importedKinds(withMiddle([](OnnxBuilder& b, const std::string& x) {
              const std::string s = b.node("HardSigmoid", {x}, "act", {{"alpha", 1.0 / 6.0}});
              return b.node("Mul", {x, s}, "act");
            })),
            (std::vector<std::string>{"conv2d", "hardswish", "flatten", "linear"}));
}

// torch's GELU pattern with `divisor` and, when `swapped`, every commutative node's operands the
// other way round: Add(1, erf), Mul(erf + 1, x), Mul(0.5, .) (scripts/hostile_onnx_activations.py).
std::string geluPattern(float divisor, bool swapped) {
  return withMiddle([=](OnnxBuilder& b, const std::string& x) {
    const std::string d = b.node("Div", {x, b.constantFloat(divisor)}, "act");
    const std::string e = b.node("Erf", {d}, "act");
    const std::string one = b.constantFloat(1.0F);
    const std::string a =
        b.node("Add", swapped ? std::vector<std::string>{one, e} : std::vector<std::string>{e, one}, "act");
    const std::string m =
        b.node("Mul", swapped ? std::vector<std::string>{a, x} : std::vector<std::string>{x, a}, "act");
    const std::string half = b.constantFloat(0.5F);
    return b.node("Mul", swapped ? std::vector<std::string>{half, m} : std::vector<std::string>{m, half}, "act");
  });
}

TEST(OnnxActivations, GeluPatternIsReadWithItsOperandsEitherWayAndOnlyWithItsConstants) {
  const std::vector<std::string> gelu{"conv2d", "gelu", "flatten", "linear"};
  EXPECT_EQ(importedKinds(geluPattern(std::sqrt(2.0F), false)), gelu);
  EXPECT_EQ(importedKinds(geluPattern(std::sqrt(2.0F), true)), gelu);
  // 1.4142 is 1.5e-5 from sqrt 2 (relative): another computation, and Div is not read on its own.
  auto refused = importOnnxModel(geluPattern(1.4142F, true), "near.onnx", OnnxImportOptions{.batch = 2});
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("/act/Div"), std::string::npos) << refused.status().message();
}

std::string importError(const std::string& bytes) {
  auto imported = importOnnxModel(bytes, "bad.onnx", OnnxImportOptions{.batch = 2});
  EXPECT_FALSE(imported.isOk());
  return imported ? "" : imported.status().message();
}

void expectContains(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in: " << message;
}

TEST(OnnxActivations, AttributesOutsidePyTorchsFormsAreRefusedAtTheirNode) {
  expectContains(importError(withMiddle([](OnnxBuilder& b, const std::string& x) {
                   return b.node("HardSigmoid", {x}, "act", {{"alpha", 0.2}});
                 })),
                 {"bad.onnx", "node", "/act/HardSigmoid", "alpha 0.2", "PyTorch's (alpha 1/6, beta 0.5)"});
  expectContains(importError(withMiddle([](OnnxBuilder& b, const std::string& x) {
                   return b.node("HardSigmoid", {x}, "act", {{"alpha", 1.0 / 6.0}, {"beta", std::nan("")}});
                 })),
                 {"/act/HardSigmoid", "beta nan"});
  expectContains(importError(withMiddle(
                     [](OnnxBuilder& b, const std::string& x) {
                       return b.node("Gelu", {x}, "act", {{"approximate", std::string("tanh")}});
                     },
                     20)),
                 {"/act/Gelu", "approximate 'tanh'", "erf"});
  expectContains(importError(withMiddle(
                     [](OnnxBuilder& b, const std::string& x) {
                       return b.node("Gelu", {x}, "act", {{"approximate", std::int64_t{1}}});
                     },
                     20)),
                 {"/act/Gelu", "approximate"});
  // An Erf outside the GELU pattern is no operator the importer reads.
  expectContains(
      importError(withMiddle([](OnnxBuilder& b, const std::string& x) { return b.node("Erf", {x}, "act"); })),
      {"/act/Erf", "Erf"});
}

}  // namespace
}  // namespace remat
