#include "remat/exec/block_buffers.hpp"

#include <type_traits>

#include "remat/model/chain.hpp"

namespace remat {
namespace {

// A view's first element: its owner's plus viewOffset elements of the graph's dtype (a bfloat16
// graph's float pointers carry bfloat16: bf16-mixed's half blocks on the CPU).
template <typename F>
F* viewed(F* owner, const BlockGraph& graph, std::size_t t, ViewLayout layout) {
  using Byte = std::conditional_t<std::is_const_v<F>, const std::byte, std::byte>;
  const std::int64_t bytes = viewOffset(graph, t, layout) * static_cast<std::int64_t>(dtypeBytes(graph.dtype));
  return reinterpret_cast<F*>(reinterpret_cast<Byte*>(owner) + bytes);
}

}  // namespace

std::int64_t viewOffset(const BlockGraph& graph, std::size_t t, ViewLayout layout) {
  const BlockTensor& view = graph.tensors[t];
  if (layout == ViewLayout::ChannelsLast) return view.viewChannelBegin;
  const Shape& shape = view.shape;  // NCHW planes: the view's H and W are its owner's
  std::int64_t plane = 1;
  for (std::size_t axis = 2; axis < shape.size(); ++axis) plane *= shape[axis];
  return view.viewChannelBegin * plane;
}

Status BlockForwardTensors::check(const std::string& where) const {
  if ((graph_.fwdWorkspaceBytes > 0 && b_.workspace == nullptr) ||
      (keep_ && graph_.extraBytes > 0 && b_.extra == nullptr))
    return Status::internal(where + ": block forward without its workspace or extras");
  return Status::ok();
}

float* BlockForwardTensors::tensor(std::size_t t) const {
  const BlockTensor& view = graph_.tensors[t];
  if (view.isView()) return viewed(tensor(view.viewOf), graph_, t, layout_);
  if (t == 0) return const_cast<float*>(b_.x);
  if (t == graph_.outputTensor()) return b_.y;
  const BlockTensor& bt = graph_.tensors[t];
  if (keep_ && bt.saved) return reinterpret_cast<float*>(b_.extra + bt.extrasOffset);
  return reinterpret_cast<float*>(b_.workspace + bt.arenaOffset);
}

float* BlockForwardTensors::stats(const BlockOp& op) const {
  return keep_ ? reinterpret_cast<float*>(b_.extra + op.statsOffset) : nullptr;
}

Status BlockBackwardTensors::check(const std::string& where) const {
  if ((graph_.bwdWorkspaceBytes > 0 && b_.workspace == nullptr) || (graph_.extraBytes > 0 && b_.extra == nullptr))
    return Status::internal(where + ": block backward without its workspace or extras");
  return Status::ok();
}

Status BlockBackwardTensors::checkReads(const BlockOp& op, const std::string& where) const {
  if ((op.readsInput && value(op.inputs[0]) == nullptr) || (op.readsOutput && value(op.output) == nullptr) ||
      (op.readsSecondInput && value(op.inputs[1]) == nullptr))
    return Status::internal(where + ": inner op '" + op.layer.name + "' lacks a saved tensor");
  return Status::ok();
}

const float* BlockBackwardTensors::value(std::size_t t) const {
  const BlockTensor& view = graph_.tensors[t];
  if (view.isView()) {
    const float* owner = value(view.viewOf);
    return owner == nullptr ? nullptr : viewed(owner, graph_, t, layout_);
  }
  if (t == 0) return b_.x;
  if (t == graph_.outputTensor()) return b_.y;
  return reinterpret_cast<const float*>(b_.extra + graph_.tensors[t].extrasOffset);
}

float* BlockBackwardTensors::grad(std::size_t t) const {
  if (t == 0) return b_.dx;  // null for layer 1
  if (t == graph_.outputTensor()) return const_cast<float*>(b_.dy);
  return reinterpret_cast<float*>(b_.workspace + graph_.tensors[t].gradOffset);
}

const float* BlockBackwardTensors::stats(const BlockOp& op) const {
  return reinterpret_cast<const float*>(b_.extra + op.statsOffset);
}

}  // namespace remat
