// Timelines as CSV (long layout, RFC 4180 quoting) and back. Numbers go through std::to_chars /
// std::from_chars: locale-independent, and doubles round-trip exactly.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

#include "export_common.hpp"
#include "remat/base/text.hpp"
#include "remat/input/input_file.hpp"
#include "remat/report/exporters.hpp"

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

// One CSV record: its fields and the byte offset where each starts.
struct CsvRecord {
  std::vector<std::string> fields;
  std::vector<std::size_t> offsets;
};

// Splits one CSV record starting at pos (quoted fields may span lines); advances pos. An
// unterminated quote is an error placed at the quote.
Result<CsvRecord> readRecord(const std::string& text, std::size_t& pos, const std::string& source) {
  CsvRecord record;
  record.fields.emplace_back();
  record.offsets.push_back(pos);
  bool quoted = false;
  std::size_t quoteAt = 0;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c != '"') {
        record.fields.back() += c;
      } else if (pos < text.size() && text[pos] == '"') {
        record.fields.back() += '"';
        ++pos;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
      quoteAt = pos - 1;
    } else if (c == ',') {
      record.fields.emplace_back();
      record.offsets.push_back(pos);
    } else if (c == '\n') {
      break;
    } else if (c != '\r') {
      record.fields.back() += c;
    }
  }
  if (quoted) return Status::invalid(placeText(source, text, quoteAt) + ": a quoted field is never closed");
  return record;
}

// The step options' columns, empty in the rows of a timeline whose step is unknown.
constexpr const char* kStepColumns[] = {"optimizer", "foreach", "grads", "precision"};

// The header's columns by name, and the optional ones it has.
struct CsvHeader {
  std::map<std::string, std::size_t> column;
  std::size_t fieldCount = 0;
  bool hasSource = false;
  bool hasStatic = false;
  bool hasStep = false;  // the four step columns (optimizer, foreach, grads, precision)
};

Result<CsvHeader> readHeader(const std::string& text, std::size_t& pos, const std::string& source) {
  auto record = readRecord(text, pos, source);
  if (!record) return record.status();
  CsvHeader header;
  header.fieldCount = record->fields.size();
  for (std::size_t i = 0; i < record->fields.size(); ++i) {
    if (!header.column.emplace(record->fields[i], i).second)
      return Status::invalid(placeText(source, text, record->offsets[i]) + ": line 1: the column " +
                             quoteText(record->fields[i], 40) + " appears twice in the header");
  }
  static const char* required[] = {
      "planner",         "run", "op_index", "op", "layer", "layer_name", "phase", "time_us", "footprint_bytes",
      "live_after_bytes"};
  for (const char* name : required)
    if (!header.column.count(name))
      return Status::invalid(placeText(source, text, 0) + ": line 1: the header has no column '" + name + "'");
  header.hasSource = header.column.count("source") > 0;
  header.hasStatic = header.column.count("static_bytes") > 0;
  header.hasStep = true;
  for (const char* name : kStepColumns) header.hasStep = header.hasStep && header.column.count(name) > 0;
  return header;
}

// One data row: its fields by column name, and where each stands for messages
// ("t.csv:7:31: line 7, column 9 'footprint_bytes': ...").
struct CsvRow {
  const CsvHeader& header;
  const CsvRecord& record;
  const std::string& text;
  const std::string& source;
  std::size_t line;
  std::size_t maxLayer;  // no layer number can exceed the file's line count

  const std::string& field(const char* name) const { return record.fields[header.column.at(name)]; }
  Status error(const char* name, const std::string& message) const {
    const std::size_t column = header.column.at(name);
    return Status::invalid(placeText(source, text, record.offsets[column]) + ": line " + std::to_string(line) +
                           ", column " + std::to_string(column + 1) + " '" + name + "': " + message);
  }
  template <typename T>
  Result<T> number(const char* name) const {
    const std::string& value = field(name);
    T number{};
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size())
      return error(name, quoteText(value, 40) + " is not a valid number" +
                             (ec == std::errc::result_out_of_range ? " (out of range)" : ""));
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(number) || number < 0) return error(name, quoteText(value, 40) + " must be finite and >= 0");
    }
    return number;
  }
};

// Rows group into timelines by (planner, source, run), in order of first appearance. The timeline
// timelineOf returns stays valid until its next call.
class TimelineGroups {
 public:
  Result<Timeline*> timelineOf(const CsvRow& row) {
    auto run = row.number<int>("run");
    if (!run) return run.status();
    if (*run < 0) return row.error("run", "must be at least 0");
    const std::string source = row.header.hasSource ? row.field("source") : std::string("measured");
    const auto key = std::make_tuple(row.field("planner"), source, *run);
    auto it = index_.find(key);
    if (it != index_.end()) return &timelines_[it->second];
    Timeline t;
    t.planner = row.field("planner");
    t.source = source;
    t.run = *run;
    if (row.header.hasStatic) {
      auto bytes = row.number<std::uint64_t>("static_bytes");
      if (!bytes) return bytes.status();
      t.staticBytes = *bytes;
    }
    if (row.header.hasStep && !row.field("optimizer").empty()) {
      auto step = detail::stepOptionsFromNames(
          row.field("optimizer"), row.field("foreach"), row.field("grads"), row.field("precision"),
          [&](const char* name, const std::string& message) -> Status { return row.error(name, message); });
      if (!step) return step.status();
      t.step = *step;
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
  auto opIndex = row.number<std::size_t>("op_index");
  if (!opIndex) return opIndex.status();
  if (*opIndex != t.entries.size())
    return row.error("op_index", std::to_string(*opIndex) + " where " + std::to_string(t.entries.size()) +
                                     " was expected (rows must be in op order)");
  TimelineEntry e;
  auto kind = detail::parseOpName(row.field("op"));
  if (!kind) return row.error("op", kind.status().message());
  e.op.kind = *kind;
  if (e.op.hasLayer()) {
    auto layer = row.number<std::size_t>("layer");
    if (!layer) return layer.status();
    if (*layer == 0) return row.error("layer", "layers are numbered from 1");
    if (*layer > row.maxLayer)
      return row.error("layer",
                       std::to_string(*layer) + " is more than the file's " + std::to_string(row.maxLayer) + " lines");
    e.op.layer = *layer;
    if (t.layerNames.size() < *layer) t.layerNames.resize(*layer);
    if (!row.field("layer_name").empty()) t.layerNames[*layer - 1] = row.field("layer_name");
  }
  if (row.field("phase") != phaseName(e.op.phase()))
    return row.error("phase", quoteText(row.field("phase"), 40) + " does not match op " + row.field("op"));
  REMAT_RETURN_IF_ERROR(detail::readEntryNumbers(
      [&](const char* name, auto& value) -> Status {
        auto number = row.number<std::decay_t<decltype(value)>>(name);
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
      if (e.op.hasLayer()) out += std::to_string(e.op.layer);
      out += ',';
      appendField(out, detail::layerName(t, e.op));
      out += ',' + std::string(phaseName(e.op.phase())) + ',' + detail::formatDouble(e.timeUs) + ',' +
             std::to_string(e.footprintBytes) + ',' + std::to_string(e.liveAfterBytes) + ',';
      appendField(out, t.source);
      out += ',' + std::to_string(t.staticBytes) + ',';
      if (t.step)
        out += std::string(optimizerName(t.step->optimizer)) + ',' + (t.step->foreach ? "on" : "off") + ',' +
               std::string(gradModeName(t.step->grads)) + ',' + std::string(precisionName(t.step->precision));
      else
        out += ",,,";
      out += '\n';
    }
  }
  return out;
}

Result<std::vector<Timeline>> parseTimelinesCsv(const std::string& text, const std::string& source) {
  REMAT_RETURN_IF_ERROR(rejectNulBytes(text, source));
  std::size_t pos = 0;
  auto header = readHeader(text, pos, source);
  if (!header) return header.status();
  const std::size_t lineCount = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  TimelineGroups groups;
  // Layer numbers are bounded by the line count while reading (nothing huge is allocated) and then
  // by the file's op count (each layer has an F op), which a written copy of the file keeps: what
  // is read once reads again from its own export.
  std::size_t farthestLayer = 0, entries = 0;
  Status farthestAt;
  std::size_t line = 2;  // of the record that starts at pos
  while (pos < text.size()) {
    const std::size_t start = pos;
    auto record = readRecord(text, pos, source);
    if (!record) return record.status();
    const std::size_t recordLine = line;
    line += static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(start),
                                                text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
    if (record->fields.size() == 1 && record->fields[0].empty()) continue;  // blank line
    if (record->fields.size() != header->fieldCount)
      return Status::invalid(placeText(source, text, start) + ": line " + std::to_string(recordLine) + " has " +
                             std::to_string(record->fields.size()) + " fields, the header " +
                             std::to_string(header->fieldCount));
    const CsvRow row{*header, *record, text, source, recordLine, lineCount};
    auto timeline = groups.timelineOf(row);
    if (!timeline) return timeline.status();
    REMAT_RETURN_IF_ERROR(appendEntry(row, **timeline));
    ++entries;
    if (const Op& op = (*timeline)->entries.back().op; op.hasLayer() && op.layer > farthestLayer) {
      farthestLayer = op.layer;
      farthestAt = row.error("layer", std::to_string(op.layer) + " is more than the file's ");
    }
  }
  if (farthestLayer > entries)
    return Status::invalid(farthestAt.message() + std::to_string(entries) + " ops (each layer has a forward op)");
  std::vector<Timeline> timelines = groups.take();
  if (timelines.empty()) return Status::invalid(source + ": no timeline rows");
  return timelines;
}

}  // namespace remat
