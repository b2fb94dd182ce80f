#pragma once
// The composite layers as small graphs of inner ops: the residual blocks (basic_block, bottleneck,
// inverted_residual), exactly torchvision's structure, and `block`, whose inner ops the layer spec
// lists (an imported model's multi-branch pieces), with the byte layout that makes a block's
// chain-level numbers (a, e, wf, wb) exact. The executors run a block from this graph; see
// docs/layers.md ("Composite blocks") for the protocol.
//
// Forward of a block (F and R; RE is the same with a transient x(l)):
//   the executor allocates x(l) (a bytes), E (e bytes, keep mode only) and ONE workspace of
//   fwdWorkspaceBytes; it runs ops[0..] in order, writing each op's output tensor
//     - tensor 0 is x(l-1) (the chain's buffer), the last tensor is x(l) (the chain's buffer);
//     - an inner tensor goes to workspace + arenaOffset, except in keep mode when it is saved:
//       then it goes to E + extrasOffset;
//     - a batch norm in keep mode writes its saved statistics (float32, C values each, mean
//       first, then the backend's second: inverse std on the GPU, variance on the CPU) to
//       E + statsOffset; in discard mode it keeps them nowhere the model counts (the inner op's
//       scratch after the arena on the CPU, NULL result pointers for cuDNN).
// Backward of a block (B, keep-mode E present): the executor allocates d(l-1) and ONE workspace
//   of bwdWorkspaceBytes and runs the ops in REVERSE order (ops.size()-1 down to 0). Op i reads
//   d(output) (d(l) when the output is the last tensor, else workspace + gradOffset), its input
//   from x(l-1) or E when readsInput, its output from x(l) or E when readsOutput, its stats from
//   E when statsBytes > 0, and writes d(inputs[j]) (d(l-1) for tensor 0, else workspace +
//   gradOffset), overwriting when gradAccumulate[j] is false and adding when it is true. A view
//   (a channel slice, BlockTensor::viewOf) is never written: its values are its owner's channels,
//   read with the owner's row stride, or from a gathered copy (BlockOp::gatherOffset). Add's
//   backward copies (or adds) d(output) into both inputs' gradients; Concat's copies (or adds) each
//   input's channel slice of d(output) into that input's gradient. Add, Sub, Mul and Div take
//   NumPy broadcasting over tensors of one rank; each operand's gradient is summed over the axes
//   it was broadcast along. Add's d(a) and d(b) are d(y); Sub's d(y) and -d(y), reading nothing;
//   Mul (y = a * b) reads both operands: d(a) is d(y) * b, d(b) likewise; Div (y = a / b) reads
//   both: d(a) is d(y) / b, d(b) is -d(y) * (a / b) / b (PyTorch's div_tensor_other_backward). Global average pooling
//   reads nothing but shapes (its [N, C, 1, 1] output is what broadcasts inside a block). A max pool reads its input
//   and keeps its int64 argmax indices where a batch norm keeps its statistics (E + statsOffset, keep mode; discard
//   mode computes none); an average pool reads its input. A dropout keeps its one-byte bool mask there too (keep mode;
//   discard mode draws it and keeps none) and its backward reads only the mask. A `block` on an [N, F] or [N, S, F]
//   input holds element-wise ops only (activations, dropout, add, sub, mul, div), every tensor of the input's shape. An
//   inner conv2d may have a bias (its parameters: the weights, then the bias).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat {

// The chain-file spelling of an inner op kind ("conv2d", "batchnorm", "relu", "relu6", "add",
// "concat") and back; the parse error lists them.
std::string_view blockOpKindName(BlockOpKind kind);
Result<BlockOpKind> parseBlockOpKind(std::string_view name);
// add, sub, mul and div: two operands of one rank, NumPy broadcasting (an axis equal in both, or 1
// in one of them), the output of the broadcast shape.
bool isBinaryBlockOp(BlockOpKind kind);

inline constexpr std::uint64_t kBlockNoOffset = std::numeric_limits<std::uint64_t>::max();
inline constexpr std::size_t kBlockNoOp = std::numeric_limits<std::size_t>::max();
// Tensors and gradients start at multiples of this inside the workspaces and E (cudaMalloc's
// alignment); each takes a slot of its bytes rounded up to it. Batch-norm statistics in E start
// at multiples of kBlockStatsAlignBytes.
inline constexpr std::uint64_t kBlockTensorAlignBytes = 256;
inline constexpr std::uint64_t kBlockStatsAlignBytes = 16;

struct BlockTensor {
  std::string name;  // "input" for x(l-1), else the name of the op that writes it
  Shape shape;
  std::uint64_t bytes = 0;
  DType dtype = DType::Float32;                // the graph's, except where a mixed precision promotes (BlockAutocast)
  std::size_t producer = kBlockNoOp;           // op index that writes it; kBlockNoOp for tensor 0
  std::size_t lastForwardReader = kBlockNoOp;  // last op index reading it; kBlockNoOp for the output
  bool saved = false;                          // some inner backward reads it (inner tensors only)
  // Inner tensors only (kBlockNoOffset for tensor 0 and the output):
  std::uint64_t arenaOffset = kBlockNoOffset;   // forward workspace (discard mode; keep mode unless saved)
  std::uint64_t extrasOffset = kBlockNoOffset;  // in E, keep mode, saved tensors only
  std::uint64_t gradOffset = kBlockNoOffset;    // d(tensor) in the backward workspace
  // A channel slice that is not the block's output is a VIEW, as PyTorch's chunk: it owns no bytes
  // (no arena slot, never in E itself) and aliases channels [viewChannelBegin, + its channels) of
  // tensor viewOf, the tensor that owns the buffer (a view of a view resolves to it). Whatever keeps
  // the view keeps viewOf: a backward that reads the view saves viewOf (x(l-1): the block's in flag),
  // and viewOf's buffer lives until the view's last reader. d(view) is a tensor of its own (gradOffset).
  std::size_t viewOf = kBlockNoOp;
  std::int64_t viewChannelBegin = 0;
  bool isView() const { return viewOf != kBlockNoOp; }
};

struct BlockOp {
  BlockOpKind kind = BlockOpKind::Add;
  // The op as a primitive layer (kind conv2d, batchnorm, relu or relu6 with its fields; for Add
  // and Concat kind is Abstract). name is torchvision's module path, e.g. "layer1.0.conv1",
  // "layer1.0.downsample.0", "features.3.conv.1.0" ("<block>.add" for the residual add; ResNet
  // reuses one "relu" module, so that name repeats).
  LayerSpec layer;
  std::vector<std::size_t> inputs;             // tensor ids; Add has two (main path first, then the skip);
                                               // Concat one or more, in channel order
  std::size_t output = 0;                      // tensor id
  std::vector<bool> gradAccumulate;            // per input: the backward adds into d(input) instead of writing it
  bool readsInput = false;                     // its backward reads inputs[0] (conv2d, batchnorm, relu6)
  bool readsOutput = false;                    // its backward reads its output (relu)
  bool readsSecondInput = false;               // its backward reads inputs[1] too (mul: each operand's
                                               // gradient is d(output) times the other operand)
  std::uint64_t statsBytes = 0;                // batch norm: 2 * C * 4 (mean, second statistic; float32);
                                               // max pool: its argmax indices, 8 bytes (int64) per output element
  std::uint64_t statsOffset = kBlockNoOffset;  // in E, keep mode
  std::uint64_t paramCount = 0;
  std::vector<std::uint64_t> paramTensors;  // ChainLayer::paramTensors of the op
  double fwdCost = 0.0;                     // GFLOP
  // Per input: when it is a view and the op needs it contiguous (every kind but concat, slice and
  // channel_shuffle, which read rows with a stride), the executor first gathers it into a copy of
  // its own, as PyTorch's convolution calls .contiguous(): at this offset of the forward workspace
  // during the op's forward, and, when the op's backward reads that input, at gatherGradOffset of
  // the backward workspace during its backward. kBlockNoOffset otherwise.
  std::vector<std::uint64_t> gatherOffset;
  std::vector<std::uint64_t> gatherGradOffset;
};

struct BlockGraph {
  LayerKind kind = LayerKind::BasicBlock;
  std::string name;
  DType dtype = DType::Float32;
  std::vector<BlockTensor> tensors;  // [0] = x(l-1), back() = x(l)
  std::vector<BlockOp> ops;          // forward order

  std::uint64_t outBytes = 0;                // a
  bool needsInput = false;                   // in: some inner backward reads x(l-1)
  bool needsOutput = false;                  // out: the last op's backward reads x(l)
  std::uint64_t extraBytes = 0;              // e: size of E
  std::uint64_t fwdWorkspaceBytes = 0;       // wf: forward arena
  std::uint64_t bwdWorkspaceBytes = 0;       // wb: gradient arena
  std::uint64_t fwdLiveLowerBoundBytes = 0;  // max over ops of the live inner slots (tightness)
  std::uint64_t bwdLiveLowerBoundBytes = 0;
  std::uint64_t paramCount = 0;
  double fwdCost = 0.0;  // GFLOP, sum of the inner ops

  std::size_t outputTensor() const { return tensors.size() - 1; }
  bool isInner(std::size_t tensor) const { return tensor != 0 && tensor != outputTensor(); }
  // The tensor whose buffer holds t's values (t itself unless t is a view) and the channel count
  // of that buffer's rows (channels-last: a view's row stride).
  std::size_t owner(std::size_t tensor) const { return tensors[tensor].isView() ? tensors[tensor].viewOf : tensor; }
  std::int64_t rowChannels(std::size_t tensor) const { return tensors[owner(tensor)].shape[1]; }
  // d(t) is alive from the backward of t's last reader to the backward of its producer, i.e.
  // over the same op indices [producer, lastForwardReader] as t itself in the forward.
};

// The inner graph of a composite layer (spec.kind basic_block, bottleneck, inverted_residual or
// block) on an NCHW input, with all offsets laid out. Errors name the field or the inner op (a
// block's: its index and name, and what is wrong: an input that is not written before it, a
// tensor nobody reads, shapes that do not add or concatenate).
Result<BlockGraph> buildBlockGraph(const LayerSpec& spec, const Shape& input, DType dtype);

// A half block under a mixed precision (docs/memory-model.md 11.7): the graph laid out for `dtype`
// (half) tensors, except where PyTorch's type promotion widens. The block's input x(l-1) has dtype
// `input`; its float32 parameters make layer_scale's product float32 (bfloat16 * float32 [C, 1, 1]
// promotes), an add, sub, mul or div with a float32 operand writes float32, and the other ops that
// are on none of autocast's lists (batch norm, layer norm, activations, pools) run in their input's
// dtype. Convolutions write half (a convolution reading a float32 x(l-1) reads autocast's cast copy,
// which the chain's rule 3 counts, not the graph).
struct BlockAutocast {
  DType input = DType::Float32;
};
Result<BlockGraph> buildBlockGraph(const LayerSpec& spec, const Shape& input, DType dtype,
                                   const BlockAutocast& autocast);

}  // namespace remat
