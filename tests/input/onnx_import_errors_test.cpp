// The ONNX importer's refusals on models built here with ONNX's own classes: each error names the
// file and the node (unsupported operators, products that do not broadcast, random ops, symbolic
// dimensions, shapes that do not chain, attributes a layer cannot take, hostile values); and the
// Squeeze-and-Excitation block whose product the refusals vary.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "onnx_builder.hpp"
#include "onnx_errors.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/block.hpp"

namespace remat {
namespace {

using testing::expectContains;
using testing::importError;
using testing::OnnxAttr;
using testing::OnnxBuilder;
using testing::withMiddle;
using Ints = std::vector<std::int64_t>;

TEST(OnnxImportErrors, UnsupportedOperatorNamesTheNodeAndListsTheSupportedOnes) {
  const std::string message = importError(
      withMiddle([](OnnxBuilder& b, const std::string& t) { return b.node("Softplus", {t}, "features.1"); }));
  expectContains(message, {"bad.onnx: node 1 ('/features/features.1/Softplus', Softplus)", "Softplus is not supported",
                           "Conv, BatchNormalization, LayerNormalization", "Relu, Clip, Sigmoid, Tanh", "MaxPool",
                           "Concat and Slice (channels)"});
  // Names of any length are quoted short: the whole message stays one readable line (the fuzz
  // target's limit is 1,000 characters).
  const std::string longNames = importError(withMiddle(
      [](OnnxBuilder& b, const std::string& t) { return b.node(std::string(300, 'n'), {t}, std::string(300, 'm')); }));
  EXPECT_NE(longNames.find("is not supported"), std::string::npos) << longNames;
  EXPECT_LT(longNames.size(), 1000u) << longNames;
}

// Squeeze-and-Excitation as torch exports it: GlobalAveragePool (or ReduceMean over H and W with
// keepdims), 1x1 Conv with bias, ReLU, 1x1 Conv with bias, HardSigmoid, Mul(scale, x): one block.
std::string seModel(
    bool reduceMean,
    const std::function<std::string(OnnxBuilder&, const std::string&, const std::string&)>& product = nullptr) {
  return withMiddle([&](OnnxBuilder& b, const std::string& x) {
    std::string t = reduceMean ? b.node("ReduceMean", {x}, "se.avgpool",
                                        {{"axes", std::vector<std::int64_t>{2, 3}}, {"keepdims", std::int64_t{1}}})
                               : b.node("GlobalAveragePool", {x}, "se.avgpool");
    t = b.node("Conv", {t, b.weight("se.fc1.weight", {2, 4, 1, 1}), b.weight("se.fc1.bias", {2})}, "se.fc1");
    t = b.node("Relu", {t}, "se.activation");
    t = b.node("Conv", {t, b.weight("se.fc2.weight", {4, 2, 1, 1}), b.weight("se.fc2.bias", {4})}, "se.fc2");
    t = b.node("HardSigmoid", {t}, "se.scale_activation", {{"alpha", 1.0 / 6.0}});
    return product ? product(b, t, x) : b.node("Mul", {t, x}, "se");
  });
}

TEST(OnnxImport, SqueezeExcitationIsOneBlockWithTheProductInside) {
  for (bool reduceMean : {false, true}) {
    SCOPED_TRACE(reduceMean ? "ReduceMean" : "GlobalAveragePool");
    auto imported = importOnnxModel(seModel(reduceMean), "se.onnx", OnnxImportOptions{.batch = 2});
    ASSERT_TRUE(imported.isOk()) << imported.status().message();
    const ChainSpec& spec = imported->spec;
    ASSERT_EQ(spec.layers.size(), 4u);  // features.0, the SE block, flatten, fc
    const LayerSpec& se = spec.layers[1];
    EXPECT_EQ(se.name, "se");
    std::vector<std::string> kinds;
    for (const BlockOpSpec& op : se.ops) kinds.emplace_back(blockOpKindName(op.kind));
    EXPECT_EQ(kinds, (std::vector<std::string>{"global_avgpool", "conv2d", "relu", "conv2d", "hardsigmoid", "mul"}));
    EXPECT_EQ(se.ops.back().inputs, (std::vector<std::size_t>{5, 0}));
    EXPECT_TRUE(se.ops[1].layer.bias);
    auto chain = buildChain(spec);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    EXPECT_EQ(chain->layers[1].paramCount, 4u * 2 + 2 + 2 * 4 + 4);
    EXPECT_TRUE(chain->layers[1].numbers.needsInput);  // the product reads x
  }
}

TEST(OnnxImportErrors, ProductsThatDoNotBroadcastOrReadAWeightNameTheNode) {
  std::string message = importError(seModel(false, [](OnnxBuilder& b, const std::string& scale, const std::string&) {
    return b.node("Mul", {scale, "x"}, "se");  // [2, 4, 1, 1] times the model's input [2, 3, 4, 4]
  }));
  expectContains(
      message, {"('/se/Mul', Mul): multiplies [2, 4, 1, 1] and [2, 3, 4, 4]", "the shapes do not broadcast (axis 1)"});
  message = importError(seModel(false, [](OnnxBuilder& b, const std::string&, const std::string& x) {
    return b.node("Mul", {x, b.constantFloat(0.5f)}, "se");
  }));
  // A weight times an activation is read only as ConvNeXt's layer_scale, [C, 1, 1].
  expectContains(message, {"('/se/Mul', Mul): multiplies [2, 4, 4, 4] by the weight []", "layer_scale"});
  message = importError(seModel(false, [](OnnxBuilder& b, const std::string&, const std::string& x) {
    return b.node("Mul", {x, b.weight("se.gamma", {1, 4, 1, 1})}, "se");  // a parameter used directly
  }));
  expectContains(message, {"more than one data input ('x', 'se.gamma')"});
  message = importError(seModel(false, [](OnnxBuilder& b, const std::string& scale, const std::string& x) {
    return b.node("Mul", {scale, x, x}, "se");
  }));
  expectContains(message, {"('/se/Mul', Mul): has 3 inputs"});
}

// torchvision's StochasticDepth in training mode: a random mask, refused with what to do instead.
TEST(OnnxImportErrors, RandomOpsOfStochasticDepthSayHowToExport) {
  for (const char* op : {"Bernoulli", "RandomUniformLike"}) {
    SCOPED_TRACE(op);
    const std::string message = importError(withMiddle([&](OnnxBuilder& b, const std::string& t) {
      return b.node("Mul", {t, b.node(op, {t}, "features.1.stochastic_depth")}, "features.1.stochastic_depth");
    }));
    expectContains(message, {"node 1 ('/features/features.1/stochastic_depth/", "draws random numbers",
                             "stochastic_depth_prob=0.0"});
  }
}

TEST(OnnxImportErrors, SymbolicDimensionsNameTheDimension) {
  OnnxBuilder b;
  std::string t = b.input("x", {-1, 3, 4, 4});
  b.output(b.node("Relu", {t}, "act"));
  expectContains(importError(b.bytes(), 0),
                 {"bad.onnx: input 'x': the batch dimension is symbolic ('batch')", "--batch"});
  OnnxBuilder h;
  t = h.input("x", {2, 3, -1, 4}, "height");
  h.output(h.node("Relu", {t}, "act"));
  expectContains(importError(h.bytes()), {"input 'x': dimension 2 ('height') is symbolic"});
}

TEST(OnnxImportErrors, MoreThanOneDataInputOrOutput) {
  OnnxBuilder b;
  const std::string x = b.input("x", {2, 3, 4, 4}), y = b.input("y", {2, 3, 4, 4});
  b.output(b.node("Add", {x, y}, "sum"));
  expectContains(importError(b.bytes()), {"bad.onnx: more than one data input ('x', 'y')", "--input NAME"});
  OnnxBuilder c;
  const std::string in = c.input("x", {2, 3, 4, 4});
  c.output(c.node("Relu", {in}, "a"));
  c.output(c.node("Relu", {in}, "b"));
  expectContains(importError(c.bytes()), {"bad.onnx: more than one output", "build them with aux_logits=False"});
}

TEST(OnnxImportErrors, ShapesThatDoNotChainNameTheNode) {
  expectContains(
      importError(withMiddle([](OnnxBuilder& b, const std::string& t) {
        return b.node("Conv", {t, b.weight("w", {4, 5, 1, 1})}, "features.1");
      })),
      {"bad.onnx: node 1 ('/features/features.1/Conv', Conv)", "weights [4, 5, 1, 1]", "do not take the input"});
  OnnxBuilder b;
  std::string t = b.node("Flatten", {b.input("x", {2, 3, 4, 4})}, "");
  b.output(b.node("Gemm", {t, b.weight("fc.weight", {2, 40})}, "fc", {{"transB", std::int64_t{1}}}));
  expectContains(importError(b.bytes()), {"('/fc/Gemm', Gemm)", "weights [2, 40] (transposed) do not take"});
  expectContains(
      importError(withMiddle([](OnnxBuilder& b, const std::string& t) {
        const std::string other = b.node("MaxPool", {t}, "p", {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
        return b.node("Add", {t, other}, "features.1");
      })),
      {"('/features/features.1/Add', Add)", "adds [2, 4, 4, 4] and [2, 4, 2, 2]"});
  expectContains(importError(withMiddle([](OnnxBuilder& b, const std::string& t) {
                   return b.node("Reshape", {t, b.constantInts({2, 4, 16})}, "r");
                 })),
                 {"('/r/Reshape', Reshape)", "the only reshapes that chain are a flatten"});
}

// A middle node for withMiddle and a part of the error it must give.
struct Case {
  std::function<std::string(OnnxBuilder&, const std::string&)> middle;
  const char* message;
};

TEST(OnnxImportErrors, AttributesALayerCannotTake) {
  const Case cases[] = {
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("MaxPool", {t}, "c", {{"kernel_shape", Ints{3, 3}}, {"ceil_mode", std::int64_t{2}}});
       },
       "ceil_mode 2 is not 0 or 1"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node(
             "AveragePool", {t}, "c",
             {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", std::int64_t{-1}}});
       },
       "count_include_pad -1 is not 0 or 1"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("MaxPool", {t}, "c", {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{2, 2, 2, 2}}});
       },
       "padding 2 is more than half of kernel 3 (PyTorch's rule for pools)"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Conv", {t, b.weight("w", {4, 4, 3, 3})}, "c", {{"pads", Ints{0, 0, 2, 2}}});
       },
       "pads [0, 0, 2, 2] differ between the start and the end of an axis"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("MaxPool", {t}, "c", {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 0, 1, 0}}});
       },
       "pads [1, 0, 1, 0] are not the same on every side"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Conv", {t, b.weight("w", {4, 4, 1, 1})}, "c", {{"dilations", Ints{2, 2}}});
       },
       "dilation [2, 2]: conv2d layers are not dilated"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("MaxPool", {t}, "c", {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 2}}});
       },
       "strides [1, 2] differs between height and width"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Conv", {t, b.weight("w", {4, 4, 1, 1})}, "c", {{"dilations", Ints{1, 2}}});
       },
       "dilation [1, 2]: conv2d layers are not dilated"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Clip", {t, b.constantFloat(0.0f), b.constantFloat(3.0f)}, "c");
       },
       "clips to [0, 3]"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Concat", {t, t}, "c", {{"axis", std::int64_t{2}}});
       },
       "concatenates along axis 2"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Relu", {b.node("Pad", {t, b.constantInts({0, 0, 1, 1, 0, 0, 1, 1})}, "p")}, "c");
       },
       "reads the output of a non-zero Pad"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("AveragePool", {t}, "c", {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
       },
       "count_include_pad = 0"},
  };
  for (const Case& c : cases)
    expectContains(importError(withMiddle(c.middle)), {"bad.onnx: node ", "('/c/", c.message});
}

// Hostile values are errors that name the node, never a crash or a wrapped-around shape.
TEST(OnnxImportErrors, HostileValues) {
  const Case hostile[] = {
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Conv", {t, b.weight("w", {4, 4, 1, 1})}, "c", {{"strides", Ints{0, 0}}});
       },
       "strides [0, 0] is not between 1 and 2147483647"},
      {[](OnnxBuilder& b, const std::string& t) {
         const std::int64_t p = std::int64_t{1} << 40;
         return b.node("Conv", {t, b.weight("w", {4, 4, 1, 1})}, "c", {{"pads", Ints{p, p, p, p}}});
       },
       "are out of range"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Conv", {t, b.weight("w", {4, std::int64_t{1} << 30, 1, 1})}, "c", {{"group", std::int64_t{4}}});
       },
       "do not take the input"},
      {[](OnnxBuilder& b, const std::string& t) {
         return b.node("Reshape", {t, b.constantFloat(std::nanf(""))}, "c");
       },
       "its input 1 ('/Constant_2_output_0') is FLOAT; Reshape takes INT64 there"},
      {[](OnnxBuilder& b, const std::string& t) {
         const std::string shape = b.node("Shape", {t}, "");
         const std::string n = b.node("Gather", {shape, b.constantInts({7}, true)}, "");
         return b.node("Reshape",
                       {t, b.node("Concat", {b.node("Unsqueeze", {n, b.constantInts({0})}, ""), b.constantInts({-1})},
                                  "", {{"axis", std::int64_t{0}}})},
                       "c");
       },
       "Gather index 7 is out of range"},
      {[](OnnxBuilder& b, const std::string& t) {
         b.graph()->add_node()->set_op_type("Relu");  // no input, no output
         return t;
       },
       "has 0 inputs; Relu (opset 13) takes 1"},
  };
  for (const Case& c : hostile) expectContains(importError(withMiddle(c.middle)), {"bad.onnx: node ", c.message});
}

TEST(OnnxImportErrors, InputsTheChainCannotTake) {
  OnnxBuilder b;
  b.output(b.node("Relu", {b.input("x", {2, 3}, "batch", onnx::TensorProto::DOUBLE)}, "a"));
  expectContains(importError(b.bytes()), {"its input 0 ('x') is DOUBLE; Relu takes FLOAT, FLOAT16 or BFLOAT16 there"});
}

}  // namespace
}  // namespace remat
