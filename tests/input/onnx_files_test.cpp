// The ONNX importer on files from disk: every model that ever broke it (tests/data/regressions) and
// paths that are not regular files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "remat/input/chain_file.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/block.hpp"

namespace remat {
namespace {

using nlohmann::json;

// The layer kinds of a spec in order, a block's inner op kinds in its place.
std::vector<std::string> flatKinds(const ChainSpec& spec) {
  std::vector<std::string> kinds;
  for (const LayerSpec& layer : spec.layers) {
    if (layer.kind != LayerKind::Block) kinds.emplace_back(kindName(layer.kind));
    for (const BlockOpSpec& op : layer.ops) kinds.emplace_back(blockOpKindName(op.kind));
  }
  return kinds;
}

// Every model that ever broke the importer (tests/data/regressions/onnx, the fuzzer's finds) is
// refused with expected.json's message, bounded and printable; or, where expected.json says
// "imports" (a half-matched pattern that became valid when Mul was read on its own, issue 22), it
// imports as those unfused kinds (no SiLU).
TEST(OnnxImportRegressions, EveryModelIsRefusedWithItsMessage) {
  const std::filesystem::path folder = std::filesystem::path(REMAT_TEST_DATA_DIR) / "regressions";
  const json expected = json::parse(std::ifstream(folder / "expected.json"));
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder / "onnx")) {
    const std::string key = "onnx/" + entry.path().filename().string();
    ASSERT_TRUE(expected.contains(key)) << key << " has no entry in expected.json";
    auto refused = importOnnxFile(entry.path().string(), OnnxImportOptions{.batch = 2});
    if (expected[key].contains("imports")) {
      ASSERT_TRUE(refused.isOk()) << key << ": " << refused.status().message();
      EXPECT_EQ(flatKinds(refused->spec), expected[key]["imports"].get<std::vector<std::string>>()) << key;
      ++files;
      continue;
    }
    ASSERT_FALSE(refused.isOk()) << key << " was accepted";
    const std::string& message = refused.status().message();
    EXPECT_EQ(message.rfind(entry.path().string() + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(expected[key]["message"].get<std::string>()), std::string::npos) << message;
    EXPECT_LE(message.size(), 1000u);
    for (unsigned char c : message) EXPECT_GE(c, 0x20) << "a control character in " << message;
    ++files;
  }
  EXPECT_GE(files, 1u);
}

// A fixed-batch export whose Reshape constant does not lead with that batch ([4, 8] for [2, 4, 2, 2]):
// at its own batch it is refused as a reshape that does not chain, under --batch the message says
// to export with a symbolic batch, since the constant cannot be rewritten safely.
TEST(OnnxImport, AReshapeConstantWithoutTheBatchInFrontAsksForDynamicAxes) {
  const std::string path =
      (std::filesystem::path(REMAT_TEST_DATA_DIR) / "regressions" / "onnx" / "reshape-batch-not-leading.onnx").string();
  auto refused = importOnnxFile(path, OnnxImportOptions{.batch = 3});
  ASSERT_FALSE(refused.isOk());
  const std::string& message = refused.status().message();
  EXPECT_NE(message.find("node 2 ('/f/Reshape', Reshape)"), std::string::npos) << message;
  EXPECT_NE(message.find("does not carry the model's fixed batch 2"), std::string::npos) << message;
  EXPECT_NE(message.find("dynamic_axes"), std::string::npos) << message;
}

// What is not a regular file is refused before a byte is read: /dev/zero would never end.
TEST(OnnxImport, RefusesWhatIsNotAFile) {
  for (const char* path : {"/dev/zero", "/tmp"}) {
    auto refused = importOnnxFile(path);
    ASSERT_FALSE(refused.isOk()) << path;
    EXPECT_EQ(refused.status().code(), ErrorCode::IoError);
    EXPECT_NE(refused.status().message().find(std::string(path) + ": not a regular file"), std::string::npos)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace remat
