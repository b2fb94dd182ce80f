// What the importer says about itself and about an import, with or without ONNX in the build.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "remat/input/onnx/onnx_import.hpp"

namespace remat {
namespace {

std::string counts(const std::vector<std::pair<std::string, std::size_t>>& list) {
  if (list.empty()) return "nothing";
  std::string text;
  for (const auto& [op, count] : list) text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + op;
  return text;
}

}  // namespace

bool isOnnxPath(std::string_view path) {
  constexpr std::string_view kSuffix = ".onnx";
  if (path.size() < kSuffix.size()) return false;
  return std::equal(kSuffix.begin(), kSuffix.end(), path.end() - static_cast<std::ptrdiff_t>(kSuffix.size()),
                    [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
}

bool isOnnxFile(const std::string& path) {
  if (isOnnxPath(path)) return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // a pipe must not lose its first byte
  std::ifstream in(path, std::ios::binary);
  char first = 0;
  return in.get(first) && first == '\x08';
}

std::string onnxSupportedOperators() {
  return "Conv, BatchNormalization, Relu, Clip (as ReLU or ReLU6), Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu, "
         "x * Sigmoid(x) (as SiLU), Div-Erf-Add-Mul-Mul (as GELU), LayerNormalization and its decomposition "
         "(ReduceMean-Sub-Pow-ReduceMean-Add-Sqrt-Div-Mul-Add), MaxPool, AveragePool, GlobalAveragePool, "
         "ReduceMean (over H and W), Dropout, Gemm, MatMul (with its bias Add), Add, Mul (of two activations, "
         "NumPy broadcasting; a [C, 1, 1] weight times an activation as ConvNeXt's layer_scale), Concat (channels), "
         "Slice (channels), Reshape-Transpose-Reshape (channel shuffle), Transpose to channels-last and back "
         "(ConvNeXt's permutes), "
         "Flatten, Reshape (to [N, features]), Identity, Pad (zeros, into the next Conv or AveragePool), and the "
         "constant plumbing Constant, Shape, Gather, Unsqueeze, Squeeze, Concat, Slice, Cast, Add, Sub, Mul, Div";
}

std::string formatOnnxSummary(const OnnxImportSummary& s, const std::string& source) {
  std::string text = source + ": opset " + std::to_string(s.opset) +
                     (s.producer.empty() ? "" : " (" + s.producer + ")") + ", " + std::to_string(s.nodes) +
                     " nodes -> " + std::to_string(s.layers) + " layers (" + std::to_string(s.blocks) + " blocks), " +
                     std::to_string(s.paramCount) + " parameters" +
                     (s.weightsInFile ? "" : " (from the weight inputs' shapes: the file has no weights)") + "\n";
  text += "batch: " + s.batch + "\n";
  text += "folded: " + counts(s.folded) + "\n";
  text += "dropped: " + counts(s.dropped) + "\n";
  return text;
}

}  // namespace remat
