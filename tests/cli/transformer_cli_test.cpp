// Transformers on the command line: --sequence and --attention reach the zoo's token models and
// change what the rule says they should, bad values are errors that name the option, `remat run`
// runs a small GPT chain under both attention rules as predicted, the zoo's GPT-2 (dropout 0.1, tied
// head) under both gradient modes and BERT-base (token types, embedding LayerNorm).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

class TransformerCli : public testing::CliTest {};

std::uint64_t storeAllPeak(const std::vector<std::string>& extra) {
  // Without an optimizer step: at batch 1 its gradients, not the activations, would be the peak.
  std::vector<std::string> args = {"simulate", "zoo:gpt2",    "--batch", "1",       "--checkpoints", "",
                                   "--json",   "--optimizer", "none",    "--grads", "in-place"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto result = runRemat(args);
  EXPECT_EQ(result.exitCode, 0) << result.err;
  return result.exitCode == 0 ? json::parse(result.out)["dynamic_peak_bytes"].get<std::uint64_t>() : 0;
}

// At batch 1 and a short sequence the head's backward, with the tied table's gradient
// (memory-model.md 12.2), is the peak whatever the rule: 256 tokens make the blocks' E the peak.
TEST_F(TransformerCli, SequenceAndAttentionReachTheChain) {
  const std::uint64_t fused256 = storeAllPeak({"--sequence", "256"});
  const std::uint64_t fusedDefault = storeAllPeak({"--sequence", "256", "--attention", "fused"});
  const std::uint64_t math256 = storeAllPeak({"--sequence", "256", "--attention", "math"});
  const std::uint64_t fused512 = storeAllPeak({"--sequence", "512"});
  EXPECT_EQ(fused256, fusedDefault);  // the zoo's default is fused
  EXPECT_GT(math256, fused256);
  EXPECT_GT(fused512, fused256);
}

// A zoo transformer written as a chain file reads back with the same numbers, and --attention
// rewrites a chain file's blocks as it does the zoo's.
TEST_F(TransformerCli, ChainFilesKeepTheRule) {
  const std::string file = path("gpt2.json");
  const auto exported = runRemat({"zoo", "export", "gpt2", "--batch", "1", "--output", file});
  ASSERT_EQ(exported.exitCode, 0) << exported.err;
  auto peakOf = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--optimizer", "none", "--grads", "in-place"});  // storeAllPeak's step
    const auto result = runRemat(args);
    EXPECT_EQ(result.exitCode, 0) << result.err;
    return result.exitCode == 0 ? json::parse(result.out)["dynamic_peak_bytes"].get<std::uint64_t>() : 0;
  };
  const std::uint64_t fromFile = peakOf({"simulate", file, "--checkpoints", "", "--json"});
  EXPECT_EQ(fromFile, storeAllPeak({}));
  EXPECT_EQ(peakOf({"simulate", file, "--checkpoints", "", "--json", "--attention", "math"}),
            storeAllPeak({"--attention", "math"}));
  EXPECT_GT(storeAllPeak({"--attention", "math"}), fromFile);
  const auto sequence = runRemat({"simulate", file, "--checkpoints", "", "--sequence", "64"});
  EXPECT_EQ(sequence.exitCode, 2);
  EXPECT_NE(sequence.err.find("a chain file or an ONNX model states its sequence in input.shape"), std::string::npos)
      << sequence.err;
}

TEST_F(TransformerCli, BadValuesNameTheOption) {
  auto attention = runRemat({"plan", "zoo:gpt2", "--sequence", "64", "--attention", "flash", "--planner", "none"});
  EXPECT_EQ(attention.exitCode, 2);
  EXPECT_NE(attention.err.find("--attention: 'flash' is not an attention rule (math, fused)"), std::string::npos)
      << attention.err;
  auto zero = runRemat({"plan", "zoo:gpt2", "--sequence", "0", "--planner", "none"});
  EXPECT_EQ(zero.exitCode, 2);
  EXPECT_NE(zero.err.find("--sequence"), std::string::npos) << zero.err;
  auto cnn = runRemat({"plan", "zoo:resnet18", "--sequence", "64", "--planner", "none"});
  EXPECT_EQ(cnn.exitCode, 2);
  EXPECT_NE(cnn.err.find("a sequence length applies to the token models"), std::string::npos) << cnn.err;
  auto longBert = runRemat({"plan", "zoo:bert_base", "--batch", "1", "--sequence", "1024", "--planner", "none"});
  EXPECT_EQ(longBert.exitCode, 2);
  EXPECT_NE(longBert.err.find("layer 1 ('embeddings', token_embedding): the sequence length 1024 is longer than the "
                              "position table (positions 512)"),
            std::string::npos)
      << longBert.err;
}

// A GPT chain file at dropout 0 with --attention math and fused: optimal's plan runs, every op as
// predicted.
TEST_F(TransformerCli, RunsASmallGptAsPredicted) {
  json layers = json::array(
      {{{"name", "wte+wpe"}, {"kind", "token_embedding"}, {"vocab", 64}, {"positions", 16}, {"width", 32}, {"p", 0}}});
  for (int i = 0; i < 3; ++i)
    layers.push_back({{"name", "h." + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 4},
                      {"hidden", 128},
                      {"causal", true},
                      {"p", 0}});
  layers.push_back({{"name", "ln_f+lm_head"}, {"kind", "lm_head"}, {"vocab", 64}});
  const std::string file = write("gpt.json", json({{"format", "remat-chain/1"},
                                                   {"name", "gpt"},
                                                   {"input", {{"shape", {2, 16}}, {"dtype", "float32"}}},
                                                   {"layers", layers}})
                                                 .dump());
  for (const char* rule : {"math", "fused"}) {
    auto run = runRemat({"run", file, "--planner", "optimal", "--device", "cpu", "--attention", rule, "--json"});
    ASSERT_EQ(run.exitCode, 0) << rule << ": " << run.err;
    const json result = json::parse(run.out);
    EXPECT_TRUE(result["matches_prediction"].get<bool>()) << rule;
    EXPECT_EQ(result["label_bytes"].get<std::uint64_t>(), 2u * 16 * 8) << rule;  // one int64 label per token
    EXPECT_EQ(result["measured_static_bytes"], result["static_bytes"]) << rule;  // the labels are in both
  }
}

// The zoo's GPT-2 (dropout 0.1, lm_head tied to wte) runs as predicted under the CLI's default step
// (PyTorch 2's: AdamW, gradients made on backward, the table's by the head's backward) and with
// static gradients; so does BERT-base (token types and the embedding's LayerNorm).
TEST_F(TransformerCli, RunsZooGpt2UnderBothGradientModesAndBert) {
  const std::vector<std::string> gpt2 = {"run",       "zoo:gpt2", "--batch",  "1",   "--sequence", "8",
                                         "--planner", "none",     "--device", "cpu", "--json"};
  auto run = runRemat(gpt2);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(json::parse(run.out)["matches_prediction"].get<bool>());
  std::vector<std::string> statics = gpt2;
  for (const char* arg : {"--optimizer", "none", "--grads", "in-place"}) statics.emplace_back(arg);
  run = runRemat(statics);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(json::parse(run.out)["matches_prediction"].get<bool>());
  auto bert = runRemat({"run", "zoo:bert_base", "--batch", "1", "--sequence", "8", "--planner", "none", "--device",
                        "cpu", "--optimizer", "none", "--grads", "in-place", "--json"});
  ASSERT_EQ(bert.exitCode, 0) << bert.err;
  EXPECT_TRUE(json::parse(bert.out)["matches_prediction"].get<bool>());
}

}  // namespace
}  // namespace remat
