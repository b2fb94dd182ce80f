// Host-only checks of Swin's kinds under bf16-mixed on the GPU backend (issue 24): they run wherever
// the backend builds, with or without a GPU, because checking a chain's bfloat16 layout and preparing
// its layers touch no device. For a small Swin (padded and shifted at 40x40, with stochastic depth,
// and one window in the whole batch at 32x32, batch 1) and zoo swin_t at 196x196 (batch 1 and 2),
// the GPU's bfloat16 layout of every layer (cuda_swin_half_layout.cpp, written out from the CPU's
// run_swin_half.cpp and run_swin_ends_half.cpp) is byte for byte the model's E (swin_mixed.cpp), as
// are its parameters and needs_input / needs_output; every x(l) is bfloat16 (the stream and the
// logits); every layer prepares on its bfloat16 runner (the refusal by name is gone). An E one byte
// off, an odd channel count, a Swin kind reading the float32 batch and a float32 region E would put
// at an odd offset are refused naming the layer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chain_helpers.hpp"
#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "cuda_swin_half_layout.hpp"
#include "precision_runs.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"
#include "small_chains.hpp"

namespace remat::gpu {
namespace {

using nlohmann::json;

Chain mixed(const json& file) { return testing::withStep(testing::chainFromJson(file), Precision::Bf16Mixed, {}); }

Chain zooSwin(std::int64_t batch) {
  auto spec = zooChain("swin_t", {.batch = batch, .resolution = 196, .numClasses = 10});
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  if (!spec) return {};
  auto built = buildChain(*spec);
  EXPECT_TRUE(built.isOk()) << built.status().message();
  if (!built) return {};
  Chain chain = testing::withStep(*built, Precision::Bf16Mixed, {});
  chain.name = "swin_t batch " + std::to_string(batch);
  return chain;
}

std::vector<Chain> everyChain() {
  std::vector<Chain> chains;
  for (const json& file : {testing::tinySwin(2, 40), testing::tinySwin(2, 40, 0.2), testing::tinySwin(1, 32)}) {
    chains.push_back(mixed(file));
    chains.back().name = file["input"].dump() + (file["layers"][2]["stochastic_depth"] > 0.0 ? " sd" : "");
  }
  chains.push_back(zooSwin(1));
  chains.push_back(zooSwin(2));
  return chains;
}

// Every layer prepared as CudaDevice::prepare does, without CUDA handles.
Result<std::vector<LayerState>> prepareAll(const Chain& chain) {
  std::vector<LayerState> layers;
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, {}, {}, layers));
  return layers;
}

std::uint64_t layoutBytes(const ChainLayer& layer, const LayerSpec& spec) {
  if (layer.kind == LayerKind::SwinBlock) return halfSwinBlockLayout(layer.inputShape, spec).savedBytes;
  return halfSwinEndLayout(layer.kind, layer.inputShape, layer.outputShape, spec).savedBytes;
}

TEST(GpuSwinHalfHost, EveryLayerSavesTheModelsEOnABfloat16Stream) {
  for (const Chain& chain : everyChain()) {
    SCOPED_TRACE(chain.name);
    ASSERT_EQ(chain.step.precision, Precision::Bf16Mixed);
    auto modes = checkHalfChain(chain);
    ASSERT_TRUE(modes.isOk()) << modes.status().message();
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const ChainLayer& layer = chain.layers[l - 1];
      ASSERT_TRUE(isSwinKind(layer.kind)) << "layer " << l;
      EXPECT_TRUE((*modes)[l].outputHalf()) << "layer " << l;
      EXPECT_EQ((*modes)[l].inputHalf, l > 1) << "layer " << l;  // the float32 image, then the bfloat16 stream
      EXPECT_EQ(layer.numbers.outBytes, elementCount(layer.outputShape) * 2) << "layer " << l;
      EXPECT_EQ(layoutBytes(layer, chain.spec.layers[layer.specIndex]), layer.numbers.extraBytes) << "layer " << l;
    }
  }
}

// The layout is autocast's, not float32's: softmax's float32 result beside its bfloat16 cast, the
// weight copies; one window in the batch keeps qkv's output in place of the k and v copies.
TEST(GpuSwinHalfHost, TheBlocksLayoutIsAutocasts) {
  const Chain plain = testing::chainFromJson(testing::tinySwin(2, 40));
  const Chain half = mixed(testing::tinySwin(2, 40));
  const ChainLayer& layer = half.layers[2];  // the shifted block of stage 1: C 32, 2 heads, window 4
  ASSERT_EQ(layer.kind, LayerKind::SwinBlock);
  const HalfSwinBlockLayout t = halfSwinBlockLayout(layer.inputShape, half.spec.layers[layer.specIndex]);
  EXPECT_NE(t.savedBytes, plain.layers[2].numbers.extraBytes);
  // 10x10 pads to 12x12: 9 windows of 16 tokens per image, A = 2 * 9 * 2 * 16 * 16 elements
  const std::uint64_t A = 2ull * 9 * 2 * 16 * 16, Tp = 2ull * 12 * 12, C = 32;
  EXPECT_EQ(t.probs16 - t.probs32, A * 4);
  EXPECT_EQ(t.h1 - t.probs16, A * 2);
  EXPECT_EQ(t.q - t.qkvCopy, 3 * C * C * 2);
  EXPECT_EQ(t.k - t.q, Tp * C * 2);
  EXPECT_EQ(t.windowed, 2 * 2 * (2ull * 10 * 10) * 4);  // both norms' float32 statistics first
  const Chain single = mixed(testing::tinySwin(1, 32));
  const ChainLayer& last = single.layers[5];  // stage 2: 4x4, one window in the batch
  const HalfSwinBlockLayout s = halfSwinBlockLayout(last.inputShape, single.spec.layers[last.specIndex]);
  EXPECT_EQ(s.merged - s.qkvOut, 3ull * 16 * 64 * 2);
  EXPECT_EQ(s.merged - s.q, 4ull * 16 * 64 * 2);
}

// The ends' regions in the CPU's order (run_swin_ends_half.cpp): the embedding's image cast and
// kernel copy first, its statistics last; merging's concatenation and norm output before the
// statistics; the head's statistics first.
TEST(GpuSwinHalfHost, TheEndsLayoutsAreTheCpusOrder) {
  const Chain chain = mixed(testing::tinySwin(2, 40));
  auto layoutOf = [&](std::size_t l) {
    const ChainLayer& layer = chain.layers[l - 1];
    return halfSwinEndLayout(layer.kind, layer.inputShape, layer.outputShape, chain.spec.layers[layer.specIndex]);
  };
  const std::uint64_t image = 2ull * 3 * 40 * 40, T1 = 2ull * 10 * 10, T2 = 2ull * 5 * 5;
  const HalfSwinEndLayout embedding = layoutOf(1);
  EXPECT_EQ(embedding.cast, 0u);
  EXPECT_EQ(embedding.copy, image * 2);
  EXPECT_EQ(embedding.a - embedding.copy, 32ull * 3 * 4 * 4 * 2);  // the kernel's bfloat16 copy
  EXPECT_EQ(embedding.stats - embedding.a, T1 * 32 * 2);           // the conv's bfloat16 output
  EXPECT_EQ(embedding.savedBytes - embedding.stats, 2 * T1 * 4);
  const HalfSwinEndLayout merging = layoutOf(4);
  EXPECT_EQ(merging.b - merging.a, T2 * 128 * 2);
  EXPECT_EQ(merging.copy - merging.stats, 2 * T2 * 4);
  EXPECT_EQ(merging.savedBytes - merging.copy, 64ull * 128 * 2);
  const HalfSwinEndLayout head = layoutOf(7);
  EXPECT_EQ(head.a, 2 * T2 * 4);
  EXPECT_EQ(head.b - head.a, T2 * 64 * 2);
  EXPECT_EQ(head.savedBytes - head.copy, 10ull * 64 * 2);
}

TEST(GpuSwinHalfHost, EveryLayerPreparesOnItsBfloat16Runner) {
  for (const Chain& chain : everyChain()) {
    SCOPED_TRACE(chain.name);
    auto layers = prepareAll(chain);
    ASSERT_TRUE(layers.isOk()) << layers.status().message();
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const LayerState& s = (*layers)[l];
      const bool block = chain.layers[l - 1].kind == LayerKind::SwinBlock;
      EXPECT_TRUE(s.half && s.outputHalf()) << "layer " << l;
      EXPECT_EQ(s.halfSwin != nullptr, block) << "layer " << l;
      EXPECT_EQ(s.halfSwinEnd != nullptr, !block) << "layer " << l;
      EXPECT_TRUE(s.swin == nullptr && s.swinEnds == nullptr) << "layer " << l << ": not float32's runner";
      EXPECT_GE(s.requiredFwdWorkspace, chain.layers[l - 1].numbers.extraBytes) << "discard mode holds E";
      EXPECT_GT(s.requiredBwdWorkspace, 0u) << "layer " << l;
    }
  }
}

TEST(GpuSwinHalfHost, AnEOffByOneByteIsRefusedNamingTheLayer) {
  for (const Chain& base : everyChain())
    for (std::size_t l = 1; l <= base.size(); ++l) {
      Chain chain = base;
      chain.layers[l - 1].numbers.extraBytes += 1;
      auto modes = checkHalfChain(chain);
      ASSERT_FALSE(modes.isOk()) << base.name << " layer " << l;
      EXPECT_NE(modes.status().message().find(layerLabel(chain, l)), std::string::npos) << modes.status().message();
      EXPECT_NE(modes.status().message().find("extra bytes"), std::string::npos) << modes.status().message();
    }
}

// The embedding saves the image's cast (in = no); blocks and the head keep x(l-1) (their norms'
// backward reads it): a chain saying needs_input = false for one is refused naming the layer.
TEST(GpuSwinHalfHost, AMissingNeedsInputIsRefusedNamingTheLayer) {
  const Chain base = mixed(testing::tinySwin(2, 40, 0.2));
  EXPECT_FALSE(base.layers[0].numbers.needsInput) << "the embedding keeps the image's cast";
  int refused = 0;
  for (std::size_t l = 1; l <= base.size(); ++l) {
    if (!base.layers[l - 1].numbers.needsInput) continue;
    Chain chain = base;
    chain.layers[l - 1].numbers.needsInput = false;
    auto modes = checkHalfChain(chain);
    ASSERT_FALSE(modes.isOk()) << "layer " << l;
    EXPECT_NE(modes.status().message().find(layerLabel(chain, l)), std::string::npos) << modes.status().message();
    EXPECT_NE(modes.status().message().find("needs_input = false"), std::string::npos) << modes.status().message();
    ++refused;
  }
  EXPECT_EQ(refused, 4 + 1);  // the four blocks and the head
}

// As the CPU's: an odd channel count is refused by layer.
TEST(GpuSwinHalfHost, AnOddChannelCountIsRefused) {
  json file = testing::tinySwin(2, 40);
  file["layers"][0]["width"] = 15;                                    // stage 1: C 15, stage 2: C 30
  for (int block : {1, 2, 4, 5}) file["layers"][block]["heads"] = 3;  // heads dividing both
  const Chain chain = mixed(file);
  ASSERT_FALSE(chain.layers.empty());
  auto modes = checkHalfChain(chain);
  ASSERT_FALSE(modes.isOk());
  EXPECT_NE(modes.status().message().find(layerLabel(chain, 1)), std::string::npos) << modes.status().message();
  EXPECT_NE(modes.status().message().find("even channel count C, got 15"), std::string::npos)
      << modes.status().message();
}

// A chain starting inside a Swin reads the float32 batch, which the layout (the bfloat16 stream) refuses.
TEST(GpuSwinHalfHost, ABlockReadingTheFloat32BatchIsRefused) {
  json file = testing::tinySwin(2, 40);
  json layers = json::array({file["layers"][1], file["layers"][2]});
  file["layers"] = layers;
  file["input"]["shape"] = {2, 10, 10, 32};
  const Chain chain = mixed(file);
  ASSERT_EQ(chain.size(), 2u);
  auto modes = checkHalfChain(chain);
  ASSERT_FALSE(modes.isOk());
  EXPECT_NE(modes.status().message().find(layerLabel(chain, 1)), std::string::npos) << modes.status().message();
  EXPECT_NE(modes.status().message().find("reads a float32 input"), std::string::npos) << modes.status().message();
}

// An odd N * 3 * H * W puts the embedding's float32 statistics at an odd 2-byte offset of E, which
// the GPU's kernels cannot address: refused naming the layer (the model's numbers are fine).
TEST(GpuSwinHalfHost, AMisalignedFloat32RegionIsRefused) {
  json file = testing::tinySwin(1, 32);
  file["input"]["shape"] = {1, 3, 33, 33};
  const Chain chain = mixed(file);
  ASSERT_FALSE(chain.layers.empty());
  auto modes = checkHalfChain(chain);
  ASSERT_FALSE(modes.isOk());
  EXPECT_NE(modes.status().message().find(layerLabel(chain, 1)), std::string::npos) << modes.status().message();
  EXPECT_NE(modes.status().message().find("not a multiple of 4"), std::string::npos) << modes.status().message();
}

}  // namespace
}  // namespace remat::gpu
