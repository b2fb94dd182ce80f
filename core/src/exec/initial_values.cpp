// Deterministic initial values of the static tensors, from the counter generator: the same seed
// gives the same input, parameters and labels on every device and platform.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "remat/exec/counter_rng.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/block.hpp"
#include "remat/model/token_input.hpp"

namespace remat {
namespace {

void fillRandomBytes(std::byte* data, std::size_t bytes, std::uint64_t key) {
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>(rng::at(key, i / 8) >> (8 * (i % 8)));
}

// Uniform in [-bound, bound), written float by float into byte storage.
void fillUniform(std::byte* data, std::size_t count, float bound, std::uint64_t key) {
  for (std::size_t i = 0; i < count; ++i) {
    const float value = (2.0f * rng::uniform01(rng::at(key, i)) - 1.0f) * bound;
    std::memcpy(data + 4 * i, &value, 4);
  }
}

void fillConstant(std::byte* data, std::size_t count, float value) {
  for (std::size_t i = 0; i < count; ++i) std::memcpy(data + 4 * i, &value, 4);
}

std::uint64_t opKey(std::uint64_t seed, rng::Purpose purpose, std::size_t layer, std::size_t innerOp) {
  return rng::mix64(rng::streamKey(seed, purpose, layer) ^ (0xA5A5A5A5ull * (innerOp + 1)));
}

// conv2d: weight [out][in/groups][k][k] then bias; linear: weight [out][in] then bias.
void initWeighted(std::byte* data, std::uint64_t weights, std::uint64_t biases, std::uint64_t fanIn, std::uint64_t seed,
                  std::size_t layer, std::size_t innerOp) {
  const float fan = static_cast<float>(fanIn > 0 ? fanIn : 1);
  fillUniform(data, weights, std::sqrt(6.0f / fan), opKey(seed, rng::Purpose::Weights, layer, innerOp));
  fillUniform(data + 4 * weights, biases, 1.0f / std::sqrt(fan), opKey(seed, rng::Purpose::Bias, layer, innerOp));
}

void initBatchNorm(std::byte* data, std::uint64_t channels) {
  fillConstant(data, channels, 1.0f);
  fillConstant(data + 4 * channels, channels, 0.0f);
}

// ConvNeXt's layer_scale: torchvision starts it at 1e-6, which would make the block's residual branch
// vanish from every value a test compares; 1 keeps the branch visible (the bytes do not depend on it).
void initLayerScale(std::byte* data, std::uint64_t channels) { fillConstant(data, channels, 1.0f); }

// transformer_block, in its parameter order (run_transformer.cpp): ln_1, qkv, out projection, ln_2,
// fc1, fc2; each linear Kaiming-uniform over its fan-in, as a Linear layer.
void initTransformerBlock(std::byte* data, std::uint64_t d, std::uint64_t hidden, std::uint64_t seed,
                          std::size_t layer) {
  std::uint64_t at = 0;
  auto norm = [&] {
    initBatchNorm(data + 4 * at, d);
    at += 2 * d;
  };
  std::size_t innerOp = 0;
  auto linear = [&](std::uint64_t in, std::uint64_t out) {
    initWeighted(data + 4 * at, in * out, out, in, seed, layer, innerOp++);
    at += in * out + out;
  };
  norm();
  linear(d, 3 * d);
  linear(d, d);
  norm();
  linear(d, hidden);
  linear(hidden, d);
}

// swin_block, in torchvision's order (core/src/cpu/run_swin.cpp): norm1, the relative position bias
// table (uniform in [-0.02, 0.02), torchvision's trunc_normal_(std=0.02) in spirit), qkv, proj, norm2,
// fc1, fc2; each linear Kaiming-uniform over its fan-in.
void initSwinBlock(std::byte* data, std::uint64_t c, std::uint64_t hidden, std::uint64_t tableCount, std::uint64_t seed,
                   std::size_t layer) {
  std::uint64_t at = 0;
  std::size_t innerOp = 0;
  auto norm = [&] {
    initBatchNorm(data + 4 * at, c);
    at += 2 * c;
  };
  auto linear = [&](std::uint64_t in, std::uint64_t out) {
    initWeighted(data + 4 * at, in * out, out, in, seed, layer, innerOp++);
    at += in * out + out;
  };
  norm();
  fillUniform(data + 4 * at, tableCount, 0.02f, opKey(seed, rng::Purpose::Weights, layer, 99));
  at += tableCount;
  linear(c, 3 * c);
  linear(c, c);
  norm();
  linear(c, hidden);
  linear(hidden, c);
}

// Swin's kinds, in their CPU parameter order (core/src/cpu/run_swin*.cpp).
void initSwinLayer(const Chain& chain, const ChainLayer& layer, std::size_t l, std::uint64_t seed, std::byte* data) {
  const Shape& in = layer.inputShape;
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  switch (layer.kind) {
    case LayerKind::SwinEmbedding: {  // the conv Kaiming-uniform, the norm (weight 1, bias 0)
      const auto fanIn = static_cast<std::uint64_t>(in[1] * spec.kernel * spec.kernel);
      const auto c = static_cast<std::uint64_t>(spec.width);
      initWeighted(data, c * fanIn, c, fanIn, seed, l, 0);
      initBatchNorm(data + 4 * (c * fanIn + c), c);
      return;
    }
    case LayerKind::SwinBlock: {
      const auto c = static_cast<std::uint64_t>(in[3]), hidden = static_cast<std::uint64_t>(spec.hidden);
      const std::uint64_t table = layer.paramCount - (4 * c * c + 2 * c * hidden + 9 * c + hidden);
      initSwinBlock(data, c, hidden, table, seed, l);
      return;
    }
    case LayerKind::PatchMerging: {  // the reduction [2C, 4C] without bias, then the norm
      const auto c = static_cast<std::uint64_t>(in[3]);
      initWeighted(data, 8 * c * c, 0, 4 * c, seed, l, 0);
      initBatchNorm(data + 4 * 8 * c * c, 4 * c);
      return;
    }
    default: {  // swin_head: the norm, then the linear over C
      const auto c = static_cast<std::uint64_t>(in[3]), out = static_cast<std::uint64_t>(spec.outFeatures);
      initBatchNorm(data, c);
      initWeighted(data + 4 * 2 * c, c * out, out, c, seed, l, 1);
      return;
    }
  }
}

// The transformer kinds, in their CPU parameter order (core/src/cpu/run_*.cpp).
void initTransformerLayer(const Chain& chain, const ChainLayer& layer, std::size_t l, std::uint64_t seed,
                          std::byte* data) {
  const Shape& in = layer.inputShape;
  switch (layer.kind) {
    case LayerKind::TokenEmbedding:  // the tables uniform in [-1, 1)
      fillUniform(data, layer.paramCount, 1.0f, opKey(seed, rng::Purpose::Weights, l, 0));
      return;
    case LayerKind::LmHead: {  // ln_f (weight 1, bias 0), then W Kaiming-uniform over d
      const LayerSpec& spec = chain.spec.layers[layer.specIndex];
      const auto d = static_cast<std::uint64_t>(in[2]);
      const std::uint64_t norm = spec.norm ? 2 * d : 0;
      if (spec.norm) initBatchNorm(data, d);
      initWeighted(data + 4 * norm, layer.paramCount - norm, 0, d, seed, l, 1);
      return;
    }
    case LayerKind::PatchEmbedding: {  // the conv Kaiming-uniform; class token and positions uniform in [-1, 1)
      const LayerSpec& spec = chain.spec.layers[layer.specIndex];
      const auto fanIn = static_cast<std::uint64_t>(in[1] * spec.kernel * spec.kernel);
      const auto d = static_cast<std::uint64_t>(spec.width);
      initWeighted(data, d * fanIn, d, fanIn, seed, l, 0);
      fillUniform(data + 4 * (d * fanIn + d), layer.paramCount - d * fanIn - d, 1.0f,
                  opKey(seed, rng::Purpose::Weights, l, 1));
      return;
    }
    case LayerKind::ClsHead: {  // the norm (weight 1, bias 0), then the linear over d
      const LayerSpec& spec = chain.spec.layers[layer.specIndex];
      const auto d = static_cast<std::uint64_t>(in[2]), out = static_cast<std::uint64_t>(spec.outFeatures);
      const std::uint64_t norm = spec.norm ? 2 * d : 0;
      if (spec.norm) initBatchNorm(data, d);
      initWeighted(data + 4 * norm, d * out, spec.bias ? out : 0, d, seed, l, 1);
      return;
    }
    case LayerKind::TransformerBlock: {
      const LayerSpec& spec = chain.spec.layers[layer.specIndex];
      initTransformerBlock(data, static_cast<std::uint64_t>(in[2]), static_cast<std::uint64_t>(spec.hidden), seed, l);
      return;
    }
    default: break;
  }
}

Status initLayer(const Chain& chain, const ChainLayer& layer, std::size_t l, std::uint64_t seed, std::byte* data) {
  const Shape& in = layer.inputShape;
  switch (layer.kind) {
    case LayerKind::Conv2d: {
      const LayerSpec& spec = chain.spec.layers[layer.specIndex];
      const std::uint64_t fanIn = static_cast<std::uint64_t>(in[1] / spec.groups * spec.kernel * spec.kernelW());
      const std::uint64_t weights = static_cast<std::uint64_t>(layer.outputShape[1]) * fanIn;
      initWeighted(data, weights, layer.paramCount - weights, fanIn, seed, l, 0);
      return Status::ok();
    }
    case LayerKind::Linear: {
      const std::uint64_t fanIn = static_cast<std::uint64_t>(in[1]);
      const std::uint64_t weights = static_cast<std::uint64_t>(layer.outputShape[1]) * fanIn;
      initWeighted(data, weights, layer.paramCount - weights, fanIn, seed, l, 0);
      return Status::ok();
    }
    case LayerKind::BatchNorm:
    case LayerKind::LayerNorm: initBatchNorm(data, layer.paramCount / 2); return Status::ok();  // weight 1, bias 0
    case LayerKind::TokenEmbedding:
    case LayerKind::LmHead:
    case LayerKind::PatchEmbedding:
    case LayerKind::ClsHead:
    case LayerKind::TransformerBlock: initTransformerLayer(chain, layer, l, seed, data); return Status::ok();
    case LayerKind::SwinEmbedding:
    case LayerKind::SwinBlock:
    case LayerKind::PatchMerging:
    case LayerKind::SwinHead: initSwinLayer(chain, layer, l, seed, data); return Status::ok();
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual:
    case LayerKind::Block: {
      auto graph = buildBlockGraph(chain.spec.layers[layer.specIndex], in, chain.dtype);
      if (!graph) return graph.status();
      std::uint64_t offset = 0;
      for (std::size_t i = 0; i < graph->ops.size(); ++i) {
        const BlockOp& op = graph->ops[i];
        const Shape& opIn = graph->tensors[op.inputs[0]].shape;
        if (op.kind == BlockOpKind::Conv2d) {
          const auto fanIn =
              static_cast<std::uint64_t>(opIn[1] / op.layer.groups * op.layer.kernel * op.layer.kernelW());
          const std::uint64_t biases = op.layer.bias ? static_cast<std::uint64_t>(op.layer.outChannels) : 0;
          initWeighted(data + 4 * offset, op.paramCount - biases, biases, fanIn, seed, l, i);
        } else if (op.kind == BlockOpKind::BatchNorm || op.kind == BlockOpKind::LayerNorm) {
          initBatchNorm(data + 4 * offset, op.paramCount / 2);  // weight 1, bias 0
        } else if (op.kind == BlockOpKind::LayerScale) {
          initLayerScale(data + 4 * offset, op.paramCount);
        }
        offset += op.paramCount;
      }
      return Status::ok();
    }
    default: break;
  }
  return Status::internal("layer " + std::to_string(l) + " ('" + layer.name +
                          "'): " + std::to_string(layer.paramCount) + " parameters of a kind that has none");
}

// Pure bf16 (the model cast with .to(torch.bfloat16)): the float32 values rounded to bfloat16,
// to nearest even, as the cast rounds them.
void roundToBFloat16(const std::vector<float>& values, std::byte* out) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t word = 0;
    std::memcpy(&word, &values[i], sizeof word);
    word += 0x7fffu + ((word >> 16) & 1u);  // the initial values are finite
    const auto half = static_cast<std::uint16_t>(word >> 16);
    std::memcpy(out + 2 * i, &half, sizeof half);
  }
}

}  // namespace

std::vector<std::byte> initialInput(const Chain& chain, std::uint64_t seed) {
  std::vector<std::byte> bytes(chain.inputBytes);
  const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Input, 0);
  const bool tokenIds = hasTokenIds(chain) && chain.size() > 0 && chain.layers[0].kind == LayerKind::TokenEmbedding &&
                        chain.layers[0].specIndex < chain.spec.layers.size();
  if (tokenIds) {  // int64 ids in [0, vocab), PyTorch's torch.long (the model's a(0): kTokenIdBytes each)
    const auto vocab =
        static_cast<std::uint64_t>(std::max<std::int64_t>(1, chain.spec.layers[chain.layers[0].specIndex].vocab));
    for (std::size_t i = 0; i < bytes.size() / kTokenIdBytes; ++i) {
      const auto id = static_cast<std::int64_t>(rng::at(key, i) % vocab);
      std::memcpy(bytes.data() + kTokenIdBytes * i, &id, kTokenIdBytes);
    }
  } else if (!chain.inputShape.empty() && chain.dtype == DType::Float32) {
    fillUniform(bytes.data(), bytes.size() / 4, 1.0f, key);
  } else if (!chain.inputShape.empty() && chain.dtype == DType::BFloat16) {
    std::vector<float> values(bytes.size() / 2);
    fillUniform(reinterpret_cast<std::byte*>(values.data()), values.size(), 1.0f, key);
    roundToBFloat16(values, bytes.data());
  } else
    fillRandomBytes(bytes.data(), bytes.size(), key);
  return bytes;
}

Status writeInitialParameters(const Chain& chain, std::size_t layer, std::uint64_t seed, std::span<std::byte> out) {
  if (layer < 1 || layer > chain.size())
    return Status::internal("initial parameters: layer " + std::to_string(layer) + " is outside 1.." +
                            std::to_string(chain.size()));
  const ChainLayer& cl = chain.layers[layer - 1];
  if (out.size() != cl.numbers.paramBytes)
    return Status::internal("initial parameters of layer " + std::to_string(layer) + ": " + std::to_string(out.size()) +
                            " bytes given for " + std::to_string(cl.numbers.paramBytes));
  if (out.empty()) return Status::ok();
  const bool floats = cl.kind != LayerKind::Abstract && chain.dtype == DType::Float32 &&
                      cl.numbers.paramBytes == cl.paramCount * 4 && cl.specIndex < chain.spec.layers.size();
  const bool halves = cl.kind != LayerKind::Abstract && chain.dtype == DType::BFloat16 &&
                      cl.numbers.paramBytes == cl.paramCount * 2 && cl.specIndex < chain.spec.layers.size();
  if (halves) {  // float32 initial values rounded to bfloat16
    std::vector<float> values(cl.paramCount);
    REMAT_RETURN_IF_ERROR(initLayer(chain, cl, layer, seed, reinterpret_cast<std::byte*>(values.data())));
    roundToBFloat16(values, out.data());
    return Status::ok();
  }
  if (!floats) {
    fillRandomBytes(out.data(), out.size(), rng::streamKey(seed, rng::Purpose::Weights, layer));
    return Status::ok();
  }
  return initLayer(chain, cl, layer, seed, out.data());
}

Result<std::vector<std::byte>> initialParameters(const Chain& chain, std::size_t layer, std::uint64_t seed) {
  if (layer < 1 || layer > chain.size())
    return Status::internal("initial parameters: layer " + std::to_string(layer) + " is outside 1.." +
                            std::to_string(chain.size()));
  std::vector<std::byte> bytes(chain.layers[layer - 1].numbers.paramBytes);
  REMAT_RETURN_IF_ERROR(writeInitialParameters(chain, layer, seed, bytes));
  return bytes;
}

std::vector<LabelIndex> initialLabels(const Chain& chain, std::uint64_t seed) {
  const std::uint64_t count = labelCount(chain);
  if (count == 0) return {};
  const ChainLayer& last = chain.layers.back();
  const std::uint64_t classes = elementCount(last.outputShape) / count;  // per sample, or the vocabulary
  std::vector<LabelIndex> labels(count);
  const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Labels, 0);
  for (std::uint64_t i = 0; i < count; ++i) labels[i] = static_cast<LabelIndex>(rng::at(key, i) % classes);
  return labels;
}

}  // namespace remat
