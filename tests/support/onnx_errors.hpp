#pragma once
// The importer's refusals in the tests: the message of a model that must not import.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "remat/input/onnx/onnx_import.hpp"

namespace remat::testing {

// The error of importing `bytes` (batch 0: as exported); a test failure when it imports.
inline std::string importError(const std::string& bytes, std::int64_t batch = 2) {
  auto imported = importOnnxModel(bytes, "bad.onnx", OnnxImportOptions{.batch = batch});
  EXPECT_FALSE(imported.isOk());
  if (imported.isOk()) return "";
  EXPECT_EQ(imported.status().code(), ErrorCode::InvalidInput);
  return imported.status().message();
}

inline void expectContains(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in: " << message;
}

}  // namespace remat::testing
