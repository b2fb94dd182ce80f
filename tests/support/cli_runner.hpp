#pragma once
// Runs the `remat` command line in-process and captures its output.
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace remat::testing {

struct CliResult {
  int exitCode = 0;
  std::string out;
  std::string err;
};

inline CliResult runRemat(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliResult result;
  result.exitCode = cli::runCli(args, out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

}  // namespace remat::testing
