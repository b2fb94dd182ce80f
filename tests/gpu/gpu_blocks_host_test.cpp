// Host-only checks of issue 22's blocks on the GPU backend: they run wherever the backend builds,
// with or without a GPU, because preparing these blocks touches no device (no inner convolution).
// Element-wise blocks on an MLP's [N, F] and a sequence's [N, S, F] (the activations, add, mul,
// sub, div and dropout) and NCHW blocks with dropout, sub, div and a broadcasting add are prepared,
// no longer refused; the inner graph the GPU lays out is the model's (E byte for byte, the
// dropouts' one-byte masks, the operands div keeps), and its workspaces are exactly the block's
// arenas, the bytes the CPU backend (the reference) asks for before its oneDNN scratch. An E one byte off is refused,
// naming the layer.
#include <gtest/gtest.h>

#include "cuda_device_impl.hpp"
#include "elementwise_block_chains.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/model/block.hpp"
#include "remat/model/operators.hpp"

namespace remat::gpu {
namespace {

// Every layer prepared as CudaDevice::prepare does, without CUDA handles.
Result<std::vector<LayerState>> prepareAll(const Chain& chain) {
  std::vector<LayerState> layers;
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, {}, {}, layers));
  return layers;
}

bool hasActivation(const BlockGraph& graph) {
  for (const BlockOp& op : graph.ops) {
    const std::optional<LayerKind> kind = blockOpInfo(op.kind).layer;
    if (kind && isPointwise(*kind)) return true;
  }
  return false;
}

std::vector<Chain> chains() { return {blocks::mlpChain(), blocks::sequenceChain(), blocks::nchwChain(false)}; }

TEST(GpuBlocksHost, BlocksPrepareWithTheModelsGraphAndTheCpusWorkspaces) {
  for (const Chain& chain : chains()) {
    SCOPED_TRACE(chain.name);
    auto layers = prepareAll(chain);
    ASSERT_TRUE(layers.isOk()) << layers.status().message();
    cpu::CpuDevice cpu;
    ASSERT_TRUE(cpu.prepare(chain).isOk());
    std::size_t blockCount = 0;
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const ChainLayer& layer = chain.layers[l - 1];
      if (layer.kind != LayerKind::Block) continue;
      SCOPED_TRACE(layer.name);
      ++blockCount;
      const LayerState& s = (*layers)[l];
      ASSERT_TRUE(s.block.has_value());
      auto model = buildBlockGraph(chain.spec.layers[layer.specIndex], layer.inputShape, DType::Float32);
      ASSERT_TRUE(model.isOk()) << model.status().message();
      const BlockGraph& graph = s.block->graph;
      EXPECT_EQ(graph.extraBytes, layer.numbers.extraBytes);
      EXPECT_EQ(graph.extraBytes, model->extraBytes);
      EXPECT_EQ(graph.needsInput, layer.numbers.needsInput);
      ASSERT_EQ(graph.tensors.size(), model->tensors.size());
      for (std::size_t t = 0; t < graph.tensors.size(); ++t) {
        EXPECT_EQ(graph.tensors[t].shape, model->tensors[t].shape) << t;
        EXPECT_EQ(graph.tensors[t].extrasOffset, model->tensors[t].extrasOffset) << t;
        EXPECT_EQ(graph.tensors[t].arenaOffset, model->tensors[t].arenaOffset) << t;
        EXPECT_EQ(graph.tensors[t].gradOffset, model->tensors[t].gradOffset) << t;
      }
      for (const BlockOp& op : graph.ops) {
        if (op.kind == BlockOpKind::Dropout) {
          EXPECT_EQ(op.statsBytes, elementCount(graph.tensors[op.inputs[0]].shape)) << op.layer.name;
        }
        if (op.kind == BlockOpKind::Div) {
          EXPECT_TRUE(op.readsInput && op.readsSecondInput) << op.layer.name;
        }
        if (op.kind == BlockOpKind::Sub) {
          EXPECT_FALSE(op.readsInput || op.readsSecondInput) << op.layer.name;
        }
      }
      // No inner convolution: the workspaces are the arenas exactly; the CPU asks for the same
      // arenas plus, after them, its oneDNN activations' scratch (none for sub, div, add, dropout).
      EXPECT_EQ(s.requiredFwdWorkspace, model->fwdWorkspaceBytes);
      EXPECT_EQ(s.requiredBwdWorkspace, model->bwdWorkspaceBytes);
      auto cpuForward = cpu.requiredWorkspaceBytes(l, Pass::Forward);
      auto cpuBackward = cpu.requiredWorkspaceBytes(l, Pass::Backward);
      ASSERT_TRUE(cpuForward.isOk() && cpuBackward.isOk());
      EXPECT_GE(*cpuForward, s.requiredFwdWorkspace);
      EXPECT_GE(*cpuBackward, s.requiredBwdWorkspace);
      if (!hasActivation(graph)) {
        EXPECT_EQ(s.requiredFwdWorkspace, *cpuForward);
        EXPECT_EQ(s.requiredBwdWorkspace, *cpuBackward);
      }
    }
    EXPECT_GE(blockCount, 4u);
  }
}

// The shapes the kernels see: [N, F] and [N, S, F] blocks keep x(l-1)'s shape through every op.
TEST(GpuBlocksHost, ElementwiseBlocksKeepTheirInputsRank) {
  for (const Chain& chain : {blocks::mlpChain(), blocks::sequenceChain()}) {
    auto layers = prepareAll(chain);
    ASSERT_TRUE(layers.isOk()) << layers.status().message();
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const LayerState& s = (*layers)[l];
      if (!s.block) continue;
      for (const BlockTensor& t : s.block->graph.tensors) EXPECT_EQ(t.shape, chain.layers[l - 1].inputShape) << t.name;
      for (const BlockOpState& o : s.block->ops) EXPECT_EQ(o.count, static_cast<Index>(elementCount(s.inShape)));
    }
  }
}

TEST(GpuBlocksHost, AnEOffByOneByteIsRefusedNamingTheLayer) {
  Chain chain = blocks::mlpChain();
  chain.layers[4].numbers.extraBytes += 1;  // layer 5, the arith branch
  auto layers = prepareAll(chain);
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("layer 5 ('arith', block)"), std::string::npos) << layers.status().message();
}

}  // namespace
}  // namespace remat::gpu
