// The restricted pickle decoder of pickle.hpp: a stack machine over the opcodes Python's pickler
// emits for plain data, and nothing else.
#include <cstring>
#include <unordered_map>

#include "remat/base/text.hpp"
#include "remat/input/pickle.hpp"

namespace remat {
namespace {

// Every opcode of Python's pickle module (pickletools), by byte, for messages.
struct OpcodeName {
  int byte;
  const char* name;
};
constexpr OpcodeName kOpcodeNames[] = {{'(', "MARK"},
                                       {'.', "STOP"},
                                       {'0', "POP"},
                                       {'1', "POP_MARK"},
                                       {'2', "DUP"},
                                       {'F', "FLOAT"},
                                       {'I', "INT"},
                                       {'J', "BININT"},
                                       {'K', "BININT1"},
                                       {'L', "LONG"},
                                       {'M', "BININT2"},
                                       {'N', "NONE"},
                                       {'P', "PERSID"},
                                       {'Q', "BINPERSID"},
                                       {'R', "REDUCE"},
                                       {'S', "STRING"},
                                       {'T', "BINSTRING"},
                                       {'U', "SHORT_BINSTRING"},
                                       {'V', "UNICODE"},
                                       {'X', "BINUNICODE"},
                                       {'a', "APPEND"},
                                       {'b', "BUILD"},
                                       {'c', "GLOBAL"},
                                       {'d', "DICT"},
                                       {'}', "EMPTY_DICT"},
                                       {'e', "APPENDS"},
                                       {'g', "GET"},
                                       {'h', "BINGET"},
                                       {'i', "INST"},
                                       {'j', "LONG_BINGET"},
                                       {'l', "LIST"},
                                       {']', "EMPTY_LIST"},
                                       {'o', "OBJ"},
                                       {'p', "PUT"},
                                       {'q', "BINPUT"},
                                       {'r', "LONG_BINPUT"},
                                       {'s', "SETITEM"},
                                       {'t', "TUPLE"},
                                       {')', "EMPTY_TUPLE"},
                                       {'u', "SETITEMS"},
                                       {'G', "BINFLOAT"},
                                       {'B', "BINBYTES"},
                                       {'C', "SHORT_BINBYTES"},
                                       {0x80, "PROTO"},
                                       {0x81, "NEWOBJ"},
                                       {0x82, "EXT1"},
                                       {0x83, "EXT2"},
                                       {0x84, "EXT4"},
                                       {0x85, "TUPLE1"},
                                       {0x86, "TUPLE2"},
                                       {0x87, "TUPLE3"},
                                       {0x88, "NEWTRUE"},
                                       {0x89, "NEWFALSE"},
                                       {0x8a, "LONG1"},
                                       {0x8b, "LONG4"},
                                       {0x8c, "SHORT_BINUNICODE"},
                                       {0x8d, "BINUNICODE8"},
                                       {0x8e, "BINBYTES8"},
                                       {0x8f, "EMPTY_SET"},
                                       {0x90, "ADDITEMS"},
                                       {0x91, "FROZENSET"},
                                       {0x92, "NEWOBJ_EX"},
                                       {0x93, "STACK_GLOBAL"},
                                       {0x94, "MEMOIZE"},
                                       {0x95, "FRAME"},
                                       {0x96, "BYTEARRAY8"},
                                       {0x97, "NEXT_BUFFER"},
                                       {0x98, "READONLY_BUFFER"}};

// The opcode's name; nullptr when the byte is none.
const char* opcodeName(unsigned char op) {
  for (const OpcodeName& entry : kOpcodeNames)
    if (entry.byte == op) return entry.name;
  return nullptr;
}

std::string hexByte(unsigned char byte) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[byte >> 4] + digits[byte & 15];
}

}  // namespace

class PickleDecoder {
 public:
  PickleDecoder(std::string_view bytes, const std::string& source, std::size_t maxDepth)
      : bytes_(bytes), maxDepth_(maxDepth) {
    doc_.source_ = source;
  }

  Result<PyDocument> run() {
    REMAT_RETURN_IF_ERROR(readProto());
    while (true) {
      if (pos_ >= bytes_.size()) return fail(pos_, "the pickle ends before its STOP opcode");
      opStart_ = pos_;
      const unsigned char op = static_cast<unsigned char>(bytes_[pos_++]);
      if (op == '.') return finish();
      REMAT_RETURN_IF_ERROR(step(op));
    }
  }

 private:
  Status fail(std::uint64_t offset, const std::string& message) const {
    return Status::invalid(doc_.source_ + ": byte offset " + std::to_string(offset) + ": " + message);
  }
  Status failHere(const std::string& message) const { return fail(opStart_, message); }

  Status readProto() {
    if (bytes_.size() < 2 || static_cast<unsigned char>(bytes_[0]) != 0x80)
      return fail(0, "a pickle starts with the PROTO opcode (0x80)");
    const unsigned protocol = static_cast<unsigned char>(bytes_[1]);
    if (protocol < 2 || protocol > 5)
      return fail(1, "pickle protocol " + std::to_string(protocol) + " is not read: protocols 2 to 5 are");
    pos_ = 2;
    return Status::ok();
  }

  Status need(std::uint64_t count) const {
    if (count > bytes_.size() - pos_)
      return failHere("the pickle ends inside " + std::string(opcodeName(bytes_[opStart_])) + "'s argument");
    return Status::ok();
  }
  std::uint64_t readLittle(unsigned width) {
    std::uint64_t value = 0;
    for (unsigned i = 0; i < width; ++i)
      value |= std::uint64_t{static_cast<unsigned char>(bytes_[pos_ + i])} << (8 * i);
    pos_ += width;
    return value;
  }
  Result<std::uint64_t> argument(unsigned width) {
    REMAT_RETURN_IF_ERROR(need(width));
    return readLittle(width);
  }

  std::uint32_t make(PyValue value) {
    value.offset = opStart_;
    doc_.values_.push_back(std::move(value));
    return static_cast<std::uint32_t>(doc_.values_.size() - 1);
  }
  std::uint32_t makeInt(std::uint64_t bits, bool isUnsigned) {
    PyValue v;
    v.kind = PyValue::Kind::Int;
    v.intBits = bits;
    v.intIsUnsigned = isUnsigned;
    return make(std::move(v));
  }
  std::uint32_t makeContainer(PyValue::Kind kind) {
    PyValue v;
    v.kind = kind;
    v.depth = 1;
    return make(std::move(v));
  }
  void push(std::uint32_t index) { stack_.push_back(index); }

  Result<std::uint32_t> pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      return failHere(std::string(opcodeName(bytes_[opStart_])) + " finds no value on the stack");
    const std::uint32_t top = stack_.back();
    stack_.pop_back();
    return top;
  }
  // The values since the last MARK, which goes.
  Result<std::vector<std::uint32_t>> popMark() {
    if (marks_.empty()) return failHere(std::string(opcodeName(bytes_[opStart_])) + " without a MARK before it");
    std::vector<std::uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  // Puts `child` into `container` (whose kind the caller checked), sealing the child.
  Status adopt(std::uint32_t container, std::uint32_t child) {
    PyValue& parent = doc_.values_[container];
    if (parent.sealed)
      return failHere(std::string(opcodeName(bytes_[opStart_])) +
                      " changes a container that already sits inside another one (a value that holds itself?)");
    if (container == child) return failHere("a container would hold itself");
    PyValue& value = doc_.values_[child];
    value.sealed = true;
    if (value.depth + 1 > parent.depth) parent.depth = value.depth + 1;
    if (parent.depth > maxDepth_)
      return failHere("containers nest deeper than " + std::to_string(maxDepth_) + " levels");
    parent.items.push_back(child);
    return Status::ok();
  }

  Status step(unsigned char op);
  Status stepContainer(unsigned char op);
  Status stepScalar(unsigned char op);
  Status stepMemo(unsigned char op);
  Status addItems(std::uint32_t target, const std::vector<std::uint32_t>& items, bool pairs);
  Status pushTuple(std::vector<std::uint32_t> items);
  Status pushString(std::uint64_t length);
  Status pushLong(std::uint64_t length);
  Result<PyDocument> finish();

  std::string_view bytes_;
  std::size_t maxDepth_;
  std::size_t pos_ = 0;
  std::size_t opStart_ = 0;
  std::vector<std::uint32_t> stack_;
  std::vector<std::size_t> marks_;  // stack sizes at each MARK
  std::unordered_map<std::uint64_t, std::uint32_t> memo_;
  PyDocument doc_;
};

Status PickleDecoder::step(unsigned char op) {
  switch (op) {
    case '(': marks_.push_back(stack_.size()); return Status::ok();
    case 0x95: {  // FRAME: a length the reader needs not; it must stay inside the file
      auto length = argument(8);
      if (!length) return length.status();
      if (*length > bytes_.size() - pos_) return failHere("FRAME is longer than the rest of the pickle");
      return Status::ok();
    }
    case '}':
    case ']':
    case ')':
    case 's':
    case 'u':
    case 'a':
    case 'e':
    case 't':
    case 0x85:
    case 0x86:
    case 0x87: return stepContainer(op);
    case 0x94:
    case 'q':
    case 'r':
    case 'h':
    case 'j': return stepMemo(op);
    default: return stepScalar(op);
  }
}

Status PickleDecoder::addItems(std::uint32_t target, const std::vector<std::uint32_t>& items, bool pairs) {
  const PyValue::Kind want = pairs ? PyValue::Kind::Dict : PyValue::Kind::List;
  if (doc_.values_[target].kind != want)
    return failHere(std::string(opcodeName(bytes_[opStart_])) + " needs a " + std::string(pyKindName(want)) +
                    ", not a " + std::string(pyKindName(doc_.values_[target].kind)));
  if (pairs && items.size() % 2 != 0) return failHere("SETITEMS has a key without a value");
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (pairs && i % 2 == 0 && doc_.values_[items[i]].kind != PyValue::Kind::Str)
      return failHere("a dict key must be a str, not " + doc_.describe(items[i]));
    REMAT_RETURN_IF_ERROR(adopt(target, items[i]));
  }
  return Status::ok();
}

Status PickleDecoder::pushTuple(std::vector<std::uint32_t> items) {
  const std::uint32_t tuple = makeContainer(PyValue::Kind::Tuple);
  for (std::uint32_t item : items) REMAT_RETURN_IF_ERROR(adopt(tuple, item));
  push(tuple);
  return Status::ok();
}

Status PickleDecoder::stepContainer(unsigned char op) {
  switch (op) {
    case '}': push(makeContainer(PyValue::Kind::Dict)); return Status::ok();
    case ']': push(makeContainer(PyValue::Kind::List)); return Status::ok();
    case ')': push(makeContainer(PyValue::Kind::Tuple)); return Status::ok();
    case 's':
    case 'a': {
      auto value = pop();
      if (!value) return value.status();
      std::vector<std::uint32_t> items{*value};
      if (op == 's') {
        auto key = pop();
        if (!key) return key.status();
        items.insert(items.begin(), *key);
      }
      auto target = pop();
      if (!target) return target.status();
      push(*target);
      return addItems(*target, items, op == 's');
    }
    case 'u':
    case 'e': {
      auto items = popMark();
      if (!items) return items.status();
      auto target = pop();
      if (!target) return target.status();
      push(*target);
      return addItems(*target, *items, op == 'u');
    }
    case 't': {
      auto items = popMark();
      if (!items) return items.status();
      return pushTuple(std::move(items).value());
    }
    default: {  // TUPLE1..TUPLE3
      std::vector<std::uint32_t> items(op - 0x84);
      for (std::size_t i = items.size(); i-- > 0;) {
        auto item = pop();
        if (!item) return item.status();
        items[i] = *item;
      }
      return pushTuple(std::move(items));
    }
  }
}

Status PickleDecoder::stepMemo(unsigned char op) {
  if (op == 0x94 || op == 'q' || op == 'r') {
    std::uint64_t key = memo_.size();
    if (op != 0x94) {
      auto arg = argument(op == 'q' ? 1 : 4);
      if (!arg) return arg.status();
      key = *arg;
    }
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      return failHere(std::string(opcodeName(op)) + " finds no value on the stack");
    memo_[key] = stack_.back();
    return Status::ok();
  }
  auto key = argument(op == 'h' ? 1 : 4);
  if (!key) return key.status();
  const auto found = memo_.find(*key);
  if (found == memo_.end())
    return failHere(std::string(opcodeName(op)) + " of memo " + std::to_string(*key) + ", which holds nothing");
  push(found->second);
  return Status::ok();
}

Status PickleDecoder::pushString(std::uint64_t length) {
  REMAT_RETURN_IF_ERROR(need(length));
  const std::string_view text = bytes_.substr(pos_, length);
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8SequenceLength(text.substr(i));
    if (n == 0) return fail(pos_ + i, "a str that is not valid UTF-8");
    i += n;
  }
  PyValue v;
  v.kind = PyValue::Kind::Str;
  v.text = std::string(text);
  pos_ += length;
  push(make(std::move(v)));
  return Status::ok();
}

// LONG1 / LONG4: little-endian two's complement of `length` bytes, kept when it fits in 64 bits.
Status PickleDecoder::pushLong(std::uint64_t length) {
  REMAT_RETURN_IF_ERROR(need(length));
  if (length > 9) return failHere("an integer of " + std::to_string(length) + " bytes, beyond 64 bits");
  unsigned __int128 bits = 0;
  for (std::uint64_t i = 0; i < length; ++i)
    bits |= static_cast<unsigned __int128>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
  const bool negative = length > 0 && (static_cast<unsigned char>(bytes_[pos_ + length - 1]) & 0x80) != 0;
  if (negative && length < 16) bits |= ~static_cast<unsigned __int128>(0) << (8 * length);
  const auto value = static_cast<__int128>(bits);
  pos_ += length;
  const __int128 uint64Max = static_cast<__int128>(~std::uint64_t{0});
  if (value < static_cast<__int128>(INT64_MIN) || value > uint64Max) return failHere("an integer beyond 64 bits");
  push(makeInt(static_cast<std::uint64_t>(value), value > static_cast<__int128>(INT64_MAX)));
  return Status::ok();
}

Status PickleDecoder::stepScalar(unsigned char op) {
  switch (op) {
    case 'N': push(make(PyValue{})); return Status::ok();
    case 0x88:
    case 0x89: {
      PyValue v;
      v.kind = PyValue::Kind::Bool;
      v.boolean = op == 0x88;
      push(make(std::move(v)));
      return Status::ok();
    }
    case 'K':
    case 'M': {
      auto arg = argument(op == 'K' ? 1 : 2);
      if (!arg) return arg.status();
      push(makeInt(*arg, false));
      return Status::ok();
    }
    case 'J': {
      auto arg = argument(4);
      if (!arg) return arg.status();
      const auto value = static_cast<std::int64_t>(static_cast<std::int32_t>(static_cast<std::uint32_t>(*arg)));
      push(makeInt(static_cast<std::uint64_t>(value), false));
      return Status::ok();
    }
    case 0x8a:
    case 0x8b: {
      auto length = argument(op == 0x8a ? 1 : 4);
      if (!length) return length.status();
      return pushLong(*length);
    }
    case 'G': {
      REMAT_RETURN_IF_ERROR(need(8));
      std::uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(bytes_[pos_ + i]);
      pos_ += 8;
      PyValue v;
      v.kind = PyValue::Kind::Float;
      std::memcpy(&v.real, &bits, sizeof v.real);
      push(make(std::move(v)));
      return Status::ok();
    }
    case 0x8c:
    case 'X':
    case 0x8d: {
      auto length = argument(op == 0x8c ? 1 : op == 'X' ? 4 : 8);
      if (!length) return length.status();
      return pushString(*length);
    }
    default: break;
  }
  const char* name = opcodeName(op);
  if (!name) return failHere("byte " + hexByte(op) + " is no pickle opcode");
  std::string shown = op >= 0x20 && op < 0x7f ? "'" + std::string(1, static_cast<char>(op)) + "', " : "";
  return failHere("opcode " + std::string(name) + " (" + shown + hexByte(op) +
                  ") not allowed: a memory snapshot holds only dicts, lists, tuples, numbers, strings, bools and "
                  "None, and reading one never imports or calls anything");
}

Result<PyDocument> PickleDecoder::finish() {
  if (!marks_.empty()) return failHere("STOP with a MARK still open");
  if (stack_.size() != 1)
    return failHere("STOP with " + std::to_string(stack_.size()) + " values on the stack; a pickle holds one");
  if (pos_ != bytes_.size()) return fail(pos_, std::to_string(bytes_.size() - pos_) + " bytes after the STOP opcode");
  doc_.root_ = stack_.back();
  return std::move(doc_);
}

Result<PyDocument> decodePickle(std::string_view bytes, const std::string& source, std::size_t maxDepth) {
  if (bytes.size() >= UINT32_MAX) return Status::invalid(source + ": a pickle of 4 GiB or more is not read");
  return PickleDecoder(bytes, source, maxDepth).run();
}

}  // namespace remat
