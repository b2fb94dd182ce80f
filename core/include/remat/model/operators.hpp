#pragma once
// One description per operator kind, in one place: its chain-file spelling, its file fields, its
// shape rule and model numbers (what it allocates, what its backward reads, its flops), whether a
// block may hold it as an inner op and the ONNX op that maps onto it. The model, the chain file,
// the importer, the executors' checks and the GUI read this table instead of switching on the
// kind; the backends keep their kernels. Adding an operator means one entry here (operators.cpp)
// plus its kernels (docs/architecture.md, "Adding an operator").
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat {

// What an operator's backward reads of the tensors around it: the rule PyTorch's autograd applies
// (tools/autograd/derivatives.yaml: `self` is the input, `result` the output).
enum class BackwardReads { Nothing, Input, Output };
std::string_view backwardReadsName(BackwardReads reads);  // "nothing", "input", "output"

enum class OperatorFamily {
  Abstract,   // the model numbers are stated, not inferred
  View,       // folded into its neighbours, never a chain layer (flatten)
  Primitive,  // one kernel with its own fields (conv2d, pools, batchnorm, linear, dropout)
  Pointwise,  // an activation y = f(x), elementwise, no fields, no parameters
  Composite,  // a graph of inner ops (block.hpp)
};

// One chain-file field of a kind: its name, type and bounds and where its value lives in LayerSpec.
// The chain file reads and writes every kind's fields from these (core/src/input/chain_file.cpp).
enum class FieldType { Integer, Flag, Real };
struct FieldInfo {
  std::string_view name;  // a string literal: name.data() is NUL-terminated
  FieldType type = FieldType::Integer;
  bool required = false;
  std::int64_t minimum = 1;                        // integers: [minimum, kMaxIntegerField]
  std::int64_t LayerSpec::*integer = nullptr;      // integers
  std::int64_t LayerSpec::*defaultFrom = nullptr;  // integers: when absent, this field's value (a pool's stride)
  bool LayerSpec::*flag = nullptr;                 // flags
  double LayerSpec::*real = nullptr;               // reals: [0, realMaximum)
  double realMaximum = 1.0;
  std::string_view atMaximum;  // reals: why the maximum itself is refused
  bool omitDefault = false;    // written only when it differs from LayerSpec's default
};

// Shape rule and model numbers: fills out.outputShape, out.paramCount and out.numbers from the
// spec and the input shape, or says which field is wrong and why (the caller adds the place).
using InferFn = Status (*)(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);

struct OperatorInfo {
  LayerKind kind = LayerKind::Abstract;
  std::string_view name;  // chain-file and inner-op spelling: "conv2d", "sigmoid", ...
  OperatorFamily family = OperatorFamily::Primitive;
  // The kind's own chain-file fields, beyond name, kind and the measured numbers of `remat profile`.
  // Two kinds' fields are not of this form and the chain file reads them itself: abstract's numbers
  // (LayerNumbers) and block's `ops`; their lists name them with no LayerSpec member.
  std::span<const FieldInfo> fields;
  InferFn infer = nullptr;  // primitive and pointwise kinds; nullptr for the others
  // Pointwise kinds: what the backward reads and the forward flops per element. The primitive kinds
  // state theirs in their shape rule (a pool's or a batch norm's depends on its fields).
  BackwardReads backwardReads = BackwardReads::Input;
  double flopPerElement = 0.0;
  std::optional<BlockOpKind> blockOp;  // its kind as a block's inner op, when a block may hold it
  std::string_view onnxOp;             // the ONNX op that maps onto it one to one ("" when none)
  std::string_view torchOp;            // what PyTorch runs (the derivatives.yaml entry), for messages and docs
};

// Every kind's description, in the order parseKind's message lists them.
std::span<const OperatorInfo> operatorTable();
const OperatorInfo& operatorInfo(LayerKind kind);
const OperatorInfo* findOperator(std::string_view name);  // by chain-file spelling; nullptr when unknown
const OperatorInfo* findOnnxOperator(std::string_view onnxOp);
bool isPointwise(LayerKind kind);

// The inner ops of a block: every kind whose description names a block op, and the ops that exist
// only inside blocks (the residual add, the channel concatenation, the broadcasting product, the
// channel slice and the channel shuffle).
struct BlockOpInfo {
  BlockOpKind kind = BlockOpKind::Relu;
  std::string_view name;
  std::optional<LayerKind> layer;  // the primitive kind it runs; none for the block-only ops
  // The op's own chain-file fields in a block's `ops` (conv2d's are conv2d's; a slice's begin and
  // out_channels; a channel shuffle's groups); read and written through these.
  std::span<const FieldInfo> fields = {};
  // What its backward reads (block-only ops; the others' follow their layer kind's rule).
  BackwardReads backwardReads = BackwardReads::Nothing;
  std::string_view torchOp = {};  // what PyTorch runs, for docs and messages
};
std::span<const BlockOpInfo> blockOpTable();
const BlockOpInfo& blockOpInfo(BlockOpKind kind);

}  // namespace remat
