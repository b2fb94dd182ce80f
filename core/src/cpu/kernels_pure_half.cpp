// Pure bf16 (the model cast with .to(torch.bfloat16); docs/memory-model.md section 11.7): the
// parameters and their gradients are bfloat16 themselves. A freshly computed bfloat16 gradient is
// added into the bfloat16 gradient buffer as AccumulateGrad adds it (round(old + new); a buffer
// that starts zeroed keeps round(new)); batch norm's bfloat16 weight and bias are widened for
// oneDNN, whose batch normalization takes float32 scale and shift only.
#include "kernels.hpp"

namespace remat::cpu {

void addHalfIntoHalf(Index count, const BFloat16* from, BFloat16* to) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) to[i] = BFloat16(to[i].value() + from[i].value());
}

void addFloatIntoHalf(Index count, const float* from, BFloat16* to) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) to[i] = BFloat16(to[i].value() + BFloat16(from[i]).value());
}

void addHalfBiasGradientHalf(Index batch, Index outFeatures, const BFloat16* dy, BFloat16* db) {
#pragma omp parallel for schedule(static)
  for (Index o = 0; o < outFeatures; ++o) {
    float sum = 0.0f;
    for (Index n = 0; n < batch; ++n) sum += dy[n * outFeatures + o].value();
    db[o] = BFloat16(db[o].value() + BFloat16(sum).value());
  }
}

}  // namespace remat::cpu
