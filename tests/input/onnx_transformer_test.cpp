// Transformers through the ONNX importer (issue 23): torch 1.13's training-mode exports without
// weights (tests/data/onnx/transformer, made by scripts/make-transformer-onnx.py) of a nanoGPT-style
// decoder (opset 14: LayerNorm decomposed, exact GELU; opset 17: LayerNormalization, tanh GELU), a
// decoder of nn.TransformerEncoderLayer (ReLU, additive causal mask), torchvision's
// VisionTransformer and a BERT-style post-norm encoder import as the chain's transformer kinds with
// torch's parameter counts, their fields read from the ops, every planner plans them, and hostile
// variants (token ids and tables of the wrong shape, sequences past the position table, the limit
// or the S x S overflow, masks of the wrong shape) are refused with the node named.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "onnx_exports.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/registry.hpp"

namespace remat {
namespace {

using nlohmann::json;
using Kinds = std::vector<std::string>;

const std::string kFolder = std::string(REMAT_TEST_DATA_DIR) + "/onnx/transformer/";

json entry(const std::string& file) {
  for (const json& m : testing::exportManifest(kFolder + "models.json"))
    if (m.at("file") == file) return m;
  ADD_FAILURE() << file << " is not in models.json";
  return {};
}

OnnxImportOptions tokens(std::int64_t batch, std::int64_t sequence) {
  return {.batch = batch, .dims = {{"sequence", sequence}}};
}

Chain imported(const std::string& file, const OnnxImportOptions& options) {
  auto result = importOnnxFile(kFolder + file, options);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result) return {};
  auto chain = buildChain(result->spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? *chain : Chain{};
}

Kinds kindsOf(const Chain& chain) {
  Kinds kinds;
  for (const ChainLayer& l : chain.layers) kinds.emplace_back(kindName(l.kind));
  return kinds;
}

const Kinds kGptKinds = {"token_embedding", "transformer_block", "transformer_block", "lm_head"};

TEST(OnnxTransformer, NanoGptImportsAsEmbeddingBlocksAndTiedHead) {
  for (const std::string file : {"gpt_small_op14.onnx", "gpt_small_op17.onnx"}) {
    SCOPED_TRACE(file);
    const Chain chain = imported(file, tokens(3, 9));
    ASSERT_EQ(kindsOf(chain), kGptKinds);
    EXPECT_EQ(chain.paramCount(), entry(file).at("torch_parameters").get<std::uint64_t>());
    EXPECT_EQ(chain.inputShape, (Shape{3, 9}));
    const LayerSpec& embedding = chain.spec.layers[0];
    EXPECT_EQ(embedding.vocab, 50);
    EXPECT_EQ(embedding.positions, 16);
    EXPECT_EQ(embedding.width, 32);
    EXPECT_EQ(embedding.segments, 0);
    EXPECT_FALSE(embedding.embeddingNorm);
    EXPECT_DOUBLE_EQ(embedding.dropoutP, 0.1);
    for (std::size_t i : {1u, 2u}) {
      const LayerSpec& block = chain.spec.layers[i];
      EXPECT_EQ(block.name, "h." + std::to_string(i - 1));  // torch's module path
      EXPECT_EQ(block.heads, 4);
      EXPECT_EQ(block.hidden, 128);
      EXPECT_TRUE(block.causal);  // masked_fill of the causal buffer: a Where before the Softmax
      EXPECT_TRUE(block.preNorm);
      EXPECT_FALSE(block.reluMlp);
      EXPECT_DOUBLE_EQ(block.dropoutP, 0.1);
      EXPECT_DOUBLE_EQ(block.epsilon, 1e-5);
      EXPECT_TRUE(block.fusedAttention);  // the chain's default rule; --attention math switches it
      EXPECT_EQ(chain.layers[i].outputShape, (Shape{3, 9, 32}));
    }
    const LayerSpec& head = chain.spec.layers[3];
    EXPECT_TRUE(head.tied);  // lm_head.weight is wte.weight: counted once
    EXPECT_TRUE(head.norm);
    EXPECT_EQ(head.vocab, 50);
    EXPECT_EQ(chain.layers[3].outputShape, (Shape{3, 9, 50}));
  }
}

TEST(OnnxTransformer, TorchEncoderLayerDecoderHasReluAndAnAdditiveMask) {
  const Chain chain = imported("torch_decoder_op15.onnx", tokens(2, 16));
  ASSERT_EQ(kindsOf(chain), kGptKinds);
  EXPECT_EQ(chain.paramCount(), entry("torch_decoder_op15.onnx").at("torch_parameters").get<std::uint64_t>());
  for (std::size_t i : {1u, 2u}) {
    const LayerSpec& block = chain.spec.layers[i];
    EXPECT_EQ(block.name, "layers." + std::to_string(i - 1));
    EXPECT_EQ(block.heads, 4);  // the scores are [N * heads, S, S]
    EXPECT_TRUE(block.reluMlp);
    EXPECT_TRUE(block.causal);
    EXPECT_TRUE(block.preNorm);  // norm_first=True
    EXPECT_DOUBLE_EQ(block.dropoutP, 0.0);
  }
  EXPECT_FALSE(chain.spec.layers[3].tied);
}

TEST(OnnxTransformer, VisionTransformerImportsAsPatchEmbeddingBlocksAndClsHead) {
  const Chain chain = imported("vit_small_op16.onnx", {.batch = 2});
  ASSERT_EQ(kindsOf(chain), (Kinds{"patch_embedding", "transformer_block", "transformer_block", "cls_head"}));
  EXPECT_EQ(chain.paramCount(), entry("vit_small_op16.onnx").at("torch_parameters").get<std::uint64_t>());
  EXPECT_EQ(chain.spec.layers[0].kernel, 8);
  EXPECT_EQ(chain.spec.layers[0].width, 64);
  EXPECT_EQ(chain.layers[0].outputShape, (Shape{2, 17, 64}));  // the class token and 16 patches
  EXPECT_EQ(chain.spec.layers[1].name, "encoder.layers.encoder_layer_0");
  EXPECT_EQ(chain.spec.layers[1].heads, 4);
  EXPECT_EQ(chain.spec.layers[1].hidden, 128);
  EXPECT_FALSE(chain.spec.layers[1].causal);
  EXPECT_DOUBLE_EQ(chain.spec.layers[1].epsilon, 1e-6);
  EXPECT_TRUE(chain.spec.layers[3].norm);  // encoder.ln, then heads on token 0
  EXPECT_FALSE(chain.spec.layers[3].tanhOut);
  EXPECT_EQ(chain.layers[3].outputShape, (Shape{2, 10}));
}

TEST(OnnxTransformer, BertStyleEncoderIsPostNormWithTokenTypesAndPooler) {
  const Chain chain = imported("bert_small_op14.onnx", tokens(2, 12));
  ASSERT_EQ(kindsOf(chain), (Kinds{"token_embedding", "transformer_block", "transformer_block", "cls_head"}));
  EXPECT_EQ(chain.paramCount(), entry("bert_small_op14.onnx").at("torch_parameters").get<std::uint64_t>());
  EXPECT_EQ(chain.spec.layers[0].segments, 2);
  EXPECT_TRUE(chain.spec.layers[0].embeddingNorm);
  EXPECT_DOUBLE_EQ(chain.spec.layers[0].epsilon, 1e-12);
  for (std::size_t i : {1u, 2u}) {
    EXPECT_FALSE(chain.spec.layers[i].preNorm);
    EXPECT_FALSE(chain.spec.layers[i].causal);
    EXPECT_FALSE(chain.spec.layers[i].reluMlp);
  }
  EXPECT_TRUE(chain.spec.layers[3].tanhOut);
  EXPECT_FALSE(chain.spec.layers[3].norm);
  EXPECT_EQ(chain.layers[3].outputShape, (Shape{2, 32}));
}

TEST(OnnxTransformer, EveryPlannerPlansTheSmallGpt) {
  const Chain chain = imported("gpt_small_op14.onnx", tokens(4, 16));
  ASSERT_EQ(chain.size(), 4u);
  auto optimal = runPlanner(chain, "optimal");
  ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
  for (const PlannerEntry& planner : plannerRegistry()) {
    std::string name(planner.name);
    if (name == "uniform") name = "uniform:2";
    if (planner.hasParameter() && name != "uniform:2") name = budgetPlannerName(optimal->dynamicPeakBytes * 2);
    SCOPED_TRACE(name);
    auto report = runPlanner(chain, name);
    ASSERT_TRUE(report.isOk()) << report.status().message();
    EXPECT_LE(optimal->dynamicPeakBytes, report->dynamicPeakBytes);
  }
}

// A copy of a committed export with `edit` applied, imported from memory.
Status importEdited(const std::string& file, const std::function<void(onnx::ModelProto&)>& edit,
                    const OnnxImportOptions& options) {
  std::ifstream in(kFolder + file, std::ios::binary);
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in));
  edit(model);
  return importOnnxModel(model.SerializeAsString(), file, options).status();
}

void setDims(onnx::ModelProto& model, const std::string& input, const std::vector<std::int64_t>& dims) {
  for (auto& i : *model.mutable_graph()->mutable_input()) {
    if (i.name() != input) continue;
    auto* shape = i.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
}

void expectRefused(const Status& status, const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::InvalidInput);
  for (const std::string& part : parts) EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
}

TEST(OnnxTransformer, SizesComeFromBatchAndDim) {
  expectRefused(importOnnxFile(kFolder + "gpt_small_op17.onnx", {.batch = 2}).status(),
                {"gpt_small_op17.onnx: input 'idx', dimension 1 ('sequence') is symbolic", "--dim sequence=N"});
  expectRefused(importOnnxFile(kFolder + "gpt_small_op17.onnx", {.batch = 2, .dims = {{"seq", 8}}}).status(),
                {"--dim 'seq': no input dimension has that name", "'sequence'"});
  // Past the position table (16): the embedding's rule, located at its first node.
  expectRefused(importOnnxFile(kFolder + "gpt_small_op17.onnx", tokens(2, 17)).status(), {"node "});
  // A CNN has no sizes but the batch.
  expectRefused(importOnnxFile(std::string(REMAT_TEST_DATA_DIR) + "/onnx/resnet18_train_op17_dynamic.onnx",
                               {.batch = 2, .dims = {{"sequence", 4}}})
                    .status(),
                {"--dim applies to a transformer's inputs"});
  EXPECT_TRUE(importOnnxFile(kFolder + "gpt_small_op17.onnx", tokens(1, 1)).isOk());
}

TEST(OnnxTransformer, SymbolicDimensionsBesidesTheBatchAreListedByName) {
  // What the explorer shows one field for: the inputs' symbolic names, the batch (first) excepted.
  auto gpt = onnxSymbolicDimensions(kFolder + "gpt_small_op17.onnx");
  ASSERT_TRUE(gpt.isOk()) << gpt.status().message();
  EXPECT_EQ(*gpt, std::vector<std::string>{"sequence"});               // idx and targets share it: once
  auto vit = onnxSymbolicDimensions(kFolder + "vit_small_op16.onnx");  // [batch, 3, 32, 32]
  ASSERT_TRUE(vit.isOk()) << vit.status().message();
  EXPECT_TRUE(vit->empty());
  auto cnn = onnxSymbolicDimensions(std::string(REMAT_TEST_DATA_DIR) + "/onnx/resnet18_train_op17_dynamic.onnx");
  ASSERT_TRUE(cnn.isOk()) << cnn.status().message();
  EXPECT_TRUE(cnn->empty());
  // A hostile model's names are bounded: they become the explorer's fields.
  std::ifstream in(kFolder + "gpt_small_op17.onnx", std::ios::binary);
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromIstream(&in));
  auto& idx = *model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  idx.mutable_dim(1)->set_dim_param(std::string(65, 's'));
  expectRefused(onnxSymbolicDimensionsOf(model.SerializeAsString(), "hostile.onnx").status(),
                {"hostile.onnx: input 'idx', dimension 1: the symbolic name", "at most 64 printable characters"});
  idx.mutable_dim(1)->set_dim_param("se\nq");
  expectRefused(onnxSymbolicDimensionsOf(model.SerializeAsString(), "hostile.onnx").status(), {"printable"});
  expectRefused(onnxSymbolicDimensionsOf("not a model", "junk.onnx").status(), {"junk.onnx: not an ONNX model"});
  auto missing = onnxSymbolicDimensions(kFolder + "missing.onnx");  // read as importOnnxFile reads
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("missing.onnx: cannot open"), std::string::npos)
      << missing.status().message();
}

TEST(OnnxTransformer, DimensionOptionIsNameEqualsWholeNumber) {
  auto ok = parseOnnxDimension("sequence=2048");
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok->first, "sequence");
  EXPECT_EQ(ok->second, 2048);
  for (const char* bad : {"sequence", "=5", "sequence=", "sequence=0", "sequence=-3", "sequence=1e3",
                          "sequence=2147483648", "sequence=99999999999999999999999"})
    expectRefused(parseOnnxDimension(bad).status(), {"--dim"});
}

TEST(OnnxTransformer, HostileShapesAreRefusedWithTheNode) {
  // Token ids [batch, sequence, 1].
  expectRefused(importEdited("gpt_small_op14.onnx",
                             [](onnx::ModelProto& m) {
                               setDims(m, "idx", {2, 16, 1});
                             },
                             {}),
                {"input 'idx': token ids are [batch, sequence] integers"});
  // An embedding table of rank 3, and one a column wider than the other.
  expectRefused(importEdited(
                    "gpt_small_op14.onnx",
                    [](onnx::ModelProto& m) {
                      setDims(m, "transformer.wte.weight", {50, 32, 1});
                    },
                    tokens(2, 16)),
                {"node "});
  expectRefused(importEdited(
                    "torch_decoder_op15.onnx",
                    [](onnx::ModelProto& m) {
                      setDims(m, "pos.weight", {16, 33});
                    },
                    tokens(2, 16)),
                {"node ", "Add"});
  // nanoGPT's causal buffer one column short: the mask does not fit the [N, heads, S, S] scores.
  expectRefused(importEdited(
                    "gpt_small_op14.onnx",
                    [](onnx::ModelProto& m) {
                      setDims(m, "transformer.h.0.attn.bias", {1, 1, 16, 8});
                      setDims(m, "transformer.h.1.attn.bias", {1, 1, 16, 8});
                    },
                    tokens(2, 16)),
                {"node ", "Where"});
  // LayerNorm's decomposition with x^3 for x^2: no LayerNorm, refused at the norm's first node.
  expectRefused(importEdited(
                    "gpt_small_op14.onnx",
                    [](onnx::ModelProto& m) {
                      std::string exponent;
                      for (const auto& n : m.graph().node())
                        if (n.op_type() == "Pow" && exponent.empty()) exponent = n.input(1);
                      for (auto& n : *m.mutable_graph()->mutable_node())
                        if (n.op_type() == "Constant" && n.output(0) == exponent) {
                          onnx::TensorProto* value = n.mutable_attribute(0)->mutable_t();
                          value->clear_raw_data();
                          value->set_data_type(onnx::TensorProto::FLOAT);
                          value->add_float_data(3.0F);
                        }
                    },
                    tokens(2, 16)),
                {"node ", "ReduceMean", "is not LayerNorm's decomposition"});
  // A position table as long as the limit allows, and S = 2^31 - 1: N * heads * S * S overflows.
  expectRefused(importEdited(
                    "torch_decoder_op15.onnx",
                    [](onnx::ModelProto& m) {
                      setDims(m, "pos.weight", {kMaxIntegerField, 32});
                    },
                    tokens(2, kMaxIntegerField)),
                {"node ", "overflow 64-bit bytes"});
}

}  // namespace
}  // namespace remat
