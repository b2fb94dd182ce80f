#pragma once
// The zoo's chain builder, shared by zoo.cpp and the model families in files of their own.
#include <cstdint>
#include <string>

#include "remat/model/chain.hpp"

namespace remat::detail {

class SpecBuilder {
 public:
  explicit SpecBuilder(ChainSpec& spec) : spec_(spec) {}

  void conv(std::string name, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
            bool bias) {
    LayerSpec& l = add(std::move(name), LayerKind::Conv2d);
    l.outChannels = out;
    l.kernel = kernel;
    l.stride = stride;
    l.padding = padding;
    l.bias = bias;
  }
  void maxpool(std::string name, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
    LayerSpec& l = add(std::move(name), LayerKind::MaxPool);
    l.kernel = kernel;
    l.stride = stride;
    l.padding = padding;
  }
  void adaptiveAvgPool(std::string name, std::int64_t size) {
    LayerSpec& l = add(std::move(name), LayerKind::AdaptiveAvgPool);
    l.outputHeight = size;
    l.outputWidth = size;
  }
  void linear(std::string name, std::int64_t out) { add(std::move(name), LayerKind::Linear).outFeatures = out; }
  void dropout(std::string name, double p) { add(std::move(name), LayerKind::Dropout).dropoutP = p; }
  void block(std::string name, LayerKind kind, std::int64_t out, std::int64_t stride, std::int64_t width = 0,
             std::int64_t expandRatio = 1) {
    LayerSpec& l = add(std::move(name), kind);
    l.outChannels = out;
    l.stride = stride;
    l.width = width;
    l.expandRatio = expandRatio;
  }
  ChainSpec& spec() { return spec_; }  // for the models built in files of their own (zoo_convnext.cpp)
  LayerSpec& add(std::string name, LayerKind kind) {
    LayerSpec l;
    l.name = std::move(name);
    l.kind = kind;
    spec_.layers.push_back(std::move(l));
    return spec_.layers.back();
  }

 private:
  ChainSpec& spec_;
};

}  // namespace remat::detail
