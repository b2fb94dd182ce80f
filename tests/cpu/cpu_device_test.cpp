// The CPU backend's allocator (exact counts, high-water mark, poisoning, checked handles, the
// block cache) and the device's checks of what a call passes against the memory model.
#include "remat/cpu/cpu_device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_harness.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat {
namespace {

TEST(CpuAllocator, CountsExactBytesAndTracksTheHighWaterMark) {
  cpu::CpuAllocator a;
  auto x = a.allocate(1000);
  auto y = a.allocate(3);
  auto z = a.allocate(0);
  ASSERT_TRUE(x && y && z);
  EXPECT_TRUE(z->valid());
  EXPECT_EQ(a.bytesHeld(), 1003u);
  EXPECT_EQ(a.buffersHeld(), 3u);
  EXPECT_EQ(a.peakBytes(), 1003u);
  ASSERT_TRUE(a.release(*x).isOk());
  EXPECT_EQ(a.bytesHeld(), 3u);
  EXPECT_EQ(a.peakBytes(), 1003u);
  a.resetPeak();
  EXPECT_EQ(a.peakBytes(), 3u);
  auto w = a.allocate(500);
  ASSERT_TRUE(w);
  ASSERT_TRUE(a.release(*w).isOk());
  EXPECT_EQ(a.peakBytes(), 503u);
  EXPECT_EQ(a.bytesHeld(), 3u);
  ASSERT_TRUE(a.release(*y).isOk());
  ASSERT_TRUE(a.release(*z).isOk());
  EXPECT_EQ(a.bytesHeld(), 0u);
}

TEST(CpuAllocator, RejectsFreedAndForeignHandles) {
  cpu::CpuAllocator a;
  auto x = a.allocate(64);
  ASSERT_TRUE(x);
  ASSERT_TRUE(a.resolve(*x).isOk());
  ASSERT_TRUE(a.release(*x).isOk());
  EXPECT_EQ(a.release(*x).code(), ErrorCode::Internal) << "double free";
  EXPECT_EQ(a.resolve(*x).status().code(), ErrorCode::Internal) << "use after free";
  EXPECT_EQ(a.resolve(DeviceBuffer{12345, 64}).status().code(), ErrorCode::Internal);
  auto y = a.allocate(64);
  ASSERT_TRUE(y);
  EXPECT_NE(y->id, x->id) << "handles are never reused";
  EXPECT_EQ(a.resolve(DeviceBuffer{y->id, 32}).status().code(), ErrorCode::Internal) << "size mismatch";
}

TEST(CpuAllocator, PoisonsFreshAndFreedMemoryWithNaN) {
  cpu::CpuDeviceOptions options;
  options.poisonMemory = true;
  cpu::CpuAllocator a(options);
  auto x = a.allocate(4 * 17);
  ASSERT_TRUE(x);
  float values[17];
  std::memcpy(values, *a.resolve(*x), sizeof values);
  for (float v : values) EXPECT_TRUE(std::isnan(v));
  std::memset(*a.resolve(*x), 0, sizeof values);
  std::byte* raw = *a.resolve(*x);
  ASSERT_TRUE(a.release(*x).isOk());
  // The block went to the cache, poisoned: a stale pointer reads NaN, not the old zeros.
  std::memcpy(values, raw, sizeof values);
  for (float v : values) EXPECT_TRUE(std::isnan(v));
}

TEST(CpuAllocator, CacheReusesBlocksWithoutCountingThem) {
  cpu::CpuAllocator a;
  auto x = a.allocate(1 << 20);
  ASSERT_TRUE(x);
  std::byte* first = *a.resolve(*x);
  ASSERT_TRUE(a.release(*x).isOk());
  EXPECT_EQ(a.bytesHeld(), 0u);
  EXPECT_EQ(a.bytesCached(), 1u << 20);
  auto y = a.allocate((1 << 20) - 10);  // the same rounded size
  ASSERT_TRUE(y);
  EXPECT_EQ(*a.resolve(*y), first);
  EXPECT_EQ(a.bytesHeld(), (1u << 20) - 10);
  EXPECT_EQ(a.bytesCached(), 0u);
  ASSERT_TRUE(a.release(*y).isOk());
  a.releaseCache();
  EXPECT_EQ(a.bytesCached(), 0u);

  cpu::CpuDeviceOptions noCache;
  noCache.cacheBytes = 0;
  cpu::CpuAllocator b(noCache);
  auto z = b.allocate(256);
  ASSERT_TRUE(z && b.release(*z).isOk());
  EXPECT_EQ(b.bytesCached(), 0u);
}

TEST(CpuAllocator, CapacityGivesOutOfMemory) {
  cpu::CpuDeviceOptions options;
  options.capacityBytes = 1000;
  cpu::CpuAllocator a(options);
  auto x = a.allocate(600);
  ASSERT_TRUE(x);
  EXPECT_EQ(a.allocate(401).status().code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(a.allocate(400).isOk());
  EXPECT_EQ(a.bytesHeld(), 1000u);
}

// The device refuses calls that disagree with the model: a buffer B(l) does not read, extras in
// discard mode, wrong sizes, a layer outside the chain.
TEST(CpuDevice, ChecksCallsAgainstTheModel) {
  testing::LayerHarness h(
      {2, 3, 4, 4},
      nlohmann::json{{"name", "conv"}, {"kind", "conv2d"}, {"out_channels", 2}, {"kernel", 3}, {"padding", 1}});
  ASSERT_EQ(h.error(), "");
  cpu::CpuDevice& d = h.device();
  DeviceAllocator& a = d.allocator();
  auto x = *a.allocate(h.chain().outBytes(1));
  auto y = *a.allocate(h.chain().outBytes(2));
  auto wrong = *a.allocate(h.chain().outBytes(2) + 4);
  auto params = *a.allocate(h.numbers().paramBytes);
  ForwardCall f;
  f.layer = 2;
  f.input = x;
  f.output = wrong;
  f.params = params;
  EXPECT_EQ(d.forward(f).code(), ErrorCode::Internal);
  f.output = y;
  f.extra = y;
  EXPECT_EQ(d.forward(f).code(), ErrorCode::Internal) << "extras in discard mode";
  f.extra = {};
  f.layer = 3;
  EXPECT_EQ(d.forward(f).code(), ErrorCode::Internal);
  f.layer = 2;
  // oneDNN's scratch (the reordered weights, its scratchpad) is the workspace: a smaller one is
  // refused before any kernel runs, exactly the required one is enough.
  const std::uint64_t wf = *d.requiredWorkspaceBytes(2, Pass::Forward);
  ASSERT_GT(wf, 0u);
  auto shortWorkspace = *a.allocate(wf - 1);
  f.workspace = shortWorkspace;
  EXPECT_EQ(d.forward(f).code(), ErrorCode::Internal) << "a workspace below the kernels' need";
  f.workspace = *a.allocate(wf);
  EXPECT_TRUE(d.forward(f).isOk());

  auto grads = *a.allocate(h.numbers().paramBytes);
  auto dx = *a.allocate(h.chain().outBytes(1));
  BackwardCall b;
  b.layer = 2;
  b.gradOutput = y;
  b.input = x;
  b.gradInput = dx;
  b.params = params;
  b.paramGrads = grads;
  b.output = y;  // conv2d's backward does not read x(l): the model says out = false
  EXPECT_EQ(d.backward(b).code(), ErrorCode::Internal);
  b.output = {};
  b.input = {};  // ... but it does read x(l-1)
  EXPECT_EQ(d.backward(b).code(), ErrorCode::Internal);
  b.input = x;
  EXPECT_EQ(d.backward(b).code(), ErrorCode::Internal) << "no backward workspace";
  b.workspace = *a.allocate(*d.requiredWorkspaceBytes(2, Pass::Backward));
  EXPECT_TRUE(d.backward(b).isOk());
  EXPECT_EQ(d.upload(x, TensorRole::Raw, 0, std::vector<std::byte>(3)).code(), ErrorCode::Internal);
}

// The kernels' needs (layer_checks.hpp) agree with every primitive kind's numbers, and a chain
// whose numbers say less than the kernels read or save is refused, naming the layer and the field.
TEST(CpuDevice, RefusesNumbersItsKernelsContradict) {
  auto parsed = parseChain(R"({"format": "remat-chain/1", "name": "kinds", "input": {"shape": [2, 3, 8, 8]},
    "layers": [{"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
               {"name": "bn", "kind": "batchnorm"}, {"name": "relu", "kind": "relu6"},
               {"name": "pool", "kind": "maxpool", "kernel": 2, "stride": 2},
               {"name": "avg", "kind": "avgpool", "kernel": 2, "stride": 2},
               {"name": "drop", "kind": "dropout", "p": 0.5},
               {"name": "gap", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
               {"name": "flat", "kind": "flatten"}, {"name": "fc", "kind": "linear", "out_features": 5, "bias": false},
               {"name": "bn1d", "kind": "batchnorm"}]})",
                           "kinds");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  const Chain& chain = *parsed;
  cpu::CpuDevice device;
  ASSERT_TRUE(device.prepare(chain).isOk());

  struct Contradiction {
    std::size_t layer;
    void (*edit)(ChainLayer&);
    std::string message;
  };
  const std::vector<Contradiction> contradictions = {
      {1, [](ChainLayer& c) { c.numbers.needsInput = false; },
       "backward reads that tensor, but the chain says needs_input = false"},
      {1, [](ChainLayer& c) { c.numbers.extraBytes = 4; }, "saves 0 extra bytes, the chain says e = 4"},
      {1, [](ChainLayer& c) { c.paramCount -= 1; }, "expected 108 parameters, the chain says 111"},
      {2, [](ChainLayer& c) { c.numbers.extraBytes -= 1; }, "saves 32 extra bytes, the chain says e = 31"},
      {3, [](ChainLayer& c) { c.numbers.needsInput = false; }, "needs_input = false"},  // relu6 reads x
      {4, [](ChainLayer& c) { c.numbers.needsInput = false; }, "needs_input = false"},
      {4, [](ChainLayer& c) { c.numbers.extraBytes = 0; }, "saves 1024 extra bytes, the chain says e = 0"},
      {6, [](ChainLayer& c) { c.numbers.extraBytes = 0; }, "saves 32 extra bytes, the chain says e = 0"},
      {7,
       [](ChainLayer& c) {
         c.inputShape = Shape{2, 16};
       },
       "do not take a [2, 16] -> [2, 4, 1, 1] layer"},
      {8, [](ChainLayer& c) { c.numbers.needsInput = false; }, "needs_input = false"},
      {8, [](ChainLayer& c) { c.paramCount = 21; }, "expected 20 parameters, the chain says 21"},
      {9, [](ChainLayer& c) { c.numbers.extraBytes = 0; }, "saves 40 extra bytes"},
  };
  for (const Contradiction& c : contradictions) {
    Chain edited = chain;
    c.edit(edited.layers[c.layer - 1]);
    const Status status = device.prepare(edited);
    EXPECT_EQ(status.code(), ErrorCode::InvalidInput) << "layer " << c.layer << ": " << c.message;
    EXPECT_NE(status.message().find(layerLabel(chain, c.layer) + ": "), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
  }
  // A chain may say a backward reads more than it does: the tensor is merely kept longer.
  Chain cautious = chain;
  cautious.layers[5].numbers.needsInput = true;  // dropout
  EXPECT_TRUE(device.prepare(cautious).isOk());
}

// A block's workspaces are its arena (the chain's inferred wf / wb) and, after it at a 256-byte
// boundary, the largest scratch of its inner primitives.
TEST(CpuDevice, BlockWorkspaceIsItsArenaPlusInnerScratch) {
  testing::LayerHarness h(
      {2, 4, 6, 6},
      nlohmann::json{{"name", "b"}, {"kind", "bottleneck"}, {"out_channels", 8}, {"width", 2}, {"stride", 2}});
  ASSERT_EQ(h.error(), "");
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    const std::uint64_t arena = pass == Pass::Forward ? h.numbers().fwdWorkspaceBytes : h.numbers().bwdWorkspaceBytes;
    const std::uint64_t required = *h.device().requiredWorkspaceBytes(2, pass);
    EXPECT_GT(arena, 0u);
    EXPECT_GT(required, (arena + 255) / 256 * 256) << "the inner convolutions' scratch comes after the arena";
  }
}

}  // namespace
}  // namespace remat
