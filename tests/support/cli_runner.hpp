#pragma once
// Runs the `remat` command line in-process and captures its output; a fixture for CLI tests.
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "golden.hpp"
#include "temp_folder.hpp"

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

// The --checkpoints argument for a JSON array of layer indices: [2, 5] -> "2,5".
inline std::string checkpointArg(const nlohmann::json& checkpoints) {
  std::string list;
  for (const auto& c : checkpoints) list += (list.empty() ? "" : ",") + std::to_string(c.get<int>());
  return list;
}

// A CLI test with a temporary folder for the chain files it passes to the command line.
class CliTest : public TempFolderTest {
 protected:
  // Writes a chain-file JSON object to "<its name>.json"; returns the path.
  std::string writeChain(const nlohmann::json& chain) const {
    return write(chain.at("name").get<std::string>() + ".json", chain.dump());
  }

  // The chain of golden.json's example `index` (0: plain6), written to the folder; returns the path.
  std::string writeGoldenChain(std::size_t index) const { return writeChain(goldenExamples().at(index).at("chain")); }

  // One plan of golden.json, with its example's chain written to the folder.
  struct GoldenPlan {
    std::string chainPath;
    std::string checkpoints;  // the --checkpoints argument
    nlohmann::json expected;  // the plan's golden object: checkpoints, dynamic_peak_bytes, ...
  };
  std::vector<GoldenPlan> goldenPlans() const {
    std::vector<GoldenPlan> plans;
    for (const auto& example : goldenExamples()) {
      const std::string chainPath = writeChain(example.at("chain"));
      for (const auto& plan : example.at("plans"))
        plans.push_back({chainPath, checkpointArg(plan["checkpoints"]), plan});
    }
    return plans;
  }
};

}  // namespace remat::testing
