#include "remat/model/chain.hpp"

#include <array>
#include <utility>

#include "layer_inference.hpp"
#include "remat/base/text.hpp"
#include "remat/model/operators.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/token_input.hpp"

namespace remat {
namespace {

bool addOverflows(std::uint64_t& total, std::uint64_t value) { return __builtin_add_overflow(total, value, &total); }

}  // namespace

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

std::span<const DType> dtypes() {
  static constexpr std::array<DType, 3> kDTypes = {DType::Float32, DType::Float16, DType::BFloat16};
  return kDTypes;
}

Result<DType> parseDType(std::string_view name) {
  for (DType dtype : dtypes())
    if (dtypeName(dtype) == name) return dtype;
  return Status::invalid("unknown dtype " + quoteText(name, 40) + " (expected float32, float16 or bfloat16)");
}

std::uint64_t dtypeBytes(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

bool hasTokenIds(const ChainSpec& spec) {
  return !spec.layers.empty() && spec.layers.front().kind == LayerKind::TokenEmbedding;
}

bool hasTokenIds(const Chain& chain) { return hasTokenIds(chain.spec); }

std::string_view inputDTypeName(const Chain& chain) {
  return hasTokenIds(chain) ? std::string_view("int64") : dtypeName(chain.dtype);
}

// Names, the kinds' order and their families come from the operator table (operators.cpp).
std::string_view kindName(LayerKind kind) { return operatorInfo(kind).name; }

Result<LayerKind> parseKind(std::string_view name) {
  if (const OperatorInfo* info = findOperator(name)) return info->kind;
  std::string known;
  for (const OperatorInfo& info : operatorTable()) known += (known.empty() ? "" : ", ") + std::string(info.name);
  return Status::invalid("unknown kind " + quoteText(name, 40) + " (known kinds: " + known + ")");
}

std::span<const LayerKind> layerKinds() {
  static const std::vector<LayerKind> kKinds = [] {
    std::vector<LayerKind> kinds;
    for (const OperatorInfo& info : operatorTable()) kinds.push_back(info.kind);
    return kinds;
  }();
  return kKinds;
}

bool isComposite(LayerKind kind) { return operatorInfo(kind).family == OperatorFamily::Composite; }

std::string shapeToString(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::uint64_t elementCount(const Shape& shape) {
  std::uint64_t count = 1;
  for (auto d : shape) count *= static_cast<std::uint64_t>(d);
  return count;
}

std::uint64_t Chain::paramBytes() const {
  std::uint64_t total = 0;
  for (const auto& layer : layers) total += layer.numbers.paramBytes;
  return total;
}

std::uint64_t Chain::paramCount() const {
  std::uint64_t total = 0;
  for (const auto& layer : layers) total += layer.paramCount;
  return total;
}

std::size_t labelCount(const Chain& chain) {
  if (chain.size() == 0) return 0;
  const ChainLayer& last = chain.layers.back();
  if (last.kind == LayerKind::Abstract || last.outputShape.empty()) return 0;
  const std::size_t batch = static_cast<std::size_t>(last.outputShape[0]);
  return last.kind == LayerKind::LmHead ? batch * static_cast<std::size_t>(last.outputShape[1]) : batch;
}

std::uint64_t Chain::staticBytes() const { return staticBreakdown(*this).total(); }

Chain makeAbstractChain(std::string name, std::uint64_t inputBytes, const std::vector<LayerNumbers>& layers) {
  Chain chain;
  chain.name = name;
  chain.inputBytes = inputBytes;
  chain.spec.name = std::move(name);
  chain.spec.input.bytes = inputBytes;
  chain.layers.reserve(layers.size());
  chain.spec.layers.reserve(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    LayerSpec spec;
    spec.name = "L" + std::to_string(i + 1);
    spec.kind = LayerKind::Abstract;
    spec.numbers = layers[i];
    ChainLayer layer;
    layer.name = spec.name;
    layer.kind = LayerKind::Abstract;
    layer.specIndex = i;
    layer.numbers = layers[i];
    chain.layers.push_back(std::move(layer));
    chain.spec.layers.push_back(std::move(spec));
  }
  return chain;
}

namespace {

// From the shape when there is one (every dimension positive, the bytes within 64 bits) at
// `elementBytes` each, else as stated.
Result<std::uint64_t> inputBytesOf(const InputSpec& input, std::uint64_t elementBytes) {
  if (input.shape.empty()) return input.bytes;
  for (std::size_t i = 0; i < input.shape.size(); ++i) {
    if (input.shape[i] <= 0 || input.shape[i] > kMaxIntegerField)
      return Status::invalid("input.shape[" + std::to_string(i) + "] is " + std::to_string(input.shape[i]) +
                             ", must be in 1.." + std::to_string(kMaxIntegerField));
  }
  std::uint64_t bytes = elementBytes;
  for (auto d : input.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes))
      return Status::invalid("input.shape " + shapeToString(input.shape) + " overflows 64-bit bytes");
  }
  return bytes;
}

// Layer `index` of the spec over an input of shape `current` (empty: unknown), which becomes the
// layer's output shape. A real layer's numbers are inferred, then its measured workspaces and costs
// applied; an abstract layer's are as stated, and no shape is known past it.
Result<ChainLayer> inferChainLayer(const LayerSpec& ls, std::size_t index, DType dtype, Shape& current) {
  ChainLayer layer;
  layer.name = ls.name;
  layer.kind = ls.kind;
  layer.specIndex = index;
  layer.inputShape = current;
  if (ls.kind == LayerKind::Abstract) {
    layer.numbers = ls.numbers;
    current.clear();
    return layer;
  }
  if (current.empty())
    return Status::invalid("a " + std::string(kindName(ls.kind)) +
                           " layer needs a known input shape (input.shape, and no abstract layer before it)");
  REMAT_RETURN_IF_ERROR(detail::inferLayer(ls, current, dtype, layer));
  if (ls.hasMeasuredWorkspace) {
    layer.numbers.fwdWorkspaceBytes = ls.numbers.fwdWorkspaceBytes;
    layer.numbers.bwdWorkspaceBytes = ls.numbers.bwdWorkspaceBytes;
  }
  if (ls.hasMeasuredCost) {
    layer.numbers.fwdCost = ls.numbers.fwdCost;
    layer.numbers.bwdCost = ls.numbers.bwdCost;
  }
  current = layer.outputShape;
  return layer;
}

// Adds every byte count of the layer that the simulator may sum (a twice: x and d; p twice:
// parameters and their gradients) to `total`; true when that overflows 64 bits.
bool bytesOverflow(std::uint64_t& total, const LayerNumbers& m) {
  return addOverflows(total, m.outBytes) || addOverflows(total, m.outBytes) || addOverflows(total, m.extraBytes) ||
         addOverflows(total, m.fwdWorkspaceBytes) || addOverflows(total, m.bwdWorkspaceBytes) ||
         addOverflows(total, m.paramBytes) || addOverflows(total, m.paramBytes);
}

}  // namespace

ChainBuilder::ChainBuilder(const ChainSpec& spec) : spec_(spec) {
  chain_.name = spec.name;
  chain_.dtype = spec.input.dtype;
  chain_.step.precision = precisionOfDType(spec.input.dtype);  // a half file runs all in half
  chain_.inputShape = spec.input.shape;
}

Status ChainBuilder::start() {
  if (spec_.layers.empty()) return Status::invalid("has no layers");
  auto inputBytes = inputBytesOf(spec_.input, hasTokenIds(spec_) ? kTokenIdBytes : dtypeBytes(spec_.input.dtype));
  if (!inputBytes) return inputBytes.status();
  chain_.inputBytes = *inputBytes;
  current_ = spec_.input.shape;
  totalBytes_ = chain_.inputBytes;
  chain_.layers.reserve(spec_.layers.size());
  return Status::ok();
}

Status ChainBuilder::addLayer(std::size_t index) {
  const LayerSpec& ls = spec_.layers[index];
  if (ls.kind == LayerKind::Flatten) {
    if (current_.size() < 2) return Status::invalid("flatten needs an input shape with at least 2 dimensions");
    current_ = {current_[0],
                static_cast<std::int64_t>(elementCount(current_) / static_cast<std::uint64_t>(current_[0]))};
    return Status::ok();
  }
  auto layer = inferChainLayer(ls, index, spec_.input.dtype, current_);
  if (!layer) return layer.status();
  if (bytesOverflow(totalBytes_, layer->numbers))
    return Status::invalid(
        "the chain's byte counts up to this layer (the input, twice each out_bytes and param_bytes, extra_bytes and "
        "the workspaces) add up to more than 2^64");
  chain_.layers.push_back(std::move(layer).value());
  return Status::ok();
}

Result<Chain> ChainBuilder::finish() {
  if (chain_.layers.empty()) return Status::invalid("has no layers once flatten views are folded");
  chain_.spec = spec_;
  return std::move(chain_);
}

std::string layerLabel(const LayerSpec& layer, std::size_t index) {
  return "layer " + std::to_string(index + 1) + " (" + quoteText(layer.name, 40) + ", " +
         std::string(kindName(layer.kind)) + ")";
}

Result<Chain> buildChain(const ChainSpec& spec) {
  const std::string chainLabel = "chain " + quoteText(spec.name, 40);
  ChainBuilder builder(spec);
  if (spec.layers.empty()) return Status::invalid(chainLabel + " has no layers");
  REMAT_RETURN_IF_ERROR(builder.start().withContext(chainLabel));
  for (std::size_t i = 0; i < spec.layers.size(); ++i)
    REMAT_RETURN_IF_ERROR(builder.addLayer(i).withContext(chainLabel + ", " + layerLabel(spec.layers[i], i)));
  auto chain = builder.finish();
  if (!chain) return Status::invalid(chainLabel + " " + chain.status().message());
  return chain;
}

}  // namespace remat
