#pragma once
// Runs one layer's CPU kernels in isolation for kernel tests: a chain "input -> relu -> [flatten]
// -> LAYER" where the test sets x(1) directly, so layer 2's forward and backward (including its
// input gradient d(1)) can be driven through the Device interface with canonical host data.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/input/chain_file.hpp"

namespace remat::testing {

inline std::vector<std::byte> toBytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline std::vector<float> toFloats(const std::vector<std::byte>& b) {
  std::vector<float> out(b.size() / 4);
  std::memcpy(out.data(), b.data(), out.size() * 4);
  return out;
}

// Deterministic values in [-scale, scale).
inline std::vector<float> randomFloats(std::size_t count, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(count);
  const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Input, 99);
  for (std::size_t i = 0; i < count; ++i) v[i] = (2.0f * rng::uniform01(rng::at(key, i)) - 1.0f) * scale;
  return v;
}

// A conv2d case of the kernel tests: the NCHW input, then the layer's fields.
struct ConvCase {
  std::array<std::int64_t, 4> in;
  std::int64_t out, kernel, stride, padding, groups;
  bool bias;

  std::vector<std::int64_t> inputShape() const { return {in.begin(), in.end()}; }
  nlohmann::json layer() const {
    return {{"name", "conv"},   {"kind", "conv2d"},   {"out_channels", out}, {"kernel", kernel},
            {"stride", stride}, {"padding", padding}, {"groups", groups},    {"bias", bias}};
  }
};

// A pool layer's JSON; kind: "maxpool" or "avgpool".
inline nlohmann::json poolLayer(const std::string& kind, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                                bool ceilMode) {
  return {{"name", "pool"},   {"kind", kind},       {"kernel", kernel},
          {"stride", stride}, {"padding", padding}, {"ceil_mode", ceilMode}};
}

class LayerHarness {
 public:
  // layer: the JSON of the layer under test; flatten: put a flatten before it.
  LayerHarness(std::vector<std::int64_t> inputShape, const nlohmann::json& layer, bool flatten = false)
      : device_(cpu::CpuDeviceOptions{.poisonMemory = true}) {
    nlohmann::json layers = nlohmann::json::array({{{"name", "pre"}, {"kind", "relu"}}});
    if (flatten) layers.push_back({{"name", "flat"}, {"kind", "flatten"}});
    layers.push_back(layer);
    const nlohmann::json j = {{"format", "remat-chain/1"},
                              {"name", "harness"},
                              {"input", {{"shape", inputShape}, {"dtype", "float32"}}},
                              {"layers", layers}};
    auto chain = parseChain(j.dump(), "harness");
    if (!chain) {
      error_ = chain.status().message();
      return;
    }
    chain_ = std::move(chain).value();
    Status st = device_.prepare(chain_);
    if (!st) error_ = st.message();
  }

  const std::string& error() const { return error_; }
  const Chain& chain() const { return chain_; }
  const LayerNumbers& numbers() const { return chain_.at(2); }
  std::size_t inputCount() const { return chain_.outBytes(1) / 4; }
  std::size_t outputCount() const { return chain_.outBytes(2) / 4; }
  std::size_t paramCount() const { return chain_.at(2).paramBytes / 4; }

  // y = layer(x; params), keep mode (discard mode when keep is false). Canonical layouts.
  std::vector<float> forward(const std::vector<float>& x, const std::vector<float>& params, bool keep = true,
                             std::uint64_t seed = 5) {
    release();
    const LayerNumbers& m = numbers();
    xBuffer_ = upload(x, TensorRole::Activation, 1);
    paramsBuffer_ = upload(params, TensorRole::Parameters, 2);
    yBuffer_ = allocate(m.outBytes);
    if (keep && m.extraBytes > 0) extraBuffer_ = allocate(m.extraBytes);
    DeviceBuffer workspace;
    const std::uint64_t workspaceBytes = workspaceFor(Pass::Forward);
    if (workspaceBytes > 0) workspace = allocate(workspaceBytes);
    Status st = device_.forward({.layer = 2,
                                 .mode = keep ? ForwardMode::Keep : ForwardMode::Discard,
                                 .input = xBuffer_,
                                 .output = yBuffer_,
                                 .extra = extraBuffer_,
                                 .workspace = workspace,
                                 .params = paramsBuffer_,
                                 .seed = seed,
                                 .sharedParams = {}});
    EXPECT_TRUE(st.isOk()) << st.message();
    if (workspace.valid()) (void)device_.allocator().release(workspace);
    return download(yBuffer_, TensorRole::Activation, 2);
  }

  struct Gradients {
    std::vector<float> dx;
    std::vector<float> dparams;
  };
  // After forward(keep = true): backward with d(2) = dy.
  Gradients backward(const std::vector<float>& dy, std::uint64_t seed = 5) {
    const LayerNumbers& m = numbers();
    DeviceBuffer dyBuffer = upload(dy, TensorRole::Activation, 2);
    DeviceBuffer dxBuffer = allocate(chain_.outBytes(1));
    DeviceBuffer grads;
    if (m.paramBytes > 0) {
      grads = allocate(m.paramBytes);
      EXPECT_TRUE(device_.fill(grads, 0).isOk());
    }
    DeviceBuffer workspace;
    const std::uint64_t workspaceBytes = workspaceFor(Pass::Backward);
    if (workspaceBytes > 0) workspace = allocate(workspaceBytes);
    // The buffers the model says the backward does not read stay empty.
    Status st = device_.backward({.layer = 2,
                                  .gradOutput = dyBuffer,
                                  .input = m.needsInput ? xBuffer_ : DeviceBuffer{},
                                  .output = m.needsOutput ? yBuffer_ : DeviceBuffer{},
                                  .extra = extraBuffer_,
                                  .gradInput = dxBuffer,
                                  .workspace = workspace,
                                  .params = paramsBuffer_,
                                  .paramGrads = grads,
                                  .seed = seed,
                                  .sharedParams = {},
                                  .sharedParamGrads = {}});
    EXPECT_TRUE(st.isOk()) << st.message();
    Gradients g;
    g.dx = download(dxBuffer, TensorRole::Activation, 1);
    if (grads.valid()) g.dparams = download(grads, TensorRole::Parameters, 2);
    for (DeviceBuffer b : {dyBuffer, dxBuffer, grads, workspace})
      if (b.valid()) (void)device_.allocator().release(b);
    return g;
  }

  cpu::CpuDevice& device() { return device_; }
  ~LayerHarness() { release(); }

 private:
  // What the device's kernels for layer 2 need in the pass (its oneDNN scratch), or the chain's
  // number when that is larger.
  std::uint64_t workspaceFor(Pass pass) {
    auto needed = device_.requiredWorkspaceBytes(2, pass);
    EXPECT_TRUE(needed.isOk()) << needed.status().message();
    const std::uint64_t stated = pass == Pass::Forward ? numbers().fwdWorkspaceBytes : numbers().bwdWorkspaceBytes;
    return needed.isOk() ? std::max(*needed, stated) : stated;
  }
  DeviceBuffer allocate(std::uint64_t bytes) {
    auto b = device_.allocator().allocate(bytes);
    EXPECT_TRUE(b.isOk());
    return b.isOk() ? *b : DeviceBuffer{};
  }
  DeviceBuffer upload(const std::vector<float>& values, TensorRole role, std::size_t layer) {
    if (values.empty()) return {};
    DeviceBuffer b = allocate(values.size() * 4);
    Status st = device_.upload(b, role, layer, toBytes(values));
    EXPECT_TRUE(st.isOk()) << st.message();
    return b;
  }
  std::vector<float> download(DeviceBuffer b, TensorRole role, std::size_t layer) {
    std::vector<std::byte> bytes(b.bytes);
    Status st = device_.download(b, role, layer, bytes);
    EXPECT_TRUE(st.isOk()) << st.message();
    return toFloats(bytes);
  }
  void release() {
    for (DeviceBuffer* b : {&xBuffer_, &paramsBuffer_, &yBuffer_, &extraBuffer_}) {
      if (b->valid()) (void)device_.allocator().release(*b);
      *b = {};
    }
  }

  cpu::CpuDevice device_;
  Chain chain_;
  std::string error_;
  DeviceBuffer xBuffer_, paramsBuffer_, yBuffer_, extraBuffer_;
};

}  // namespace remat::testing
