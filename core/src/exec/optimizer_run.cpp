#include "optimizer_run.hpp"

#include "remat/exec/owned_buffers.hpp"

namespace remat::detail {
namespace {

bool adamLike(OptimizerKind kind) { return kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW; }

OptimizerCall callFor(const Chain& chain, std::size_t l, int step, const OptimizerBuffers& b) {
  OptimizerCall call;
  call.layer = l;
  call.optimizer = chain.step.optimizer;
  call.step = step;
  call.params = b.params[l];
  call.grads = b.grads[l];
  call.state = b.state[l];
  call.stateSquare = b.stateSquare[l];
  return call;
}

// _multi_tensor_*: the square roots of every layer exist together.
Status foreachStep(Device& device, const Chain& chain, int step, const OptimizerBuffers& b) {
  const bool adam = adamLike(chain.step.optimizer);
  std::vector<OwnedBuffer> roots(chain.size() + 1);
  if (adam) {
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const std::uint64_t p = chain.at(l).paramBytes;
      if (p == 0) continue;
      auto root = OwnedBuffer::allocate(device.allocator(), p, "optimizer step, square roots");
      if (!root) return root.status();
      roots[l] = std::move(*root);
    }
  }
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    if (chain.at(l).paramBytes == 0) continue;
    OptimizerCall call = callFor(chain, l, step, b);
    call.denominator = roots[l].get();
    REMAT_RETURN_IF_ERROR(device.optimizerStep(call));
  }
  for (OwnedBuffer& root : roots) REMAT_RETURN_IF_ERROR(root.release());
  return Status::ok();
}

// _single_tensor_*: per parameter tensor (paramTensorBytes) the square root and the quotient; the
// previous tensor's denominator stays bound until the new one replaces it.
Status singleTensorStep(Device& device, const Chain& chain, int step, const OptimizerBuffers& b) {
  const bool adam = adamLike(chain.step.optimizer);
  OwnedBuffer previous;
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    std::uint64_t offset = 0;
    for (const std::uint64_t t : paramTensorBytes(chain.layers[l - 1])) {
      OptimizerCall call = callFor(chain, l, step, b);
      call.offsetBytes = offset;
      call.spanBytes = t;
      offset += t;
      OwnedBuffer root, denominator;
      if (adam) {
        auto r = OwnedBuffer::allocate(device.allocator(), t, "optimizer step, square root");
        if (!r) return r.status();
        root = std::move(*r);
        auto d = OwnedBuffer::allocate(device.allocator(), t, "optimizer step, denominator");
        if (!d) return d.status();
        denominator = std::move(*d);
        call.squareRoot = root.get();
        call.denominator = denominator.get();
      }
      REMAT_RETURN_IF_ERROR(device.optimizerStep(call));
      REMAT_RETURN_IF_ERROR(root.release());
      REMAT_RETURN_IF_ERROR(previous.release());
      previous = std::move(denominator);
    }
  }
  return previous.release();
}

}  // namespace

Status runOptimizerStep(Device& device, const Chain& chain, int& updates, const OptimizerBuffers& buffers) {
  if (!hasOptimizerStep(chain.step)) return Status::internal("a STEP op without an optimizer");
  if (chain.step.precision == Precision::Fp16Mixed) {  // GradScaler: unscale_, then step unless inf/NaN
    auto foundInf = device.unscaleGradients(buffers.grads);
    if (!foundInf) return foundInf.status();
    if (*foundInf) return Status::ok();  // scaler.step skips optimizer.step(), and its step count
  }
  const int step = ++updates;
  return chain.step.foreach ? foreachStep(device, chain, step, buffers)
                            : singleTensorStep(device, chain, step, buffers);
}

}  // namespace remat::detail
