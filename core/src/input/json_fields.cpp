#include "remat/input/json_fields.hpp"

#include <cmath>

#include "remat/base/text.hpp"

namespace remat::io {

using nlohmann::json;

FieldReader::FieldReader(const JsonDocument& document, const json& object, std::string what)
    : document_(document), object_(object), what_(std::move(what)) {}

const json* FieldReader::member(const char* field) {
  used_.insert(field);
  const auto found = object_.find(field);
  return found == object_.end() ? nullptr : &*found;
}

Status FieldReader::error(const std::string& field, const std::string& message) const {
  const auto found = object_.find(field);
  const std::string place = document_.where(found == object_.end() ? object_ : *found);
  return Status::invalid(place + ": " + (what_.empty() ? "" : what_ + ": ") + "field " + quoteText(field, 40) + " " +
                         message);
}

Status FieldReader::readString(const char* field, std::string& out, bool required) {
  const json* v = member(field);
  if (!v) return required ? error(field, "is missing") : Status::ok();
  if (!v->is_string()) return error(field, "must be a string, not " + document_.describe(*v));
  out = v->get<std::string>();
  return Status::ok();
}

Status FieldReader::readName(const char* field, std::string& out, bool required) {
  REMAT_RETURN_IF_ERROR(readString(field, out, required));
  for (const char c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
      return error(field, "holds a control character: " + quoteText(out, 40));
  return Status::ok();
}

Status FieldReader::readBool(const char* field, bool& out, bool required) {
  const json* v = member(field);
  if (!v) return required ? error(field, "is missing") : Status::ok();
  if (!v->is_boolean()) return error(field, "must be true or false, not " + document_.describe(*v));
  out = v->get<bool>();
  return Status::ok();
}

Status FieldReader::readBytes(const char* field, std::uint64_t& out, bool required, bool* present) {
  const json* v = member(field);
  if (present) *present = v != nullptr;
  if (!v) return required ? error(field, "is missing") : Status::ok();
  if (v->is_number_unsigned()) {
    out = v->get<std::uint64_t>();
    return Status::ok();
  }
  const std::string text = document_.describe(*v);
  if (v->is_number_integer()) return error(field, "must be a non-negative integer, not " + text);
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (d >= 18446744073709551616.0) return error(field, "is " + text + ", which overflows 64 bits");
    if (d < 0) return error(field, "must be a non-negative integer, not " + text);
    return error(field, "must be an integer, not " + text);
  }
  return error(field, "must be a non-negative integer, not " + text);
}

Status FieldReader::readInt(const char* field, std::int64_t& out, bool required, std::int64_t minimum,
                            std::int64_t maximum) {
  const json* v = member(field);
  if (!v) return required ? error(field, "is missing") : Status::ok();
  const std::string text = document_.describe(*v);
  const std::string tooLarge = "must be at most " + std::to_string(maximum) + ", not " + text;
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(maximum))
    return error(field, tooLarge);
  if (!v->is_number_integer()) return error(field, "must be an integer, not " + text);
  const std::int64_t value = v->get<std::int64_t>();
  if (value < minimum) return error(field, "must be at least " + std::to_string(minimum) + ", not " + text);
  if (value > maximum) return error(field, tooLarge);
  out = value;
  return Status::ok();
}

Status FieldReader::readDouble(const char* field, double& out, double minimum, double maximum, bool required) {
  const json* v = member(field);
  if (!v) return required ? error(field, "is missing") : Status::ok();
  if (!v->is_number()) return error(field, "must be a number, not " + document_.describe(*v));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < minimum || d > maximum)
    return error(field, "must be between " + json(minimum).dump() + " and " + json(maximum).dump() + ", not " +
                            document_.describe(*v));
  out = d;
  return Status::ok();
}

Status FieldReader::rejectUnknown(const std::string& context) const {
  for (const auto& [key, value] : object_.items()) {
    if (used_.count(key)) continue;
    std::string known;
    for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
    return error(key, "is not a field of " + context + " (fields: " + known + ")");
  }
  return Status::ok();
}

}  // namespace remat::io
