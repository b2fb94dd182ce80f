// libFuzzer target: the command line's argument parsing. The input is an argument list, one
// argument per line. Every list is parsed (CLI11 and our checks of each option); the commands that
// finish quickly on small inputs (simulate, plan, compare, zoo list, zoo export) also run, in a
// private folder holding the two small chain files of tests/data/regressions/chains, so the arguments meet the code
// they steer. run and profile are parsed only: they execute training steps. An argument naming anything outside the
// folder (a '/') is not used, so nothing outside it is read or written.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "fuzz_checks.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxArguments = 16;
constexpr std::size_t kMaxArgumentBytes = 256;

fs::path& folder() {
  static fs::path path;
  return path;
}

// Removes what a command wrote (zoo export --output), keeping the two chains.
void tidyFolder() {
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(folder(), ignored)) {
    const std::string name = entry.path().filename().string();
    if (name != "a.json" && name != "r.json") fs::remove_all(entry.path(), ignored);
  }
}

std::vector<std::string> splitArguments(const std::string& text) {
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start <= text.size() && args.size() < kMaxArguments) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    args.push_back(text.substr(start, std::min(end - start, kMaxArgumentBytes)));
    start = end + 1;
  }
  return args;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char templ[] = "/tmp/remat-fuzz-cli-XXXXXX";
  if (!::mkdtemp(templ)) remat::fuzz::fail("cannot create the private folder", templ);
  folder() = templ;
  // The chains the regression test's argument lists name (tests/data/regressions/README.md).
  for (const char* name : {"a.json", "r.json"})
    fs::copy_file(fs::path(REMAT_SOURCE_DIR) / "tests/data/regressions/chains" / name, folder() / name);
  fs::current_path(folder());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = splitArguments(std::string(reinterpret_cast<const char*>(data), size));
  for (const std::string& arg : args)
    if (arg.find('/') != std::string::npos) return -1;  // not added to the corpus
  std::ostringstream out, err;
  remat::cli::ParsedCommandLine parsed = remat::cli::parseCommandLine(args, out, err);
  if (parsed.exitCode) {
    if (*parsed.exitCode != remat::cli::kExitOk && err.str().rfind("remat: ", 0) != 0)
      remat::fuzz::fail("a refused command line says nothing", err.str());
    return 0;
  }
  static const std::set<std::string> kQuick = {"simulate", "plan", "compare", "zoo list", "zoo export"};
  if (!kQuick.count(parsed.command)) return 0;
  remat::cli::Io io{out, err};
  const int exitCode = remat::cli::runAction(parsed.action, io);
  tidyFolder();
  if (exitCode == remat::cli::kExitInternal) remat::fuzz::fail("an internal error", err.str());
  if (exitCode != remat::cli::kExitOk) {
    const std::string message = err.str();
    if (message.rfind("remat: error: ", 0) != 0) remat::fuzz::fail("an error without 'remat: error: '", message);
    if (message.size() > remat::fuzz::kMaxMessageChars)
      remat::fuzz::fail("the message is too long", message.substr(0, 400));
  }
  return 0;
}
