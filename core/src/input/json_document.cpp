#include "remat/input/json_document.hpp"

#include <iterator>
#include <optional>

#include "remat/base/text.hpp"
#include "remat/input/input_file.hpp"

namespace remat {

using nlohmann::json;

namespace {

// A forward iterator over the text that publishes how far nlohmann-json's lexer has read, so the
// SAX callbacks know where they are (the SAX interface of nlohmann-json 3.11 reports no places).
class PublishingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  PublishingIterator() = default;
  PublishingIterator(const char* at, const char** published) : at_(at), published_(published) {}
  reference operator*() const { return *at_; }
  PublishingIterator& operator++() {
    ++at_;
    if (published_) *published_ = at_;
    return *this;
  }
  PublishingIterator operator++(int) {
    PublishingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const PublishingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const PublishingIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_ = nullptr;
  const char** published_ = nullptr;
};

bool isSeparator(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':'; }

// The end of the token at `offset`: a string with its quotes, or a number or literal.
std::size_t tokenEnd(std::string_view text, std::size_t offset) {
  std::size_t end = offset;
  if (end < text.size() && text[end] == '"') {
    for (++end; end < text.size() && text[end] != '"'; ++end)
      if (text[end] == '\\') ++end;
    return std::min(end + 1, text.size());
  }
  while (end < text.size() && !isSeparator(text[end]) && text[end] != ']' && text[end] != '}') ++end;
  return end;
}

// nlohmann-json's reason without its prefix and with a bounded quote of the last token:
// "syntax error while parsing object key - invalid literal, at '{x' (expected string literal)".
std::string parseErrorReason(const nlohmann::detail::exception& error, const std::string& lastToken) {
  if (error.id == 406) return "a number out of range, " + quoteText(lastToken, 40);
  std::string what = error.what();
  const std::size_t column = what.find(": ", what.find("column"));
  if (column != std::string::npos) what.erase(0, column + 2);
  const std::string lastRead = "; last read: '" + lastToken + "'";
  const std::size_t at = what.find(lastRead);
  std::string expected;
  if (at != std::string::npos) {
    expected = what.substr(at + lastRead.size());
    what.erase(at);
    what += ", at " + quoteText(lastToken, 40);
  } else {
    const std::size_t semicolon = what.find("; expected");
    if (semicolon != std::string::npos) expected = what.substr(semicolon), what.erase(semicolon);
  }
  if (expected.rfind("; expected ", 0) == 0) what += " (" + expected.substr(2) + ")";
  return what;
}

}  // namespace

// The SAX handler: builds the values like nlohmann-json's own DOM builder, and records where each
// member key and each container element of an array starts. Array elements are recorded when
// their array closes: only then do their addresses stop moving.
class JsonPlaceRecorder {
 public:
  JsonPlaceRecorder(JsonDocument& document, const char* const& read, std::size_t maxDepth)
      : doc_(document), read_(read), maxDepth_(maxDepth) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(json::number_integer_t v) { return value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(v); }
  bool number_float(json::number_float_t v, const std::string&) { return value(v); }
  bool string(json::string_t& v) { return value(std::move(v)); }
  bool binary(json::binary_t& v) { return value(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& name) {
    const std::size_t offset = start();
    json& object = *frames_.back().container;
    if (const auto found = object.find(name); found != object.end()) {
      const JsonDocument::Place* first = doc_.placeOf(*found);
      return fail(offset, "the key " + quoteText(name) + " appears twice in one object" +
                              (first ? " (first at " + placeText(doc_.source_, doc_.text_, first->offset) + ")" : ""));
    }
    member_ = &object[name];
    doc_.places_.push_back({member_, offset, true});
    return true;
  }

  bool parse_error(std::size_t position, const std::string& lastToken, const nlohmann::detail::exception& error) {
    if (!status_.isOk()) return false;
    if (doc_.text_.empty() || doc_.text_.find_first_not_of(" \t\r\n") == std::string::npos)
      return fail(0, "not valid JSON: the file is empty");
    // Where the lexer stopped; a number out of range at its start (the lexer read past its end).
    std::size_t offset = position > 0 ? position - 1 : 0;
    const std::size_t number = error.id == 406 ? doc_.text_.rfind(lastToken, offset) : std::string::npos;
    if (number != std::string::npos && number + lastToken.size() + 1 >= offset) offset = number;
    return fail(offset, "not valid JSON: " + parseErrorReason(error, lastToken));
  }

  const Status& status() const { return status_; }

 private:
  struct Frame {
    json* container = nullptr;
    std::vector<std::pair<std::size_t, std::size_t>> elementOffsets;  // arrays: (index, offset) of containers
  };

  // Where the value or key being reported starts: after the separators that follow the last event.
  std::size_t start() {
    std::size_t offset = lastEnd_;
    while (offset < doc_.text_.size() && isSeparator(doc_.text_[offset])) ++offset;
    lastEnd_ = static_cast<std::size_t>(read_ - doc_.text_.data());
    return offset;
  }

  bool fail(std::size_t offset, const std::string& message) {
    status_ = Status::invalid(placeText(doc_.source_, doc_.text_, offset) + ": " + message);
    return false;
  }

  // Places a new value; returns it.
  json* place(json&& v, std::size_t offset, bool container) {
    if (frames_.empty()) {
      doc_.root_ = std::move(v);
      doc_.rootOffset_ = offset;
      return &doc_.root_;
    }
    Frame& parent = frames_.back();
    if (parent.container->is_object()) {
      *member_ = std::move(v);
      return member_;
    }
    parent.container->push_back(std::move(v));
    if (container) parent.elementOffsets.emplace_back(parent.container->size() - 1, offset);
    return &parent.container->back();
  }

  template <typename T>
  bool value(T&& v) {
    const std::size_t offset = start();
    place(json(std::forward<T>(v)), offset, false);
    return true;
  }

  bool open(json&& empty) {
    const std::size_t offset = start();
    if (frames_.size() >= maxDepth_)
      return fail(offset, "nested deeper than " + std::to_string(maxDepth_) + " levels, more than the format needs");
    frames_.push_back({place(std::move(empty), offset, true), {}});
    return true;
  }

  bool close() {
    lastEnd_ = static_cast<std::size_t>(read_ - doc_.text_.data());
    Frame& frame = frames_.back();
    for (const auto& [index, offset] : frame.elementOffsets)
      doc_.places_.push_back({&(*frame.container)[index], offset, false});
    frames_.pop_back();
    return true;
  }

  JsonDocument& doc_;
  const char* const& read_;
  std::size_t maxDepth_;
  std::vector<Frame> frames_;
  json* member_ = nullptr;
  std::size_t lastEnd_ = 0;
  Status status_;
};

Result<JsonDocument> JsonDocument::parse(std::string text, std::string source, std::size_t maxDepth) {
  REMAT_RETURN_IF_ERROR(rejectNulBytes(text, source));
  JsonDocument document;
  document.text_ = std::move(text);
  document.source_ = std::move(source);
  const char* read = document.text_.data();
  JsonPlaceRecorder recorder(document, read, maxDepth);
  const char* begin = document.text_.data();
  const bool parsed = json::sax_parse(PublishingIterator(begin, &read),
                                      PublishingIterator(begin + document.text_.size(), nullptr), &recorder);
  if (!recorder.status().isOk()) return recorder.status();
  if (!parsed) return Status::invalid(document.source_ + ": not valid JSON");
  return document;
}

JsonDocument JsonDocument::unplaced(json value, std::string source) {
  JsonDocument document;
  document.root_ = std::move(value);
  document.source_ = std::move(source);
  return document;
}

const JsonDocument::Place* JsonDocument::placeOf(const json& value) const {
  for (const Place& place : places_)
    if (place.value == &value) return &place;
  return nullptr;
}

std::size_t JsonDocument::valueOffset(const Place& place) const {
  if (!place.member) return place.offset;
  std::size_t offset = tokenEnd(text_, place.offset);  // past the key
  while (offset < text_.size() && isSeparator(text_[offset])) ++offset;
  return offset;
}

std::string JsonDocument::where(const json& value) const {
  if (text_.empty()) return source_;
  if (&value == &root_) return placeText(source_, text_, rootOffset_);
  const Place* place = placeOf(value);
  return place ? placeText(source_, text_, place->offset) : source_;
}

std::string JsonDocument::describe(const json& value) const {
  const std::string type = value.type_name();
  std::optional<std::size_t> offset;
  if (!text_.empty()) {
    if (&value == &root_) offset = rootOffset_;
    if (const Place* place = placeOf(value)) offset = valueOffset(*place);
  }
  if (offset) {
    const std::string_view text(text_);
    const std::size_t end = value.is_structured() ? text.size() : tokenEnd(text, *offset);
    return type + " " + quoteText(text.substr(*offset, end - *offset));
  }
  if (value.is_string())  // at most a few hundred bytes of a string that may be megabytes long
    return type + " " + quoteText("\"" + value.get_ref<const std::string&>().substr(0, 4 * kMaxQuotedChars) + "\"");
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " values";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  return type + " " + quoteText(value.dump());
}

}  // namespace remat
