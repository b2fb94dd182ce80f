// Lifetimes and byte layout of a block's inner tensors: the forward arena (wf), the extras E (e) and
// the gradient arena (wb). The layout is an offline interval packing, greedy by size: slots in
// decreasing size, each at the best-fitting gap among the slots it is alive with (docs/layers.md).
#include <algorithm>
#include <limits>
#include <numeric>

#include "layers_common.hpp"

namespace remat::detail {
namespace {

std::uint64_t alignUp(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

struct Slot {
  std::size_t first = 0;  // op indices during which it is alive, inclusive
  std::size_t last = 0;
  std::uint64_t bytes = 0;  // already rounded to the alignment
  std::uint64_t offset = 0;
};

bool overlapInTime(const Slot& a, const Slot& b) { return a.first <= b.last && b.first <= a.last; }

// Places every slot; returns the arena size.
std::uint64_t packSlots(std::vector<Slot>& slots) {
  std::vector<std::size_t> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (slots[a].bytes != slots[b].bytes) return slots[a].bytes > slots[b].bytes;
    return slots[a].first < slots[b].first;
  });
  std::vector<std::size_t> placed;
  std::uint64_t arenaBytes = 0;
  for (std::size_t index : order) {
    Slot& slot = slots[index];
    std::vector<const Slot*> neighbours;
    for (std::size_t other : placed)
      if (overlapInTime(slot, slots[other])) neighbours.push_back(&slots[other]);
    std::sort(neighbours.begin(), neighbours.end(), [](const Slot* a, const Slot* b) { return a->offset < b->offset; });
    std::uint64_t cursor = 0;
    std::uint64_t bestOffset = 0;
    std::uint64_t bestGap = 0;
    bool found = false;
    for (const Slot* n : neighbours) {
      if (n->offset > cursor) {
        const std::uint64_t gap = n->offset - cursor;
        if (gap >= slot.bytes && (!found || gap < bestGap)) {
          found = true;
          bestGap = gap;
          bestOffset = cursor;
        }
      }
      cursor = std::max(cursor, n->offset + n->bytes);
    }
    slot.offset = found ? bestOffset : cursor;
    arenaBytes = std::max(arenaBytes, slot.offset + slot.bytes);
    placed.push_back(index);
  }
  return arenaBytes;
}

std::uint64_t liveLowerBound(const std::vector<Slot>& slots, std::size_t opCount) {
  std::uint64_t best = 0;
  for (std::size_t op = 0; op < opCount; ++op) {
    std::uint64_t live = 0;
    for (const Slot& s : slots)
      if (s.first <= op && op <= s.last) live += s.bytes;
    best = std::max(best, live);
  }
  return best;
}

// Every offset is at most the sum of all slots, so checking that sum once rules out overflow.
Status checkSlotTotal(const BlockGraph& graph) {
  unsigned __int128 totalSlots = 0;
  for (const auto& t : graph.tensors) totalSlots += alignUp(t.bytes, kBlockTensorAlignBytes);
  for (const auto& op : graph.ops) totalSlots += alignUp(op.statsBytes, kBlockStatsAlignBytes);
  if (totalSlots > std::numeric_limits<std::uint64_t>::max() / 2)
    return Status::invalid("block '" + graph.name + "': its inner tensors overflow 64-bit bytes");
  return Status::ok();
}

// A channel slice whose output is an inner tensor is a view of its input's owner, as PyTorch's
// chunk (docs/memory-model.md section 6): it copies nothing, so it costs no flops either. The
// block's output is the chain's own buffer x(l), so a slice that writes it stays a copy.
void resolveViews(BlockGraph& graph) {
  for (BlockOp& op : graph.ops) {
    if (op.kind != BlockOpKind::Slice || !graph.isInner(op.output)) continue;
    const BlockTensor& in = graph.tensors[op.inputs[0]];
    BlockTensor& view = graph.tensors[op.output];
    view.viewOf = graph.owner(op.inputs[0]);
    view.viewChannelBegin = in.viewChannelBegin + op.layer.channelBegin;
    op.fwdCost = 0.0;
  }
}

// Whether the op reads its input j in its backward (conv2d, batchnorm, ...: the first; mul both).
bool backwardReadsInput(const BlockOp& op, std::size_t j) {
  return j == 0 ? op.readsInput : j == 1 && op.readsSecondInput;
}

// Each tensor's last forward reader, which inner tensors E saves, and the block's own flags, a, p
// and forward cost. A backward that reads a view keeps the view's owner: the whole buffer.
Status setLifetimesAndNumbers(BlockGraph& graph) {
  auto& tensors = graph.tensors;
  auto& ops = graph.ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    for (std::size_t in : ops[i].inputs) tensors[in].lastForwardReader = i;
    for (std::size_t j = 0; j < ops[i].inputs.size(); ++j) {
      if (!backwardReadsInput(ops[i], j)) continue;
      const std::size_t in = graph.owner(ops[i].inputs[j]);
      if (in == 0) graph.needsInput = true;
      if (graph.isInner(in)) tensors[in].saved = true;
    }
    if (ops[i].readsOutput && graph.isInner(ops[i].output)) tensors[ops[i].output].saved = true;
  }
  const std::size_t output = graph.outputTensor();
  if (tensors[output].producer != ops.size() - 1) return Status::internal("block output is not the last op's");
  graph.needsOutput = ops.back().readsOutput;
  graph.outBytes = tensors[output].bytes;
  graph.paramCount = 0;
  graph.fwdCost = 0.0;
  for (const auto& op : ops) {
    graph.paramCount += op.paramCount;
    graph.fwdCost += op.fwdCost;
  }
  return Status::ok();
}

// The kinds that read a view in place, row by row with its owner's stride (PyTorch's cat and the
// shuffle's view-transpose-contiguous do too); every other kind gets a contiguous copy first.
bool readsViewsInPlace(BlockOpKind kind) {
  return kind == BlockOpKind::Concat || kind == BlockOpKind::Slice || kind == BlockOpKind::ChannelShuffle;
}

// A view input's gathered copy (BlockOp::gatherOffset), alive during its op only; gathersOf(graph,
// true) lists the backward's, which exist where the op's backward reads that input.
struct Gather {
  std::size_t op = 0;
  std::size_t input = 0;
};

std::vector<Gather> gathersOf(const BlockGraph& graph, bool backward) {
  std::vector<Gather> gathers;
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const BlockOp& op = graph.ops[i];
    if (readsViewsInPlace(op.kind)) continue;
    for (std::size_t j = 0; j < op.inputs.size(); ++j)
      if (graph.tensors[op.inputs[j]].isView() && (!backward || backwardReadsInput(op, j))) gathers.push_back({i, j});
  }
  return gathers;
}

// Forward arena: inner tensor t that owns its bytes is alive over ops [producer, last reader of t
// or of a view of t] in discard mode; a view has no slot. Gradient arena: d(t) (views included: a
// gradient is a tensor of its own) is written by the backward of t's last reader and read by the
// backward of its producer: alive over [producer, lastForwardReader], laid out on its own. The
// gathered copies of views are slots alive during their op only, in the arena of their pass.
Status layoutArenas(BlockGraph& graph) {
  auto& tensors = graph.tensors;
  std::vector<std::size_t> storageLast(tensors.size(), 0);
  for (std::size_t t = 1; t < graph.outputTensor(); ++t) {
    if (tensors[t].lastForwardReader == kBlockNoOp) return Status::internal("inner tensor nobody reads");
    std::size_t& last = storageLast[graph.owner(t)];
    last = std::max(last, tensors[t].lastForwardReader);
  }
  std::vector<Slot> slots, gradSlots;
  std::vector<std::size_t> slotTensor, gradSlotTensor;
  for (std::size_t t = 1; t < graph.outputTensor(); ++t) {
    const std::uint64_t bytes = alignUp(tensors[t].bytes, kBlockTensorAlignBytes);
    if (!tensors[t].isView()) {
      slots.push_back({tensors[t].producer, storageLast[t], bytes, 0});
      slotTensor.push_back(t);
    }
    gradSlots.push_back({tensors[t].producer, tensors[t].lastForwardReader, bytes, 0});
    gradSlotTensor.push_back(t);
  }
  const std::vector<Gather> forwardGathers = gathersOf(graph, false);
  const std::vector<Gather> backwardGathers = gathersOf(graph, true);
  auto addGathers = [&](const std::vector<Gather>& gathers, std::vector<Slot>& to) {
    for (const Gather& g : gathers)
      to.push_back({g.op, g.op, alignUp(tensors[graph.ops[g.op].inputs[g.input]].bytes, kBlockTensorAlignBytes), 0});
  };
  addGathers(forwardGathers, slots);
  addGathers(backwardGathers, gradSlots);
  graph.fwdWorkspaceBytes = packSlots(slots);
  graph.fwdLiveLowerBoundBytes = liveLowerBound(slots, graph.ops.size());
  graph.bwdWorkspaceBytes = packSlots(gradSlots);
  graph.bwdLiveLowerBoundBytes = liveLowerBound(gradSlots, graph.ops.size());
  for (std::size_t s = 0; s < slotTensor.size(); ++s) tensors[slotTensor[s]].arenaOffset = slots[s].offset;
  for (std::size_t s = 0; s < gradSlotTensor.size(); ++s) tensors[gradSlotTensor[s]].gradOffset = gradSlots[s].offset;
  for (BlockOp& op : graph.ops) {
    op.gatherOffset.assign(op.inputs.size(), kBlockNoOffset);
    op.gatherGradOffset.assign(op.inputs.size(), kBlockNoOffset);
  }
  for (std::size_t g = 0; g < forwardGathers.size(); ++g)
    graph.ops[forwardGathers[g].op].gatherOffset[forwardGathers[g].input] = slots[slotTensor.size() + g].offset;
  for (std::size_t g = 0; g < backwardGathers.size(); ++g)
    graph.ops[backwardGathers[g].op].gatherGradOffset[backwardGathers[g].input] =
        gradSlots[gradSlotTensor.size() + g].offset;
  return Status::ok();
}

// E: saved tensors in tensor order, then the batch-norm statistics in op order.
void layoutExtras(BlockGraph& graph) {
  std::uint64_t cursor = 0;
  for (std::size_t t = 1; t < graph.outputTensor(); ++t) {
    if (!graph.tensors[t].saved) continue;
    cursor = alignUp(cursor, kBlockTensorAlignBytes);
    graph.tensors[t].extrasOffset = cursor;
    cursor += graph.tensors[t].bytes;
  }
  for (auto& op : graph.ops) {
    if (op.statsBytes == 0) continue;
    cursor = alignUp(cursor, kBlockStatsAlignBytes);
    op.statsOffset = cursor;
    cursor += op.statsBytes;
  }
  graph.extraBytes = cursor;
}

// Backward in reverse op order: the first op to reach d(t) writes it, later ones add into it.
void markGradientAccumulation(BlockGraph& graph) {
  std::vector<bool> reached(graph.tensors.size(), false);
  for (std::size_t i = graph.ops.size(); i-- > 0;) {
    BlockOp& op = graph.ops[i];
    op.gradAccumulate.assign(op.inputs.size(), false);
    for (std::size_t j = 0; j < op.inputs.size(); ++j) {
      op.gradAccumulate[j] = reached[op.inputs[j]];
      reached[op.inputs[j]] = true;
    }
  }
}

}  // namespace

Status layoutBlockGraph(BlockGraph& graph) {
  if (graph.tensors.size() < 2 || graph.ops.empty())
    return Status::internal("block '" + graph.name + "' has no inner ops");
  REMAT_RETURN_IF_ERROR(checkSlotTotal(graph));
  resolveViews(graph);
  REMAT_RETURN_IF_ERROR(setLifetimesAndNumbers(graph));
  REMAT_RETURN_IF_ERROR(layoutArenas(graph));
  layoutExtras(graph);
  markGradientAccumulation(graph);
  return Status::ok();
}

}  // namespace remat::detail
