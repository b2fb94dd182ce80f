// Parameter tensors (ChainLayer::paramTensors, memory-model.md 11.3): every zoo layer splits its
// parameters into PyTorch's tensors, and the single-tensor optimizer loop's scratch, which pairs
// each tensor with the one before it, is the one torchvision's own parameter list gives
// (tests/data/param_tensors.json, scripts/make-param-tensor-reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "remat/model/step_options.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

// The zoo model at batch 2 and its smallest resolution (sequence 16 for the token models); ViT at
// torchvision's 224, which sizes its position table.
Result<Chain> zooModel(const std::string& name, StepOptions step) {
  const auto models = zooModels();
  const auto entry = std::find_if(models.begin(), models.end(), [&](const ZooEntry& e) { return e.name == name; });
  if (entry == models.end()) return Status::invalid("no zoo model " + name);
  const bool vit = name.rfind("vit", 0) == 0;
  auto spec = zooChain(name, {.batch = 2,
                              .resolution = vit ? 224 : std::max<std::int64_t>(entry->minResolution, 32),
                              .sequence = entry->tokenModel ? 16 : 0});
  if (!spec) return spec.status();
  auto chain = buildChain(*spec);
  if (chain) chain->step = step;
  return chain;
}

// PyTorch's _single_tensor_adam(w): the previous tensor's denominator beside t's square root and quotient.
std::uint64_t singleTensorScratch(const std::vector<std::uint64_t>& tensorBytes) {
  std::uint64_t previous = 0, most = 0;
  for (const std::uint64_t t : tensorBytes) {
    most = std::max(most, previous + 2 * t);
    previous = t;
  }
  return most;
}

TEST(ParamTensors, EveryZooLayerSplitsItsParameters) {
  for (const ZooEntry& entry : zooModels()) {
    auto built = zooModel(entry.name, {});
    ASSERT_TRUE(built.isOk()) << entry.name << ": " << built.status().message();
    const Chain& chain = *built;
    for (const ChainLayer& layer : chain.layers) {
      SCOPED_TRACE(entry.name + " " + layer.name);
      if (layer.paramCount == 0) continue;
      EXPECT_FALSE(layer.paramTensors.empty()) << "the kind does not name its tensors";
      EXPECT_EQ(std::accumulate(layer.paramTensors.begin(), layer.paramTensors.end(), std::uint64_t{0}),
                layer.paramCount);
      const auto bytes = paramTensorBytes(layer);
      EXPECT_EQ(std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0}), layer.numbers.paramBytes);
    }
  }
}

TEST(ParamTensors, SingleTensorAdamScratchIsTorchvisionsList) {
  std::ifstream file(std::string(REMAT_TEST_DATA_DIR) + "/param_tensors.json");
  ASSERT_TRUE(file) << "tests/data/param_tensors.json";
  const auto reference = nlohmann::json::parse(file);
  ASSERT_GE(reference["models"].size(), 10u);
  for (const auto& [name, numels] : reference["models"].items()) {
    SCOPED_TRACE(name);
    auto built = zooModel(name, {OptimizerKind::AdamW, false, GradMode::OnBackward});
    ASSERT_TRUE(built.isOk()) << built.status().message();
    const Chain& chain = *built;
    std::vector<std::uint64_t> theirs, ours;
    for (const auto& n : numels) theirs.push_back(n.get<std::uint64_t>() * 4);
    for (const ChainLayer& layer : chain.layers)
      for (const std::uint64_t t : paramTensorBytes(layer)) ours.push_back(t);
    EXPECT_EQ(optimizerScratchBytes(chain), singleTensorScratch(theirs));
    // The same tensors, whatever order a block's inner graph visits them in.
    std::sort(theirs.begin(), theirs.end());
    std::sort(ours.begin(), ours.end());
    EXPECT_EQ(ours, theirs);
  }
}

// ResNet-18 by hand: layer4's 3x3 convolutions (512 x 512 x 9 floats) follow a batch norm's bias
// (512 floats), so the loop peaks at 2 x 9,437,184 + 2,048 bytes, where a whole block (14.7 MB
// for layer4.0) counted as one tensor said 52.6 MB (scripts/torch-fidelity.py's whole-step rows).
TEST(ParamTensors, ResNet18SingleTensorAdamW) {
  auto built = zooModel("resnet18", {OptimizerKind::AdamW, false, GradMode::OnBackward});
  ASSERT_TRUE(built.isOk()) << built.status().message();
  const Chain& chain = *built;
  EXPECT_EQ(optimizerScratchBytes(chain), 2u * 512 * 512 * 9 * 4 + 512 * 4);
  Chain multiTensor = chain;
  multiTensor.step.foreach = true;
  EXPECT_EQ(optimizerScratchBytes(multiTensor), chain.paramBytes());
}

// Under a pure half precision the tensors are 2-byte; under a mixed one the float32 masters.
TEST(ParamTensors, BytesFollowTheParametersDtype) {
  auto spec = zooChain("resnet18", {.batch = 2, .resolution = 64, .dtype = DType::BFloat16});
  ASSERT_TRUE(spec.isOk());
  auto chain = buildChain(*spec);
  ASSERT_TRUE(chain.isOk());
  chain->step = {OptimizerKind::Adam, false, GradMode::Static};
  EXPECT_EQ(optimizerScratchBytes(*chain), 2u * 512 * 512 * 9 * 2 + 512 * 2);
}

}  // namespace
}  // namespace remat
