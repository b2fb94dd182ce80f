#pragma once
// Small builders shared by core (and GUI) tests: abstract layer numbers, layer specs of the real
// kinds, and chains built from them, from golden.json or from the zoo.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "remat/input/chain_file.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/model/step_options.hpp"
#include "remat/model/zoo.hpp"

namespace remat::testing {

// An abstract layer's numbers: a = outBytes, e = extraBytes, wf / wb = workspaces.
inline LayerNumbers numbers(std::uint64_t a, bool in = true, bool out = false, std::uint64_t e = 0,
                            std::uint64_t wf = 0, std::uint64_t wb = 0) {
  return {.outBytes = a,
          .needsInput = in,
          .needsOutput = out,
          .extraBytes = e,
          .fwdWorkspaceBytes = wf,
          .bwdWorkspaceBytes = wb};
}

// A layer of `kind`, every field but the name at its default. (The real kinds ignore `numbers`;
// it is listed because GCC's -Wextra flags an omitted member that has no default initializer; so is
// `ops`, which has none because clang needs BlockOpSpec complete for one.)
inline LayerSpec layerSpec(std::string name, LayerKind kind) {
  return {.name = std::move(name), .kind = kind, .numbers = {}, .ops = {}};
}

// A conv2d layer named "c".
inline LayerSpec convSpec(std::int64_t out, std::int64_t kernel, std::int64_t stride = 1, std::int64_t padding = 0,
                          std::int64_t groups = 1, bool bias = true) {
  return {.name = "c",
          .kind = LayerKind::Conv2d,
          .outChannels = out,
          .kernel = kernel,
          .stride = stride,
          .padding = padding,
          .groups = groups,
          .bias = bias,
          .numbers = {},
          .ops = {}};
}

// A max or average pool named "p".
inline LayerSpec poolSpec(LayerKind kind, std::int64_t kernel, std::int64_t stride, std::int64_t padding = 0,
                          bool ceilMode = false) {
  return {.name = "p",
          .kind = kind,
          .kernel = kernel,
          .stride = stride,
          .padding = padding,
          .ceilMode = ceilMode,
          .numbers = {},
          .ops = {}};
}

// A residual block named "b": width for bottlenecks, expandRatio for inverted residuals.
inline LayerSpec blockSpec(LayerKind kind, std::int64_t out, std::int64_t stride, std::int64_t width = 0,
                           std::int64_t expandRatio = 1) {
  return {.name = "b",
          .kind = kind,
          .outChannels = out,
          .stride = stride,
          .width = width,
          .expandRatio = expandRatio,
          .numbers = {},
          .ops = {}};
}

// buildChain on a chain "t" of `layers` after an input of `input`.
inline Result<Chain> chainFromLayers(Shape input, std::vector<LayerSpec> layers, DType dtype = DType::Float32) {
  ChainSpec spec;
  spec.name = "t";
  spec.input.shape = std::move(input);
  spec.input.dtype = dtype;
  spec.layers = std::move(layers);
  return buildChain(spec);
}

// Builds a chain from a chain-file JSON object (golden.json's "chain" entries); fails the test on
// error (and returns an empty chain).
inline Chain chainFromJson(const nlohmann::json& j) {
  auto spec = chainSpecFromJson(j, "golden.json");
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  if (!spec) return {};
  auto chain = buildChain(spec.value());
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

// A zoo model's chain, built; fails the test (and returns an empty chain) when the zoo or shape
// inference refuses.
inline Chain zooBuilt(const std::string& name, const ZooOptions& options = {}) {
  auto spec = zooChain(name, options);
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  if (!spec) return {};
  auto chain = buildChain(*spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

// Every combination of optimizer, foreach and gradient mode (memory-model.md section 11), 30 in all:
// on backward, static, in place.
inline StepOptions stepMode(std::size_t index) {
  const auto kinds = optimizerKinds();
  constexpr GradMode kModes[] = {GradMode::OnBackward, GradMode::Static, GradMode::InPlace};
  StepOptions options;
  options.optimizer = kinds[index % kinds.size()];
  options.foreach = (index / kinds.size()) % 2 == 0;
  options.grads = kModes[(index / (2 * kinds.size())) % 3];
  return options;
}
inline constexpr std::size_t kStepModeCount = 30;

// `chain` (abstract) with parameters on about two layers in three, each up to one to three times the
// largest activation (multiples of 4 bytes) (so the weight gradients and the optimizer step sometimes make the
// peak and sometimes do not), and step mode `mode`.
inline Chain withParameters(const Chain& chain, std::uint64_t seed, std::size_t mode) {
  SplitMix64 rng(seed ^ 0x5851f42d4c957f2dull);
  std::uint64_t largest = 1;
  for (std::size_t l = 1; l <= chain.size(); ++l) largest = std::max(largest, chain.at(l).outBytes);
  const std::uint64_t scale = 1 + rng.next() % 3;  // 1..3 times
  std::vector<LayerNumbers> layers;
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    LayerNumbers m = chain.at(l);
    m.paramBytes = rng.chance(2, 3) ? 4 * (1 + rng.next() % (scale * largest / 4 + 1)) : 0;
    layers.push_back(m);
  }
  Chain out = makeAbstractChain(chain.name + " +params", chain.inputBytes, layers);
  out.step = stepMode(mode);
  return out;
}

}  // namespace remat::testing
