// `remat zoo list` and `remat zoo export NAME [--batch B] [--resolution R] [--dtype D] [--output FILE]`
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "cli.hpp"
#include "cli_args.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/zoo.hpp"

namespace remat::cli {
namespace {

struct ZooExportOptions {
  std::string name;
  ZooOptions zoo;
  std::string dtype = "float32";
  std::string output;
};

Status listModels(Io& io) {
  // The name column is as wide as the longest name, so descriptions line up however long names get.
  int nameWidth = 4;
  for (const ZooEntry& entry : zooModels()) nameWidth = std::max(nameWidth, static_cast<int>(entry.name.size()));
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %7s  %12s  %10s  %s\n", nameWidth, "name", "layers", "params", "min_res",
                "description");
  io.out << line;
  for (const ZooEntry& entry : zooModels()) {
    ZooOptions options;
    options.batch = 1;
    auto spec = zooChain(entry.name, options);
    if (!spec) return spec.status();
    auto chain = buildChain(*spec);
    if (!chain) return chain.status();
    std::snprintf(line, sizeof line, "%-*s  %7zu  %12llu  %10lld  %s\n", nameWidth, entry.name.c_str(), chain->size(),
                  static_cast<unsigned long long>(chain->paramCount()), static_cast<long long>(entry.minResolution),
                  entry.description.c_str());
    io.out << line;
  }
  return Status::ok();
}

Status exportModel(const ZooExportOptions& options, Io& io) {
  ZooOptions zoo = options.zoo;
  auto dtype = parseDType(options.dtype);
  if (!dtype) return dtype.status().withContext("--dtype");
  zoo.dtype = *dtype;
  auto spec = zooChain(options.name, zoo);
  if (!spec) return spec.status();
  auto chain = buildChain(*spec);  // refuse to write a chain that would not load
  if (!chain) return chain.status();
  if (options.output.empty()) {
    io.out << chainSpecToText(*spec);
    return Status::ok();
  }
  REMAT_RETURN_IF_ERROR(saveChainFile(*spec, options.output).withContext("--output"));
  io.err << "wrote " << options.output << " (" << chain->size() << " layers)\n";
  return Status::ok();
}

}  // namespace

void addZooCommands(CLI::App& app, Action& action) {
  CLI::App* zoo = app.add_subcommand("zoo", "Built-in models (torchvision's CNNs and ViT, GPT-2, BERT)");
  zoo->require_subcommand(1);
  CLI::App* list = zoo->add_subcommand("list", "List the zoo's models");
  list->callback([&action] { action = [](Io& io) { return listModels(io); }; });

  auto options = std::make_shared<ZooExportOptions>();
  CLI::App* exp = zoo->add_subcommand("export", "Write a zoo model as a remat-chain/1 file");
  exp->add_option("name", options->name, "Model name, e.g. vgg16, resnet50 (see 'remat zoo list')")->required();
  exp->add_option("--batch", options->zoo.batch, "Batch size")
      ->capture_default_str()
      ->check(wholeNumberIn(1, kMaxIntegerField));
  exp->add_option("--resolution", options->zoo.resolution, "Input height and width")
      ->capture_default_str()
      ->check(wholeNumberIn(1, kMaxIntegerField));
  exp->add_option("--dtype", options->dtype, "float32, float16 or bfloat16")->capture_default_str();
  exp->add_option("--classes", options->zoo.numClasses, "Number of classes")
      ->capture_default_str()
      ->check(wholeNumberIn(1, kMaxIntegerField));
  exp->add_option("--output,-o", options->output, "Output file (default: stdout)");
  exp->callback([options, &action] { action = [options](Io& io) { return exportModel(*options, io); }; });
}

}  // namespace remat::cli
