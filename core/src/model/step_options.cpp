#include "remat/model/step_options.hpp"

#include <algorithm>
#include <array>

#include "remat/model/chain.hpp"

namespace remat {
namespace {

constexpr std::array kOptimizers = {OptimizerKind::None, OptimizerKind::Sgd, OptimizerKind::Momentum,
                                    OptimizerKind::Adam, OptimizerKind::AdamW};

constexpr std::array kPrecisions = {Precision::Fp32, Precision::Bf16, Precision::Fp16, Precision::Bf16Mixed,
                                    Precision::Fp16Mixed};

std::string quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out + (text.size() > 40 ? "...'" : "'");
}

bool isAdam(OptimizerKind kind) { return kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW; }

}  // namespace

std::string_view optimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::None: return "none";
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Momentum: return "momentum";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

std::span<const OptimizerKind> optimizerKinds() { return kOptimizers; }

Result<OptimizerKind> parseOptimizer(std::string_view name) {
  std::string valid;
  for (OptimizerKind kind : kOptimizers) {
    if (optimizerName(kind) == name) return kind;
    valid += (valid.empty() ? "" : ", ") + std::string(optimizerName(kind));
  }
  return Status::invalid("unknown optimizer " + quoted(name) + " (valid: " + valid + ")");
}

std::string_view gradModeName(GradMode mode) {
  switch (mode) {
    case GradMode::InPlace: return "in-place";
    case GradMode::Static: return "static";
    case GradMode::OnBackward: return "on-backward";
  }
  return "?";
}

std::span<const GradMode> gradModes() {
  static constexpr GradMode kModes[] = {GradMode::Static, GradMode::OnBackward, GradMode::InPlace};
  return kModes;
}

Result<GradMode> parseGradMode(std::string_view name) {
  for (GradMode mode : gradModes())
    if (gradModeName(mode) == name) return mode;
  return Status::invalid("unknown gradient mode " + quoted(name) + " (valid: in-place, on-backward, static)");
}

Result<bool> parseForeach(std::string_view name) {
  if (name == "on") return true;
  if (name == "off") return false;
  return Status::invalid("unknown foreach setting " + quoted(name) + " (valid: on, off)");
}

std::string_view precisionName(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
    case Precision::Bf16Mixed: return "bf16-mixed";
    case Precision::Fp16Mixed: return "fp16-mixed";
  }
  return "?";
}

std::span<const Precision> precisions() { return kPrecisions; }

Result<Precision> parsePrecision(std::string_view name) {
  std::string valid;
  for (Precision precision : kPrecisions) {
    if (precisionName(precision) == name) return precision;
    valid += (valid.empty() ? "" : ", ") + std::string(precisionName(precision));
  }
  return Status::invalid("unknown precision " + quoted(name) + " (valid: " + valid + ")");
}

namespace {
std::string_view gradModeWords(GradMode mode) {
  return mode == GradMode::OnBackward ? "on backward" : mode == GradMode::InPlace ? "in place" : "static";
}
}  // namespace

std::string describeStepOptions(const StepOptions& options) {
  std::string text = std::string(optimizerName(options.optimizer)) + ", foreach " + (options.foreach ? "on" : "off") +
                     ", gradients " + std::string(gradModeWords(options.grads));
  if (options.precision != Precision::Fp32) text += ", " + std::string(precisionName(options.precision));
  return text;
}

std::uint64_t optimizerStateFactor(OptimizerKind kind) {
  if (kind == OptimizerKind::Momentum) return 1;
  return isAdam(kind) ? 2 : 0;
}

StaticBreakdown staticBreakdown(const Chain& chain) {
  StaticBreakdown b;
  const std::uint64_t params = chain.paramBytes();
  b.inputBytes = chain.inputBytes;
  b.labelBytes = labelCount(chain) * sizeof(LabelIndex);
  b.weightBytes = params;
  b.gradientBytes = hasStaticGradients(chain.step.grads) ? params : 0;
  b.optimizerStateBytes = optimizerStateFactor(chain.step.optimizer) * params;
  return b;
}

std::string describeStaticParts(const Chain& chain) {
  std::string text = labelCount(chain) > 0 ? "(input + labels + parameters" : "(input + parameters";
  if (hasStaticGradients(chain.step.grads)) text += " + parameter gradients";
  if (optimizerStateFactor(chain.step.optimizer) > 0) text += " + optimizer state";
  return text + ")";
}

std::vector<std::uint64_t> paramTensorBytes(const ChainLayer& layer) {
  const std::uint64_t p = layer.numbers.paramBytes;
  if (p == 0) return {};
  if (layer.paramTensors.empty() || layer.paramCount == 0 || p % layer.paramCount != 0) return {p};
  // The parameters' dtype: float32 masters under a mixed precision, the chain's under a pure one.
  const std::uint64_t elementBytes = p / layer.paramCount;
  std::vector<std::uint64_t> bytes;
  std::uint64_t sum = 0;
  for (const std::uint64_t count : layer.paramTensors) {
    if (count == 0) continue;
    bytes.push_back(count * elementBytes);
    sum += count;
  }
  if (sum != layer.paramCount) return {p};
  return bytes;
}

std::uint64_t optimizerScratchBytes(const Chain& chain) {
  if (!isAdam(chain.step.optimizer)) return 0;
  if (chain.step.foreach) return chain.paramBytes();
  // The previous tensor's denominator is still bound while the next one's sqrt and quotient exist.
  std::uint64_t previous = 0;
  std::uint64_t most = 0;
  for (const ChainLayer& layer : chain.layers) {
    for (const std::uint64_t t : paramTensorBytes(layer)) {
      most = std::max(most, previous + 2 * t);
      previous = t;
    }
  }
  return most;
}

std::uint64_t freshGradientBytes(const Chain& chain, std::size_t l) {
  if (chain.step.grads != GradMode::Static || l < 1 || l > chain.size()) return 0;
  const ChainLayer& layer = chain.layers[l - 1];
  const std::uint64_t p = layer.numbers.paramBytes;
  const std::uint64_t largest = layer.largestOpParamCount;
  if (largest == 0 || largest >= layer.paramCount || p % layer.paramCount != 0) return p;
  return largest * (p / layer.paramCount);  // in the parameters' dtype
}

std::uint64_t optimizerStepFootprint(const Chain& chain) {
  if (!hasOptimizerStep(chain.step)) return 0;
  const std::uint64_t grads = chain.step.grads == GradMode::OnBackward ? chain.paramBytes() : 0;
  return grads + optimizerScratchBytes(chain);
}

std::size_t sharedParamsLayer(const Chain& chain, std::size_t l) {
  if (l < 1 || l > chain.size()) return 0;
  const ChainLayer& layer = chain.layers[l - 1];
  const bool tied = layer.kind == LayerKind::LmHead && layer.specIndex < chain.spec.layers.size() &&
                    chain.spec.layers[layer.specIndex].tied;
  return tied ? 1 : 0;
}

std::vector<std::size_t> weightGradientWriters(const Chain& chain) {
  std::vector<std::size_t> writer(chain.size() + 1, 0);
  for (std::size_t l = 1; l <= chain.size(); ++l) writer[l] = std::max(writer[l], l);
  // The backward runs from layer n down: the latest layer that shares a table runs first.
  for (std::size_t l = 1; l <= chain.size(); ++l)
    if (const std::size_t owner = sharedParamsLayer(chain, l); owner > 0 && owner < l)
      writer[owner] = std::max(writer[owner], l);
  return writer;
}

}  // namespace remat
