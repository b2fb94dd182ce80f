// Issues 22 and 23, opsets 18 to 20 (PyTorch 2's exporters): torch 1.13's opset-17 exports rewritten
// by scripts/onnx-upgrade-opset.py (tests/data/onnx/opset18, manifest.json) import through
// `remat import` and `remat compare` exactly as their sources do (the chain file field for field,
// the parameter count, every planner's numbers); a ReduceMean with its axes as an input (opset 18)
// is built here from the upgraded ResNet-18; and the new forms written wrong are refused at the node
// with exit 2: axes not constant, out of range or still an attribute, a Split's num_outputs against
// its outputs, a Gelu's approximate.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli_runner.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;
using Args = std::vector<std::string>;

const std::string kData = std::string(REMAT_TEST_DATA_DIR) + "/onnx/";
const std::string kFolder = kData + "opset18/";

class OnnxOpset18 : public testing::CliTest {
 protected:
  // `remat import` of `model`: the chain file without its name (the file's stem) and the count of
  // parameters the summary gives.
  std::pair<json, std::int64_t> imported(const std::string& model, const Args& sizes) const {
    Args args = {"import", model, "--output", path("chain.json")};
    args.insert(args.end(), sizes.begin(), sizes.end());
    const auto result = runRemat(args);
    EXPECT_EQ(result.exitCode, 0) << model << ": " << result.err;
    const std::string summary = result.out;  // with --output, the summary goes to stdout
    std::smatch match;
    const bool counted = std::regex_search(summary, match, std::regex("(\\d+) parameters"));
    EXPECT_TRUE(counted) << summary << result.err;
    std::ifstream in(path("chain.json"));
    json chain = result.exitCode == 0 ? json::parse(in) : json::object();
    chain.erase("name");
    return {chain, counted ? std::stoll(match[1]) : -1};
  }

  // Every planner's plan of `remat compare --json`, without the planning time and the chain's name.
  static json plans(const std::string& model, const Args& sizes) {
    Args args = {"compare", model, "--json", "--optimizer", "none", "--grads", "in-place"};
    args.insert(args.end(), sizes.begin(), sizes.end());
    const auto result = runRemat(args);
    EXPECT_EQ(result.exitCode, 0) << model << ": " << result.err;
    if (result.exitCode != 0) return json();
    json out = json::parse(result.out).at("plans");
    for (auto& plan : out) plan.erase("plan_seconds");
    return out;
  }

  void expectSame(const std::string& upgraded, const std::string& source, const Args& sizes) const {
    SCOPED_TRACE(upgraded);
    const auto [chain, params] = imported(upgraded, sizes);
    const auto [sourceChain, sourceParams] = imported(source, sizes);
    EXPECT_FALSE(chain.value("layers", json::array()).empty());
    EXPECT_EQ(chain, sourceChain);
    EXPECT_EQ(params, sourceParams);
    EXPECT_EQ(plans(upgraded, sizes), plans(source, sizes));
  }

  // `model` edited by `edit`, written to the folder; its path.
  std::string edited(const std::string& model, const std::string& name,
                     const std::function<void(onnx::ModelProto&)>& edit) const {
    std::ifstream in(model, std::ios::binary);
    onnx::ModelProto proto;
    EXPECT_TRUE(proto.ParseFromIstream(&in)) << model;
    edit(proto);
    std::ofstream out(path(name), std::ios::binary);
    proto.SerializeToOstream(&out);
    return path(name);
  }

  // `remat import` refuses `model` with exit 2, at a node, with `part` in the message.
  static void expectRefused(const std::string& model, const std::string& part, const Args& sizes = {"--batch", "2"}) {
    Args args = {"import", model};
    args.insert(args.end(), sizes.begin(), sizes.end());
    const auto result = runRemat(args);
    EXPECT_EQ(result.exitCode, 2) << result.err;
    EXPECT_TRUE(result.out.empty());
    EXPECT_NE(result.err.find(": node "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(part), std::string::npos) << "'" << part << "' in: " << result.err;
  }
};

const Args kBatch = {"--batch", "2"};
const Args kTokens = {"--batch", "2", "--dim", "sequence=16"};

onnx::NodeProto* nodeOf(onnx::ModelProto& m, const std::string& opType) {
  for (auto& node : *m.mutable_graph()->mutable_node())
    if (node.op_type() == opType) return &node;
  ADD_FAILURE() << "no " << opType;
  static onnx::NodeProto none;
  return &none;
}

void setAttribute(onnx::NodeProto& node, const std::string& name, const std::function<void(onnx::AttributeProto&)>& f) {
  for (auto& a : *node.mutable_attribute())
    if (a.name() == name) return f(a);
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  f(*a);
}

onnx::TensorProto int64Tensor(const std::string& name, const std::vector<std::int64_t>& values) {
  onnx::TensorProto tensor;
  tensor.set_name(name);
  tensor.set_data_type(onnx::TensorProto::INT64);
  tensor.add_dims(static_cast<std::int64_t>(values.size()));
  for (std::int64_t v : values) tensor.add_int64_data(v);
  return tensor;
}

enum class AxesFrom { Initializer, ConstantNode, GraphInput };

// ResNet-18's GlobalAveragePool as the ReduceMean over H and W (dims kept) that opset 18 writes,
// its axes the int64 input 1 from an initializer, a Constant node before it or a graph input.
void reduceMeanForPool(onnx::ModelProto& m, const std::vector<std::int64_t>& axes, AxesFrom from) {
  const onnx::TensorProto tensor = int64Tensor("pool_axes", axes);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> rebuilt;
  for (onnx::NodeProto& node : *m.mutable_graph()->mutable_node()) {
    if (node.op_type() == "GlobalAveragePool") {
      if (from == AxesFrom::ConstantNode) {
        onnx::NodeProto* constant = rebuilt.Add();
        constant->set_op_type("Constant");
        constant->set_name("/avgpool/Constant");
        constant->add_output("pool_axes");
        setAttribute(*constant, "value", [&](onnx::AttributeProto& a) {
          a.set_type(onnx::AttributeProto::TENSOR);
          *a.mutable_t() = tensor;
        });
      }
      node.set_op_type("ReduceMean");
      node.add_input("pool_axes");
    }
    *rebuilt.Add() = node;
  }
  m.mutable_graph()->mutable_node()->Swap(&rebuilt);
  if (from == AxesFrom::Initializer) *m.mutable_graph()->add_initializer() = tensor;
  if (from == AxesFrom::GraphInput) {
    onnx::ValueInfoProto* input = m.mutable_graph()->add_input();
    input->set_name("pool_axes");
    auto* type = input->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::INT64);
    type->mutable_shape()->add_dim()->set_dim_value(static_cast<std::int64_t>(axes.size()));
  }
}

const std::string kResnet18 = kFolder + "resnet18_train_op18_dynamic.onnx";
const std::string kResnet17 = kData + "resnet18_train_op17_dynamic.onnx";

TEST_F(OnnxOpset18, UpgradedExportsImportAsTheirOpset17Sources) {
  std::ifstream in(kFolder + "manifest.json");
  const json manifest = json::parse(in);
  ASSERT_EQ(manifest.at("models").size(), 9u);
  for (const json& m : manifest.at("models")) {
    const std::string file = m.at("file");
    const Args sizes = file.rfind("gpt", 0) == 0 ? kTokens : kBatch;
    Args args = {"import", kFolder + file, "--output", path("x.json")};
    args.insert(args.end(), sizes.begin(), sizes.end());
    const auto result = runRemat(args);
    EXPECT_NE(result.out.find(": opset " + std::to_string(m.at("opset").get<int>()) + " "), std::string::npos)
        << result.out;
    expectSame(kFolder + file, kData + m.at("source").get<std::string>(), sizes);
  }
}

TEST_F(OnnxOpset18, TheNewFormsAreWhereTheScriptPutThem) {
  std::ifstream in(kFolder + "manifest.json");
  for (const json& m : json::parse(in).at("models")) {
    int gelus = 0, counted = 0, opset = 0;
    edited(kFolder + m.at("file").get<std::string>(), "probe.onnx", [&](onnx::ModelProto& p) {
      for (const auto& node : p.graph().node()) {
        gelus += node.op_type() == "Gelu";
        for (const auto& a : node.attribute()) counted += node.op_type() == "Split" && a.name() == "num_outputs";
      }
      opset = static_cast<int>(p.opset_import(0).version());
    });
    EXPECT_EQ(opset, m.at("opset").get<int>());
    EXPECT_EQ(gelus, m.value("gelu_nodes", 0)) << m.at("file");
    EXPECT_EQ(counted, m.value("split_num_outputs", 0)) << m.at("file");
  }
}

TEST_F(OnnxOpset18, ReduceMeanWithAxesInputIsTheGlobalPool) {
  for (const AxesFrom from : {AxesFrom::Initializer, AxesFrom::ConstantNode}) {
    for (const std::vector<std::int64_t>& axes : {std::vector<std::int64_t>{2, 3}, {-1, -2}}) {
      const std::string model =
          edited(kResnet18, "reducemean.onnx", [&](onnx::ModelProto& m) { reduceMeanForPool(m, axes, from); });
      expectSame(model, kResnet17, kBatch);
    }
  }
}

TEST_F(OnnxOpset18, ReduceMeanAxesWrittenWrongAreRefusedAtTheNode) {
  expectRefused(edited(kResnet18, "input.onnx",
                       [](onnx::ModelProto& m) {
                         reduceMeanForPool(m, {2, 3}, AxesFrom::GraphInput);
                       }),
                "its axes (input 1, 'pool_axes') are not constant");
  expectRefused(edited(kResnet18, "range.onnx",
                       [](onnx::ModelProto& m) {
                         reduceMeanForPool(m, {2, 7}, AxesFrom::Initializer);
                       }),
                "reduces axis 7, out of range for its rank-4 input");
  expectRefused(edited(kResnet18, "attribute.onnx",
                       [](onnx::ModelProto& m) {
                         reduceMeanForPool(m, {2, 3}, AxesFrom::Initializer);
                         setAttribute(*nodeOf(m, "ReduceMean"), "axes", [](onnx::AttributeProto& a) {
                           a.set_type(onnx::AttributeProto::INTS);
                           a.add_ints(2);
                           a.add_ints(3);
                         });
                       }),
                "has an axes attribute; from opset 18 on ReduceMean's axes are its input 1");
  expectRefused(edited(kResnet18, "noop.onnx",
                       [](onnx::ModelProto& m) {
                         nodeOf(m, "GlobalAveragePool")->set_op_type("ReduceMean");
                         setAttribute(*nodeOf(m, "ReduceMean"), "noop_with_empty_axes", [](onnx::AttributeProto& a) {
                           a.set_type(onnx::AttributeProto::INT);
                           a.set_i(1);
                         });
                       }),
                "has no axes and noop_with_empty_axes = 1");
}

TEST_F(OnnxOpset18, SplitNumOutputsMustMatchItsOutputs) {
  auto numOutputs = [](std::int64_t count) {
    return [count](onnx::AttributeProto& a) {
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(count);
    };
  };
  for (const std::int64_t count : {2, 4, 0, -3}) {
    expectRefused(
        edited(kFolder + "gpt_small_op18.onnx", "split.onnx",
               [&](onnx::ModelProto& m) { setAttribute(*nodeOf(m, "Split"), "num_outputs", numOutputs(count)); }),
        "num_outputs is " + std::to_string(count) + " but the node has 3 outputs", kTokens);
  }
  expectRefused(edited(kFolder + "gpt_small_op19_split_input.onnx", "both.onnx",
                       [&](onnx::ModelProto& m) { setAttribute(*nodeOf(m, "Split"), "num_outputs", numOutputs(3)); }),
                "has both the split input and num_outputs", kTokens);
  expectRefused(edited(kFolder + "gpt_small_op18.onnx", "neither.onnx",
                       [](onnx::ModelProto& m) {
                         onnx::NodeProto* split = nodeOf(m, "Split");
                         split->clear_attribute();
                         setAttribute(*split, "axis", [](onnx::AttributeProto& a) {
                           a.set_type(onnx::AttributeProto::INT);
                           a.set_i(2);
                         });
                       }),
                "has neither the split input nor num_outputs", kTokens);
}

TEST_F(OnnxOpset18, GeluApproximateOtherThanNoneIsRefused) {
  auto approximate = [](const std::string& value) {
    return [value](onnx::AttributeProto& a) {
      a.set_type(onnx::AttributeProto::STRING);
      a.set_s(value);
    };
  };
  for (const std::string value : {"fancy", "tanh", ""}) {
    SCOPED_TRACE(value);
    expectRefused(
        edited(kFolder + "activations_train_op20_dynamic.onnx", "gelu.onnx",
               [&](onnx::ModelProto& m) { setAttribute(*nodeOf(m, "Gelu"), "approximate", approximate(value)); }),
        "has approximate '" + value + "'; Gelu is read in its exact (erf) form");
  }
  // A transformer's MLP: ONNX's two forms are GELU's kinds; any other is refused at the node.
  const std::string gpt = edited(kFolder + "gpt_small_op20.onnx", "gpt_gelu.onnx", [&](onnx::ModelProto& m) {
    onnx::NodeProto* tanh = nodeOf(m, "Tanh");
    tanh->set_op_type("Gelu");
    setAttribute(*tanh, "approximate", approximate("sigmoid"));
  });
  expectRefused(gpt, "Gelu's approximate is 'sigmoid'; ONNX defines 'none' and 'tanh'", kTokens);
}

// Found by the campaign on the opset-18 GPT (and as old as the transformer path): a LayerNorm from
// another axis than the last, which ONNX 1.12's inference does not refuse, is refused at the node.
TEST_F(OnnxOpset18, TransformerLayerNormOverAnotherAxisIsRefused) {
  for (const std::string file : {"gpt_small_op18.onnx", "gpt_small_op20.onnx"}) {
    const std::string model = edited(kFolder + file, "ln.onnx", [](onnx::ModelProto& m) {
      setAttribute(*nodeOf(m, "LayerNormalization"), "axis", [](onnx::AttributeProto& a) {
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(-2);
      });
    });
    expectRefused(model, "its axis is -2 of 3 (the input's rank)", kTokens);
  }
  const std::string last = edited(kFolder + "gpt_small_op18.onnx", "ln2.onnx", [](onnx::ModelProto& m) {
    setAttribute(*nodeOf(m, "LayerNormalization"), "axis", [](onnx::AttributeProto& a) {
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(2);  // the last axis of [N, S, d], counted from the front
    });
  });
  expectSame(last, kData + "transformer/gpt_small_op17.onnx", kTokens);
}

}  // namespace
}  // namespace remat
