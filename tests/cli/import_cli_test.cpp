// `remat import` and ONNX models wherever the command line takes a chain, end to end through
// runCli, on the committed torch exports (tests/data/onnx).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "remat/input/chain_file.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

const std::string kResnet = std::string(REMAT_TEST_DATA_DIR) + "/onnx/resnet18_train_op17_dynamic.onnx";
const std::string kSqueezenet = std::string(REMAT_TEST_DATA_DIR) + "/onnx/squeezenet1_0_train_op12.onnx";

class ImportCli : public testing::CliTest {};

TEST_F(ImportCli, WritesTheChainToStdoutAndTheSummaryToStderr) {
  const auto result = runRemat({"import", kResnet, "--batch", "8"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  auto spec = parseChainSpec(result.out, "stdout");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->name, "resnet18_train_op17_dynamic");
  EXPECT_EQ(spec->input.shape, (Shape{8, 3, 64, 64}));
  EXPECT_NE(result.err.find("opset 17 ('pytorch 1.13.0'), 69 nodes -> 14 layers (8 blocks), 11689512 parameters"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("batch: 8 (--batch, for the symbolic dimension 'batch')"), std::string::npos);
  EXPECT_NE(result.err.find("folded: 1 Flatten"), std::string::npos);
}

TEST_F(ImportCli, OutputFileGetsTheChainAndStdoutTheSummary) {
  const std::string out = path("fire.json");
  const auto result = runRemat({"import", kSqueezenet, "--output", out});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("33 layers (8 blocks), 1248424 parameters"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("wrote " + out), std::string::npos);
  auto chain = loadChainFile(out);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->paramCount(), 1248424u);
  EXPECT_EQ(chain->layers[5].name, "features.3");
  EXPECT_EQ(chain->layers[5].kind, LayerKind::Block);
}

TEST_F(ImportCli, BadModelsExitTwoAndWriteNothing) {
  const std::string out = path("never.json");
  const std::string notOnnx = write("chain.onnx", "{\"format\": \"remat-chain/1\"}");
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"import", kResnet, "-o", out}, "the batch dimension is symbolic ('batch'): give the batch size (--batch N)"},
      {{"import", notOnnx, "-o", out}, "chain.onnx: not an ONNX model"},
      {{"import", path("missing.onnx"), "-o", out}, "missing.onnx: cannot open"},
  };
  for (const auto& c : cases) {
    const auto result = runRemat(c.args);
    EXPECT_EQ(result.exitCode, 2) << c.message;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder_), {}), 1);  // only chain.onnx
}

// Inception's factorised convs end to end: the small inception-like export imports with its 1x7 conv's
// width fields, and a chain file whose 1x7 conv is wider than its padded input is exit 2 with the
// place and the width's fields, nothing written.
TEST_F(ImportCli, NonSquareConvsImportAndAnImpossibleOneIsLocated) {
  const std::string small = std::string(REMAT_TEST_DATA_DIR) + "/onnx/inception_small_train_op17_dynamic.onnx";
  const std::string chain = path("small.json");
  auto result = runRemat({"import", small, "--batch", "2", "-o", chain});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  std::ifstream in(chain);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"kernel\":1,\"kernel_width\":7"), std::string::npos) << text.substr(0, 400);
  const std::string bad = write("wide.json",
                                R"({"format": "remat-chain/1", "name": "w", "input": {"shape": [2, 3, 9, 5]},
  "layers": [{"name": "c", "kind": "conv2d", "out_channels": 4, "kernel": 1, "kernel_width": 7}]})");
  const std::string never = path("never.json");
  result = runRemat({"plan", bad, "--planner", "optimal", "--json"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("wide.json:2:"), std::string::npos) << result.err;  // the layer's line
  EXPECT_NE(result.err.find("layer 1 ('c', conv2d): kernel_width 7 is larger than the padded input width 5 (5 + 2 * "
                            "padding_width 0)"),
            std::string::npos)
      << result.err;
  result = runRemat({"zoo", "export", "inception_v3", "--resolution", "74", "--output", never});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("resolution 74 is below its minimum 75"), std::string::npos) << result.err;
  EXPECT_FALSE(std::filesystem::exists(never));
}

TEST_F(ImportCli, EveryChainCommandTakesAnOnnxModel) {
  // Without the optimizer step's peak (it makes store-all optimal here), so that the plan has checkpoints.
  const auto plan =
      runRemat({"plan", kSqueezenet, "--planner", "optimal", "--json", "--optimizer", "none", "--grads", "in-place"});
  ASSERT_EQ(plan.exitCode, 0) << plan.err;
  const json p = json::parse(plan.out);
  ASSERT_EQ(p["checkpoint_names"].size(), p["checkpoints"].size());
  ASSERT_FALSE(p["checkpoints"].empty());
  auto chain = buildChain(*parseChainSpec(runRemat({"import", kSqueezenet}).out, "fire"));
  ASSERT_TRUE(chain.isOk());
  for (std::size_t i = 0; i < p["checkpoints"].size(); ++i)
    EXPECT_EQ(p["checkpoint_names"][i], chain->layers[p["checkpoints"][i].get<std::size_t>() - 1].name);
  const auto compare = runRemat({"compare", kResnet, "--batch", "4", "--json"});
  ASSERT_EQ(compare.exitCode, 0) << compare.err;
  EXPECT_TRUE(json::parse(compare.out)["plans"][0].contains("checkpoint_names"));
  const auto simulate = runRemat({"simulate", kResnet, "--batch", "4", "--checkpoints", "5,9", "--json"});
  ASSERT_EQ(simulate.exitCode, 0) << simulate.err;
  const auto run = runRemat({"run", kSqueezenet, "--device", "cpu", "--planner", "sqrt", "--json"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const auto profile = runRemat({"profile", kSqueezenet, "--device", "cpu", "--output", path("profiled.json")});
  ASSERT_EQ(profile.exitCode, 0) << profile.err;
  EXPECT_TRUE(loadChainFile(path("profiled.json")).isOk());
}

// --input NAME on import and on every chain command: the data input by name; an unknown one, or
// --input on a chain file or zoo model, is exit 2 with a message that names it.
TEST_F(ImportCli, InputNamesTheDataInput) {
  const auto plain = runRemat({"import", kSqueezenet});
  const auto named = runRemat({"import", kSqueezenet, "--input", "input"});
  ASSERT_EQ(named.exitCode, 0) << named.err;
  EXPECT_EQ(named.out, plain.out);
  const auto plan = runRemat({"plan", kResnet, "--batch", "2", "--input", "input", "--planner", "optimal"});
  EXPECT_EQ(plan.exitCode, 0) << plan.err;
  for (const char* command : {"import", "plan"}) {
    std::vector<std::string> args = {command, kSqueezenet, "--input", "pixels"};
    if (std::string(command) == "plan") args.insert(args.end(), {"--planner", "none"});
    const auto unknown = runRemat(args);
    EXPECT_EQ(unknown.exitCode, 2);
    EXPECT_NE(unknown.err.find("--input 'pixels': the graph has no input of that name (its inputs: 'input'"),
              std::string::npos)
        << unknown.err;
    EXPECT_TRUE(unknown.out.empty() || std::string(command) == "plan");
  }
  const auto zoo = runRemat({"plan", "zoo:resnet18", "--input", "x", "--planner", "none"});
  EXPECT_EQ(zoo.exitCode, 2);
  EXPECT_NE(zoo.err.find("--input applies to ONNX models"), std::string::npos) << zoo.err;
}

// The batch of a zoo model or an ONNX model; a chain file states its own.
TEST_F(ImportCli, BatchAppliesToOnnxAndZooModels) {
  const auto onnx = json::parse(runRemat({"plan", kResnet, "--batch", "4", "--planner", "none", "--json"}).out);
  const auto zoo = json::parse(runRemat({"plan", "zoo:resnet18", "--batch", "4", "--planner", "none", "--json"}).out);
  EXPECT_EQ(zoo["static_bytes"],
            json::parse(runRemat({"plan", "zoo:resnet18", "--planner", "none", "--json"}).out)["static_bytes"]
                    .get<std::uint64_t>() -
                (64 - 4) * (3 * 224 * 224 * 4 + 8));  // each sample's image and int64 label
  EXPECT_GT(onnx["dynamic_peak_bytes"].get<std::uint64_t>(), 0u);
  const std::string chainFile = writeGoldenChain(0);
  const auto refused = runRemat({"plan", chainFile, "--batch", "4", "--planner", "none"});
  EXPECT_EQ(refused.exitCode, 2);
  EXPECT_NE(refused.err.find("--batch applies to ONNX models and zoo:NAME"), std::string::npos) << refused.err;
  const auto zero = runRemat({"plan", kResnet, "--batch", "0", "--planner", "none"});
  EXPECT_EQ(zero.exitCode, 2);
}

// An ONNX file is known by its first byte as well as by its name.
TEST_F(ImportCli, AnOnnxModelUnderAnotherNameIsStillRead) {
  std::filesystem::copy_file(kSqueezenet, path("model.bin"));
  const auto result = runRemat({"plan", path("model.bin"), "--planner", "sqrt"});
  EXPECT_EQ(result.exitCode, 0) << result.err;
}

const std::string kGpt = std::string(REMAT_TEST_DATA_DIR) + "/onnx/transformer/gpt_small_op17.onnx";

// --dim NAME=V sizes a transformer's symbolic dimensions on import and on every chain command.
TEST_F(ImportCli, DimSetsATransformersSequence) {
  const std::string out = path("gpt.json");
  const auto imported = runRemat({"import", kGpt, "--batch", "2", "--dim", "sequence=12", "-o", out});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_NE(imported.out.find("4 layers (0 blocks), 27584 parameters"), std::string::npos) << imported.out;
  auto chain = loadChainFile(out);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->inputShape, (Shape{2, 12}));
  // The exported graph computes math attention; the chain's default is fused (PyTorch 2's SDPA).
  auto storeAll = [](const char* attention) {
    return json::parse(runRemat({"plan", kGpt, "--batch", "8", "--dim", "sequence=16", "--attention", attention,
                                 "--planner", "none", "--optimizer", "none", "--grads", "in-place", "--json"})
                           .out);
  };
  const auto math = storeAll("math");
  const auto fused = storeAll("fused");
  EXPECT_GT(math["dynamic_peak_bytes"].get<std::uint64_t>(), fused["dynamic_peak_bytes"].get<std::uint64_t>());
  const std::string never = path("never.json");
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"import", kGpt, "--batch", "2", "-o", never}, "--dim sequence=N"},
      {{"import", kGpt, "--batch", "2", "--dim", "sequence=abc", "-o", never}, "--dim 'sequence=abc'"},
      {{"import", kGpt, "--batch", "2", "--dim", "sequence=99999999999", "-o", never}, "not a whole number"},
      {{"import", kGpt, "--batch", "2", "--dim", "tokens=8", "-o", never}, "no input dimension has that name"},
      {{"plan", "zoo:resnet18", "--dim", "sequence=8", "--planner", "none"}, "--dim applies to ONNX models"},
  };
  for (const auto& c : cases) {
    const auto result = runRemat(c.args);
    EXPECT_EQ(result.exitCode, 2) << c.message;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_FALSE(std::filesystem::exists(never));
  }
}

}  // namespace
}  // namespace remat
