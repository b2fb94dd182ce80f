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

// Pure bf16 (memory-model.md 11.7): parameters, gradients, state and the step's temporaries are
// bfloat16 as PyTorch's are for a model cast with .to(torch.bfloat16) (zeros_like(p) state). Each
// element's update is computed in float32 from the stored bfloat16 values and every stored result
// (parameter, moments, square root, denominator) is rounded to bfloat16 once. PyTorch 1.13's CPU
// kernels round after each op instead (mul_, lerp_, addcmul_, ... each writes bfloat16): the bytes
// are the same, the values may differ in the last bit.
struct HalfSpans {
  BFloat16* params = nullptr;
  const BFloat16* grads = nullptr;
  BFloat16* state = nullptr;
  BFloat16* stateSquare = nullptr;
  BFloat16* denominator = nullptr;
  BFloat16* squareRoot = nullptr;
  std::size_t count = 0;
};

void halfSgd(const HalfSpans& s, bool momentum) {
  for (std::size_t i = 0; i < s.count; ++i) {
    float direction = s.grads[i].value();
    if (momentum) {
      direction += H::kMomentum * s.state[i].value();
      s.state[i] = BFloat16(direction);
    }
    s.params[i] = BFloat16(s.params[i].value() - H::kLearningRate * direction);
  }
}

void halfAdam(const HalfSpans& s, int step, bool decoupledDecay) {
  const double t = static_cast<double>(step);
  const auto biasCorrection1 = static_cast<float>(1.0 - std::pow(static_cast<double>(H::kBeta1), t));
  const auto biasCorrection2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(H::kBeta2), t)));
  const float stepSize = H::kLearningRate / biasCorrection1;
  for (std::size_t i = 0; i < s.count; ++i) {
    float p = s.params[i].value();
    if (decoupledDecay) p *= 1.0f - H::kLearningRate * H::kAdamWWeightDecay;
    const float g = s.grads[i].value();
    float m = s.state[i].value();
    m += (g - m) * (1.0f - H::kBeta1);
    const float v = s.stateSquare[i].value() * H::kBeta2 + (1.0f - H::kBeta2) * g * g;
    const float root = std::sqrt(v);
    if (s.squareRoot != nullptr) s.squareRoot[i] = BFloat16(root);
    const float denominator = root / biasCorrection2Sqrt + H::kEpsilon;
    s.denominator[i] = BFloat16(denominator);
    s.state[i] = BFloat16(m);
    s.stateSquare[i] = BFloat16(v);
    s.params[i] = BFloat16(p - stepSize * m / denominator);
  }
}

void halfUpdate(const OptimizerCall& call, const OptimizerMemory& m, std::uint64_t paramBytes) {
  auto halves = [](std::byte* data) { return reinterpret_cast<BFloat16*>(data); };
  const HalfSpans s{halves(m.params),
                    halves(m.grads),
                    halves(m.state),
                    halves(m.stateSquare),
                    halves(m.denominator),
                    halves(m.squareRoot),
                    static_cast<std::size_t>(paramBytes / sizeof(BFloat16))};
  switch (call.optimizer) {
    case OptimizerKind::Sgd: halfSgd(s, false); break;
    case OptimizerKind::Momentum: halfSgd(s, true); break;
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: halfAdam(s, call.step, call.optimizer == OptimizerKind::AdamW); break;
    case OptimizerKind::None: break;
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

// In the parameters' dtype, one thread, in order: float32 (and the float32 masters of a mixed
// precision), bfloat16 rounded once per element (pure bf16), bytes mod 256 (abstract layers).
Status CpuDevice::accumulateGradient(std::size_t layer, DeviceBuffer dst, DeviceBuffer src) {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(layer));
  auto m = checkAccumulateCall(impl_->allocator, *impl_->chain, layer, dst, src);
  if (!m) return m.status();
  if (impl_->chain->layers[layer - 1].kind == LayerKind::Abstract) {
    for (std::uint64_t i = 0; i < m->bytes; ++i)
      m->dst[i] = static_cast<std::byte>(static_cast<std::uint8_t>(m->dst[i]) + static_cast<std::uint8_t>(m->src[i]));
    return Status::ok();
  }
  if (cpu::isPureHalf(*impl_->chain)) {
    addHalfIntoHalf(static_cast<Index>(m->bytes / sizeof(BFloat16)), reinterpret_cast<const BFloat16*>(m->src),
                    reinterpret_cast<BFloat16*>(m->dst));
    return Status::ok();
  }
  if (m->bytes % sizeof(float) != 0)
    return Status::internal("layer " + std::to_string(layer) + " gradient accumulation: parameters are not float32");
  addInto(static_cast<Index>(m->bytes / sizeof(float)), reinterpret_cast<const float*>(m->src),
          reinterpret_cast<float*>(m->dst));
  return Status::ok();
}

Status CpuDevice::optimizerStep(const OptimizerCall& call) {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(call.layer));
  auto m = checkOptimizerCall(impl_->allocator, *impl_->chain, call);
  if (!m) return m.status();
  const std::uint64_t p = m->bytes;  // the part of the layer's parameters this call updates
  if (impl_->chain->layers[call.layer - 1].kind == LayerKind::Abstract) {
    abstractUpdate(m->params, m->grads, m->state, m->denominator, p);
    return Status::ok();
  }
  if (cpu::isPureHalf(*impl_->chain)) {
    halfUpdate(call, *m, p);
    return Status::ok();
  }
  if (p % sizeof(float) != 0)
    return Status::internal("layer " + std::to_string(call.layer) + " optimizer step: parameters are not float32");
  auto floats = [](std::byte* data) { return reinterpret_cast<float*>(data); };
  const UpdateSpans s{floats(m->params),
                      floats(m->grads),
                      floats(m->state),
                      floats(m->stateSquare),
                      floats(m->denominator),
                      floats(m->squareRoot),
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
