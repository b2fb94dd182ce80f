#include "remat/model/random_chain.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace remat {

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::below(std::uint64_t bound) { return bound == 0 ? 0 : next() % bound; }

bool SplitMix64::chance(std::uint64_t numerator, std::uint64_t denominator) { return below(denominator) < numerator; }

namespace {

double drawCost(SplitMix64& rng) { return 0.5 * static_cast<double>(1 + rng.below(8)); }

void drawWorkspaces(SplitMix64& rng, const RandomChainOptions& o, LayerNumbers& m) {
  if (!o.workspaces) return;
  if (rng.chance(1, 3)) m.fwdWorkspaceBytes = o.unitBytes * rng.below(2 * o.maxUnits + 1) / 2;
  if (rng.chance(1, 3)) m.bwdWorkspaceBytes = o.unitBytes * rng.below(2 * o.maxUnits + 1) / 2;
}

std::vector<LayerNumbers> generalLayers(SplitMix64& rng, const RandomChainOptions& o) {
  std::vector<LayerNumbers> layers(o.layers);
  const std::uint64_t equalSize = o.unitBytes * (1 + rng.below(o.maxUnits));
  for (LayerNumbers& m : layers) {
    m.outBytes = o.equalSizes ? equalSize : o.unitBytes * (1 + rng.below(o.maxUnits));
    if (o.mixFlags) {
      m.needsInput = rng.chance(2, 3);
      m.needsOutput = rng.chance(1, 2);
    }
    if (o.extras && rng.chance(1, 4)) m.extraBytes = o.unitBytes * (1 + rng.below(o.maxUnits)) / 4;
    drawWorkspaces(rng, o, m);
    m.fwdCost = drawCost(rng);
    m.bwdCost = 2.0 * m.fwdCost;
  }
  return layers;
}

// Layer kinds of the CNN mode with docs/memory-model.md section 5's flags.
enum class CnnKind { Conv, BatchNorm, Relu, MaxPool, AvgPool, Dropout };

LayerNumbers cnnLayer(CnnKind kind, std::uint64_t bytes, SplitMix64& rng, const RandomChainOptions& o) {
  LayerNumbers m;
  m.outBytes = bytes;
  switch (kind) {
    case CnnKind::Conv: m.needsInput = true, m.needsOutput = false; break;
    case CnnKind::BatchNorm:
      m.needsInput = true, m.needsOutput = false;
      if (o.extras) m.extraBytes = std::max<std::uint64_t>(1, bytes / 64);
      break;
    case CnnKind::Relu: m.needsInput = false, m.needsOutput = true; break;
    case CnnKind::MaxPool:  // PyTorch's input and int64 indices (twice a float32 output)
      m.needsInput = true, m.needsOutput = false;
      if (o.extras) m.extraBytes = 2 * bytes;
      break;
    case CnnKind::AvgPool: m.needsInput = true, m.needsOutput = false; break;
    case CnnKind::Dropout:
      m.needsInput = false, m.needsOutput = false;
      if (o.extras) m.extraBytes = std::max<std::uint64_t>(1, bytes / 4);
      break;
  }
  if (kind == CnnKind::Conv) drawWorkspaces(rng, o, m);
  m.fwdCost = drawCost(rng);
  m.bwdCost = 2.0 * m.fwdCost;
  return m;
}

// Blocks of conv [batchnorm] relu [maxpool | avgpool | dropout]. Sizes never grow: a conv keeps or
// halves its input size, pools halve it, the other kinds keep it. The only layers whose output no
// backward reads are a conv or batch-norm followed by a relu (which keeps the size); the pools and
// dropout are followed by a conv, which reads them. So u(k) = T(k-1) + a(k) is nondecreasing.
std::vector<LayerNumbers> cnnLayers(SplitMix64& rng, const RandomChainOptions& o, std::uint64_t& inputBytes) {
  std::vector<LayerNumbers> layers;
  layers.reserve(o.layers + 4);
  std::uint64_t bytes = o.unitBytes * (std::uint64_t{1} << (3 + rng.below(4)));
  inputBytes = bytes;
  auto shrink = [&](std::uint64_t b) { return std::max(o.unitBytes, b / 2); };
  while (layers.size() < o.layers) {
    // A conv reads its input, so the layer before it is kept and the conv may shrink the size.
    if (!layers.empty() && rng.chance(1, 4)) bytes = shrink(bytes);
    layers.push_back(cnnLayer(CnnKind::Conv, bytes, rng, o));
    if (rng.chance(1, 2)) layers.push_back(cnnLayer(CnnKind::BatchNorm, bytes, rng, o));
    layers.push_back(cnnLayer(CnnKind::Relu, bytes, rng, o));
    const std::uint64_t tail = rng.below(5);
    if (tail == 0) {
      bytes = shrink(bytes);
      layers.push_back(cnnLayer(CnnKind::MaxPool, bytes, rng, o));
    } else if (tail == 1) {
      bytes = shrink(bytes);
      layers.push_back(cnnLayer(CnnKind::AvgPool, bytes, rng, o));
    } else if (tail == 2) {
      layers.push_back(cnnLayer(CnnKind::Dropout, bytes, rng, o));
    }
  }
  // Cut to length; a cut after an unread layer is harmless because the last layer has no
  // successor.
  layers.resize(o.layers);
  return layers;
}

}  // namespace

Chain makeRandomChain(const RandomChainOptions& options) {
  SplitMix64 rng(options.seed ^ (0xD1B54A32D192ED03ull * (options.layers + 1)));
  std::uint64_t inputBytes = options.unitBytes;
  const std::vector<LayerNumbers> layers =
      options.cnnLike ? cnnLayers(rng, options, inputBytes) : generalLayers(rng, options);
  Chain chain = makeAbstractChain("random" + std::to_string(options.layers) + "_" + std::to_string(options.seed),
                                  inputBytes, layers);
  return chain;
}

RandomChainOptions mixedRandomChainOptions(std::size_t layers, std::uint64_t seed) {
  SplitMix64 rng(seed * 0x2545F4914F6CDD1Dull + 0x632BE59BD9B4E019ull);
  RandomChainOptions o;
  o.layers = layers;
  o.seed = seed;
  const std::uint64_t mode = rng.below(12);
  o.cnnLike = mode < 3;
  o.equalSizes = mode == 3 || mode == 4;
  o.mixFlags = mode != 5;
  o.extras = rng.chance(2, 3);
  o.workspaces = rng.chance(1, 2);
  o.maxUnits = 1 + rng.below(16);
  o.unitBytes = 256;
  return o;
}

}  // namespace remat
