// libFuzzer target: ONNX models (a serialized ModelProto). Any bytes either import, and then the
// chain builds, writes to a chain file that loads to the same chain and simulates, or are refused
// with a bounded message that names the model first. The batch is set (2), so exports with a
// symbolic batch get past the interface and into the graph. Mutations are structure-aware
// (onnx_mutator.hpp): a model that parses is changed one field at a time through reflection.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_checks.hpp"
#include "onnx_mutator.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/memory/simulator.hpp"

namespace {

constexpr const char* kSource = "fuzz.onnx";

void checkImported(const remat::OnnxImport& imported) {
  auto chain = remat::buildChain(imported.spec);
  if (!chain) remat::fuzz::fail("an imported chain does not build", chain.status().message());
  const std::string text = remat::chainSpecToText(imported.spec);
  auto again = remat::parseChain(text, "again.json");
  if (!again) remat::fuzz::fail("an imported chain does not load once written", again.status().message());
  if (remat::chainSpecToJson(again->spec) != remat::chainSpecToJson(imported.spec))
    remat::fuzz::fail("an imported chain loads as another chain", text.substr(0, 2000));
  auto simulation = remat::simulate(*chain, remat::Plan{});
  if (!simulation) remat::fuzz::fail("an imported chain does not simulate", simulation.status().message());
}

}  // namespace

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t maxSize);

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t maxSize,
                                               unsigned int seed) {
  onnx::ModelProto model;
  // One in eight (and whatever does not parse): libFuzzer's byte mutations, which also reach
  // truncations and the wire format's own corners.
  if (size == 0 || seed % 8 == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  remat::fuzz::OnnxMutator(seed).mutate(model);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // A transformer's token ids [batch, sequence] (tests/data/onnx/transformer) also need their sequence.
  remat::OnnxImportOptions options{.batch = 2};
  if (bytes.find("sequence") != std::string::npos) options.dims = {{"sequence", 16}};
  // The names the explorer makes its dimension fields of: bounded, or a placed refusal.
  auto dims = remat::onnxSymbolicDimensionsOf(bytes, kSource);
  if (dims) {
    if (dims->size() > 16) remat::fuzz::fail("more than 16 dimension names", std::to_string(dims->size()));
    for (const std::string& name : *dims) {
      if (name.empty() || name.size() > 64) remat::fuzz::fail("a dimension name empty or too long", name);
      for (unsigned char c : name)
        if (c < 0x20 || c == 0x7F) remat::fuzz::fail("a dimension name holds a control character", name);
    }
  } else {
    remat::fuzz::checkMessage(dims.status().message(), kSource);
  }
  auto imported = remat::importOnnxModel(bytes, kSource, options);
  if (imported) {
    checkImported(*imported);
  } else {
    remat::fuzz::checkMessage(imported.status().message(), kSource);
  }
  return 0;
}
