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

// The header's columns by name, and the optional ones it has.
struct CsvHeader {
  std::map<std::string, std::size_t> column;
  std::size_t fieldCount = 0;
  bool hasSource = false;
  bool hasStatic = false;
};

Result<CsvHeader> readHeader(const std::string& text, std::size_t& pos, const std::string& source) {
  auto fields = readRecord(text, pos, 1);
  if (!fields) return fields.status().withContext(source);
  CsvHeader header;
  header.fieldCount = fields->size();
  for (std::size_t i = 0; i < fields->size(); ++i) header.column[(*fields)[i]] = i;
  static const char* required[] = {
      "planner",         "run", "op_index", "op", "layer", "layer_name", "phase", "time_us", "footprint_bytes",
      "live_after_bytes"};
  for (const char* name : required)
    if (!header.column.count(name)) return Status::invalid(source + ": the header has no column '" + name + "'");
  header.hasSource = header.column.count("source") > 0;
  header.hasStatic = header.column.count("static_bytes") > 0;
  return header;
}

// One data row: its fields by column name and where it stands, for messages ("file: line 7").
struct CsvRow {
  const CsvHeader& header;
  const std::vector<std::string>& fields;
  std::string where;
  const std::string& field(const char* name) const { return fields[header.column.at(name)]; }
};

// Rows group into timelines by (planner, source, run), in order of first appearance. The timeline
// timelineOf returns stays valid until its next call.
class TimelineGroups {
 public:
  Result<Timeline*> timelineOf(const CsvRow& row) {
    auto run = parseNumber<int>(row.field("run"), row.where + ", run");
    if (!run) return run.status();
    const std::string source = row.header.hasSource ? row.field("source") : std::string("measured");
    const auto key = std::make_tuple(row.field("planner"), source, *run);
    auto it = index_.find(key);
    if (it != index_.end()) return &timelines_[it->second];
    Timeline t;
    t.planner = row.field("planner");
    t.source = source;
    t.run = *run;
    if (row.header.hasStatic) {
      auto bytes = parseNumber<std::uint64_t>(row.field("static_bytes"), row.where + ", static_bytes");
      if (!bytes) return bytes.status();
      t.staticBytes = *bytes;
    }
    index_.emplace(key, timelines_.size());
    timelines_.push_back(std::move(t));
    return &timelines_.back();
  }

  std::vector<Timeline> take() { return std::move(timelines_); }

 private:
  std::vector<Timeline> timelines_;
  std::map<std::tuple<std::string, std::string, int>, std::size_t> index_;
};

// Appends the row's op to its timeline, which must be at the row's op_index.
Status appendEntry(const CsvRow& row, Timeline& t) {
  const std::string& where = row.where;
  auto opIndex = parseNumber<std::size_t>(row.field("op_index"), where + ", op_index");
  if (!opIndex) return opIndex.status();
  if (*opIndex != t.entries.size())
    return Status::invalid(where + ", op_index: " + std::to_string(*opIndex) + " where " +
                           std::to_string(t.entries.size()) + " was expected (rows must be in op order)");
  TimelineEntry e;
  auto kind = detail::parseOpName(row.field("op"));
  if (!kind) return kind.status().withContext(where + ", op");
  e.op.kind = *kind;
  if (e.op.kind != OpKind::Seed) {
    auto layer = parseNumber<std::size_t>(row.field("layer"), where + ", layer");
    if (!layer) return layer.status();
    if (*layer == 0) return Status::invalid(where + ", layer: layers are numbered from 1");
    e.op.layer = *layer;
    if (t.layerNames.size() < *layer) t.layerNames.resize(*layer);
    if (!row.field("layer_name").empty()) t.layerNames[*layer - 1] = row.field("layer_name");
  }
  if (row.field("phase") != phaseName(e.op.phase()))
    return Status::invalid(where + ", phase: '" + row.field("phase") + "' does not match op " + row.field("op"));
  REMAT_RETURN_IF_ERROR(detail::readEntryNumbers(
      [&](const char* name, auto& value) -> Status {
        auto number = parseNumber<std::decay_t<decltype(value)>>(row.field(name), where + ", " + name);
        if (!number) return number.status();
        value = *number;
        return Status::ok();
      },
      e));
  t.entries.push_back(e);
  return Status::ok();
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
  auto header = readHeader(text, pos, source);
  if (!header) return header.status();
  TimelineGroups groups;
  while (pos < text.size()) {
    ++line;
    auto record = readRecord(text, pos, line);
    if (!record) return record.status().withContext(source);
    if (record->size() == 1 && (*record)[0].empty()) continue;  // blank line
    if (record->size() != header->fieldCount)
      return Status::invalid(source + ": line " + std::to_string(line) + " has " + std::to_string(record->size()) +
                             " fields, the header " + std::to_string(header->fieldCount));
    const CsvRow row{*header, *record, source + ": line " + std::to_string(line)};
    auto timeline = groups.timelineOf(row);
    if (!timeline) return timeline.status();
    REMAT_RETURN_IF_ERROR(appendEntry(row, **timeline));
  }
  std::vector<Timeline> timelines = groups.take();
  if (timelines.empty()) return Status::invalid(source + ": no timeline rows");
  return timelines;
}

}  // namespace remat
