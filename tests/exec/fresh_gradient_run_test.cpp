// --grads static on the CPU (docs/memory-model.md 11.2): each B(l) writes its parameter gradient
// into a fresh buffer, which the device adds into the static G(l) (AccumulateGrad's
// `grad += new_grad`) before it is freed. Runs measure the prediction op by op and compute the
// in-place model's gradients bit for bit.
#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "cpu_bfloat16.hpp"
#include "executor_helpers.hpp"
#include "random_real_chain.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

const RunOptions kTwoSteps{.steps = 2, .captureGradients = true, .captureDigests = true};

Chain withGrads(const Chain& chain, GradMode grads, Precision precision = Precision::Fp32) {
  auto stepped = withStepOptions(chain, {.optimizer = OptimizerKind::Sgd, .grads = grads, .precision = precision});
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped.isOk() ? std::move(stepped).value() : chain;
}

Result<RunResult> runOn(const Chain& chain, const Plan& plan) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  const Chain fitted = testing::fittedTo(chain, device);
  auto run = runPlan(fitted, plan, device, testing::seeded(7), kTwoSteps);
  if (run.isOk())
    for (const Timeline& t : run->timelines) testing::expectMatchesSimulation(fitted, plan, t);
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
  return run;
}

// The digests of every d(l) B and SEED wrote, in op order (a static run's B also writes its fresh
// weight gradient, 'w').
std::vector<std::pair<std::size_t, std::uint64_t>> activationGradients(const RunResult& run) {
  std::vector<std::pair<std::size_t, std::uint64_t>> out;
  for (const TensorDigest& d : run.digests)
    if (d.tensor == 'd') out.emplace_back(d.layer, d.digest);
  return out;
}

// Static and in-place compute the same gradients (0 + g is g) with different memory.
void expectSameGradientsAsInPlace(const Chain& base, const Plan& plan, Precision precision = Precision::Fp32) {
  SCOPED_TRACE(base.name + " " + std::string(precisionName(precision)) + " [" + formatCheckpointList(plan) + "]");
  auto inPlace = runOn(withGrads(base, GradMode::InPlace, precision), plan);
  auto fresh = runOn(withGrads(base, GradMode::Static, precision), plan);
  ASSERT_TRUE(inPlace.isOk()) << inPlace.status().message();
  ASSERT_TRUE(fresh.isOk()) << fresh.status().message();
  ASSERT_FALSE(fresh->parameterGradients.empty());
  EXPECT_EQ(fresh->parameterGradients, inPlace->parameterGradients);
  EXPECT_EQ(activationGradients(*fresh), activationGradients(*inPlace));
  const Timeline& a = inPlace->timelines.back();
  const Timeline& b = fresh->timelines.back();
  ASSERT_EQ(a.entries.size(), b.entries.size());
  std::uint64_t extra = 0;
  for (std::size_t i = 0; i < a.entries.size(); ++i)
    extra = std::max(extra,
                     b.entries[i].footprintBytes - std::min(b.entries[i].footprintBytes, a.entries[i].footprintBytes));
  EXPECT_GT(extra, 0u) << "no backward held a fresh gradient";
}

TEST(FreshGradientRun, ResNet18StoreAllAndCheckpointed) {
  const Chain chain = testing::zooBuilt("resnet18", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
  expectSameGradientsAsInPlace(chain, Plan{});
  expectSameGradientsAsInPlace(chain, Plan{{3, 6}});
}

TEST(FreshGradientRun, Bf16MixedAndPureBf16) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const Chain chain = testing::zooBuilt("mobilenet_v2", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
  expectSameGradientsAsInPlace(chain, Plan{{4}}, Precision::Bf16Mixed);
  expectSameGradientsAsInPlace(chain, Plan{}, Precision::Bf16);
}

TEST(FreshGradientRun, RandomRealAndAbstractChains) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    auto real = buildChain(testing::randomRealChainSpec(seed, 5 + seed));
    ASSERT_TRUE(real.isOk()) << real.status().message();
    expectSameGradientsAsInPlace(*real, Plan{{2}});
    const Chain plain = makeRandomChain(mixedRandomChainOptions(4 + seed, 700 + seed));
    expectSameGradientsAsInPlace(testing::withParameters(plain, seed, 0), Plan{});
  }
}

// The device checks the two buffers as it checks every call's: sizes, and not one buffer twice.
TEST(FreshGradientRun, AccumulateChecksItsBuffers) {
  const Chain chain = withGrads(
      testing::zooBuilt("resnet18", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10}), GradMode::Static);
  cpu::CpuDevice device;
  ASSERT_TRUE(device.prepare(chain).isOk());
  const std::uint64_t p = chain.at(1).paramBytes;
  auto dst = device.allocator().allocate(p);
  auto small = device.allocator().allocate(p / 2);
  ASSERT_TRUE(dst.isOk() && small.isOk());
  const Status wrong = device.accumulateGradient(1, *dst, *small);
  EXPECT_EQ(wrong.code(), ErrorCode::Internal);
  EXPECT_NE(wrong.message().find("layer 1 gradient accumulation, fresh gradient"), std::string::npos)
      << wrong.message();
  const Status same = device.accumulateGradient(1, *dst, *dst);
  EXPECT_NE(same.message().find("the fresh gradient is the static one"), std::string::npos) << same.message();
  ASSERT_TRUE(device.allocator().release(*dst).isOk());
  ASSERT_TRUE(device.allocator().release(*small).isOk());
}

}  // namespace
}  // namespace remat
