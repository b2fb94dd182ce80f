// Shape inference and memory-model numbers of the primitive layer kinds, following PyTorch's
// output-size rules and torchvision's parameter counts (docs/layers.md). Each kind's description in
// the operator table (operators.cpp) names its rule here; the pointwise kinds share one rule that
// reads their backward reads and flops from the description.
//
// Each kind's numbers set here (in, out, e, the parameter count, a from the output shape) are
// relied on elsewhere; a change here must be made there as well:
//   - the simulator and the interpreter take them as the truth: B(l) reads x(l-1) iff in, x(l) iff
//     out and E(l) iff e > 0 (core/src/memory/tensor_graph.hpp, core/src/exec/interpreter.cpp);
//   - both backends' layer checks restate, per kind, what the kernels read and save and refuse a
//     chain that says less (kernelNeeds in core/src/exec/layer_checks.cpp, called by the CPU's
//     and the GPU's prepareReal; the pointwise kinds' from their descriptions);
//   - the blocks' inner ops take them from here (core/src/model/block.cpp), and the blocks' layouts
//     derive each block's flags, E and arenas from them (core/src/model/block_layout.cpp);
//   - the random CNN-like chains copy the flags (cnnLayer in core/src/model/random_chain.cpp);
//   - docs/memory-model.md section 5.1 and docs/layers.md ("Primitive kinds") tabulate them.
#include <array>
#include <cmath>
#include <numeric>

#include "layers_common.hpp"
#include "remat/model/operators.hpp"

namespace remat::detail {

Status checkPositiveField(std::string_view field, std::int64_t value) {
  if (value <= 0) return Status::invalid(std::string(field) + " is " + std::to_string(value) + ", must be positive");
  if (value > kMaxFieldValue)
    return Status::invalid(std::string(field) + " is " + std::to_string(value) + ", must be at most " +
                           std::to_string(kMaxFieldValue));
  return Status::ok();
}

Status checkNonNegativeField(std::string_view field, std::int64_t value) {
  if (value < 0) return Status::invalid(std::string(field) + " is " + std::to_string(value) + ", must not be negative");
  if (value > kMaxFieldValue)
    return Status::invalid(std::string(field) + " is " + std::to_string(value) + ", must be at most " +
                           std::to_string(kMaxFieldValue));
  return Status::ok();
}

bool checkedMul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

std::vector<std::uint64_t> weightAndBias(std::uint64_t weights, std::uint64_t biases) {
  if (biases == 0) return {weights};
  return {weights, biases};
}

Status setCommonNumbers(ChainLayer& out, Shape outputShape, DType dtype, std::uint64_t paramCount, double forwardFlop) {
  std::uint64_t outBytes = dtypeBytes(dtype);
  for (auto d : outputShape) {
    if (d <= 0) return Status::internal("inferred a non-positive dimension in " + shapeToString(outputShape));
    if (!checkedMul(outBytes, static_cast<std::uint64_t>(d), outBytes))
      return Status::invalid("the output shape " + shapeToString(outputShape) + " overflows 64-bit bytes");
  }
  std::uint64_t paramBytes = 0;
  if (!checkedMul(paramCount, dtypeBytes(dtype), paramBytes))
    return Status::invalid("the parameter count " + std::to_string(paramCount) + " overflows 64-bit bytes");
  out.outputShape = std::move(outputShape);
  out.paramCount = paramCount;
  out.numbers.outBytes = outBytes;
  out.numbers.paramBytes = paramBytes;
  out.numbers.fwdWorkspaceBytes = 0;  // real workspaces come from profiling (LayerSpec overrides)
  out.numbers.bwdWorkspaceBytes = 0;
  out.numbers.fwdCost = forwardFlop / 1e9;
  out.numbers.bwdCost = 2.0 * out.numbers.fwdCost;  // the usual approximation: dx and dW each cost a forward
  return Status::ok();
}

namespace {

Status requireNCHW(const Shape& input, std::string_view kind) {
  if (input.size() != 4)
    return Status::invalid(std::string(kind) + " needs an NCHW input (4 dimensions), got " + shapeToString(input));
  return Status::ok();
}

std::int64_t floorDiv(std::int64_t num, std::int64_t den) {
  std::int64_t q = num / den;
  if ((num % den != 0) && ((num < 0) != (den < 0))) --q;
  return q;
}

double toDouble(std::uint64_t v) { return static_cast<double>(v); }

}  // namespace

namespace {

// One axis of a convolution: its field names (as the chain file spells them, so that a message names
// the field to change), kernel, stride and padding.
struct ConvAxis {
  const char* dim;
  const char* kernelField;
  const char* strideField;
  const char* paddingField;
  std::int64_t kernel, stride, padding;
};

std::array<ConvAxis, 2> convAxes(const LayerSpec& spec) {
  const bool square = spec.squareConv();
  return {ConvAxis{"height", "kernel", "stride", "padding", spec.kernel, spec.stride, spec.padding},
          ConvAxis{"width", square ? "kernel" : "kernel_width", square ? "stride" : "stride_width",
                   square ? "padding" : "padding_width", spec.kernelW(), spec.strideW(), spec.paddingW()}};
}

// PyTorch's output size along one axis, or why the kernel does not fit the padded input.
Result<std::int64_t> convOutputSize(const ConvAxis& axis, std::int64_t in) {
  REMAT_RETURN_IF_ERROR(checkPositiveField(axis.kernelField, axis.kernel));
  REMAT_RETURN_IF_ERROR(checkPositiveField(axis.strideField, axis.stride));
  REMAT_RETURN_IF_ERROR(checkNonNegativeField(axis.paddingField, axis.padding));
  const std::int64_t padded = in + 2 * axis.padding;
  if (padded < axis.kernel)
    return Status::invalid(std::string(axis.kernelField) + " " + std::to_string(axis.kernel) +
                           " is larger than the padded input " + axis.dim + " " + std::to_string(padded) + " (" +
                           std::to_string(in) + " + 2 * " + axis.paddingField + " " + std::to_string(axis.padding) +
                           ")");
  return (padded - axis.kernel) / axis.stride + 1;
}

}  // namespace

Status inferConv2d(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireNCHW(input, "conv2d"));
  REMAT_RETURN_IF_ERROR(checkPositiveField("out_channels", spec.outChannels));
  REMAT_RETURN_IF_ERROR(checkPositiveField("groups", spec.groups));
  const std::int64_t inChannels = input[1];
  if (inChannels % spec.groups != 0)
    return Status::invalid("groups " + std::to_string(spec.groups) + " does not divide the input channels " +
                           std::to_string(inChannels));
  if (spec.outChannels % spec.groups != 0)
    return Status::invalid("groups " + std::to_string(spec.groups) + " does not divide out_channels " +
                           std::to_string(spec.outChannels));
  Shape output = {input[0], spec.outChannels, 0, 0};
  const auto axes = convAxes(spec);
  for (int i = 0; i < 2; ++i) {
    auto size = convOutputSize(axes[i], input[2 + i]);
    if (!size) return size.status();
    output[2 + i] = *size;
  }
  // Both kernel sides are at most kMaxFieldValue (checked above), so their product fits.
  const auto taps = static_cast<std::uint64_t>(spec.kernel * spec.kernelW());
  const auto inPerGroup = static_cast<std::uint64_t>(inChannels / spec.groups);
  std::uint64_t weights = 0;
  if (!checkedMul(static_cast<std::uint64_t>(spec.outChannels), inPerGroup, weights) ||
      !checkedMul(weights, taps, weights))
    return Status::invalid("the weight count of out_channels " + std::to_string(spec.outChannels) + " x kernel " +
                           std::to_string(spec.kernel) + "x" + std::to_string(spec.kernelW()) + " overflows 64 bits");
  const std::uint64_t params = weights + (spec.bias ? static_cast<std::uint64_t>(spec.outChannels) : 0);
  const double outElements = toDouble(elementCount(output));
  // 2 * MACs, plus one add per output element for the bias.
  const double flop = 2.0 * outElements * toDouble(inPerGroup) * toDouble(taps) + (spec.bias ? outElements : 0.0);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, std::move(output), dtype, params, flop));
  out.paramTensors = weightAndBias(weights, spec.bias ? static_cast<std::uint64_t>(spec.outChannels) : 0);
  out.numbers.needsInput = true;
  out.numbers.needsOutput = false;
  out.numbers.extraBytes = 0;
  return Status::ok();
}

namespace {

// PyTorch's pooling_output_shape: floor((in + 2p - k [+ s - 1 in ceil mode]) / s) + 1, and in ceil
// mode the last window must start inside the input or its left padding.
std::int64_t poolOutputSize(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                            bool ceilMode) {
  std::int64_t size = floorDiv(in + 2 * padding - (kernel - 1) - 1 + (ceilMode ? stride - 1 : 0), stride) + 1;
  if (ceilMode && (size - 1) * stride >= in + padding) --size;
  return size;
}

}  // namespace

Status inferPool(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  const std::string kind(kindName(spec.kind));
  REMAT_RETURN_IF_ERROR(requireNCHW(input, kind));
  REMAT_RETURN_IF_ERROR(checkPositiveField("kernel", spec.kernel));
  REMAT_RETURN_IF_ERROR(checkPositiveField("stride", spec.stride));
  REMAT_RETURN_IF_ERROR(checkNonNegativeField("padding", spec.padding));
  if (spec.padding > spec.kernel / 2)
    return Status::invalid("padding " + std::to_string(spec.padding) + " must be at most half of kernel " +
                           std::to_string(spec.kernel) + " (PyTorch's rule)");
  Shape output = {input[0], input[1], 0, 0};
  const char* dimNames[2] = {"height", "width"};
  for (int i = 0; i < 2; ++i) {
    output[2 + i] = poolOutputSize(input[2 + i], spec.kernel, spec.stride, spec.padding, spec.ceilMode);
    if (output[2 + i] <= 0)
      return Status::invalid("output " + std::string(dimNames[i]) + " would be " + std::to_string(output[2 + i]) +
                             ": kernel " + std::to_string(spec.kernel) + " is larger than the padded input " +
                             dimNames[i] + " " + std::to_string(input[2 + i] + 2 * spec.padding) + " (" +
                             std::to_string(input[2 + i]) + " + 2 * padding " + std::to_string(spec.padding) + ")");
  }
  // One comparison (max) or add (average) per window element.
  const double flop = toDouble(elementCount(output)) * toDouble(static_cast<std::uint64_t>(spec.kernel * spec.kernel));
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, std::move(output), dtype, 0, flop));
  // What PyTorch's autograd saves (docs/memory-model.md section 5.1): max_pool2d_with_indices
  // keeps its input and the int64 argmax indices, not its output; avg_pool2d keeps its input.
  const bool isMax = spec.kind == LayerKind::MaxPool;
  const std::uint64_t outElements = elementCount(out.outputShape);
  out.numbers.needsInput = true;
  out.numbers.needsOutput = false;
  out.numbers.extraBytes = 0;
  if (isMax && !checkedMul(outElements, kMaxPoolIndexBytes, out.numbers.extraBytes))
    return Status::invalid("the indices of output " + shapeToString(out.outputShape) + " overflow 64-bit bytes");
  return Status::ok();
}

Status inferAdaptiveAvgPool(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireNCHW(input, "adaptive_avgpool"));
  REMAT_RETURN_IF_ERROR(checkPositiveField("output_height", spec.outputHeight));
  REMAT_RETURN_IF_ERROR(checkPositiveField("output_width", spec.outputWidth));
  Shape output = {input[0], input[1], spec.outputHeight, spec.outputWidth};
  // Window i spans [floor(i*in/out), ceil((i+1)*in/out)); the window lengths add up to
  // out + in - gcd(out, in), which counts one add per input element read.
  auto windowSum = [](std::int64_t in, std::int64_t outSize) {
    return toDouble(static_cast<std::uint64_t>(outSize + in - std::gcd(outSize, in)));
  };
  const double flop = toDouble(static_cast<std::uint64_t>(input[0] * input[1])) *
                      windowSum(input[2], spec.outputHeight) * windowSum(input[3], spec.outputWidth);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, std::move(output), dtype, 0, flop));
  // PyTorch runs a 1x1 output as a mean, which keeps nothing since 2.2 (1.13 to 2.1 keep the
  // input); any other size is _adaptive_avg_pool2d, whose backward keeps its input.
  out.numbers.needsInput = !(spec.outputHeight == 1 && spec.outputWidth == 1);
  out.numbers.needsOutput = false;
  out.numbers.extraBytes = 0;
  return Status::ok();
}

Status inferBatchNorm(const LayerSpec&, const Shape& input, DType dtype, ChainLayer& out) {
  if (input.size() != 2 && input.size() != 4)
    return Status::invalid("batchnorm needs an [N, C] (BatchNorm1d) or [N, C, H, W] (BatchNorm2d) input, got " +
                           shapeToString(input));
  const std::uint64_t channels = static_cast<std::uint64_t>(input[1]);
  const std::uint64_t elements = elementCount(input);
  if (elements / channels <= 1)
    return Status::invalid("batchnorm in training needs more than one value per channel, got input " +
                           shapeToString(input));
  // mean, variance, normalise, scale-and-shift: four flops per element.
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, input, dtype, 2 * channels, 4.0 * toDouble(elements)));
  out.paramTensors = weightAndBias(channels, channels);
  out.numbers.needsInput = true;
  out.numbers.needsOutput = false;
  out.numbers.extraBytes = 2 * channels * 4;  // saved mean and inverse std, float32 whatever the dtype
  return Status::ok();
}

Status inferLinear(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (input.size() != 2)
    return Status::invalid("linear needs an [N, features] input, got " + shapeToString(input) +
                           "; add a flatten layer before it");
  REMAT_RETURN_IF_ERROR(checkPositiveField("out_features", spec.outFeatures));
  const auto inFeatures = static_cast<std::uint64_t>(input[1]);
  const auto outFeatures = static_cast<std::uint64_t>(spec.outFeatures);
  std::uint64_t weights = 0;
  if (!checkedMul(inFeatures, outFeatures, weights))
    return Status::invalid("the weight count of out_features " + std::to_string(spec.outFeatures) + " x " +
                           std::to_string(inFeatures) + " input features overflows 64 bits");
  const std::uint64_t params = weights + (spec.bias ? outFeatures : 0);
  const double outElements = toDouble(static_cast<std::uint64_t>(input[0])) * toDouble(outFeatures);
  const double flop = 2.0 * outElements * toDouble(inFeatures) + (spec.bias ? outElements : 0.0);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], spec.outFeatures}, dtype, params, flop));
  out.paramTensors = weightAndBias(weights, spec.bias ? outFeatures : 0);
  out.numbers.needsInput = true;
  out.numbers.needsOutput = false;
  out.numbers.extraBytes = 0;
  return Status::ok();
}

Status inferPointwise(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  const OperatorInfo& info = operatorInfo(spec.kind);
  const double elements = toDouble(elementCount(input));
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, input, dtype, 0, info.flopPerElement * elements));
  // What the backward reads is the description's (PyTorch's derivatives.yaml): relu and sigmoid
  // keep their result, relu6 (hardtanh), silu, gelu and the hard ones their input.
  // docs/memory-model.md section 5.1.
  out.numbers.needsInput = info.backwardReads == BackwardReads::Input;
  out.numbers.needsOutput = info.backwardReads == BackwardReads::Output;
  out.numbers.extraBytes = 0;
  return Status::ok();
}

Status inferDropout(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (!(spec.dropoutP >= 0.0 && spec.dropoutP < 1.0))
    return Status::invalid("p is " + std::to_string(spec.dropoutP) + ", must be in [0, 1)");
  const std::uint64_t elements = elementCount(input);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, input, dtype, 0, toDouble(elements)));
  out.numbers.needsInput = false;
  out.numbers.needsOutput = false;
  out.numbers.extraBytes = elements;  // the mask, one byte per element
  return Status::ok();
}

// nn.LayerNorm(F) over the last axis of [N, F] with its weight and bias [F] (2F parameters). PyTorch's
// native_layer_norm saves the float32 mean and rstd of each row whatever the dtype, and its backward
// reads the input: in = yes, out = no, E = 2 N float32 (docs/memory-model.md section 5.1).
Status inferLayerNorm(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (input.size() != 2 && input.size() != 4)
    return Status::invalid(
        "layernorm normalizes the features of an [N, F] input or the channels of an [N, C, H, W] "
        "input, got " +
        shapeToString(input));
  if (!(spec.epsilon >= 0.0 && spec.epsilon < 1.0))
    return Status::invalid("epsilon is " + std::to_string(spec.epsilon) + ", must be in [0, 1)");
  // Over the channels of NCHW (ConvNeXt's LayerNorm2d: permute, layer_norm, permute back) each of
  // the N*H*W positions is a row with its own mean and rstd.
  std::uint64_t rows = static_cast<std::uint64_t>(input[0]);
  if (input.size() == 4 && (!checkedMul(rows, static_cast<std::uint64_t>(input[2]), rows) ||
                            !checkedMul(rows, static_cast<std::uint64_t>(input[3]), rows)))
    return Status::invalid("the " + shapeToString(input) + " input has too many positions");
  const auto features = static_cast<std::uint64_t>(input[1]);
  // mean, variance, normalise, scale, shift: five flops per element.
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, input, dtype, 2 * features, 5.0 * toDouble(elementCount(input))));
  out.paramTensors = weightAndBias(features, features);
  out.numbers.needsInput = true;
  out.numbers.needsOutput = false;
  // mean and rstd, float32 whatever the dtype (a float16 input's rows may make more bytes than it has)
  if (!checkedMul(rows, 2 * 4, out.numbers.extraBytes))
    return Status::invalid("the saved statistics of " + std::to_string(rows) + " rows overflow 64 bits");
  return Status::ok();
}

Status inferPrimitiveLayer(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  const OperatorInfo& info = operatorInfo(spec.kind);
  if (info.infer == nullptr) return Status::internal("'" + std::string(info.name) + "' is not a primitive layer kind");
  return info.infer(spec, input, dtype, out);
}

}  // namespace remat::detail
