// Timelines as CSV (long layout, RFC 4180 quoting) and back. Numbers go through std::to_chars /
// std::from_chars: locale-independent, and doubles round-trip exactly.
#include <charconv>
#include <map>
#include <tuple>

#include "export_common.hpp"
#include "remat/io/exporters.hpp"

namespace remat {
namespace {

void appendField(std::string& out, const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

// Splits one CSV record starting at pos (quoted fields may span lines); advances pos.
Result<std::vector<std::string>> readRecord(const std::string& text, std::size_t& pos, std::size_t line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c == '"') {
        if (pos < text.size() && text[pos] == '"') {
          fields.back() += '"';
          ++pos;
        } else {
          quoted = false;
        }
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      break;
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) return Status::invalid("line " + std::to_string(line) + ": unterminated quoted field");
  return fields;
}

template <typename T>
Result<T> parseNumber(const std::string& text, const std::string& where) {
  T value{};
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    return Status::invalid(where + ": '" + text + "' is not a valid number");
  return value;
}

}  // namespace

std::string timelinesToCsv(const std::vector<Timeline>& timelines) {
  std::string out = std::string(kTimelineCsvHeader) + "\n";
  for (const Timeline& t : timelines) {
    for (std::size_t i = 0; i < t.entries.size(); ++i) {
      const TimelineEntry& e = t.entries[i];
      appendField(out, t.planner);
      out += ',' + std::to_string(t.run) + ',' + std::to_string(i) + ',' + std::string(opName(e.op.kind)) + ',';
      if (e.op.kind != OpKind::Seed) out += std::to_string(e.op.layer);
      out += ',';
      appendField(out, detail::layerName(t, e.op));
      out += ',' + std::string(phaseName(e.op.phase())) + ',' + detail::formatDouble(e.timeUs) + ',' +
             std::to_string(e.footprintBytes) + ',' + std::to_string(e.liveAfterBytes) + ',';
      appendField(out, t.source);
      out += ',' + std::to_string(t.staticBytes) + '\n';
    }
  }
  return out;
}

Result<std::vector<Timeline>> parseTimelinesCsv(const std::string& text, const std::string& source) {
  std::size_t pos = 0;
  std::size_t line = 1;
  auto header = readRecord(text, pos, line);
  if (!header) return header.status().withContext(source);
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < header->size(); ++i) column[(*header)[i]] = i;
  static const char* required[] = {
      "planner",         "run", "op_index", "op", "layer", "layer_name", "phase", "time_us", "footprint_bytes",
      "live_after_bytes"};
  for (const char* name : required)
    if (!column.count(name)) return Status::invalid(source + ": the header has no column '" + name + "'");
  const bool hasSource = column.count("source") > 0, hasStatic = column.count("static_bytes") > 0;

  std::vector<Timeline> timelines;
  std::map<std::tuple<std::string, std::string, int>, std::size_t> index;
  while (pos < text.size()) {
    ++line;
    auto record = readRecord(text, pos, line);
    if (!record) return record.status().withContext(source);
    if (record->size() == 1 && (*record)[0].empty()) continue;  // blank line
    if (record->size() != header->size())
      return Status::invalid(source + ": line " + std::to_string(line) + " has " + std::to_string(record->size()) +
                             " fields, the header " + std::to_string(header->size()));
    const auto& r = *record;
    const std::string where = source + ": line " + std::to_string(line);
    auto field = [&](const char* name) -> const std::string& { return r[column.at(name)]; };
    auto run = parseNumber<int>(field("run"), where + ", run");
    if (!run) return run.status();
    const std::string timelineSource = hasSource ? r[column.at("source")] : std::string("measured");
    const auto key = std::make_tuple(field("planner"), timelineSource, *run);
    auto it = index.find(key);
    if (it == index.end()) {
      Timeline t;
      t.planner = field("planner");
      t.source = timelineSource;
      t.run = *run;
      if (hasStatic) {
        auto bytes = parseNumber<std::uint64_t>(r[column.at("static_bytes")], where + ", static_bytes");
        if (!bytes) return bytes.status();
        t.staticBytes = *bytes;
      }
      it = index.emplace(key, timelines.size()).first;
      timelines.push_back(std::move(t));
    }
    Timeline& t = timelines[it->second];
    auto opIndex = parseNumber<std::size_t>(field("op_index"), where + ", op_index");
    if (!opIndex) return opIndex.status();
    if (*opIndex != t.entries.size())
      return Status::invalid(where + ", op_index: " + std::to_string(*opIndex) + " where " +
                             std::to_string(t.entries.size()) + " was expected (rows must be in op order)");
    TimelineEntry e;
    auto kind = detail::parseOpName(field("op"));
    if (!kind) return kind.status().withContext(where + ", op");
    e.op.kind = *kind;
    if (e.op.kind != OpKind::Seed) {
      auto layer = parseNumber<std::size_t>(field("layer"), where + ", layer");
      if (!layer) return layer.status();
      if (*layer == 0) return Status::invalid(where + ", layer: layers are numbered from 1");
      e.op.layer = *layer;
      if (t.layerNames.size() < *layer) t.layerNames.resize(*layer);
      if (!field("layer_name").empty()) t.layerNames[*layer - 1] = field("layer_name");
    }
    if (field("phase") != phaseName(e.op.phase()))
      return Status::invalid(where + ", phase: '" + field("phase") + "' does not match op " + field("op"));
    REMAT_RETURN_IF_ERROR(detail::readEntryNumbers(
        [&](const char* name, auto& value) -> Status {
          auto number = parseNumber<std::decay_t<decltype(value)>>(field(name), where + ", " + name);
          if (!number) return number.status();
          value = *number;
          return Status::ok();
        },
        e));
    t.entries.push_back(e);
  }
  if (timelines.empty()) return Status::invalid(source + ": no timeline rows");
  return timelines;
}

}  // namespace remat
