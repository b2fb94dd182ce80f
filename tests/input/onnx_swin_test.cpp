// Swin Transformer through the ONNX importer (issue 23): torch 1.13's training-mode exports without
// weights (tests/data/onnx/transformer, made by scripts/make-transformer-onnx.py) of torchvision's
// SwinTransformer import as swin_embedding, swin_block, patch_merging and swin_head with torch's
// parameter counts and their fields read from the ops; swin_t's configuration is the zoo's swin_t
// field for field (but stochastic depth, which torch 1.13 cannot export in training mode); hostile
// variants (a table for another window, an index of the wrong length or past the table, a shift
// mask of the wrong shape, a perm or a LayerNorm axis ONNX 1.12 lets through, a value_info at odds
// with the output, an op Swin V1 does not have) are refused with the node named.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "onnx_exports.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/registry.hpp"

namespace remat {
namespace {

using nlohmann::json;

const std::string kFolder = std::string(REMAT_TEST_DATA_DIR) + "/onnx/transformer/";

std::uint64_t torchParameters(const std::string& file) {
  for (const json& m : testing::exportManifest(kFolder + "models.json"))
    if (m.at("file") == file) return m.at("torch_parameters").get<std::uint64_t>();
  ADD_FAILURE() << file << " is not in models.json";
  return 0;
}

Chain imported(const std::string& file, std::int64_t batch) {
  auto result = importOnnxFile(kFolder + file, {.batch = batch});
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result) return {};
  auto chain = buildChain(result->spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? *chain : Chain{};
}

const std::vector<std::string> kSwinNames = {"features.0",   "features.1.0", "features.1.1",     "features.2",
                                             "features.3.0", "features.3.1", "norm+avgpool+head"};

// The small SwinTransformer's fields: stage widths C and 2C, heads, window; each stage's second
// block rolls by half a window.
void expectSmallSwin(const Chain& chain, std::int64_t batch, std::int64_t width, std::int64_t heads,
                     std::int64_t window, std::int64_t classes) {
  ASSERT_EQ(chain.size(), kSwinNames.size());
  const auto& l = chain.spec.layers;
  for (std::size_t i = 0; i < kSwinNames.size(); ++i) EXPECT_EQ(l[i].name, kSwinNames[i]);
  EXPECT_EQ(l[0].kind, LayerKind::SwinEmbedding);
  EXPECT_EQ(l[0].kernel, 4);
  EXPECT_EQ(l[0].width, width);
  for (std::size_t i : {1u, 2u, 4u, 5u}) {
    SCOPED_TRACE(l[i].name);
    EXPECT_EQ(l[i].kind, LayerKind::SwinBlock);
    EXPECT_EQ(l[i].window, window);
    EXPECT_EQ(l[i].heads, i < 3 ? heads : 2 * heads);
    EXPECT_EQ(l[i].hidden, i < 3 ? 4 * width : 8 * width);
    EXPECT_EQ(l[i].shift, i == 2 || i == 5 ? window / 2 : 0);
    EXPECT_DOUBLE_EQ(l[i].epsilon, 1e-5);
    EXPECT_EQ(l[i].stochasticDepth, 0.0);
  }
  EXPECT_EQ(l[3].kind, LayerKind::PatchMerging);
  EXPECT_EQ(chain.layers[3].outputShape[3], 2 * width);
  EXPECT_EQ(l[6].kind, LayerKind::SwinHead);
  EXPECT_EQ(l[6].outFeatures, classes);
  EXPECT_EQ(chain.layers[6].outputShape, (Shape{batch, classes}));
}

TEST(OnnxSwin, SmallSwinImportsAsTheSwinKinds) {
  // Opset 17, symbolic batch: 8 x 8 and 4 x 4 maps of 2 x 2 windows.
  const Chain chain = imported("swin_small_op17_dynamic.onnx", 3);
  EXPECT_EQ(chain.paramCount(), torchParameters("swin_small_op17_dynamic.onnx"));
  EXPECT_EQ(chain.inputShape, (Shape{3, 3, 32, 32}));
  expectSmallSwin(chain, 3, 16, 2, 2, 10);
  EXPECT_EQ(chain.layers[3].outputShape, (Shape{3, 4, 4, 32}));
}

TEST(OnnxSwin, PaddedSwinAtOpset14ImportsWithDecomposedNorms) {
  // 40 x 40: a 10 x 10 map padded to 12 x 12 for 4 x 4 windows, merged to 5 x 5 (the odd side padded),
  // padded to 8 x 8; LayerNorm decomposed (opset 14); the batch fixed at 2.
  const Chain chain = imported("swin_small_op14.onnx", 2);
  EXPECT_EQ(chain.paramCount(), torchParameters("swin_small_op14.onnx"));
  expectSmallSwin(chain, 2, 8, 1, 4, 4);
  EXPECT_EQ(chain.layers[1].inputShape, (Shape{2, 10, 10, 8}));
  EXPECT_EQ(chain.layers[3].outputShape, (Shape{2, 5, 5, 16}));
  // Another batch: torch wrote the batch into the window views' shapes.
  EXPECT_FALSE(importOnnxFile(kFolder + "swin_small_op14.onnx", {.batch = 3}).isOk());
}

// swin_t's configuration (torchvision's SwinTransformer with swin_t's arguments) is the zoo's swin_t
// layer for layer: kinds, names, fields, shapes and numbers, and every planner's E, but stochastic
// depth (0 in the export: torch 1.13 exports no StochasticDepth in training mode), set to 0 in the
// zoo's for the comparison. Its last stage is one 7x7 window, so its second block cannot roll: it
// keeps the stage's alternation (shift 3), as torchvision's module does.
TEST(OnnxSwin, SwinTIsTheZoosSwinT) {
  const Chain mine = imported("swin_t_op17.onnx", 2);
  EXPECT_EQ(mine.paramCount(), 28288354u);  // torchvision's swin_t
  EXPECT_EQ(mine.paramCount(), torchParameters("swin_t_op17.onnx"));
  auto spec = zooChain("swin_t", {.batch = 2, .resolution = 224});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  for (LayerSpec& l : spec->layers) l.stochasticDepth = 0.0;
  auto theirs = buildChain(*spec);
  ASSERT_TRUE(theirs.isOk());
  ASSERT_EQ(mine.size(), theirs->size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const LayerSpec &a = mine.spec.layers[i], &b = theirs->spec.layers[i];
    SCOPED_TRACE(b.name);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.kernel, b.kernel);
    EXPECT_EQ(a.width, b.width);
    EXPECT_EQ(a.heads, b.heads);
    EXPECT_EQ(a.hidden, b.hidden);
    EXPECT_EQ(a.window, b.window);
    EXPECT_EQ(a.shift, b.shift);
    EXPECT_EQ(a.stochasticDepth, b.stochasticDepth);
    EXPECT_EQ(a.epsilon, b.epsilon);
    EXPECT_EQ(a.outFeatures, b.outFeatures);
    EXPECT_EQ(mine.layers[i].inputShape, theirs->layers[i].inputShape);
    EXPECT_EQ(mine.layers[i].outputShape, theirs->layers[i].outputShape);
    EXPECT_EQ(mine.layers[i].paramCount, theirs->layers[i].paramCount);
    EXPECT_EQ(mine.layers[i].numbers, theirs->layers[i].numbers);
    EXPECT_EQ(mine.layers[i].extraParts, theirs->layers[i].extraParts);
  }
  EXPECT_EQ(mine.spec.layers[15].shift, 3);  // features.7.1: no roll in the graph, the alternation's
  EXPECT_EQ(mine.staticBytes(), theirs->staticBytes());
  for (const PlannerEntry& planner : plannerRegistry()) {
    if (planner.hasParameter()) continue;
    SCOPED_TRACE(planner.name);
    auto a = runPlanner(mine, planner.name), b = runPlanner(*theirs, planner.name);
    ASSERT_TRUE(a.isOk() && b.isOk());
    EXPECT_EQ(a->dynamicPeakBytes, b->dynamicPeakBytes);
    EXPECT_EQ(a->recomputeCost, b->recomputeCost);
  }
}

// A copy of a committed export with `edit` applied, imported from memory.
Status importEdited(const std::string& file, const std::function<void(onnx::ModelProto&)>& edit) {
  std::ifstream in(kFolder + file, std::ios::binary);
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in));
  edit(model);
  return importOnnxModel(model.SerializeAsString(), file, {.batch = 2}).status();
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

// The node that adds the shift mask to the first shifted block's scores, and the mask's name.
onnx::NodeProto* maskAdd(onnx::ModelProto& m) {
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Add" && n.name().find("features.1.1/attn/Add_") != std::string::npos &&
        n.input(1).find("Unsqueeze") != std::string::npos && n.input(0).find("Reshape") != std::string::npos)
      return &n;
  return nullptr;
}

TEST(OnnxSwin, HostileSwinsAreRefusedWithTheNode) {
  const std::string file = "swin_small_op17_dynamic.onnx";
  // A bias table for a window of 3 ([25, heads]) in a block of 2 x 2 windows.
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               setDims(m, "features.1.0.attn.relative_position_bias_table", {25, 2});
                             }),
                {"node ", "Gather", "relative position bias table", "[25, 2]", "[9, 2]"});
  // An index of another window's length: the bias's view [M^2, M^2, heads] does not chain.
  expectRefused(
      importEdited(file, [](onnx::ModelProto& m) { setDims(m, "features.1.1.attn.relative_position_index", {81}); }),
      {"node ", "features.1.1/attn/Reshape", "shape inference"});
  // The index as an initializer with an entry past the table's 9 rows.
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               onnx::TensorProto* index = m.mutable_graph()->add_initializer();
                               index->set_name("features.3.0.attn.relative_position_index");
                               index->set_data_type(onnx::TensorProto::INT64);
                               index->add_dims(16);
                               for (int k = 0; k < 16; ++k) index->add_int64_data(k == 5 ? 9 : k % 9);
                             }),
                {"node ", "relative position index", "has 9 at entry 5", "[0, 9)"});
  // A shift mask of one window ([1, 1, 1, 4, 4]) where the block has 16: it broadcasts, but it is not
  // the block's mask.
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               onnx::NodeProto* add = maskAdd(m);
                               ASSERT_NE(add, nullptr);
                               onnx::TensorProto* mask = m.mutable_graph()->add_initializer();
                               mask->set_name("one_window_mask");
                               mask->set_data_type(onnx::TensorProto::FLOAT);
                               for (std::int64_t d : {1, 1, 1, 4, 4}) mask->add_dims(d);
                               for (int k = 0; k < 16; ++k) mask->add_float_data(0.0F);
                               add->set_input(1, "one_window_mask");
                             }),
                {"node ", "shift mask", "[1, 1, 1, 4, 4]", "[1, 16, 1, 4, 4]"});
  // The window reverse's Transpose with a perm of five axes for its six: ONNX 1.12 infers a rank-5
  // output, and the Reshape after it takes that; not a permutation of the input.
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               for (auto& n : *m.mutable_graph()->mutable_node())
                                 if (n.name() == "/features/features.1/features.1.1/attn/Transpose_9")
                                   for (auto& a : *n.mutable_attribute()) {
                                     a.clear_ints();
                                     for (std::int64_t axis : {0, 3, 1, 2, 4}) a.add_ints(axis);
                                   }
                             }),
                {"node ", "Transpose_9", "not a permutation"});
  // The embedding's LayerNorm over axis 7 of a rank-4 tensor (ONNX 1.12's inference takes it).
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               for (auto& n : *m.mutable_graph()->mutable_node())
                                 if (n.name() == "/features/features.0/features.0.2/LayerNormalization")
                                   for (auto& a : *n.mutable_attribute())
                                     if (a.name() == "axis") a.set_i(7);
                             }),
                {"node ", "LayerNormalization", "axis is 7 of 4"});
  // A value_info entry declaring the graph's output [2, 12345] (ONNX's pass reads graph.output).
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               onnx::ValueInfoProto* info = m.mutable_graph()->add_value_info();
                               info->set_name("output");
                               auto* type = info->mutable_type()->mutable_tensor_type();
                               type->set_elem_type(onnx::TensorProto::FLOAT);
                               type->mutable_shape()->add_dim()->set_dim_value(2);
                               type->mutable_shape()->add_dim()->set_dim_value(12345);
                             }),
                {"node ", "Gemm", "value_info declares the output"});
  // An op Swin V1's block does not have (the q scale's Mul as a Max): refused at it.
  expectRefused(importEdited(file,
                             [](onnx::ModelProto& m) {
                               for (auto& n : *m.mutable_graph()->mutable_node())
                                 if (n.name() == "/features/features.1/features.1.0/attn/Mul_3") n.set_op_type("Max");
                             }),
                {"node ", "Mul_3", "Max", "Swin V2"});
}

}  // namespace
}  // namespace remat
