#pragma once
// Seeded random chains of real layer kinds (not abstract): conv2d with groups and depthwise,
// relu, relu6, pools with padding and ceil mode, adaptive pooling, batch norm (2-D and 4-D),
// dropout (2-D and 4-D), flatten, linear and the three residual blocks, on small shapes. Every
// candidate layer is checked by shape inference on the chain built so far; one that does not fit
// is dropped and another drawn, so every chain is valid.
#include <cstdint>
#include <string>

#include "remat/model/chain.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/model/random_chain.hpp"

namespace remat::testing {

inline ChainSpec randomRealChainSpec(std::uint64_t seed, std::size_t targetLayers = 10) {
  SplitMix64 gen(rng::mix64(seed ^ 0x5DEECE66Dull));  // mixed: SplitMix64 states of seeds s and s+1 overlap
  ChainSpec spec;
  spec.name = "random_real_" + std::to_string(seed);
  const std::int64_t side = 5 + static_cast<std::int64_t>(gen.below(6));
  spec.input.shape = {2, 1 + static_cast<std::int64_t>(gen.below(4)), side, side};
  Shape shape = spec.input.shape;
  auto fits = [&](const LayerSpec& layer) {
    spec.layers.push_back(layer);
    if (layer.kind == LayerKind::Flatten) {  // a view: buildChain folds it, so track it here
      if (shape.size() != 4) {
        spec.layers.pop_back();
        return false;
      }
      shape = {shape[0], shape[1] * shape[2] * shape[3]};
      return true;
    }
    auto chain = buildChain(spec);
    if (chain) {
      shape = chain->layers.back().outputShape;
      return true;
    }
    spec.layers.pop_back();
    return false;
  };
  auto pick = [&](std::initializer_list<std::int64_t> values) {
    return *(values.begin() + static_cast<std::ptrdiff_t>(gen.below(values.size())));
  };
  std::size_t attempts = 0;
  while (spec.layers.size() < targetLayers && attempts++ < 200) {
    LayerSpec l;
    l.name = "l" + std::to_string(spec.layers.size() + 1);
    const bool image = shape.size() == 4;
    const std::uint64_t draw = gen.below(image ? 12 : 5);
    if (image) {
      const std::int64_t channels = shape[1];
      switch (draw) {
        case 0:
        case 1:
        case 2: {
          l.kind = LayerKind::Conv2d;
          l.kernel = pick({1, 3, 3, 5});
          l.stride = pick({1, 1, 2});
          l.padding = gen.below(static_cast<std::uint64_t>(l.kernel / 2 + 1));
          l.bias = gen.chance(1, 2);
          const std::uint64_t form = gen.below(4);
          if (form == 0) {  // depthwise
            l.outChannels = channels;
            l.groups = channels;
          } else if (form == 1 && channels % 2 == 0) {
            l.outChannels = 2 * pick({1, 2, 3});
            l.groups = 2;
          } else {
            l.outChannels = pick({2, 3, 4, 6, 8});
          }
          break;
        }
        case 3: l.kind = LayerKind::Relu; break;
        case 4: l.kind = LayerKind::Relu6; break;
        case 5: l.kind = LayerKind::BatchNorm; break;
        case 6:
        case 7:
          l.kind = gen.chance(1, 2) ? LayerKind::MaxPool : LayerKind::AvgPool;
          l.kernel = pick({2, 3});
          l.stride = pick({1, 2, 2});
          l.padding = gen.below(static_cast<std::uint64_t>(l.kernel / 2 + 1));
          l.ceilMode = gen.chance(1, 3);
          break;
        case 8:
          l.kind = LayerKind::Dropout;
          l.dropoutP = 0.25;
          break;
        case 9: {
          const std::uint64_t which = gen.below(3);
          l.stride = pick({1, 2});
          if (which == 0) {
            l.kind = LayerKind::BasicBlock;
            l.outChannels = pick({channels, 4, 6});
          } else if (which == 1) {
            l.kind = LayerKind::Bottleneck;
            l.width = pick({1, 2, 3});
            l.outChannels = pick({channels, 4, 8});
          } else {
            l.kind = LayerKind::InvertedResidual;
            l.expandRatio = pick({1, 2, 3});
            l.outChannels = pick({channels, 3, 5});
          }
          break;
        }
        case 10:
          l.kind = LayerKind::AdaptiveAvgPool;
          l.outputHeight = pick({1, 2, 3});
          l.outputWidth = pick({1, 2});
          break;
        default: l.kind = LayerKind::Flatten; break;
      }
    } else {
      switch (draw) {
        case 0:
        case 1:
          l.kind = LayerKind::Linear;
          l.outFeatures = pick({3, 5, 8, 12});
          l.bias = gen.chance(3, 4);
          break;
        case 2: l.kind = gen.chance(1, 2) ? LayerKind::Relu : LayerKind::Relu6; break;
        case 3: l.kind = LayerKind::BatchNorm; break;
        default:
          l.kind = LayerKind::Dropout;
          l.dropoutP = 0.4;
          break;
      }
    }
    fits(l);
  }
  // End in class logits: flatten if needed, then a linear layer.
  if (shape.size() == 4) {
    LayerSpec flatten;
    flatten.name = "flatten";
    flatten.kind = LayerKind::Flatten;
    fits(flatten);
  }
  LayerSpec head;
  head.name = "head";
  head.kind = LayerKind::Linear;
  head.outFeatures = 2 + static_cast<std::int64_t>(gen.below(8));
  fits(head);
  return spec;
}

}  // namespace remat::testing
