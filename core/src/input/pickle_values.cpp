// PyDocument's lookups and messages, JSON into Python values and back, and the protocol 4 encoder.
#include <cstring>
#include <nlohmann/json.hpp>

#include "remat/base/text.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/pickle.hpp"

namespace remat {

using nlohmann::json;

std::string_view pyKindName(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::None: return "None";
    case PyValue::Kind::Bool: return "bool";
    case PyValue::Kind::Int: return "int";
    case PyValue::Kind::Float: return "float";
    case PyValue::Kind::Str: return "str";
    case PyValue::Kind::List: return "list";
    case PyValue::Kind::Tuple: return "tuple";
    case PyValue::Kind::Dict: return "dict";
  }
  return "?";
}

std::optional<std::uint32_t> PyDocument::member(std::uint32_t dict, std::string_view key) const {
  const PyValue& d = values_[dict];
  if (d.kind != PyValue::Kind::Dict) return std::nullopt;
  for (std::size_t i = d.items.size(); i >= 2; i -= 2)
    if (values_[d.items[i - 2]].text == key) return d.items[i - 1];
  return std::nullopt;
}

std::string PyDocument::where(std::uint32_t index) const {
  const PyValue& v = values_[index];
  if (json_) return v.origin ? json_->where(*v.origin) : source_;
  return source_ + ": byte offset " + std::to_string(v.offset);
}

std::string PyDocument::describe(std::uint32_t index) const {
  const PyValue& v = values_[index];
  switch (v.kind) {
    case PyValue::Kind::Bool: return v.boolean ? "True" : "False";
    case PyValue::Kind::Int:
      return "int " +
             (v.intIsUnsigned ? std::to_string(v.intBits) : std::to_string(static_cast<std::int64_t>(v.intBits)));
    case PyValue::Kind::Float: return "float " + json(v.real).dump();
    case PyValue::Kind::Str: return "str " + quoteText(v.text, 40);
    default: return std::string(pyKindName(v.kind));
  }
}

Result<json> PyDocument::toJson(std::uint32_t index) const {
  const PyValue& v = values_[index];
  switch (v.kind) {
    case PyValue::Kind::None: return json(nullptr);
    case PyValue::Kind::Bool: return json(v.boolean);
    case PyValue::Kind::Int: return v.intIsUnsigned ? json(v.intBits) : json(static_cast<std::int64_t>(v.intBits));
    case PyValue::Kind::Float: return json(v.real);
    case PyValue::Kind::Str: return json(v.text);
    case PyValue::Kind::List:
    case PyValue::Kind::Tuple: {
      json out = json::array();
      for (std::uint32_t item : v.items) {
        auto element = toJson(item);
        if (!element) return element.status();
        out.push_back(std::move(element).value());
      }
      return out;
    }
    case PyValue::Kind::Dict: {
      json out = json::object();
      for (std::size_t i = 0; i + 1 < v.items.size(); i += 2) {
        auto element = toJson(v.items[i + 1]);
        if (!element) return element.status();
        out[values_[v.items[i]].text] = std::move(element).value();
      }
      return out;
    }
  }
  return Status::internal("unknown Python value kind");
}

namespace {

// JSON values into the arena, depth first; JsonDocument bounded the depth already.
std::uint32_t addJson(std::vector<PyValue>& values, const json& value) {
  PyValue v;
  v.origin = &value;
  if (value.is_null()) {
    v.kind = PyValue::Kind::None;
  } else if (value.is_boolean()) {
    v.kind = PyValue::Kind::Bool;
    v.boolean = value.get<bool>();
  } else if (value.is_number_unsigned() || value.is_number_integer()) {
    v.kind = PyValue::Kind::Int;
    v.intIsUnsigned = value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t{INT64_MAX};
    v.intBits =
        value.is_number_unsigned() ? value.get<std::uint64_t>() : static_cast<std::uint64_t>(value.get<std::int64_t>());
  } else if (value.is_number_float()) {
    v.kind = PyValue::Kind::Float;
    v.real = value.get<double>();
  } else if (value.is_string()) {
    v.kind = PyValue::Kind::Str;
    v.text = value.get<std::string>();
  } else {
    v.kind = value.is_array() ? PyValue::Kind::List : PyValue::Kind::Dict;
    std::vector<std::uint32_t> items;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (value.is_object()) {
        PyValue key;
        key.kind = PyValue::Kind::Str;
        key.text = it.key();
        key.origin = &*it;
        values.push_back(std::move(key));
        items.push_back(static_cast<std::uint32_t>(values.size() - 1));
      }
      items.push_back(addJson(values, *it));
    }
    v.items = std::move(items);
  }
  values.push_back(std::move(v));
  return static_cast<std::uint32_t>(values.size() - 1);
}

void putLittle(std::string& out, std::uint64_t value, unsigned width) {
  for (unsigned i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void encodeInt(std::string& out, const json& value) {
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t{INT64_MAX}) {
    out.push_back(static_cast<char>(0x8a));  // LONG1: 8 bytes and a zero byte keep it positive
    out.push_back(9);
    putLittle(out, value.get<std::uint64_t>(), 8);
    out.push_back(0);
    return;
  }
  const std::int64_t v = value.get<std::int64_t>();
  if (v >= 0 && v < 256) {
    out.push_back('K');
    putLittle(out, static_cast<std::uint64_t>(v), 1);
  } else if (v >= 0 && v < 65536) {
    out.push_back('M');
    putLittle(out, static_cast<std::uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out.push_back('J');
    putLittle(out, static_cast<std::uint64_t>(v), 4);
  } else {
    out.push_back(static_cast<char>(0x8a));
    out.push_back(8);
    putLittle(out, static_cast<std::uint64_t>(v), 8);
  }
}

void encodeString(std::string& out, const std::string& text) {
  if (text.size() < 256) {
    out.push_back(static_cast<char>(0x8c));
    putLittle(out, text.size(), 1);
  } else if (text.size() <= UINT32_MAX) {
    out.push_back('X');
    putLittle(out, text.size(), 4);
  } else {
    out.push_back(static_cast<char>(0x8d));
    putLittle(out, text.size(), 8);
  }
  out += text;
}

// Containers as Python's pickler writes them: the empty one, then MARK ... APPENDS / SETITEMS in
// batches of at most 1000.
void encodeValue(std::string& out, const json& value) {
  if (value.is_null()) {
    out.push_back('N');
  } else if (value.is_boolean()) {
    out.push_back(static_cast<char>(value.get<bool>() ? 0x88 : 0x89));
  } else if (value.is_number_integer()) {
    encodeInt(out, value);
  } else if (value.is_number_float()) {
    std::uint64_t bits = 0;
    const double d = value.get<double>();
    std::memcpy(&bits, &d, sizeof d);
    out.push_back('G');
    for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  } else if (value.is_string()) {
    encodeString(out, value.get_ref<const std::string&>());
  } else {
    const bool dict = value.is_object();
    out.push_back(dict ? '}' : ']');
    std::size_t inBatch = 0;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (inBatch == 0) out.push_back('(');
      if (dict) encodeString(out, it.key());
      encodeValue(out, *it);
      if (++inBatch == 1000) {
        out.push_back(dict ? 'u' : 'e');
        inBatch = 0;
      }
    }
    if (inBatch > 0) out.push_back(dict ? 'u' : 'e');
  }
}

}  // namespace

Result<PyDocument> pyDocumentFromJson(const JsonDocument& document) {
  PyDocument doc;
  doc.source_ = document.source();
  doc.json_ = &document;
  doc.root_ = addJson(doc.values_, document.root());
  if (doc.values_.size() >= UINT32_MAX) return Status::invalid(document.source() + ": too many values");
  return doc;
}

std::string encodePickle(const json& value) {
  std::string out{static_cast<char>(0x80), 4};
  encodeValue(out, value);
  out.push_back('.');
  return out;
}

}  // namespace remat
