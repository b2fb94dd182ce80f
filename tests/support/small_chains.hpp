#pragma once
// Small chain files that the CPU run tests of several precisions build alike (tests/exec/
// convnext_run_test.cpp, convnext_bf16_run_test.cpp, swin_run_test.cpp, swin_half_run_test.cpp):
// torchvision's ConvNeXt pieces and the tiny Swin of scripts/make-swin-reference.py.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace remat::testing {

// ConvNeXt's pieces as the zoo and the importer write them.
namespace convnext {

inline nlohmann::json conv(const std::string& name, std::int64_t out, std::int64_t kernel, std::int64_t groups,
                           std::size_t input) {
  return {{"name", name},          {"kind", "conv2d"}, {"out_channels", out}, {"kernel", kernel},
          {"padding", kernel / 2}, {"groups", groups}, {"bias", true},        {"inputs", {input}}};
}

// torchvision's CNBlock(C).
inline nlohmann::json cnBlock(const std::string& name, std::int64_t c) {
  nlohmann::json ops = nlohmann::json::array();
  ops.push_back(conv("block.0", c, 7, c, 0));
  ops.push_back({{"name", "block.2"}, {"kind", "layernorm"}, {"epsilon", 1e-6}, {"inputs", {1}}});
  ops.push_back(conv("block.3", 4 * c, 1, 1, 2));
  ops.push_back({{"name", "block.4"}, {"kind", "gelu"}, {"inputs", {3}}});
  ops.push_back(conv("block.5", c, 1, 1, 4));
  ops.push_back({{"name", "layer_scale"}, {"kind", "layer_scale"}, {"inputs", {5}}});
  ops.push_back({{"name", "add"}, {"kind", "add"}, {"inputs", {6, 0}}});
  return {{"name", name}, {"kind", "block"}, {"ops", ops}};
}

inline nlohmann::json layerNorm(const std::string& name) {
  return {{"name", name}, {"kind", "layernorm"}, {"epsilon", 1e-6}};
}

// The stem's and the downsampling's conv (kernel = stride).
inline nlohmann::json patchify(const std::string& name, std::int64_t out, std::int64_t kernel) {
  return {{"name", name},     {"kind", "conv2d"}, {"out_channels", out},
          {"kernel", kernel}, {"stride", kernel}, {"bias", true}};
}

}  // namespace convnext

inline nlohmann::json swinBlock(const std::string& name, std::int64_t heads, std::int64_t width, std::int64_t shift,
                                double sd) {
  return {{"name", name}, {"kind", "swin_block"}, {"heads", heads},        {"hidden", 4 * width},
          {"window", 4},  {"shift", shift},       {"stochastic_depth", sd}};
}

// make-swin-reference.py's model: patch 4, embed 32, depths [2, 2], heads [2, 4], window 4; `sd`
// the stochastic depth of every block but the first.
inline nlohmann::json tinySwin(std::int64_t batch, std::int64_t image, double sd = 0.0) {
  nlohmann::json layers = nlohmann::json::array();
  layers.push_back({{"name", "features.0"}, {"kind", "swin_embedding"}, {"patch", 4}, {"width", 32}});
  layers.push_back(swinBlock("features.1.0", 2, 32, 0, 0.0));
  layers.push_back(swinBlock("features.1.1", 2, 32, 2, sd));
  layers.push_back({{"name", "features.2"}, {"kind", "patch_merging"}});
  layers.push_back(swinBlock("features.3.0", 4, 64, 0, sd));
  layers.push_back(swinBlock("features.3.1", 4, 64, 2, sd));
  layers.push_back({{"name", "norm+avgpool+head"}, {"kind", "swin_head"}, {"out_features", 10}});
  return {{"format", "remat-chain/1"},
          {"name", "tiny-swin"},
          {"input", {{"shape", {batch, 3, image, image}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

}  // namespace remat::testing
