#include "remat/gpu/cudnn_ops.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "kernels.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

bool isTensorOpMath(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

std::string bytesText(std::uint64_t bytes) { return std::to_string(bytes) + " B"; }

// cuDNN's heuristic list for one of the three passes, each entry's exact workspace size filled in
// by the pass's cudnnGet*WorkspaceSize (the heuristic's own `memory` field is only an estimate),
// asked with the query descriptor set to the math type the entry was ranked with.
template <typename Perf, typename WorkspaceFn>
Result<std::vector<AlgorithmCandidate>> candidatesFrom(const Perf* perf, int count, cudnnConvolutionDescriptor_t query,
                                                       bool allowTf32, WorkspaceFn workspaceOf) {
  std::vector<AlgorithmCandidate> out;
  for (int i = 0; i < count; ++i) {
    AlgorithmCandidate c;
    c.algo = static_cast<int>(perf[i].algo);
    c.available = perf[i].status == CUDNN_STATUS_SUCCESS;
    c.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    c.tensorOps = isTensorOpMath(perf[i].mathType);
    if (c.available) {
      std::size_t bytes = 0;
      // An algorithm whose size query fails is not usable with these descriptors.
      cudnnStatus_t status = cudnnSetConvolutionMathType(query, allowTf32 ? perf[i].mathType : CUDNN_FMA_MATH);
      if (status == CUDNN_STATUS_SUCCESS) status = workspaceOf(perf[i].algo, &bytes);
      if (status != CUDNN_STATUS_SUCCESS)
        c.available = false;
      else
        c.workspaceBytes = bytes;
    }
    out.push_back(c);
  }
  return out;
}

cudnnMathType_t mathFor(const AlgorithmCandidate& chosen, bool allowTf32) {
  if (!allowTf32) return CUDNN_FMA_MATH;
  return chosen.tensorOps ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
}

const AlgorithmCandidate& findCandidate(const std::vector<AlgorithmCandidate>& candidates, int algo) {
  for (const auto& c : candidates)
    if (c.algo == algo && c.available) return c;
  return candidates.front();  // not reached: chooseAlgorithm picked one of them
}

// Picks one pass's algorithm and makes that pass's descriptor, with the math type the chosen
// entry was ranked with.
Status settlePass(const std::vector<AlgorithmCandidate>& candidates, std::uint64_t workspaceLimitBytes,
                  const ConvGeometry& geometry, const AlgorithmPolicy& policy, const std::string& what,
                  AlgorithmChoice& choice, ConvolutionDescriptor& descriptor) {
  auto chosen = chooseAlgorithm(candidates, workspaceLimitBytes, policy.deterministic, policy.allowTf32, what);
  if (!chosen) return chosen.status();
  auto desc = createConvolutionDescriptor(geometry, policy.allowTf32);
  if (!desc) return desc.status();
  REMAT_CUDNN_CHECK(
      cudnnSetConvolutionMathType(desc->get(), mathFor(findCandidate(candidates, chosen->algo), policy.allowTf32)));
  choice = *chosen;
  descriptor = std::move(*desc);
  return Status::ok();
}

}  // namespace

Result<AlgorithmChoice> chooseAlgorithm(std::span<const AlgorithmCandidate> candidates,
                                        std::uint64_t workspaceLimitBytes, bool requireDeterministic,
                                        bool allowTensorOps, std::string_view what) {
  std::uint64_t smallestAcceptable = std::numeric_limits<std::uint64_t>::max();
  for (const auto& c : candidates) {
    if (!c.available) continue;
    if (requireDeterministic && !c.deterministic) continue;
    if (c.tensorOps && !allowTensorOps) continue;
    if (c.workspaceBytes <= workspaceLimitBytes) return AlgorithmChoice{c.algo, c.workspaceBytes};
    smallestAcceptable = std::min(smallestAcceptable, c.workspaceBytes);
  }
  std::string message = std::string(what) + ": no " + (requireDeterministic ? "deterministic " : "") +
                        "cuDNN algorithm fits a workspace of " + bytesText(workspaceLimitBytes);
  if (smallestAcceptable != std::numeric_limits<std::uint64_t>::max())
    message += " (the smallest needs " + bytesText(smallestAcceptable) +
               "; `remat profile` writes the measured workspaces into the chain file)";
  else
    message += " (none of the " + std::to_string(candidates.size()) + " candidates is usable)";
  return Status::invalid(std::move(message));
}

std::string_view forwardAlgorithmName(int algo) {
  static constexpr std::array<std::string_view, 8> kNames = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return algo >= 0 && algo < static_cast<int>(kNames.size()) ? kNames[static_cast<std::size_t>(algo)] : "?";
}

std::string_view backwardDataAlgorithmName(int algo) {
  static constexpr std::array<std::string_view, 6> kNames = {"ALGO_0",     "ALGO_1",   "FFT",
                                                             "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return algo >= 0 && algo < static_cast<int>(kNames.size()) ? kNames[static_cast<std::size_t>(algo)] : "?";
}

std::string_view backwardFilterAlgorithmName(int algo) {
  static constexpr std::array<std::string_view, 7> kNames = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  return algo >= 0 && algo < static_cast<int>(kNames.size()) ? kNames[static_cast<std::size_t>(algo)] : "?";
}

// --- ConvOp ------------------------------------------------------------------------------------

Result<ConvOp> ConvOp::create(cudnnHandle_t handle, const ConvGeometry& geometry, bool bias,
                              const AlgorithmPolicy& policy, std::string_view name) {
  // cuDNN's algorithm queries dereference the handle (a null one crashes cuDNN 9).
  if (handle == nullptr)
    return Status::internal("gpu: convolution '" + std::string(name) + "': no cuDNN handle to choose algorithms with");
  ConvOp op;
  op.geometry_ = geometry;
  op.bias_ = bias;
  auto output = convolutionOutputDims(geometry, policy.allowTf32);
  if (!output) return output.status();
  op.output_ = *output;
  REMAT_RETURN_IF_ERROR(op.createTensorDescriptors());
  // One descriptor for the queries; each pass then gets its own with the chosen math type.
  auto query = createConvolutionDescriptor(geometry, policy.allowTf32);
  if (!query) return query.status();
  const std::string what(name);
  REMAT_RETURN_IF_ERROR(op.chooseForward(handle, query->get(), policy, what + " forward"));
  REMAT_RETURN_IF_ERROR(op.chooseBackwardData(handle, query->get(), policy, what + " backward data"));
  REMAT_RETURN_IF_ERROR(op.chooseBackwardFilter(handle, query->get(), policy, what + " backward filter"));
  return op;
}

Status ConvOp::createTensorDescriptors() {
  auto x = createTensorDescriptor(geometry_.input, geometry_.bfloat16);
  if (!x) return x.status();
  xDesc_ = std::move(*x);
  auto y = createTensorDescriptor(output_, geometry_.bfloat16);
  if (!y) return y.status();
  yDesc_ = std::move(*y);
  auto w = createFilterDescriptor(geometry_);
  if (!w) return w.status();
  wDesc_ = std::move(*w);
  if (bias_) {
    auto b = createChannelDescriptor(geometry_.outChannels);
    if (!b) return b.status();
    biasDesc_ = std::move(*b);
  }
  return Status::ok();
}

Status ConvOp::chooseForward(cudnnHandle_t handle, cudnnConvolutionDescriptor_t query, const AlgorithmPolicy& policy,
                             const std::string& what) {
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int count = 0;
  REMAT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, xDesc_.get(), wDesc_.get(), query, yDesc_.get(),
                                                           static_cast<int>(perf.size()), &count, perf.data()));
  auto candidates = candidatesFrom(perf.data(), count, query, policy.allowTf32,
                                   [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
                                     return cudnnGetConvolutionForwardWorkspaceSize(handle, xDesc_.get(), wDesc_.get(),
                                                                                    query, yDesc_.get(), algo, bytes);
                                   });
  if (!candidates) return candidates.status();
  return settlePass(*candidates, policy.forwardLimitBytes, geometry_, policy, what, forward_, convForward_);
}

Status ConvOp::chooseBackwardData(cudnnHandle_t handle, cudnnConvolutionDescriptor_t query,
                                  const AlgorithmPolicy& policy, const std::string& what) {
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
  int count = 0;
  REMAT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, wDesc_.get(), yDesc_.get(), query, xDesc_.get(),
                                                                static_cast<int>(perf.size()), &count, perf.data()));
  auto candidates = candidatesFrom(perf.data(), count, query, policy.allowTf32,
                                   [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
                                     return cudnnGetConvolutionBackwardDataWorkspaceSize(
                                         handle, wDesc_.get(), yDesc_.get(), query, xDesc_.get(), algo, bytes);
                                   });
  if (!candidates) return candidates.status();
  return settlePass(*candidates, policy.backwardLimitBytes, geometry_, policy, what, data_, convData_);
}

Status ConvOp::chooseBackwardFilter(cudnnHandle_t handle, cudnnConvolutionDescriptor_t query,
                                    const AlgorithmPolicy& policy, const std::string& what) {
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
  int count = 0;
  REMAT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      handle, xDesc_.get(), yDesc_.get(), query, wDesc_.get(), static_cast<int>(perf.size()), &count, perf.data()));
  auto candidates = candidatesFrom(perf.data(), count, query, policy.allowTf32,
                                   [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
                                     return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                         handle, xDesc_.get(), yDesc_.get(), query, wDesc_.get(), algo, bytes);
                                   });
  if (!candidates) return candidates.status();
  return settlePass(*candidates, policy.backwardLimitBytes, geometry_, policy, what, filter_, convFilter_);
}

std::uint64_t ConvOp::backwardWorkspaceBytes() const { return std::max(data_.workspaceBytes, filter_.workspaceBytes); }

std::string ConvOp::describe() const {
  return "fwd " + std::string(forwardAlgorithmName(forward_.algo)) + " (" + bytesText(forward_.workspaceBytes) +
         "), bwd data " + std::string(backwardDataAlgorithmName(data_.algo)) + " (" + bytesText(data_.workspaceBytes) +
         "), bwd filter " + std::string(backwardFilterAlgorithmName(filter_.algo)) + " (" +
         bytesText(filter_.workspaceBytes) + ")";
}

Status ConvOp::forward(cudnnHandle_t handle, const float* x, const float* w, const float* b, float* y,
                       void* workspace) const {
  REMAT_CUDNN_CHECK(cudnnConvolutionForward(handle, &kOne, xDesc_.get(), x, wDesc_.get(), w, convForward_.get(),
                                            static_cast<cudnnConvolutionFwdAlgo_t>(forward_.algo), workspace,
                                            forward_.workspaceBytes, &kZero, yDesc_.get(), y));
  if (bias_) REMAT_CUDNN_CHECK(cudnnAddTensor(handle, &kOne, biasDesc_.get(), b, &kOne, yDesc_.get(), y));
  return Status::ok();
}

Status ConvOp::backwardData(cudnnHandle_t handle, const float* dy, const float* w, float* dx, void* workspace,
                            bool accumulate) const {
  REMAT_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &kOne, wDesc_.get(), w, yDesc_.get(), dy, convData_.get(),
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(data_.algo), workspace,
                                                 data_.workspaceBytes, accumulate ? &kOne : &kZero, xDesc_.get(), dx));
  return Status::ok();
}

Status ConvOp::backwardParams(cudnnHandle_t handle, const float* x, const float* dy, float* dw, float* db,
                              void* workspace) const {
  REMAT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &kOne, xDesc_.get(), x, yDesc_.get(), dy, convFilter_.get(),
                                                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter_.algo),
                                                   workspace, filter_.workspaceBytes, &kOne, wDesc_.get(), dw));
  // The bias gradient by our own deterministic reduction (cuDNN does not promise that of
  // cudnnConvolutionBackwardBias), on the handle's stream.
  if (bias_) {
    cudaStream_t stream = nullptr;
    REMAT_CUDNN_CHECK(cudnnGetStream(handle, &stream));
    return kernels::accumulateChannelBiasGrad(stream, output_.n, output_.c,
                                              static_cast<kernels::Index>(output_.h) * output_.w, dy, db);
  }
  return Status::ok();
}

// --- PoolOp ------------------------------------------------------------------------------------

Result<PoolOp> PoolOp::create(const PoolGeometry& geometry) {
  PoolOp op;
  op.geometry_ = geometry;
  auto output = poolingOutputDims(geometry);
  if (!output) return output.status();
  op.output_ = *output;
  auto x = createTensorDescriptor(geometry.input, geometry.bfloat16);
  if (!x) return x.status();
  op.xDesc_ = std::move(*x);
  auto y = createTensorDescriptor(op.output_, geometry.bfloat16);
  if (!y) return y.status();
  op.yDesc_ = std::move(*y);
  auto pool = createPoolingDescriptor(geometry);
  if (!pool) return pool.status();
  op.pool_ = std::move(*pool);
  return op;
}

Status PoolOp::forward(cudnnHandle_t handle, const float* x, float* y) const {
  REMAT_CUDNN_CHECK(cudnnPoolingForward(handle, pool_.get(), &kOne, xDesc_.get(), x, &kZero, yDesc_.get(), y));
  return Status::ok();
}

Status PoolOp::backward(cudnnHandle_t handle, const float* x, const float* y, const float* dy, float* dx) const {
  // Average pooling never looks at x or y, but the API wants pointers of the right shapes: dy has
  // y's shape and dx has x's.
  if (geometry_.mode == PoolMode::AverageIncludePadding) {
    x = dx;
    y = dy;
  }
  REMAT_CUDNN_CHECK(cudnnPoolingBackward(handle, pool_.get(), &kOne, yDesc_.get(), y, yDesc_.get(), dy, xDesc_.get(), x,
                                         &kZero, xDesc_.get(), dx));
  return Status::ok();
}

// --- BatchNormOp -------------------------------------------------------------------------------

Result<BatchNormOp> BatchNormOp::create(const Dims4& dims) {
  BatchNormOp op;
  op.dims_ = dims;
  auto x = createTensorDescriptor(dims);
  if (!x) return x.status();
  op.xDesc_ = std::move(*x);
  auto c = createChannelDescriptor(dims.c);
  if (!c) return c.status();
  op.channelDesc_ = std::move(*c);
  return op;
}

Status BatchNormOp::forward(cudnnHandle_t handle, const float* x, const float* gamma, const float* beta, float* y,
                            float* stats) const {
  // No running statistics: a training step does not read them, and PyTorch keeps them as buffers
  // outside both sides of the comparison.
  float* mean = stats;
  float* invStd = stats != nullptr ? stats + dims_.c : nullptr;
  REMAT_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(handle, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xDesc_.get(),
                                                           x, xDesc_.get(), y, channelDesc_.get(), gamma, beta, 0.0,
                                                           nullptr, nullptr, kEpsilon, mean, invStd));
  return Status::ok();
}

Status BatchNormOp::backward(cudnnHandle_t handle, const float* x, const float* dy, const float* gamma,
                             const float* stats, float* dx, float* dgamma, float* dbeta, bool accumulate) const {
  REMAT_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      handle, CUDNN_BATCHNORM_SPATIAL, &kOne, accumulate ? &kOne : &kZero, &kOne, &kOne, xDesc_.get(), x, xDesc_.get(),
      dy, xDesc_.get(), dx, channelDesc_.get(), gamma, dgamma, dbeta, kEpsilon, stats, stats + dims_.c));
  return Status::ok();
}

}  // namespace remat::gpu
