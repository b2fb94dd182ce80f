#pragma once
// Drives a whole chain's training step through the CPU device by hand, store-all (F(1..n) in
// keep mode, SEED, B(n..1)), with values the test gives: x0, each layer's parameters and the
// labels (canonical layouts). What the kernel tests of whole models (tests/exec/transformer_*)
// compare with PyTorch's loss.backward(): every layer's parameter gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cpu_harness.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/device_calls.hpp"

namespace remat::testing {

class ChainDriver {
 public:
  explicit ChainDriver(const Chain& chain) : chain_(chain), device_(cpu::CpuDeviceOptions{.poisonMemory = true}) {
    Status st = device_.prepare(chain_);
    if (!st) error_ = st.message();
  }
  const std::string& error() const { return error_; }

  // The parameter gradients of every layer (index l - 1), or an empty vector on failure (the
  // failure is reported; `failure` receives the first error's message).
  std::vector<std::vector<float>> step(const std::vector<float>& x0, const std::vector<std::vector<float>>& params,
                                       const std::vector<LabelIndex>& labels, std::string* failure = nullptr) {
    const std::size_t n = chain_.size();
    std::vector<DeviceBuffer> x(n + 1), extra(n + 1), p(n + 1), grads(n + 1);
    std::vector<std::vector<float>> out;
    auto fail = [&](const Status& st) {
      if (failure != nullptr && failure->empty()) *failure = st.message();
      return st.isOk();
    };
    x[0] = upload(toBytes(x0), TensorRole::Activation, 0);
    bool ok = true;
    for (std::size_t l = 1; l <= n && ok; ++l) {
      const LayerNumbers& m = chain_.at(l);
      p[l] = upload(toBytes(params[l - 1]), TensorRole::Parameters, l);
      grads[l] = allocate(m.paramBytes);  // all zeroed before the backward: a tied head adds into layer 1's
      if (grads[l].valid()) ok = fail(device_.fill(grads[l], 0));
      x[l] = allocate(m.outBytes);
      if (m.extraBytes > 0) extra[l] = allocate(m.extraBytes);
      DeviceBuffer work = workspace(l, Pass::Forward);
      ok = fail(device_.forward({.layer = l,
                                 .mode = ForwardMode::Keep,
                                 .input = x[l - 1],
                                 .output = x[l],
                                 .extra = extra[l],
                                 .workspace = work,
                                 .params = p[l],
                                 .seed = 1,
                                 .sharedParams = shared(p, l)}));
      release(work);
    }
    DeviceBuffer d = allocate(chain_.outBytes(n));
    DeviceBuffer labelBuffer =
        upload(std::vector<std::byte>(reinterpret_cast<const std::byte*>(labels.data()),
                                      reinterpret_cast<const std::byte*>(labels.data() + labels.size())),
               TensorRole::Labels, 0);
    if (ok) ok = fail(device_.lossSeed({.logits = x[n], .labels = labelBuffer, .gradLogits = d, .seed = 1}));
    for (std::size_t l = n; l >= 1 && ok; --l) {
      const LayerNumbers& m = chain_.at(l);
      DeviceBuffer dx = l > 1 ? allocate(chain_.outBytes(l - 1)) : DeviceBuffer{};
      DeviceBuffer work = workspace(l, Pass::Backward);
      ok = ok && fail(device_.backward({.layer = l,
                                        .gradOutput = d,
                                        .input = m.needsInput ? x[l - 1] : DeviceBuffer{},
                                        .output = m.needsOutput ? x[l] : DeviceBuffer{},
                                        .extra = extra[l],
                                        .gradInput = dx,
                                        .workspace = work,
                                        .params = p[l],
                                        .paramGrads = grads[l],
                                        .seed = 1,
                                        .sharedParams = shared(p, l),
                                        .sharedParamGrads = shared(grads, l)}));
      release(work);
      release(d);
      d = dx;
    }
    release(d);
    if (ok)
      for (std::size_t l = 1; l <= n; ++l) out.push_back(download(grads[l], TensorRole::Parameters, l));
    for (std::vector<DeviceBuffer>* v : {&x, &extra, &p, &grads})
      for (DeviceBuffer b : *v) release(b);
    release(labelBuffer);
    EXPECT_EQ(device_.allocator().bytesHeld(), 0u);
    return out;
  }

 private:
  // Layer l's view of the layer whose parameters it shares (a tied lm_head: layer 1's).
  DeviceBuffer shared(const std::vector<DeviceBuffer>& perLayer, std::size_t l) const {
    const std::size_t owner = sharedParamsLayer(chain_, l);
    return owner > 0 ? perLayer[owner] : DeviceBuffer{};
  }
  DeviceBuffer workspace(std::size_t l, Pass pass) {
    auto needed = device_.requiredWorkspaceBytes(l, pass);
    const LayerNumbers& m = chain_.at(l);
    const std::uint64_t stated = pass == Pass::Forward ? m.fwdWorkspaceBytes : m.bwdWorkspaceBytes;
    return allocate(needed.isOk() ? std::max(*needed, stated) : stated);
  }
  DeviceBuffer allocate(std::uint64_t bytes) {
    if (bytes == 0) return {};
    auto b = device_.allocator().allocate(bytes);
    EXPECT_TRUE(b.isOk());
    return b.isOk() ? *b : DeviceBuffer{};
  }
  DeviceBuffer upload(const std::vector<std::byte>& bytes, TensorRole role, std::size_t layer) {
    DeviceBuffer b = allocate(bytes.size());
    if (b.valid()) {
      EXPECT_TRUE(device_.upload(b, role, layer, bytes).isOk());
    }
    return b;
  }
  std::vector<float> download(DeviceBuffer b, TensorRole role, std::size_t layer) {
    if (!b.valid()) return {};
    std::vector<std::byte> bytes(b.bytes);
    EXPECT_TRUE(device_.download(b, role, layer, bytes).isOk());
    return toFloats(bytes);
  }
  void release(DeviceBuffer b) {
    if (b.valid()) (void)device_.allocator().release(b);
  }

  Chain chain_;
  cpu::CpuDevice device_;
  std::string error_;
};

}  // namespace remat::testing
