// No function body in core/, gpu/ or app/ is over 60 lines (the project's code standard). A heuristic
// scanner, not a parser: it blanks comments, string and character literals, raw strings and
// preprocessor lines, then matches braces and takes a `{` for a function body when the text
// before it ends a parameter list (with its qualifiers or a constructor's initializer list) that
// does not belong to a control statement or a lambda. Lambdas count towards their enclosing
// function. The scanner is tested on snippets first, so a blind spot shows up as a failure here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kSourceDir = fs::weakly_canonical(REMAT_SOURCE_DIR);
constexpr std::size_t kMaxBodyLines = 60;

// Functions allowed to stay over the limit for a while, each with its reason. Each entry must still
// be over the limit (a stale entry fails the test), so the list only shrinks. Empty: every function
// in core/, gpu/ and app/ is within the limit.
struct Allowed {
  const char* file;
  const char* function;
  const char* reason;
};
const std::vector<Allowed> kAllowed = {};

// ---- Blanking everything that is not code --------------------------------------------------

bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Replaces comments, literals and preprocessor lines with spaces, keeping every newline, so that
// offsets and line numbers stay those of the file and no brace inside them is seen.
class CodeOnly {
 public:
  explicit CodeOnly(std::string text) : code_(std::move(text)) {
    while (at_ < code_.size()) step();
  }
  const std::string& code() const { return code_; }

 private:
  void step() {
    const char c = code_[at_];
    const char next = at_ + 1 < code_.size() ? code_[at_ + 1] : '\0';
    if (c == '/' && next == '/') return blankUntil(code_.find('\n', at_));
    if (c == '/' && next == '*') return blankUntil(endOf("*/", at_ + 2));
    if (c == '#' && startsLine()) return blankPreprocessorLine();
    if (c == '"' && rawStringPrefix()) return blankRawString();
    if (c == '"') return blankQuoted('"');
    if (c == '\'' && !digitSeparator()) return blankQuoted('\'');
    ++at_;
  }

  std::size_t endOf(const char* terminator, std::size_t from) const {
    const std::size_t found = code_.find(terminator, from);
    return found == std::string::npos ? code_.size() : found + std::char_traits<char>::length(terminator);
  }

  // Blanks [at_, end) except newlines.
  void blankUntil(std::size_t end) {
    end = std::min(end, code_.size());
    for (; at_ < end; ++at_)
      if (code_[at_] != '\n') code_[at_] = ' ';
  }

  bool startsLine() const {
    for (std::size_t i = at_; i-- > 0;) {
      if (code_[i] == '\n') return true;
      if (code_[i] != ' ' && code_[i] != '\t') return false;
    }
    return true;
  }

  // A directive runs to the first newline not escaped by a backslash.
  void blankPreprocessorLine() {
    std::size_t end = at_;
    while (end < code_.size() && (code_[end] != '\n' || code_[end - 1] == '\\')) ++end;
    blankUntil(end);
  }

  // R"delim( ... )delim", also with an encoding prefix (u8R, LR, uR, UR).
  bool rawStringPrefix() const {
    if (at_ == 0 || code_[at_ - 1] != 'R') return false;
    std::size_t start = at_ - 1;
    while (start > 0 && isIdentChar(code_[start - 1])) --start;
    const std::string prefix = code_.substr(start, at_ - start);
    return prefix == "R" || prefix == "u8R" || prefix == "LR" || prefix == "uR" || prefix == "UR";
  }

  void blankRawString() {
    const std::size_t open = code_.find('(', at_);
    if (open == std::string::npos) return blankUntil(code_.size());
    const std::string closing = ")" + code_.substr(at_ + 1, open - at_ - 1) + "\"";
    blankUntil(endOf(closing.c_str(), open));
  }

  // 1'000'000: a quote inside a number is a digit separator, not a character literal.
  bool digitSeparator() const {
    std::size_t start = at_;
    while (start > 0 && isIdentChar(code_[start - 1])) --start;
    return start < at_ && std::isdigit(static_cast<unsigned char>(code_[start])) != 0;
  }

  void blankQuoted(char quote) {
    std::size_t end = at_ + 1;
    while (end < code_.size() && code_[end] != quote && code_[end] != '\n') end += code_[end] == '\\' ? 2 : 1;
    blankUntil(end + 1);
  }

  std::string code_;
  std::size_t at_ = 0;
};

// ---- Recognising function bodies -------------------------------------------------------------

constexpr std::size_t kNowhere = std::string::npos;

// Reads blanked code backwards from a `{`, to tell a function body from every other brace.
class BraceContext {
 public:
  explicit BraceContext(const std::string& code) : code_(code) {}

  // The function's name when the `{` at `brace` opens a function body; nothing otherwise.
  std::optional<std::string> functionName(std::size_t brace) const {
    const std::size_t i = beforeQualifiers(before(brace));
    if (i == kNowhere) return std::nullopt;
    if (code_[i] == ')') {
      const std::size_t open = matching(i);
      return open == kNowhere ? std::nullopt : nameBeforeParameters(open);
    }
    if (code_[i] == '}') return constructorName(i);  // the last member initializer braced: a_{x} {
    return std::nullopt;  // class X {, namespace, else, do, = {, ( {, , {, ; {, : {, > {, ] {, ...
  }

 private:
  // The last non-blank position before `pos`.
  std::size_t before(std::size_t pos) const {
    while (pos-- > 0)
      if (!std::isspace(static_cast<unsigned char>(code_[pos]))) return pos;
    return kNowhere;
  }

  // Steps back from `i` over what may follow a parameter list: const, noexcept(...), &, ...
  std::size_t beforeQualifiers(std::size_t i) const {
    static const std::set<std::string> kQualifiers = {"const", "noexcept", "override", "final", "volatile"};
    while (i != kNowhere) {
      if (code_[i] == '&') {
        i = before(i);
      } else if (isIdentChar(code_[i]) && kQualifiers.contains(wordEndingAt(i))) {
        i = before(wordStart(i));
      } else if (code_[i] == ')' && isNoexceptOperand(i)) {
        i = before(wordStart(before(matching(i))));
      } else {
        return i;
      }
    }
    return i;
  }

  // `close` ends noexcept(expression).
  bool isNoexceptOperand(std::size_t close) const {
    const std::size_t open = matching(close);
    const std::size_t j = open == kNowhere ? kNowhere : before(open);
    return j != kNowhere && isIdentChar(code_[j]) && wordEndingAt(j) == "noexcept";
  }

  std::size_t wordStart(std::size_t last) const {
    while (last > 0 && isIdentChar(code_[last - 1])) --last;
    return last;
  }

  std::string wordEndingAt(std::size_t last) const {
    const std::size_t start = wordStart(last);
    return code_.substr(start, last + 1 - start);
  }

  // The `(` or `{` that the `)` or `}` at `close` closes.
  std::size_t matching(std::size_t close) const {
    const char closeChar = code_[close];
    const char openChar = closeChar == ')' ? '(' : '{';
    int depth = 0;
    for (std::size_t i = close + 1; i-- > 0;) {
      if (code_[i] == closeChar) ++depth;
      if (code_[i] == openChar && --depth == 0) return i;
    }
    return kNowhere;
  }

  // Ns::Type::name or ~Type, ending at `last`.
  std::string qualifiedName(std::size_t last) const {
    std::size_t start = wordStart(last);
    while (start >= 1 && code_[start - 1] == '~') --start;
    while (start >= 3 && code_[start - 1] == ':' && code_[start - 2] == ':' && isIdentChar(code_[start - 3]))
      start = wordStart(start - 3);
    return code_.substr(start, last + 1 - start);
  }

  // `open` is the `(` of what may be a parameter list.
  std::optional<std::string> nameBeforeParameters(std::size_t open) const {
    const std::size_t j = before(open);
    if (j == kNowhere || code_[j] == ']') return std::nullopt;  // a lambda
    if (code_[j] == ')') {                                      // operator()(...)
      const std::size_t inner = matching(j);
      const std::size_t k = inner == kNowhere ? kNowhere : before(inner);
      if (k != kNowhere && isIdentChar(code_[k]) && wordEndingAt(k) == "operator") return qualifiedName(k) + "()";
      return std::nullopt;
    }
    if (!isIdentChar(code_[j])) return operatorName(j);
    static const std::set<std::string> kNotFunctions = {"if",     "for",    "while",    "switch",  "catch",
                                                        "return", "sizeof", "decltype", "alignas", "constexpr"};
    if (kNotFunctions.contains(wordEndingAt(j))) return std::nullopt;
    const std::size_t k = before(wordStart(j));
    if (k != kNowhere && (code_[k] == ',' || initializerColon(k))) return constructorName(j);
    return qualifiedName(j);
  }

  // operator==, operator<, ... ending at `last`.
  std::optional<std::string> operatorName(std::size_t last) const {
    static const std::string kOperatorChars = "=<>!+-*/%&|^~[]";
    std::size_t start = last + 1;
    while (start > 0 && kOperatorChars.find(code_[start - 1]) != std::string::npos) --start;
    const std::size_t k = before(start);
    if (k == kNowhere || !isIdentChar(code_[k]) || wordEndingAt(k) != "operator") return std::nullopt;
    return qualifiedName(k) + code_.substr(start, last + 1 - start);
  }

  bool singleColon(std::size_t i) const {
    return code_[i] == ':' && (i == 0 || code_[i - 1] != ':') && (i + 1 >= code_.size() || code_[i + 1] != ':');
  }

  // The `:` that starts a member initializer list, not that of `public:` and its kind.
  bool initializerColon(std::size_t i) const {
    if (!singleColon(i)) return false;
    const std::size_t j = before(i);
    if (j == kNowhere || !isIdentChar(code_[j])) return true;
    const std::string word = wordEndingAt(j);
    return word != "public" && word != "private" && word != "protected";
  }

  // `last` ends the last entry of what may be a constructor's member initializer list,
  // `a_(x), b_{y}`: walks back over the entries to the `:` and names the constructor.
  std::optional<std::string> constructorName(std::size_t last) const {
    std::size_t i = last;
    std::size_t colon = kNowhere;
    while (colon == kNowhere) {
      if (code_[i] == ')' || code_[i] == '}') {
        const std::size_t open = matching(i);
        if (open == kNowhere) return std::nullopt;
        i = before(open);
      }
      if (i == kNowhere || !isIdentChar(code_[i])) return std::nullopt;
      const std::size_t separator = before(wordStart(i));
      if (separator == kNowhere) return std::nullopt;
      if (initializerColon(separator)) {
        colon = separator;
      } else if (code_[separator] == ',') {
        i = before(separator);
      } else {
        return std::nullopt;
      }
    }
    const std::size_t parameters = beforeQualifiers(before(colon));
    if (parameters == kNowhere || code_[parameters] != ')') return std::nullopt;
    const std::size_t open = matching(parameters);
    return open == kNowhere ? std::nullopt : nameBeforeParameters(open);
  }

  const std::string& code_;
};

struct FunctionBody {
  std::string name;
  std::size_t line = 0;   // of its `{`
  std::size_t lines = 0;  // from the `{` line to the `}` line, both included
};

std::vector<FunctionBody> functionBodies(const std::string& text) {
  const CodeOnly blanked(text);
  const std::string& code = blanked.code();
  const BraceContext context(code);
  struct Open {
    std::size_t line;
    std::optional<std::string> function;
  };
  std::vector<Open> open;
  std::vector<FunctionBody> bodies;
  std::size_t line = 1;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '\n') ++line;
    if (code[i] == '{') open.push_back({line, context.functionName(i)});
    if (code[i] == '}' && !open.empty()) {
      if (open.back().function)
        bodies.push_back({*open.back().function, open.back().line, line - open.back().line + 1});
      open.pop_back();
    }
  }
  return bodies;
}

// ---- The repository's sources ----------------------------------------------------------------

bool isSource(const fs::path& relative) {
  static const std::set<std::string> kExtensions = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".cc"};
  const std::string top = relative.begin() == relative.end() ? "" : relative.begin()->string();
  return (top == "core" || top == "gpu" || top == "app") && kExtensions.contains(relative.extension().string());
}

// Tracked files from git where the source is a checkout; otherwise a walk of core/, gpu/ and app/.
std::vector<fs::path> sourceFiles() {
  std::vector<fs::path> files;
  const std::string command = "git -C '" + kSourceDir.string() + "' ls-files -z core gpu app 2>/dev/null";
  if (FILE* pipe = fs::exists(kSourceDir / ".git") ? popen(command.c_str(), "r") : nullptr) {
    std::string name;
    for (int c = std::fgetc(pipe); c != EOF; c = std::fgetc(pipe)) {
      if (c != '\0') {
        name.push_back(static_cast<char>(c));
      } else {
        if (isSource(name)) files.emplace_back(name);
        name.clear();
      }
    }
    if (pclose(pipe) == 0 && !files.empty()) return files;
    files.clear();
  }
  for (const char* top : {"core", "gpu", "app"})
    for (const auto& entry : fs::recursive_directory_iterator(kSourceDir / top))
      if (entry.is_regular_file() && isSource(fs::relative(entry.path(), kSourceDir)))
        files.push_back(fs::relative(entry.path(), kSourceDir));
  return files;
}

std::string textOf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---- The scanner on snippets -----------------------------------------------------------------

std::vector<std::string> namesIn(const std::string& text) {
  std::vector<std::string> names;
  for (const FunctionBody& body : functionBodies(text)) names.push_back(body.name);
  return names;
}

TEST(FunctionLengthScanner, FindsFunctionsAndSkipsEveryOtherBrace) {
  const std::string text = R"cpp(
    namespace a::b {
    struct [[nodiscard]] S final : Base {
      int x{1};

     public:
      S(int v) : Base(v), x_{v} {}
      explicit S(long v) : x_(v) {}
      S(S&& o) noexcept : Base(std::move(o)), x_(f({}, o.x_)) {}
      ~S() override {}
      bool operator==(const S&) const = default;
      bool operator<(const S& o) const { return x < o.x; }
      int operator()(int k) const& noexcept(true) { return k; }
      int* data() && { return nullptr; }
    };
    enum class E : int { A, B };
    Status S::run(const Plan& plan) const {
      if (plan.ok()) {
        return {};
      }
      for (int i = 0; i < 3; ++i) {
        while (x) {
          do {
          } while (0);
        }
      }
      switch (k) {
        case 1: {
          break;
        }
        default: break;
      }
      auto f = [&](int y) { return y; };
      auto g = [=]() mutable -> int { return 0; };
      std::vector<int> v = {1, 2};
      call({.a = 1}, T{2});
      try {
      } catch (...) {
      }
      return S{3};
    }
    class P {
     public:
      void public_member() {}
    };
    }  // namespace a::b
    extern "C" {
    void c_function(void) {}
    }
    __global__ void kernel(const float* x) {}
  )cpp";
  const std::vector<std::string> expected = {
      "S", "S", "S", "~S", "operator<", "operator()", "data", "S::run", "public_member", "c_function", "kernel"};
  EXPECT_EQ(namesIn(text), expected);
}

TEST(FunctionLengthScanner, IgnoresBracesInCommentsLiteralsAndDirectives) {
  const std::string text =
      "// void commented() {\n"
      "/* void blocked() { */\n"
      "#define MACRO(x) do { x; } \\\n  while (0) {\n"
      "const char* s = \"f() {\\\" {\";\n"
      "char c = '{', q = '\\'';\n"
      "long big = 1'000'000;\n"
      "const char* raw = R\"json({\"a\": f() {)\" })json\";\n"
      "void real() { const char* t = u8\"}\"; }\n";
  EXPECT_EQ(namesIn(text), std::vector<std::string>{"real"});
}

TEST(FunctionLengthScanner, CountsLinesFromTheOpeningToTheClosingBrace) {
  std::string text = "int sixty(int a)\n{\n";
  for (int i = 0; i < 58; ++i) text += "  a += [&] { return a; }();\n";
  text += "}\nvoid shortOne() {\n}\n";
  const std::vector<FunctionBody> bodies = functionBodies(text);
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0].name, "sixty");
  EXPECT_EQ(bodies[0].line, 2u);
  EXPECT_EQ(bodies[0].lines, 60u);
  EXPECT_EQ(bodies[1].lines, 2u);
}

// ---- The rule --------------------------------------------------------------------------------

TEST(FunctionLength, NoFunctionInCoreGpuOrAppIsLongerThanSixtyLines) {
  const std::vector<fs::path> files = sourceFiles();
  ASSERT_GT(files.size(), 50u) << "source folder " << kSourceDir;
  std::set<std::pair<std::string, std::string>> stillLong;
  std::size_t functions = 0;
  for (const fs::path& file : files) {
    for (const FunctionBody& body : functionBodies(textOf(kSourceDir / file))) {
      ++functions;
      if (body.lines <= kMaxBodyLines) continue;
      const auto allowed = std::find_if(std::begin(kAllowed), std::end(kAllowed), [&](const Allowed& a) {
        return file.generic_string() == a.file && body.name == a.function;
      });
      if (allowed != std::end(kAllowed)) {
        stillLong.insert({allowed->file, allowed->function});
        continue;
      }
      ADD_FAILURE() << file.generic_string() << ":" << body.line << ": " << body.name << " is " << body.lines
                    << " lines long (at most " << kMaxBodyLines << "): split it at its natural seams";
    }
  }
  EXPECT_GT(functions, 500u) << "the scanner found too few functions to be trusted";
  for (const Allowed& a : kAllowed)
    EXPECT_TRUE(stillLong.contains({a.file, a.function}))
        << a.file << ": " << a.function << " is no longer over " << kMaxBodyLines
        << " lines (or is gone; it was allowed as " << a.reason << "): remove it from kAllowed";
}

}  // namespace
