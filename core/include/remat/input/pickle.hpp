#pragma once
// Python values as a restricted pickle holds them, for PyTorch memory snapshots
// (docs/formats.md, "PyTorch memory snapshots"). The decoder understands protocols 2 to 5 and only
// the opcodes Python's pickler emits for dicts, lists, tuples, ints, floats, strings, bools and
// None. Every opcode that names, imports, builds or calls anything (GLOBAL, STACK_GLOBAL, REDUCE,
// BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID, ...) is refused before anything else happens: reading a
// pickle never runs code. Errors are InvalidInput "SOURCE: byte offset N: ...".
//
// Limits that keep a hostile file small in memory and time:
//   - the values form a tree at most maxDepth containers deep. A container cannot change once it
//     sits inside another one (Python's pickler fills every container before it uses it), so no
//     value can hold itself and the depth is known as the tree is built;
//   - a memo reference shares a value, never copies it: the values number at most one per byte;
//   - integers fit in 64 bits (signed or unsigned), strings are valid UTF-8;
//   - exactly one value, nothing after STOP.
// The encoder writes protocol 4 (no frames, no memo), which every Python 3.4+ reads.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"

namespace remat {

class JsonDocument;

struct PyValue {
  enum class Kind : std::uint8_t { None, Bool, Int, Float, Str, List, Tuple, Dict };
  Kind kind = Kind::None;
  bool boolean = false;
  bool intIsUnsigned = false;  // an int above INT64_MAX: its bits are a std::uint64_t
  std::uint64_t intBits = 0;   // an int: two's complement (signed) or plain (unsigned)
  double real = 0.0;
  std::string text;
  std::vector<std::uint32_t> items;        // List, Tuple: elements; Dict: key, value, key, value, ...
  std::uint32_t depth = 0;                 // containers nested inside, this one included
  bool sealed = false;                     // inside another container: never changes again
  std::uint64_t offset = 0;                // of the opcode that made it (pickle)
  const nlohmann::json* origin = nullptr;  // the JSON value it came from (JSON)
};

std::string_view pyKindName(PyValue::Kind kind);  // "dict", "list", "int", ...

// A tree of Python values read from a pickle or a JSON document, with the place of each value for
// messages. Values refer to each other by index.
class PyDocument {
 public:
  PyDocument() = default;
  PyDocument(PyDocument&&) = default;
  PyDocument& operator=(PyDocument&&) = default;

  const PyValue& at(std::uint32_t index) const { return values_[index]; }
  std::uint32_t root() const { return root_; }
  const std::string& source() const { return source_; }
  std::size_t size() const { return values_.size(); }

  // The value of `key` in a dict (the last one, as Python's dict keeps), if there.
  std::optional<std::uint32_t> member(std::uint32_t dict, std::string_view key) const;
  // "SOURCE: byte offset N" (pickle) or "SOURCE:LINE:COLUMN" (JSON) of a value.
  std::string where(std::uint32_t index) const;
  // The value in a few words for messages: "str 'abc'", "int 12", "dict", "None".
  std::string describe(std::uint32_t index) const;

  // A value as nlohmann-json (dict keys must be strings); InvalidInput otherwise.
  Result<nlohmann::json> toJson(std::uint32_t index) const;

 private:
  friend class PickleDecoder;
  friend Result<PyDocument> pyDocumentFromJson(const JsonDocument& json);
  std::vector<PyValue> values_;
  std::uint32_t root_ = 0;
  std::string source_;
  const JsonDocument* json_ = nullptr;  // where() of JSON values; outlives this document
};

// Decodes a pickle of at most maxDepth nested containers.
Result<PyDocument> decodePickle(std::string_view bytes, const std::string& source, std::size_t maxDepth);
// The values of a JSON document (which must outlive the result: messages quote its places).
Result<PyDocument> pyDocumentFromJson(const JsonDocument& json);

// Protocol 4 pickle of a JSON value: objects become dicts, arrays lists, numbers ints or floats.
std::string encodePickle(const nlohmann::json& value);

}  // namespace remat
