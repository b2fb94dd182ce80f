// The optimizer's update on the CPU (memory-model.md section 11.3): SGD, momentum, Adam and AdamW
// as torch.optim computes them with their defaults, as plain loops over float32 (elementwise, so
// the parameters' layout does not matter), in place. Every value is computed by one thread in a
// fixed order, so the result does not depend on the thread count. Abstract layers' parameters are
// bytes, not numbers: they get a deterministic byte update, which is all their memory needs.
#include <cmath>
#include <cstring>

#include "device_impl.hpp"
#include "remat/cpu/cpu_device.hpp"

namespace remat::cpu {
namespace {

using H = OptimizerHyperparameters;

struct UpdateSpans {
  float* params = nullptr;
  const float* grads = nullptr;
  float* state = nullptr;
  float* stateSquare = nullptr;
  float* denominator = nullptr;
  float* squareRoot = nullptr;
  std::size_t count = 0;
};

void sgd(const UpdateSpans& s) {
  for (std::size_t i = 0; i < s.count; ++i) s.params[i] -= H::kLearningRate * s.grads[i];
}

// _single_tensor_sgd / _multi_tensor_sgd, dampening 0: buf = momentum * buf + g; p -= lr * buf.
void momentum(const UpdateSpans& s) {
  for (std::size_t i = 0; i < s.count; ++i) {
    s.state[i] = H::kMomentum * s.state[i] + s.grads[i];
    s.params[i] -= H::kLearningRate * s.state[i];
  }
}

// _multi_tensor_adam(w): lerp of exp_avg, exp_avg_sq * beta2 + (1 - beta2) g², the denominator
// sqrt(v) / sqrt(1 - beta2^t) + eps (through the square root first in the single-tensor loop),
// then p += -(lr / (1 - beta1^t)) * m / denominator. AdamW first decays p by 1 - lr * wd.
void adam(const UpdateSpans& s, int step, bool decoupledDecay) {
  const double t = static_cast<double>(step);
  const auto biasCorrection1 = static_cast<float>(1.0 - std::pow(static_cast<double>(H::kBeta1), t));
  const auto biasCorrection2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(H::kBeta2), t)));
  const float stepSize = H::kLearningRate / biasCorrection1;
  for (std::size_t i = 0; i < s.count; ++i) {
    if (decoupledDecay) s.params[i] *= 1.0f - H::kLearningRate * H::kAdamWWeightDecay;
    const float g = s.grads[i];
    s.state[i] += (g - s.state[i]) * (1.0f - H::kBeta1);
    s.stateSquare[i] = s.stateSquare[i] * H::kBeta2 + (1.0f - H::kBeta2) * g * g;
    float root = std::sqrt(s.stateSquare[i]);
    if (s.squareRoot != nullptr) {
      s.squareRoot[i] = root;
      root = s.squareRoot[i];
    }
    s.denominator[i] = root / biasCorrection2Sqrt + H::kEpsilon;
    s.params[i] += -stepSize * s.state[i] / s.denominator[i];
  }
}

// Abstract layers: p -= g and the state follows g, bytewise; the denominators get p's new bytes.
void abstractUpdate(std::byte* params, const std::byte* grads, std::byte* state, std::byte* denominator,
                    std::uint64_t bytes) {
  for (std::uint64_t i = 0; i < bytes; ++i) {
    const auto g = static_cast<std::uint8_t>(grads[i]);
    params[i] = static_cast<std::byte>(static_cast<std::uint8_t>(params[i]) - g);
    if (state != nullptr) state[i] = static_cast<std::byte>(static_cast<std::uint8_t>(state[i]) + g);
    if (denominator != nullptr) denominator[i] = params[i];
  }
}

}  // namespace

Status CpuDevice::optimizerStep(const OptimizerCall& call) {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(call.layer));
  const std::uint64_t p = impl_->chain->at(call.layer).paramBytes;
  const std::string where = "layer " + std::to_string(call.layer) + " optimizer step";
  const bool adamLike = call.optimizer == OptimizerKind::Adam || call.optimizer == OptimizerKind::AdamW;
  const bool needsState = call.optimizer != OptimizerKind::Sgd;
  std::byte* spans[6] = {};
  const DeviceBuffer buffers[6] = {call.params,      call.grads,       call.state,
                                   call.stateSquare, call.denominator, call.squareRoot};
  const bool required[6] = {true, true, needsState, adamLike, adamLike, false};
  for (int k = 0; k < 6; ++k) {
    if (!buffers[k].valid()) {
      if (required[k]) return Status::internal(where + ": buffer " + std::to_string(k) + " missing");
      continue;
    }
    if (buffers[k].bytes != p) return Status::internal(where + ": a buffer is not p = " + std::to_string(p) + " bytes");
    auto data = impl_->memory(buffers[k], "optimizerStep");
    if (!data) return data.status();
    spans[k] = *data;
  }
  if (call.optimizer == OptimizerKind::None) return Status::internal(where + ": no optimizer");
  if (impl_->chain->layers[call.layer - 1].kind == LayerKind::Abstract) {
    abstractUpdate(spans[0], spans[1], spans[2], spans[4], p);
    return Status::ok();
  }
  if (p % sizeof(float) != 0) return Status::internal(where + ": parameters are not float32");
  const UpdateSpans s{reinterpret_cast<float*>(spans[0]),         reinterpret_cast<const float*>(spans[1]),
                      reinterpret_cast<float*>(spans[2]),         reinterpret_cast<float*>(spans[3]),
                      reinterpret_cast<float*>(spans[4]),         reinterpret_cast<float*>(spans[5]),
                      static_cast<std::size_t>(p / sizeof(float))};
  switch (call.optimizer) {
    case OptimizerKind::Sgd: sgd(s); break;
    case OptimizerKind::Momentum: momentum(s); break;
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: adam(s, call.step, call.optimizer == OptimizerKind::AdamW); break;
    case OptimizerKind::None: break;
  }
  return Status::ok();
}

}  // namespace remat::cpu
