#pragma once
// Chains of issue 22's blocks for the GPU tests (gpu_blocks_host_test.cpp without a device,
// cuda_elementwise_blocks_test.cpp on one): element-wise blocks on an MLP's [N, F] and a sequence's
// [N, S, F] (the activations, add, mul, sub, div and dropout), and NCHW blocks with dropout, sub,
// div and a broadcasting add after a global average pool, as tests/exec's CPU runs hold them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "remat/input/chain_file.hpp"

namespace remat::gpu::blocks {

using nlohmann::json;

inline json op(const std::string& name, const std::string& kind, std::vector<std::size_t> inputs) {
  return {{"name", name}, {"kind", kind}, {"inputs", inputs}};
}

inline json dropoutOp(const std::string& name, double p, std::size_t input) {
  json o = op(name, "dropout", {input});
  o["p"] = p;
  return o;
}

inline json block(const std::string& name, json ops) {
  return {{"name", name}, {"kind", "block"}, {"ops", std::move(ops)}};
}

inline json linear(const std::string& name, std::int64_t out) {
  return {{"name", name}, {"kind", "linear"}, {"out_features", out}};
}

// x * Sigmoid(Tanh(x)).
inline json gateBlock(const std::string& name) {
  return block(name, {op("tanh", "tanh", {0}), op("sigmoid", "sigmoid", {1}), op("mul", "mul", {0, 2})});
}

// Dropout(act(a)) + a: torchvision's branch with dropout, p 0.3.
inline json dropoutBranch(const std::string& name, const std::string& activation) {
  return block(name, {op("act", activation, {0}), dropoutOp("drop", 0.3, 1), op("add", "add", {2, 0})});
}

// Dropout(x / Sigmoid(x)) - Sigmoid(x): div reads both operands, sub none.
inline json arithBranch(const std::string& name) {
  return block(name,
               {op("s", "sigmoid", {0}), op("q", "div", {0, 1}), dropoutOp("drop", 0.2, 2), op("y", "sub", {3, 1})});
}

// (x - Tanh(x)) / Tanh(x).
inline json arithGate(const std::string& name) {
  return block(name, {op("t", "tanh", {0}), op("d", "sub", {0, 1}), op("y", "div", {2, 1})});
}

// NCHW with the pooled mean m [N, C, 1, 1] broadcast on either side of each op.
inline json meanAdd() {
  return block("add", {op("mean", "global_avgpool", {0}), op("a", "add", {0, 1}), op("y", "add", {1, 2})});
}
inline json meanSub() {
  return block("sub", {op("mean", "global_avgpool", {0}), op("d", "sub", {0, 1}), op("y", "sub", {1, 2})});
}
inline json meanDiv() {
  return block("div", {op("mean", "global_avgpool", {0}), op("s", "sigmoid", {1}), op("q", "div", {0, 2}),
                       op("t", "tanh", {3}), op("g", "sigmoid", {4}), op("y", "div", {2, 5})});
}
// A tensor divided by itself (its gradient written, then added).
inline json selfDiv() {
  return block("self", {op("s", "sigmoid", {0}), op("q", "div", {1, 1}), op("y", "sub", {2, 0})});
}

inline Chain chainOf(const std::string& name, const Shape& input, const json& layers) {
  const json j = {{"format", "remat-chain/1"},
                  {"name", name},
                  {"input", {{"shape", input}, {"dtype", "float32"}}},
                  {"layers", layers}};
  auto chain = parseChain(j.dump(), name);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

inline Chain mlpChain() {
  return chainOf(
      "gpu-mlp-blocks", {4, 12},
      {linear("fc1", 16), gateBlock("gate"), linear("fc2", 16), dropoutBranch("branch", "hardswish"),
       arithBranch("arith"), dropoutBranch("branch2", "sigmoid"), arithGate("arith-gate"), linear("fc3", 5)});
}

// [N, S, F]: no layer before the blocks takes a rank-3 input, so the chain starts with them.
inline Chain sequenceChain() {
  return chainOf("gpu-sequence-blocks", {2, 6, 8},
                 {dropoutBranch("branch", "gelu"),
                  gateBlock("gate"),
                  arithBranch("arith"),
                  arithGate("arith-gate"),
                  dropoutBranch("branch2", "tanh"),
                  {{"name", "flat"}, {"kind", "flatten"}},
                  linear("fc", 4)});
}

// stem: a convolution first (cuDNN: device tests only), so x(l-1) and the gradients cross layers.
inline Chain nchwChain(bool stem) {
  json layers = json::array();
  if (stem) layers.push_back({{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 3}});
  for (const json& b :
       {meanSub(), meanDiv(), meanAdd(), selfDiv(), dropoutBranch("branch", "silu"), dropoutBranch("branch2", "relu")})
    layers.push_back(b);
  layers.push_back({{"name", "pool"}, {"kind", "adaptive_avgpool"}});
  layers.push_back({{"name", "flat"}, {"kind", "flatten"}});
  layers.push_back(linear("fc", 3));
  return chainOf(stem ? "gpu-nchw-arith-stem" : "gpu-nchw-arith", stem ? Shape{2, 3, 7, 7} : Shape{2, 8, 5, 5}, layers);
}

}  // namespace remat::gpu::blocks
