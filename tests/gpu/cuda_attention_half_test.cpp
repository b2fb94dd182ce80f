// The fused rule's bfloat16 flash kernels on the GPU (gpu/src/kernels_attention_half.cu, issue 24)
// against the CPU backend's (core/src/cpu/kernels_attention_half.cpp): for causal and bidirectional
// attention, without and with dropout, the bfloat16 output, the float32 log-sum-exp and dq, dk, dv
// agree with the CPU's (same loops, same order; fused multiply-adds may move a result by one
// bfloat16 step), and the bfloat16 head split and merge are exact copies. Needs a GPU: without one
// every test skips, saying why. Math attention's bfloat16 softmax and its backward are compared
// the same way, from the bfloat16 products q k^T and dO v^T its cuBLAS calls will make.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "cpu/attention_half.hpp"  // the CPU backend's (core/src/cpu)
#include "device_array.hpp"
#include "kernels_attention_half.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {
namespace {

using cpu::BFloat16;
using kernels::Bf16;

std::vector<BFloat16> randomHalves(std::size_t count, std::uint32_t seed) {
  return gpu::randomHalves(count, seed, 2.0f);  // device_array.hpp's, in [-2.0, 2.0)
}

// Within one bfloat16 step of the CPU's (2^-7 of the element) or 1e-3 of the tensor's largest.
void expectNearTheCpus(const std::vector<BFloat16>& gpu, const std::vector<BFloat16>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  float largest = 0.0f;
  for (const BFloat16& v : cpu) largest = std::max(largest, std::fabs(v.value()));
  std::size_t far = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const float diff = std::fabs(gpu[i].value() - cpu[i].value());
    far += diff > std::fabs(cpu[i].value()) / 128.0f + 1e-3f * largest ? 1 : 0;
  }
  EXPECT_EQ(far, 0u) << what << ": elements further than one bfloat16 step from the CPU's";
  EXPECT_GT(largest, 0.0f) << what;
}

class CudaAttentionHalfTest : public ::testing::TestWithParam<std::tuple<bool, double>> {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "bf16 attention kernels on the GPU: " << available.message();
  }
};

TEST_P(CudaAttentionHalfTest, FlashForwardAndBackwardAreTheCpus) {
  const auto [causal, p] = GetParam();
  const cpu::AttentionGeometry cg{2, 19, 3, 16, causal, 1};
  const kernels::AttentionShape g{cg.batch, cg.seq, cg.heads, cg.headDim, causal};
  const std::uint64_t key = rng::streamKey(7, rng::Purpose::Dropout, 2);
  const auto tokens = static_cast<std::size_t>(cg.tokens()), d = static_cast<std::size_t>(cg.width());
  const std::size_t rows = static_cast<std::size_t>(cg.batch * cg.heads * cg.seq);
  const std::vector<BFloat16> qkv = randomHalves(tokens * 3 * d, 1), dOut = randomHalves(tokens * d, 2);
  const cpu::DropoutDraw draw = p > 0.0 ? cpu::DropoutDraw(key, p) : cpu::DropoutDraw();
  // per-thread scratch for every OpenMP thread the CPU kernels may use
  std::vector<float> scratch(static_cast<std::size_t>(cpu::halfAttentionThreadFloats(cg)) * 256);
  std::vector<BFloat16> cpuOut(tokens * d), cpuDqkv(tokens * 3 * d);
  std::vector<float> cpuLse(rows);
  cpu::fusedAttentionForwardHalf(cg, qkv.data(), cpuOut.data(), cpuLse.data(), scratch.data(), draw);
  cpu::fusedAttentionBackwardHalf(cg, qkv.data(), cpuOut.data(), cpuLse.data(), dOut.data(), cpuDqkv.data(),
                                  scratch.data(), draw);

  DeviceArray<Bf16> qkvDevice(qkv.size()), out(cpuOut.size()), dOutDevice(dOut.size()), dqkv(cpuDqkv.size());
  DeviceArray<float> lse(rows);
  qkvDevice.upload(qkv);
  dOutDevice.upload(dOut);
  const kernels::AttentionDrop drop{key, p};
  ASSERT_TRUE(kernels::flashAttentionForwardHalf(nullptr, g, drop, qkvDevice.get(), out.get(), lse.get()).isOk());
  const std::vector<BFloat16> gpuOut = out.download<BFloat16>();
  expectNearTheCpus(gpuOut, cpuOut, "out");
  const std::vector<float> gpuLse = lse.download<float>();
  for (std::size_t r = 0; r < rows; ++r) EXPECT_NEAR(gpuLse[r], cpuLse[r], 1e-4f * (1.0f + std::fabs(cpuLse[r])));
  // The backward from the CPU's output, so both differentiate the same forward.
  out.upload(cpuOut);
  lse.upload(cpuLse);
  ASSERT_TRUE(kernels::flashAttentionBackwardHalf(nullptr, g, drop, qkvDevice.get(), out.get(), lse.get(),
                                                  dOutDevice.get(), dqkv.get())
                  .isOk());
  expectNearTheCpus(dqkv.download<BFloat16>(), cpuDqkv, "dq, dk, dv");
}

float dotHalf(const BFloat16* a, const BFloat16* b, std::size_t n) {  // the CPU's order
  float sum = 0.0f;
  for (std::size_t c = 0; c < n; ++c) sum += a[c].value() * b[c].value();
  return sum;
}

// The bfloat16 products the math rule's cuBLAS calls make, in the CPU's order: out[pair][i][j] =
// bfloat16(a_i . b_j) over the [N*h][S][dh] heads.
std::vector<BFloat16> headProducts(const cpu::AttentionGeometry& g, const std::vector<BFloat16>& a,
                                   const std::vector<BFloat16>& b) {
  const auto S = static_cast<std::size_t>(g.seq), dh = static_cast<std::size_t>(g.headDim);
  std::vector<BFloat16> out;
  for (std::size_t pair = 0; pair < static_cast<std::size_t>(g.batch * g.heads); ++pair)
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t j = 0; j < S; ++j)
        out.emplace_back(dotHalf(&a[(pair * S + i) * dh], &b[(pair * S + j) * dh], dh));
  return out;
}

// Math attention's softmax and its backward on the GPU from the bfloat16 products q k^T and dO v^T:
// the probabilities, the mask and the dropped probabilities are the CPU's, and dq = dS k (summed
// here in the CPU's order) is the CPU's dq.
TEST_P(CudaAttentionHalfTest, MathSoftmaxAndItsBackwardAreTheCpus) {
  const auto [causal, p] = GetParam();
  const cpu::AttentionGeometry cg{2, 13, 2, 8, causal, 1};
  const kernels::AttentionShape g{cg.batch, cg.seq, cg.heads, cg.headDim, causal};
  const auto S = static_cast<std::size_t>(cg.seq), dh = static_cast<std::size_t>(cg.headDim);
  const std::size_t pairs = static_cast<std::size_t>(cg.batch * cg.heads), heads = pairs * S * dh;
  const std::vector<BFloat16> q = randomHalves(heads, 4), k = randomHalves(heads, 5), v = randomHalves(heads, 6);
  const std::vector<BFloat16> dOut = randomHalves(heads, 7);
  const std::uint64_t key = rng::streamKey(9, rng::Purpose::Dropout, 1);
  std::vector<BFloat16> probs(pairs * S * S), out(heads), cpuDropped(pairs * S * S);
  std::vector<std::uint8_t> cpuMask(pairs * S * S);
  cpu::HalfAttentionDropout cpuDrop;
  if (p > 0.0) cpuDrop = {cpu::DropoutDraw(key, p), cpuMask.data(), cpuDropped.data()};
  std::vector<float> scratch(static_cast<std::size_t>(cpu::halfAttentionThreadFloats(cg)) * 256);
  cpu::mathAttentionForwardHalf(cg, q.data(), k.data(), v.data(), probs.data(), out.data(), scratch.data(), cpuDrop);
  std::vector<BFloat16> cpuDqkv(static_cast<std::size_t>(cg.tokens()) * 3 * cg.width());
  cpu::mathAttentionBackwardHalf(cg, q.data(), k.data(), v.data(), probs.data(), dOut.data(), cpuDqkv.data(),
                                 scratch.data(), cpuDrop);

  const kernels::AttentionDrop drop{key, p};
  DeviceArray<Bf16> scores(probs.size()), dropped(probs.size()), cpuProbs(probs.size()), ds(probs.size());
  DeviceArray<std::uint8_t> mask(probs.size());
  scores.upload(headProducts(cg, q, k));
  ASSERT_TRUE(kernels::attentionSoftmaxHalf(nullptr, g, drop, scores.get(), mask.get(), dropped.get()).isOk());
  expectNearTheCpus(scores.download<BFloat16>(), probs, "probabilities");
  if (p > 0.0) {
    EXPECT_EQ(mask.download<std::uint8_t>(), cpuMask);
    expectNearTheCpus(dropped.download<BFloat16>(), cpuDropped, "dropped probabilities");
    mask.upload(cpuMask);
  }
  cpuProbs.upload(probs);
  ds.upload(headProducts(cg, dOut, v));
  ASSERT_TRUE(kernels::attentionSoftmaxBackwardHalf(nullptr, g, drop, cpuProbs.get(), mask.get(), ds.get()).isOk());
  const std::vector<BFloat16> dScores = ds.download<BFloat16>();
  std::vector<BFloat16> dq, cpuDq;
  for (std::size_t pair = 0; pair < pairs; ++pair)
    for (std::size_t i = 0; i < S; ++i) {
      const std::size_t n = pair / static_cast<std::size_t>(cg.heads), h = pair % static_cast<std::size_t>(cg.heads);
      const std::size_t row = (n * S + i) * 3 * static_cast<std::size_t>(cg.width()) + h * dh;
      for (std::size_t c = 0; c < dh; ++c) {
        float sum = 0.0f;
        for (std::size_t j = 0; j < (causal ? i + 1 : S); ++j)
          sum += dScores[(pair * S + i) * S + j].value() * k[(pair * S + j) * dh + c].value();
        dq.emplace_back(sum);
        cpuDq.push_back(cpuDqkv[row + c]);
      }
      if (causal) {
        for (std::size_t j = i + 1; j < S; ++j) EXPECT_EQ(dScores[(pair * S + i) * S + j].bits, 0u);
      }
    }
  expectNearTheCpus(dq, cpuDq, "dq from the GPU's d(scores)");
}

INSTANTIATE_TEST_SUITE_P(CausalAndDropout, CudaAttentionHalfTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(0.0, 0.2)));

TEST_P(CudaAttentionHalfTest, HeadSplitAndMergeAreCopies) {
  const auto [causal, p] = GetParam();
  if (causal || p > 0.0) GTEST_SKIP() << "one geometry is enough for the copies";
  const cpu::AttentionGeometry cg{2, 5, 4, 8, false, 1};
  const kernels::AttentionShape g{cg.batch, cg.seq, cg.heads, cg.headDim, false};
  const auto tokens = static_cast<std::size_t>(cg.tokens()), d = static_cast<std::size_t>(cg.width());
  const std::vector<BFloat16> rows = randomHalves(tokens * 3 * d, 3);
  std::vector<BFloat16> cpuHeads(tokens * d), cpuRows(tokens * 3 * d, BFloat16(0.0f));
  cpu::rowsToHeadsHalf(cg, rows.data(), 3 * cg.width(), cg.width(), cpuHeads.data());  // the k columns
  cpu::headsToRowsHalf(cg, cpuHeads.data(), cpuRows.data(), 3 * cg.width(), 2 * cg.width());
  DeviceArray<Bf16> rowsDevice(rows.size()), heads(cpuHeads.size()), back(cpuRows.size());
  rowsDevice.upload(rows);
  back.upload(std::vector<BFloat16>(cpuRows.size(), BFloat16(0.0f)));
  ASSERT_TRUE(kernels::rowsToHeadsHalf(nullptr, g, rowsDevice.get(), 3 * g.width(), g.width(), heads.get()).isOk());
  ASSERT_TRUE(kernels::headsToRowsHalf(nullptr, g, heads.get(), back.get(), 3 * g.width(), 2 * g.width()).isOk());
  const auto bits = [](const std::vector<BFloat16>& v) {
    std::vector<std::uint16_t> out;
    for (const BFloat16& x : v) out.push_back(x.bits);
    return out;
  };
  EXPECT_EQ(bits(heads.download<BFloat16>()), bits(cpuHeads));
  EXPECT_EQ(bits(back.download<BFloat16>()), bits(cpuRows));
}

}  // namespace
}  // namespace remat::gpu
