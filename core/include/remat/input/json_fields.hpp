#pragma once
// Typed fields of one JSON object of a JsonDocument, for the readers of core/io. A FieldReader
// remembers which fields it read, so that rejectUnknown() can name a field that does not belong.
// Every error is InvalidInput placed at the field's key (at the object when the field is missing)
// and names the object: "r.json:7:24: layer 3 ('c'): field 'kernel' must be at least 1, not
// number '0'". Internal to core/io.
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "remat/base/status.hpp"
#include "remat/input/json_document.hpp"

namespace remat::io {

class FieldReader {
 public:
  // `what` names the object in messages ("layer 3 ('c')", "input"; empty for a file's top level).
  FieldReader(const JsonDocument& document, const nlohmann::json& object, std::string what);

  bool has(const char* field) const { return object_.contains(field); }
  // The field's value (nullptr when missing); marks it read.
  const nlohmann::json* member(const char* field);

  Status error(const std::string& field, const std::string& message) const;

  Status readString(const char* field, std::string& out, bool required);
  // A string shown to people (a layer's, an inner op's or a chain's name): one printable line, so
  // that every later message can name it as it is. Control characters are refused here.
  Status readName(const char* field, std::string& out, bool required);
  Status readBool(const char* field, bool& out, bool required = false);
  // Non-negative integers that fit in 64 bits (sizes in bytes).
  Status readBytes(const char* field, std::uint64_t& out, bool required, bool* present = nullptr);
  // Integers in minimum..maximum.
  Status readInt(const char* field, std::int64_t& out, bool required, std::int64_t minimum,
                 std::int64_t maximum = std::numeric_limits<std::int64_t>::max());
  // Finite numbers in minimum..maximum.
  Status readDouble(const char* field, double& out, double minimum, double maximum, bool required = false);

  void markUsed(const char* field) { used_.insert(field); }
  // The first field not read, if any, as "field 'x' is not a field of CONTEXT (fields: ...)".
  Status rejectUnknown(const std::string& context) const;

  const JsonDocument& document() const { return document_; }

 private:
  const JsonDocument& document_;
  const nlohmann::json& object_;
  std::string what_;
  std::set<std::string> used_;
};

}  // namespace remat::io
