// What the importer says about itself and about an import, with or without ONNX in the build.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "remat/base/text.hpp"
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

// Compact enough that the whole message, with a file, node and operator name of the longest
// quoted length, stays a readable line (under 1,000 characters: fuzz_checks.hpp); docs/import.md's
// "Operators" has the rules.
std::string onnxSupportedOperators() {
  return "Conv, BatchNormalization, LayerNormalization (also decomposed), Relu, Clip, Sigmoid, Tanh, HardSigmoid, "
         "HardSwish, Gelu (also as Erf), x * Sigmoid(x) (SiLU), MaxPool, AveragePool, GlobalAveragePool, ReduceMean "
         "(over H and W), Dropout, Gemm, MatMul (with its bias Add), Add, Sub, Mul, Div (of two activations, "
         "broadcasting; a [C, 1, 1] weight times one as layer_scale), Concat and Slice (channels), "
         "Reshape-Transpose-Reshape (channel shuffle), Transpose to "
         "channels-last and back, Flatten, Reshape (to [N, features]), Identity, Pad (into a Conv or AveragePool) and "
         "the constant plumbing Constant, Shape, Gather, Unsqueeze, Squeeze, Cast (docs/import.md)";
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

namespace remat {

Result<std::pair<std::string, std::int64_t>> parseOnnxDimension(std::string_view text) {
  const std::string quoted = quoteText(std::string(text), 60);
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return Status::invalid("--dim " + quoted + ": expected NAME=SIZE (e.g. sequence=2048)");
  const std::string_view digits = text.substr(eq + 1);
  std::int64_t value = 0;
  for (char c : digits) {
    // More than 2^31 - 1 is refused before it could overflow: no input dimension is that large.
    if (!std::isdigit(static_cast<unsigned char>(c)) || value > kMaxIntegerField)
      return Status::invalid("--dim " + quoted + ": the size is not a whole number in [1, " +
                             std::to_string(kMaxIntegerField) + "]");
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > kMaxIntegerField)
    return Status::invalid("--dim " + quoted + ": the size is not a whole number in [1, " +
                           std::to_string(kMaxIntegerField) + "]");
  return std::pair<std::string, std::int64_t>{std::string(text.substr(0, eq)), value};
}

}  // namespace remat
