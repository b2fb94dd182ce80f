#pragma once

// What the GPU's float32 and half block runners share (cuda_layers_run.cpp, cuda_half_blocks.cpp):
// a tensor's sample geometry in the block graph, and the backward walk, the inner ops in reverse,
// each given the saved inputs its gradient reads and, under --grads static, its own fresh gradient
// (withFreshGradient). Internal to gpu.

#include <algorithm>
#include <string>

#include "cuda_device_impl.hpp"
#include "remat/exec/block_buffers.hpp"

namespace remat::gpu {

// The elements of one sample of tensor t, and between two samples of its buffer: its owner's
// C * H * W (a channel slice, a view, is read in place, sample by sample).
inline Index perSample(const BlockGraph& graph, std::size_t t) {
  const Shape& shape = graph.tensors[t].shape;
  return static_cast<Index>(elementCount(shape)) / shape[0];
}
inline Index sampleStride(const BlockGraph& graph, std::size_t t) { return perSample(graph, graph.owner(t)); }
inline Index planeOf(const BlockGraph& graph, std::size_t t) {
  const Shape& shape = graph.tensors[t].shape;
  return shape[2] * shape[3];
}

// No saved input stands in for one the op's backward reads (the float32 runner's case).
struct NoSubstitute {
  template <typename Saved>
  bool operator()(const BlockOp&, Saved (&)[2]) const {
    return false;
  }
};

// Each op gets the inputs its gradient reads (both operands of a product, each gradient reading the
// other) through gather(op, j, values, slot, out), which copies a view the kernel cannot read in
// place to its workspace slot (block.hpp's gather offsets), unless substitute(op, saved) fills them
// (the half runner's cast of x(l-1), saved in E); runOp(op, opState, tensors, buffers, saved) runs
// its backward into buffers (the fresh gradient's under --grads static).
template <typename Saved, typename Gather, typename RunOp, typename Substitute = NoSubstitute>
Status walkBlockBackward(const LayerState& s, const BackwardBuffers& p, cudaStream_t stream, Gather&& gather,
                         RunOp&& runOp, Substitute&& substitute = {}) {
  const BlockState& block = *s.block;
  const BlockGraph& graph = block.graph;
  const BlockBackwardTensors tensors(graph, p, ViewLayout::Nchw);
  const std::string where = "gpu: " + s.label;
  REMAT_RETURN_IF_ERROR(tensors.check(where));
  for (std::size_t i = graph.ops.size(); i-- > 0;) {
    const BlockOp& op = graph.ops[i];
    Saved saved[2] = {nullptr, nullptr};
    if (!substitute(op, saved)) {
      REMAT_RETURN_IF_ERROR(tensors.checkReads(op, where));
      const bool mul = op.kind == BlockOpKind::Mul;
      const bool reads[2] = {op.readsInput || mul, op.readsSecondInput || mul};
      for (std::size_t j = 0; j < std::min<std::size_t>(2, op.inputs.size()); ++j)
        if (reads[j])
          REMAT_RETURN_IF_ERROR(gather(op, j, tensors.value(op.inputs[j]), op.gatherGradOffset[j], saved[j]));
    }
    const BlockOpState& o = block.ops[i];
    REMAT_RETURN_IF_ERROR(
        withFreshGradient(stream, p, o.weightOffset, static_cast<Index>(op.paramCount), [&](const BackwardBuffers& q) {
          return runOp(op, o, tensors, q, saved);
        }).withContext(where + ", inner op '" + op.layer.name + "'"));
  }
  return Status::ok();
}

}  // namespace remat::gpu
