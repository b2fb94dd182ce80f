#include "remat/exec/device_calls.hpp"

#include <string>

namespace remat {

ForwardBuffers ForwardMemory::floats() const {
  ForwardBuffers b;
  b.x = reinterpret_cast<const float*>(x);
  b.y = reinterpret_cast<float*>(y);
  b.extra = extra;
  b.workspace = workspace;
  b.params = reinterpret_cast<const float*>(params);
  b.sharedParams = reinterpret_cast<const float*>(sharedParams);
  return b;
}

BackwardBuffers BackwardMemory::floats() const {
  BackwardBuffers b;
  b.dy = reinterpret_cast<const float*>(dy);
  b.x = reinterpret_cast<const float*>(x);
  b.y = reinterpret_cast<const float*>(y);
  b.extra = extra;
  b.dx = reinterpret_cast<float*>(dx);
  b.workspace = workspace;
  b.params = reinterpret_cast<const float*>(params);
  b.paramGrads = reinterpret_cast<float*>(paramGrads);
  b.sharedParams = reinterpret_cast<const float*>(sharedParams);
  b.sharedParamGrads = reinterpret_cast<float*>(sharedParamGrads);
  b.freshParamGrads = freshParamGrads;
  return b;
}

Status requirePreparedLayer(const CountingAllocator& allocator, const std::optional<Chain>& chain, std::size_t layer) {
  if (!chain) return Status::internal(allocator.device() + ": no chain prepared");
  if (layer < 1 || layer > chain->size())
    return Status::internal(allocator.device() + ": layer " + std::to_string(layer) + " is outside 1.." +
                            std::to_string(chain->size()));
  return Status::ok();
}

Result<std::byte*> checkedMemory(const CountingAllocator& allocator, DeviceBuffer buffer, std::uint64_t bytes,
                                 std::string_view where, std::string_view what, bool optional, bool atLeast) {
  // Messages are built only on failure: this runs several times per op.
  auto label = [&] {
    return allocator.device() + ": " + std::string(where) + (where.empty() ? "" : ", ") + std::string(what);
  };
  if (!buffer.valid()) {
    if (optional) return static_cast<std::byte*>(nullptr);
    return Status::internal(label() + ": no buffer given");
  }
  if (atLeast ? buffer.bytes < bytes : buffer.bytes != bytes)
    return Status::internal(label() + ": buffer #" + std::to_string(buffer.id) + " has " +
                            std::to_string(buffer.bytes) + " bytes, the kernel needs " + (atLeast ? "at least " : "") +
                            std::to_string(bytes));
  auto data = allocator.memoryOf(buffer);
  if (!data) return data.status().withContext(label());
  return static_cast<std::byte*>(*data);
}

namespace {

// Resolves buffers into the fields of a *Memory struct, keeping the first error.
class Resolver {
 public:
  Resolver(const CountingAllocator& allocator, std::string_view where) : allocator_(allocator), where_(where) {}
  void operator()(std::byte*& out, DeviceBuffer buffer, std::uint64_t bytes, std::string_view what, bool optional,
                  bool atLeast = false) {
    if (!status_) return;
    auto data = checkedMemory(allocator_, buffer, bytes, where_, what, optional, atLeast);
    if (data)
      out = *data;
    else
      status_ = data.status();
  }
  const Status& status() const { return status_; }

 private:
  const CountingAllocator& allocator_;
  std::string_view where_;
  Status status_ = Status::ok();
};

}  // namespace

Result<ForwardMemory> checkForwardCall(const CountingAllocator& allocator, const Chain& chain, const ForwardCall& call,
                                       std::string_view label, std::uint64_t requiredWorkspaceBytes) {
  const std::size_t l = call.layer;
  const LayerNumbers& m = chain.at(l);
  const bool wantsExtra = call.mode == ForwardMode::Keep && m.extraBytes > 0;
  ForwardMemory memory;
  Resolver resolve(allocator, label);
  resolve(memory.x, call.input, chain.outBytes(l - 1), "forward input x(l-1)", false);
  resolve(memory.y, call.output, m.outBytes, "forward output x(l)", false);
  if (resolve.status() && !wantsExtra && call.extra.valid())
    return Status::internal(allocator.device() + ": " + std::string(label) +
                            " forward: extras passed in discard mode or for a layer without extras");
  resolve(memory.extra, call.extra, m.extraBytes, "forward extras E(l)", !wantsExtra);
  resolve(memory.workspace, call.workspace, requiredWorkspaceBytes, "forward workspace", requiredWorkspaceBytes == 0,
          true);
  resolve(memory.params, call.params, m.paramBytes, "forward parameters", m.paramBytes == 0);
  const std::size_t owner = sharedParamsLayer(chain, l);
  if (owner == 0 && call.sharedParams.valid())
    return Status::internal(allocator.device() + ": " + std::string(label) +
                            " forward: shared parameters passed to a layer that shares none");
  if (owner > 0)
    resolve(memory.sharedParams, call.sharedParams, chain.at(owner).paramBytes, "forward shared parameters", false);
  if (!resolve.status()) return resolve.status();
  return memory;
}

Result<BackwardMemory> checkBackwardCall(const CountingAllocator& allocator, const Chain& chain,
                                         const BackwardCall& call, std::string_view label,
                                         std::uint64_t requiredWorkspaceBytes) {
  const std::size_t l = call.layer;
  const LayerNumbers& m = chain.at(l);
  // A buffer the model says B(l) does not read must not be passed: the interpreter's liveness
  // would otherwise disagree with the simulator's.
  auto presentIff = [&](const DeviceBuffer& b, bool wanted, const char* name) -> Status {
    if (!wanted && b.valid())
      return Status::internal(allocator.device() + ": " + std::string(label) + " backward: " + name +
                              " passed, but the model says B(l) does not use it");
    return Status::ok();
  };
  REMAT_RETURN_IF_ERROR(presentIff(call.input, m.needsInput, "x(l-1)"));
  REMAT_RETURN_IF_ERROR(presentIff(call.output, m.needsOutput, "x(l)"));
  REMAT_RETURN_IF_ERROR(presentIff(call.extra, m.extraBytes > 0, "E(l)"));
  REMAT_RETURN_IF_ERROR(presentIff(call.gradInput, l > 1, "d(l-1)"));
  BackwardMemory memory;
  Resolver resolve(allocator, label);
  resolve(memory.dy, call.gradOutput, m.outBytes, "backward d(l)", false);
  resolve(memory.x, call.input, chain.outBytes(l - 1), "backward x(l-1)", !m.needsInput);
  resolve(memory.y, call.output, m.outBytes, "backward x(l)", !m.needsOutput);
  resolve(memory.extra, call.extra, m.extraBytes, "backward E(l)", m.extraBytes == 0);
  resolve(memory.dx, call.gradInput, chain.outBytes(l - 1), "backward d(l-1)", l == 1);
  resolve(memory.workspace, call.workspace, requiredWorkspaceBytes, "backward workspace", requiredWorkspaceBytes == 0,
          true);
  resolve(memory.params, call.params, m.paramBytes, "backward parameters", m.paramBytes == 0);
  resolve(memory.paramGrads, call.paramGrads, m.paramBytes, "backward parameter gradients", m.paramBytes == 0);
  const std::size_t owner = sharedParamsLayer(chain, l);
  REMAT_RETURN_IF_ERROR(presentIff(call.sharedParams, owner > 0, "shared parameters"));
  REMAT_RETURN_IF_ERROR(presentIff(call.sharedParamGrads, owner > 0, "shared parameter gradients"));
  if (owner > 0) {
    const std::uint64_t bytes = chain.at(owner).paramBytes;
    resolve(memory.sharedParams, call.sharedParams, bytes, "backward shared parameters", false);
    resolve(memory.sharedParamGrads, call.sharedParamGrads, bytes, "backward shared parameter gradients", false);
  }
  // --grads static: a block's per-op fresh gradient (a one-op layer's is paramGrads itself).
  const std::uint64_t fresh = freshGradientBytes(chain, l);
  const bool freshPerOp = fresh > 0 && fresh < m.paramBytes;
  REMAT_RETURN_IF_ERROR(presentIff(call.freshParamGrads, freshPerOp, "a block's fresh gradient"));
  resolve(memory.freshParamGrads, call.freshParamGrads, fresh, "backward fresh parameter gradients", !freshPerOp);
  if (!resolve.status()) return resolve.status();
  return memory;
}

Result<SeedMemory> checkSeedCall(const CountingAllocator& allocator, const std::optional<Chain>& chain,
                                 const SeedCall& call) {
  if (!chain || chain->size() == 0) return Status::internal(allocator.device() + ": no chain prepared");
  const std::uint64_t bytes = chain->outBytes(chain->size());
  SeedMemory memory;
  Resolver resolve(allocator, "SEED");
  resolve(memory.logits, call.logits, bytes, "logits x(n)", false);
  resolve(memory.gradLogits, call.gradLogits, bytes, "gradient d(n)", false);
  if (!resolve.status()) return resolve.status();
  return memory;
}

Result<OptimizerMemory> checkOptimizerCall(const CountingAllocator& allocator, const Chain& chain,
                                           const OptimizerCall& call) {
  const std::string where = "layer " + std::to_string(call.layer) + " optimizer step";
  if (call.optimizer == OptimizerKind::None) return Status::internal(where + ": no optimizer");
  const std::uint64_t p = chain.at(call.layer).paramBytes;
  const std::uint64_t part = call.spanBytes == 0 ? p : call.spanBytes;
  if (call.offsetBytes > p || part > p - call.offsetBytes)
    return Status::internal(where + ": the part [" + std::to_string(call.offsetBytes) + ", +" + std::to_string(part) +
                            ") is outside p = " + std::to_string(p) + " bytes");
  const bool adamLike = call.optimizer == OptimizerKind::Adam || call.optimizer == OptimizerKind::AdamW;
  const bool needsState = call.optimizer != OptimizerKind::Sgd;
  const DeviceBuffer buffers[6] = {call.params,      call.grads,       call.state,
                                   call.stateSquare, call.denominator, call.squareRoot};
  const bool required[6] = {true, true, needsState, adamLike, adamLike, false};
  std::byte* spans[6] = {};
  for (int k = 0; k < 6; ++k) {
    if (!buffers[k].valid()) {
      if (required[k]) return Status::internal(where + ": buffer " + std::to_string(k) + " missing");
      continue;
    }
    const std::uint64_t bytes = k < 4 ? p : part;  // the temporaries hold the part only
    if (buffers[k].bytes != bytes)
      return Status::internal(where + ": buffer " + std::to_string(k) + " is not " + std::to_string(bytes) + " bytes");
    auto data = checkedMemory(allocator, buffers[k], bytes, "", "optimizerStep", false);
    if (!data) return data.status();
    spans[k] = k < 4 ? *data + call.offsetBytes : *data;
  }
  return OptimizerMemory{spans[0], spans[1], spans[2], spans[3], spans[4], spans[5], part};
}

Result<AccumulateMemory> checkAccumulateCall(const CountingAllocator& allocator, const Chain& chain, std::size_t layer,
                                             DeviceBuffer dst, DeviceBuffer src) {
  const std::string where = "layer " + std::to_string(layer) + " gradient accumulation";
  const std::uint64_t p = chain.at(layer).paramBytes;
  if (dst.valid() && src.valid() && dst.id == src.id)
    return Status::internal(where + ": the fresh gradient is the static one (buffer #" + std::to_string(dst.id) + ")");
  auto to = checkedMemory(allocator, dst, p, where, "static gradient", false);
  if (!to) return to.status();
  auto from = checkedMemory(allocator, src, p, where, "fresh gradient", false);
  if (!from) return from.status();
  return AccumulateMemory{*to, *from, p};
}

}  // namespace remat
