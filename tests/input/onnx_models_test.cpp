// Real torch exports (tests/data/onnx, made by scripts/make-onnx-test-models.py with Debian's
// torch 1.13, without weights): each imports with torch's parameter count (eval exports: the count
// of the folded graph's own weights); ResNet-18, VGG-11-BN, EfficientNet-B0 and MobileNetV3-Large
// are the zoo's models layer for layer with every planner's E equal (and optimal's E the lowest); MobileNetV2 is finer
// than the zoo, optimal's E no higher; and every small one runs on the CPU under every planner's plan with the measured
// footprint of every op equal to the prediction and the gradients bitwise store-all's.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/block.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

using nlohmann::json;

const std::string kFolder = std::string(REMAT_TEST_DATA_DIR) + "/onnx/";

std::vector<json> manifest() {
  std::ifstream in(kFolder + "models.json");
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return {};
  return j.at("models").get<std::vector<json>>();
}

std::string fileOf(const json& model) { return model.at("file").get<std::string>(); }

// The model's chain at `batch` (its own fixed batch is overridden, a symbolic one set).
Chain imported(const json& model, std::int64_t batch) {
  auto result = importOnnxFile(kFolder + fileOf(model), {.batch = batch});
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result) return {};
  auto chain = buildChain(result->spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? *chain : Chain{};
}

Chain zoo(const json& model, std::int64_t batch) {
  auto spec = zooChain(model.at("zoo").get<std::string>(),
                       {.batch = batch, .resolution = model.at("resolution").get<std::int64_t>()});
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  auto chain = buildChain(*spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return *chain;
}

std::map<std::string, std::uint64_t> plannerPeaks(const Chain& chain) {
  std::map<std::string, std::uint64_t> peaks;
  for (const std::string& name : defaultComparePlanners(chain.size())) {
    auto report = runPlanner(chain, name);
    EXPECT_TRUE(report.isOk()) << name << ": " << report.status().message();
    if (report) peaks[name] = report->dynamicPeakBytes;
  }
  return peaks;
}

TEST(OnnxExports, TheManifestListsEveryCommittedExport) {
  const std::vector<json> models = manifest();
  ASSERT_EQ(models.size(), 14u);
  for (const json& m : models) EXPECT_TRUE(std::ifstream(kFolder + fileOf(m)).good()) << fileOf(m);
}

TEST(OnnxExports, ParameterCountsAreTorchsOrTheFoldedGraphs) {
  for (const json& m : manifest()) {
    SCOPED_TRACE(fileOf(m));
    const Chain chain = imported(m, 2);
    const char* count = m.at("mode") == "train" ? "torch_parameters" : "onnx_parameters";
    EXPECT_EQ(chain.paramCount(), m.at(count).get<std::uint64_t>());
    EXPECT_EQ(m.at("onnx_parameters") == m.at("torch_parameters"), m.at("mode") == "train");
  }
}

TEST(OnnxExports, ASymbolicBatchNeedsTheBatch) {
  for (const json& m : manifest()) {
    if (!m.at("batch").is_null()) continue;
    auto result = importOnnxFile(kFolder + fileOf(m));
    ASSERT_FALSE(result.isOk()) << fileOf(m);
    EXPECT_NE(result.status().message().find("the batch dimension is symbolic ('batch')"), std::string::npos);
  }
}

// Layer for layer: names, shapes, numbers and kinds; torch exports AdaptiveAvgPool2d to a size
// the input is a multiple of as an AveragePool, which computes the same with the same numbers.
void expectSameLayers(const Chain& mine, const Chain& theirs) {
  ASSERT_EQ(mine.size(), theirs.size());
  EXPECT_EQ(mine.inputBytes, theirs.inputBytes);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const ChainLayer &a = mine.layers[i], &b = theirs.layers[i];
    SCOPED_TRACE(b.name);
    EXPECT_EQ(a.name, b.name);
    EXPECT_TRUE(a.kind == b.kind || (a.kind == LayerKind::AvgPool && b.kind == LayerKind::AdaptiveAvgPool))
        << kindName(a.kind) << " vs " << kindName(b.kind);
    EXPECT_EQ(a.inputShape, b.inputShape);
    EXPECT_EQ(a.outputShape, b.outputShape);
    EXPECT_EQ(a.paramCount, b.paramCount);
    EXPECT_EQ(a.numbers, b.numbers);
  }
}

// EfficientNet-B0, MobileNetV3-Large and RegNetY-400MF too: the zoo cuts their Squeeze-and-Excitation
// pieces as the importer does (a block of their own without the skip, inside the block with it);
// and ShuffleNetV2, whose fixed-batch export at batch 16 has its Reshape constants' batch rewritten.
TEST(OnnxExports, EveryExportOfAZooModelButMobileNetV2IsTheZoosModel) {
  int compared = 0;
  for (const json& m : manifest()) {
    if (m.at("zoo").is_null() || m.at("zoo") == "mobilenet_v2") continue;
    SCOPED_TRACE(fileOf(m));
    for (std::int64_t batch : {2, 16}) {
      const Chain mine = imported(m, batch), theirs = zoo(m, batch);
      expectSameLayers(mine, theirs);
      EXPECT_EQ(mine.staticBytes(), theirs.staticBytes());
      EXPECT_EQ(plannerPeaks(mine), plannerPeaks(theirs));
    }
    ++compared;
  }
  EXPECT_EQ(compared, 7);  // resnet18, vgg11_bn, efficientnet_b0, mobilenet_v3_large, regnet_y_400mf, shufflenet,
                           // inception_v3
}

// The exports with Squeeze-and-Excitation (global average pooling, 1x1 convs with bias on [N, C, 1,
// 1], the broadcasting product inside blocks) and ShuffleNetV2's channel slices and shuffles:
// optimal's E is no higher than any other planner's.
TEST(OnnxExports, OptimalIsNoWorseThanAnyPlannerOnTheNewModels) {
  const std::set<std::string> models = {"efficientnet_b0", "mobilenet_v3_large", "regnet_y_400mf",
                                        "shufflenet_v2_x1_0"};
  int checked = 0;
  for (const json& m : manifest()) {
    if (!m.at("zoo").is_string() || models.count(m.at("zoo").get<std::string>()) == 0) continue;
    SCOPED_TRACE(fileOf(m));
    const std::map<std::string, std::uint64_t> peaks = plannerPeaks(imported(m, 4));
    ASSERT_TRUE(peaks.count("optimal"));
    for (const auto& [planner, peak] : peaks) EXPECT_LE(peaks.at("optimal"), peak) << planner;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// GoogLeNet (aux_logits=False): each Inception module is one block whose fourth branch is a max
// pool (3x3, stride 1, padding 1, ceil mode) then a conv; the pool keeps its input and its int64
// indices (E). torchvision's parameter count, and optimal's E no higher than any other planner's.
TEST(OnnxExports, GoogLeNetsPoolBranchesAreInsideItsBlocks) {
  int checked = 0;
  for (const json& m : manifest()) {
    if (m.at("model") != "googlenet") continue;
    SCOPED_TRACE(fileOf(m));
    const Chain chain = imported(m, 4);
    EXPECT_EQ(chain.paramCount(), 6624904u);  // torchvision's googlenet(aux_logits=False)
    std::size_t pooledBlocks = 0;
    for (const ChainLayer& layer : chain.layers) {
      if (layer.kind != LayerKind::Block) continue;
      auto graph = buildBlockGraph(chain.spec.layers[layer.specIndex], layer.inputShape, chain.dtype);
      ASSERT_TRUE(graph.isOk()) << graph.status().message();
      for (const BlockOp& op : graph->ops) {
        if (op.kind != BlockOpKind::MaxPool) continue;
        EXPECT_TRUE(op.readsInput) << op.layer.name;
        EXPECT_EQ(op.statsBytes, elementCount(graph->tensors[op.output].shape) * kMaxPoolIndexBytes);
        EXPECT_TRUE(op.layer.ceilMode);
        ++pooledBlocks;
      }
    }
    EXPECT_EQ(pooledBlocks, 9u);  // inception3a to inception5b
    const std::map<std::string, std::uint64_t> peaks = plannerPeaks(chain);
    ASSERT_TRUE(peaks.count("optimal"));
    for (const auto& [planner, peak] : peaks) EXPECT_LE(peaks.at("optimal"), peak) << planner;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// Inception-v3 (aux_logits=False, 75 x 75) and the small inception-like model: the factorised 1x7 /
// 7x1 and 1x3 / 3x1 convs are conv2d inner ops with their width fields, InceptionE's inner
// torch.cat([1x3, 3x1]) is one concat with the outer one, and optimal's E is no higher than any
// other planner's.
TEST(OnnxExports, InceptionsFactorisedConvsAreInsideItsBlocks) {
  const std::map<std::string, std::pair<std::size_t, std::size_t>> expected = {
      {"inception_v3", {34, 2}},     // 6 in each InceptionC, 2 in InceptionD, 4 in each InceptionE
      {"inception_small", {6, 0}}};  // its E-like block concatenates three: [1x3, 3x1] and the pool branch
  int checked = 0;
  for (const json& m : manifest()) {
    const auto it = expected.find(m.at("model").get<std::string>());
    if (it == expected.end()) continue;
    SCOPED_TRACE(fileOf(m));
    const Chain chain = imported(m, 4);
    std::size_t nonSquare = 0, sixWayConcats = 0;
    for (const ChainLayer& layer : chain.layers) {
      if (layer.kind != LayerKind::Block) continue;
      const std::vector<BlockOpSpec>& ops = chain.spec.layers[layer.specIndex].ops;
      if (ops.back().kind == BlockOpKind::Concat && ops.back().inputs.size() == 6) ++sixWayConcats;
      for (const BlockOpSpec& op : ops) {
        if (op.kind != BlockOpKind::Conv2d || op.layer.squareConv()) continue;
        const LayerSpec& c = op.layer;
        EXPECT_TRUE((c.kernel == 1 && c.padding == 0 && c.paddingW() == (c.kernelW() - 1) / 2) ||
                    (c.kernelW() == 1 && c.paddingW() == 0 && c.padding == (c.kernel - 1) / 2))
            << c.name;
        ++nonSquare;
      }
    }
    EXPECT_EQ(nonSquare, it->second.first);
    EXPECT_EQ(sixWayConcats, it->second.second);  // Mixed_7b and Mixed_7c; the small one's E-like block
    const std::map<std::string, std::uint64_t> peaks = plannerPeaks(chain);
    ASSERT_TRUE(peaks.count("optimal"));
    for (const auto& [planner, peak] : peaks) EXPECT_LE(peaks.at("optimal"), peak) << planner;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// --input NAME: the data input by name gives the same chain as the default (the only graph input that
// reaches the output); an unknown name and a weight's name are errors that name the option and the
// inputs there are.
TEST(OnnxExports, TheDataInputCanBeNamed) {
  const json* googlenet = nullptr;
  const std::vector<json> models = manifest();
  for (const json& m : models)
    if (fileOf(m) == "googlenet_train_op13.onnx") googlenet = &m;
  ASSERT_NE(googlenet, nullptr);
  const std::string path = kFolder + fileOf(*googlenet);
  auto byDefault = importOnnxFile(path);
  auto named = importOnnxFile(path, {.input = "input"});
  ASSERT_TRUE(byDefault.isOk() && named.isOk());
  EXPECT_EQ(chainSpecToText(byDefault->spec), chainSpecToText(named->spec));
  auto unknown = importOnnxFile(path, {.input = "images"});
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find(": --input 'images': the graph has no input of that name (its inputs: "
                                            "'input', 'conv1.conv.weight'"),
            std::string::npos)
      << unknown.status().message();
  auto weight = importOnnxFile(path, {.input = "conv1.conv.weight"});
  ASSERT_FALSE(weight.isOk());
  EXPECT_NE(weight.status().message().find("does not reach the output through the data of an op (a weight?); the "
                                           "data inputs: 'input'"),
            std::string::npos)
      << weight.status().message();
}

// ShuffleNetV2's export fixes the batch (2) in the constants of its channel shuffles' Reshapes;
// --batch rewrites that leading dimension, and every layer follows the new batch.
TEST(OnnxExports, AFixedBatchChannelShuffleTakesAnyBatch) {
  for (const json& m : manifest()) {
    if (m.at("zoo") != "shufflenet_v2_x1_0") continue;
    ASSERT_EQ(m.at("batch"), 2);
    for (std::int64_t batch : {1, 2, 5}) {
      const Chain chain = imported(m, batch);
      ASSERT_GT(chain.size(), 0u);
      std::size_t shuffles = 0;
      for (const ChainLayer& layer : chain.layers) {
        EXPECT_EQ(layer.outputShape[0], batch) << layer.name;
        shuffles += layer.name.ends_with(".channel_shuffle") ? 1 : 0;
      }
      EXPECT_EQ(shuffles, 16u);
    }
    return;
  }
  FAIL() << "no shufflenet_v2_x1_0 export in the manifest";
}

// The zoo groups every inverted residual into one layer; the graph forces only those with a skip
// together, so the import has those as the same layers and the others as their plain ops: every
// zoo checkpoint is still a checkpoint of the import, and optimal's E can only go down.
TEST(OnnxExports, MobileNetV2IsFinerThanTheZooAndNoWorse) {
  for (const json& m : manifest()) {
    if (m.at("zoo") != "mobilenet_v2") continue;
    const Chain mine = imported(m, 8), theirs = zoo(m, 8);
    EXPECT_GT(mine.size(), theirs.size());
    std::map<std::string, const ChainLayer*> byName;
    for (const ChainLayer& layer : mine.layers) byName[layer.name] = &layer;
    std::size_t shared = 0;
    for (const ChainLayer& layer : theirs.layers) {
      // The zoo names the functional pooling of forward() "avgpool"; the export names it by its op.
      auto it = byName.find(layer.kind == LayerKind::AdaptiveAvgPool ? "globalaveragepool" : layer.name);
      if (it == byName.end()) {
        EXPECT_EQ(layer.kind, LayerKind::InvertedResidual) << layer.name;
        continue;
      }
      EXPECT_EQ(it->second->numbers, layer.numbers) << layer.name;
      ++shared;
    }
    EXPECT_EQ(shared, theirs.size() - 7);  // the 7 inverted residuals without a skip are split
    auto fine = runPlanner(mine, "optimal"), coarse = runPlanner(theirs, "optimal");
    ASSERT_TRUE(fine.isOk() && coarse.isOk());
    EXPECT_LE(fine->dynamicPeakBytes, coarse->dynamicPeakBytes);
    EXPECT_EQ(mine.staticBytes(), theirs.staticBytes());
    return;
  }
  FAIL() << "no mobilenet_v2 export in the manifest";
}

class OnnxExecution : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxExecution, EveryPlanMatchesStoreAllAndTheSimulator) {
  const json* model = nullptr;
  const std::vector<json> models = manifest();
  for (const json& m : models)
    if (fileOf(m) == GetParam()) model = &m;
  ASSERT_NE(model, nullptr);
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = testing::fittedTo(imported(*model, 2), device);  // the CPU's workspaces written in
  auto interp = Interpreter::create(chain, device, testing::seeded(5));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  RunOptions options{.digestGradients = true, .captureDigests = true};
  const auto plans = testing::plannerPlans(chain, testing::allPlanners());
  auto reference = (*interp)->run(Plan{}, options);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  testing::expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
  for (std::size_t i = 1; i < plans.size(); ++i) {
    SCOPED_TRACE(plans[i].first + " [" + formatCheckpointList(plans[i].second) + "]");
    auto run = (*interp)->run(plans[i].second, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(chain, plans[i].second, *run, *reference);
  }
}

// Every committed export small enough to run (VGG needs 224 x 224). Inception-v3's export is the zoo's
// inception_v3 layer for layer (above), which tests/exec/interpreter_zoo_test.cpp runs at 75 x 75.
INSTANTIATE_TEST_SUITE_P(CommittedExports, OnnxExecution,
                         ::testing::Values("resnet18_train_op17_dynamic.onnx", "resnet18_eval_op15.onnx",
                                           "mobilenet_v2_train_op13.onnx", "squeezenet1_0_train_op12.onnx",
                                           "densenet_small_train_op14.onnx", "efficientnet_b0_train_op13.onnx",
                                           "mobilenet_v3_large_train_op17_dynamic.onnx",
                                           "regnet_y_400mf_train_op15_dynamic.onnx",
                                           "shufflenet_v2_x1_0_train_op13.onnx", "googlenet_train_op13.onnx",
                                           "inception_small_train_op17_dynamic.onnx"),
                         [](const auto& info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           return name;
                         });

}  // namespace
}  // namespace remat
