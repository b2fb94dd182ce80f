// Issue 22's blocks on a real GPU (skipped, with the reason, where there is none): element-wise
// blocks on an MLP's [N, F] and a sequence's [N, S, F] (the activations, add, mul, sub, div and
// dropout) and NCHW blocks after a convolution with dropout, sub, div and a broadcasting add run
// every planner's plan with each op's measured footprint (our allocator's count) equal to the
// model's prediction and the gradients bit for bit store-all's (the inner dropouts' masks redrawn
// on recomputation), and give the CPU backend's gradients within 1e-4 (the same dropout masks:
// both draw each element's decision from its canonical index).
#include <gtest/gtest.h>

#include "cuda_run_helpers.hpp"
#include "elementwise_block_chains.hpp"
#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {
namespace {

class CudaElementwiseBlocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "issue 22's blocks on the GPU: " << available.message();
  }

  template <typename Body>
  static void forEachChain(Body body) {
    for (const Chain& chain :
         {blocks::mlpChain(), blocks::sequenceChain(), blocks::nchwChain(true), blocks::nchwChain(false)}) {
      SCOPED_TRACE(chain.name);
      body(chain);
    }
  }
};

TEST_F(CudaElementwiseBlocksTest, EveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  forEachChain([](const Chain& chain) { expectEveryPlanReproducesStoreAllOnTheGpu(chain, 31); });
}

TEST_F(CudaElementwiseBlocksTest, GradientsMatchTheCpu) {
  forEachChain([](const Chain& chain) { expectStoreAllGradientsNearTheCpus(chain, 9); });
}

}  // namespace
}  // namespace remat::gpu
