// The seeded random chain generator: reproducible bit for bit, and every option does what it says.
#include "remat/model/random_chain.hpp"

#include <gtest/gtest.h>

#include "remat/planners/planners.hpp"

namespace remat {
namespace {

std::uint64_t fingerprint(const Chain& chain) {
  // FNV-1a over every number of every layer.
  std::uint64_t h = 0xCBF29CE484222325ull;
  auto mix = [&h](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
  };
  mix(chain.inputBytes);
  for (const ChainLayer& l : chain.layers) {
    const LayerNumbers& m = l.numbers;
    for (std::uint64_t v : {m.outBytes, std::uint64_t{m.needsInput}, std::uint64_t{m.needsOutput}, m.extraBytes,
                            m.fwdWorkspaceBytes, m.bwdWorkspaceBytes, static_cast<std::uint64_t>(m.fwdCost * 2)})
      mix(v);
  }
  return h;
}

TEST(SplitMix64, ReferenceSequence) {
  // The published SplitMix64 outputs for seed 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(rng.next(), 0x06C45D188009454Full);
}

TEST(RandomChain, Reproducible) {
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const RandomChainOptions o = mixedRandomChainOptions(30, seed);
    EXPECT_EQ(fingerprint(makeRandomChain(o)), fingerprint(makeRandomChain(o)));
  }
  EXPECT_NE(fingerprint(makeRandomChain(mixedRandomChainOptions(30, 1))),
            fingerprint(makeRandomChain(mixedRandomChainOptions(30, 2))));
}

TEST(RandomChain, PinnedAcrossPlatforms) {
  // Pinned fingerprints: a change here means every seeded test chain changed.
  const RandomChainOptions general{.layers = 20, .seed = 42};
  const RandomChainOptions cnn{.layers = 20, .seed = 42, .cnnLike = true};
  EXPECT_EQ(fingerprint(makeRandomChain(general)), 16963033178164159327ull);
  // The CNN-like chains changed with the max pooling's numbers (PyTorch's indices, issue 21).
  EXPECT_EQ(fingerprint(makeRandomChain(cnn)), 3451140012776782832ull);
}

TEST(RandomChain, OptionsAreHonoured) {
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    RandomChainOptions o{.layers = 1 + seed % 40,
                         .seed = seed,
                         .mixFlags = false,
                         .extras = false,
                         .workspaces = false,
                         .equalSizes = true};
    const Chain plain = makeRandomChain(o);
    ASSERT_EQ(plain.size(), o.layers);
    for (const ChainLayer& l : plain.layers) {
      EXPECT_TRUE(l.numbers.needsInput);
      EXPECT_FALSE(l.numbers.needsOutput);
      EXPECT_EQ(l.numbers.extraBytes, 0u);
      EXPECT_EQ(l.numbers.fwdWorkspaceBytes + l.numbers.bwdWorkspaceBytes, 0u);
      EXPECT_EQ(l.numbers.outBytes, plain.layers[0].numbers.outBytes);
      EXPECT_EQ(l.numbers.outBytes % o.unitBytes, 0u);
    }
    o.cnnLike = true;
    o.extras = true;
    const Chain cnn = makeRandomChain(o);
    ASSERT_EQ(cnn.size(), o.layers);
    for (std::size_t l = 2; l <= cnn.size(); ++l) EXPECT_LE(cnn.outBytes(l), cnn.outBytes(l - 1));
    EXPECT_TRUE(segmentEndCostsNondecreasing(cnn));
  }
}

TEST(RandomChain, MixedOptionsCoverEveryFeature) {
  std::size_t cnn = 0, equal = 0, flagsOff = 0, extras = 0, workspaces = 0, inOff = 0, outOn = 0;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    const RandomChainOptions o = mixedRandomChainOptions(12, seed);
    cnn += o.cnnLike;
    equal += o.equalSizes && !o.cnnLike;
    flagsOff += !o.mixFlags;
    const Chain chain = makeRandomChain(o);
    for (const ChainLayer& l : chain.layers) {
      extras += l.numbers.extraBytes > 0;
      workspaces += l.numbers.fwdWorkspaceBytes + l.numbers.bwdWorkspaceBytes > 0;
      inOff += !l.numbers.needsInput;
      outOn += l.numbers.needsOutput;
    }
  }
  EXPECT_GT(cnn, 50u);
  EXPECT_GT(equal, 30u);
  EXPECT_GT(flagsOff, 10u);
  EXPECT_GT(extras, 300u);
  EXPECT_GT(workspaces, 300u);
  EXPECT_GT(inOff, 300u);
  EXPECT_GT(outOn, 300u);
}

}  // namespace
}  // namespace remat
