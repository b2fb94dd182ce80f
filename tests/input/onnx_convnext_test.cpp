// ConvNeXt from torch's ONNX export (tests/data/onnx/convnext, made by scripts/make-convnext-onnx.py
// with Debian's torch 1.13): the permutes to channels-last and back fold away (views), the
// LayerNormalization over the last axis (opset 17) or its decomposition (opset 13) is a layernorm
// over the channels, MatMul + Add over the channels a 1x1 conv with bias, layer_scale * x the
// parameter-scaled product; each export imports with torch's parameter count, ConvNeXt-Tiny is the
// zoo's convnext_tiny layer for layer, every planner plans (optimal's E the lowest), and a CPU run of
// optimal's plan at batch 2 equals the prediction op by op.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

using nlohmann::json;

const std::string kFolder = std::string(REMAT_TEST_DATA_DIR) + "/onnx/convnext/";

std::vector<json> manifest() {
  std::ifstream in(kFolder + "models.json");
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return {};
  return j.at("models").get<std::vector<json>>();
}

Result<Chain> imported(const std::string& file, std::int64_t batch) {
  auto result = importOnnxFile(kFolder + file, {.batch = batch});
  if (!result) return result.status();
  return buildChain(result->spec);
}

std::vector<LayerKind> kindsOf(const Chain& chain) {
  std::vector<LayerKind> kinds;
  for (const ChainLayer& layer : chain.layers) kinds.push_back(layer.kind);
  return kinds;
}

TEST(OnnxConvNext, EveryExportImportsWithTorchsParameterCount) {
  const std::vector<json> models = manifest();
  ASSERT_EQ(models.size(), 3u);
  for (const json& m : models) {
    SCOPED_TRACE(m.at("file").get<std::string>());
    auto chain = imported(m.at("file"), 2);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    EXPECT_EQ(chain->paramCount(), m.at("torch_parameters").get<std::uint64_t>());
  }
}

// Both opsets give the same chain: stem conv and LayerNorm2d, one CNBlock, LayerNorm2d and the 2x2
// conv, two CNBlocks, the head's pool, LayerNorm2d and linear (the flatten folds away).
TEST(OnnxConvNext, BothOpsetsGiveTheSameLayers) {
  auto at13 = imported("convnext_small_train_op13.onnx", 2);
  auto at17 = imported("convnext_small_train_op17.onnx", 2);
  ASSERT_TRUE(at13.isOk()) << at13.status().message();
  ASSERT_TRUE(at17.isOk()) << at17.status().message();
  using K = LayerKind;
  const std::vector<LayerKind> expected = {K::Conv2d, K::LayerNorm, K::Block,           K::LayerNorm, K::Conv2d,
                                           K::Block,  K::Block,     K::AdaptiveAvgPool, K::LayerNorm, K::Linear};
  EXPECT_EQ(kindsOf(*at17), expected);
  ASSERT_EQ(at13->size(), at17->size());
  for (std::size_t l = 0; l < at17->layers.size(); ++l) {
    EXPECT_EQ(at13->layers[l].kind, at17->layers[l].kind) << l;
    EXPECT_EQ(at13->layers[l].numbers, at17->layers[l].numbers) << l;
    EXPECT_EQ(at13->layers[l].paramCount, at17->layers[l].paramCount) << l;
  }
}

TEST(OnnxConvNext, TinyIsTheZoosModelLayerForLayer) {
  auto mine = imported("convnext_tiny_train_op17_noweights.onnx", 2);
  ASSERT_TRUE(mine.isOk()) << mine.status().message();
  auto spec = zooChain("convnext_tiny", {.batch = 2, .resolution = 64});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto theirs = buildChain(*spec);
  ASSERT_TRUE(theirs.isOk()) << theirs.status().message();
  ASSERT_EQ(mine->size(), theirs->size());
  for (std::size_t l = 0; l < mine->size(); ++l) {
    const ChainLayer &a = mine->layers[l], &b = theirs->layers[l];
    SCOPED_TRACE(b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.outputShape, b.outputShape);
    EXPECT_EQ(a.paramCount, b.paramCount);
    EXPECT_EQ(a.numbers, b.numbers);
  }
}

TEST(OnnxConvNext, EveryPlannerPlansAndOptimalIsTheLowest) {
  auto chain = imported("convnext_small_train_op17.onnx", 4);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  std::uint64_t optimal = 0;
  std::vector<std::uint64_t> peaks;
  for (const std::string& name : defaultComparePlanners(chain->size())) {
    auto report = runPlanner(*chain, name);
    ASSERT_TRUE(report.isOk()) << name << ": " << report.status().message();
    if (name == "optimal") optimal = report->dynamicPeakBytes;
    peaks.push_back(report->dynamicPeakBytes);
  }
  ASSERT_GT(optimal, 0u);
  for (std::uint64_t peak : peaks) EXPECT_LE(optimal, peak);
}

// At both opsets: store-all and optimal's plan at batch 2 on the CPU, every op's footprint the
// prediction's, optimal's gradients bitwise store-all's.
TEST(OnnxConvNext, OptimalsPlanRunsOnTheCpuAsPredicted) {
  for (const char* file : {"convnext_small_train_op13.onnx", "convnext_small_train_op17.onnx"}) {
    SCOPED_TRACE(file);
    auto built = imported(file, 2);
    ASSERT_TRUE(built.isOk()) << built.status().message();
    cpu::CpuDevice device({.poisonMemory = true});
    const Chain chain = testing::fittedTo(*built, device);
    auto interp = Interpreter::create(chain, device, testing::seeded(5));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    const RunOptions options{.digestGradients = true, .captureDigests = true};
    auto reference = (*interp)->run(Plan{}, options);
    ASSERT_TRUE(reference.isOk()) << reference.status().message();
    testing::expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
    auto optimal = runPlanner(chain, "optimal");
    ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
    auto run = (*interp)->run(optimal->plan, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(chain, optimal->plan, *run, *reference);
  }
}

// The committed opset-17 export, changed by `edit`, imported from memory.
Status importEdited(const std::function<void(onnx::GraphProto&)>& edit) {
  std::ifstream in(kFolder + "convnext_small_train_op17.onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(bytes.str()));
  edit(*model.mutable_graph());
  auto imported = importOnnxModel(model.SerializeAsString(), "cn.onnx", {.batch = 2});
  return imported ? Status::ok() : imported.status();
}

onnx::NodeProto* nthOf(onnx::GraphProto& g, const std::string& op, int n) {
  for (auto& node : *g.mutable_node())
    if (node.op_type() == op && n-- == 0) return &node;
  return nullptr;
}

void setPerm(onnx::NodeProto& node, std::vector<std::int64_t> perm) {
  for (auto& a : *node.mutable_attribute())
    if (a.name() == "perm") {
      a.clear_ints();
      for (std::int64_t p : perm) a.add_ints(p);
    }
}

void expectRefusedAt(const Status& status, const std::string& node, const std::string& why) {
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("cn.onnx: node "), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(node), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(why), std::string::npos) << status.message();
}

// Hostile or unsupported forms are refused at the node, saying what the importer reads.
TEST(OnnxConvNext, RefusesOtherPermutesAndReadersOfTheChannelsLastTensor) {
  expectRefusedAt(importEdited([](onnx::GraphProto& g) {
                    setPerm(*nthOf(g, "Transpose", 0), {0, 3, 2, 1});
                  }),
                  "features.0.1/Transpose", "ConvNeXt's permutes");
  // A Relu between the last Linear and the permute back reads the channels-last tensor.
  expectRefusedAt(importEdited([](onnx::GraphProto& g) {
                    for (auto& node : *g.mutable_node()) {
                      if (node.op_type() != "Mul" || node.name().find("layer_scale") != std::string::npos) continue;
                      const std::string& in = node.input(1);
                      if (in.find("block.6/Transpose") == std::string::npos) continue;
                      // the layer_scale Mul reads the Linear's channels-last output directly
                      const onnx::NodeProto* back = nullptr;
                      for (const auto& b : g.node())
                        if (b.output_size() > 0 && b.output(0) == in) back = &b;
                      node.set_input(1, back->input(0));
                      return;
                    }
                  }),
                  "Mul", "reads a channels-last tensor");
  expectRefusedAt(importEdited([](onnx::GraphProto& g) {
                    for (auto& a : *nthOf(g, "LayerNormalization", 0)->mutable_attribute())
                      if (a.name() == "axis") a.set_i(1);
                  }),
                  "LayerNormalization", "layernorm takes the last axis");
}

TEST(OnnxConvNext, RefusesALayerScaleOfAnotherShape) {
  expectRefusedAt(importEdited([](onnx::GraphProto& g) {
                    for (auto& t : *g.mutable_initializer())
                      if (t.name().find("layer_scale") != std::string::npos) {
                        t.set_dims(0, t.dims(0) + 1);
                        t.clear_raw_data();
                        t.clear_float_data();
                        for (std::int64_t i = 0; i < t.dims(0); ++i) t.add_float_data(0.5f);
                        return;
                      }
                  }),
                  "Mul", "ConvNeXt's layer_scale");
}

}  // namespace
}  // namespace remat
