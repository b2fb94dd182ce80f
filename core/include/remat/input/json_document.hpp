#pragma once
// A JSON text read strictly, with the place of what it holds: the shared front end of the JSON
// readers (chain files, JSON timelines). nlohmann-json builds the values through its SAX
// interface, so the limits are checked before anything deep or large is built:
//   - exactly one JSON value, UTF-8, nothing after it (no NUL byte anywhere: nlohmann-json would
//     stop reading there);
//   - containers nested at most maxDepth deep;
//   - no key twice in one object;
//   - numbers within a double (1e309 is refused, not turned into infinity).
// Every error is InvalidInput "SOURCE:LINE:COLUMN: ..." and quotes at most kMaxQuotedChars
// characters of the file.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "remat/base/status.hpp"

namespace remat {

class JsonDocument {
 public:
  static Result<JsonDocument> parse(std::string text, std::string source, std::size_t maxDepth);
  // A value built elsewhere (a test, an edit): its places are the source name alone.
  static JsonDocument unplaced(nlohmann::json value, std::string source);

  JsonDocument(JsonDocument&&) = default;  // the values' places survive a move, not a copy
  JsonDocument& operator=(JsonDocument&&) = default;
  JsonDocument(const JsonDocument&) = delete;
  JsonDocument& operator=(const JsonDocument&) = delete;

  const nlohmann::json& root() const { return root_; }
  const std::string& source() const { return source_; }

  // "SOURCE:LINE:COLUMN" of a value of this document: an object member's key, an array's object
  // or array element, or the root. Any other value (a number inside an array, a value of another
  // document) gives the source name alone, as does a document without text.
  std::string where(const nlohmann::json& value) const;

  // The value as the file writes it, at most kMaxQuotedChars characters, in single quotes
  // ('"1024"', '1e3', '[[[[...'), after its type ("string '\"1024\"'"). Never serialises a
  // whole container, however deep or large.
  std::string describe(const nlohmann::json& value) const;

 private:
  JsonDocument() = default;
  struct Place {
    const nlohmann::json* value = nullptr;
    std::size_t offset = 0;  // of the member's key, or of the element itself
    bool member = false;
  };
  friend class JsonPlaceRecorder;
  const Place* placeOf(const nlohmann::json& value) const;
  std::size_t valueOffset(const Place& place) const;

  std::string text_;
  std::string source_;
  nlohmann::json root_;
  std::size_t rootOffset_ = 0;
  std::vector<Place> places_;  // in the order of the file; searched only for messages
};

}  // namespace remat
