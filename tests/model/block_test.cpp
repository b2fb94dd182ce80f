// Composite blocks: torchvision's inner structure, hand-computed e/wf/wb for tiny blocks, and an
// independent check that the byte layout of every zoo block is valid (no two tensors alive at the
// same time share bytes) by replaying the executor's protocol (block.hpp).
#include "remat/model/block.hpp"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "chain_helpers.hpp"
#include "remat/model/operators.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

using testing::blockSpec;

BlockGraph mustBuild(const LayerSpec& spec, const Shape& input, DType dtype = DType::Float32) {
  auto graph = buildBlockGraph(spec, input, dtype);
  EXPECT_TRUE(graph.isOk()) << graph.status().message();
  return graph.isOk() ? *graph : BlockGraph{};
}

std::vector<std::string> opNames(const BlockGraph& g) {
  std::vector<std::string> names;
  for (const auto& op : g.ops) names.push_back(op.layer.name);
  return names;
}

struct Range {
  std::uint64_t begin;
  std::uint64_t end;
  std::string what;
};

// Fails when two ranges share a byte or one leaves [0, size).
void expectDisjoint(const std::vector<Range>& ranges, std::uint64_t size, const std::string& where) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_LE(ranges[i].end, size) << where << ": " << ranges[i].what << " past the end";
    for (std::size_t j = i + 1; j < ranges.size(); ++j)
      EXPECT_TRUE(ranges[i].end <= ranges[j].begin || ranges[j].end <= ranges[i].begin)
          << where << ": " << ranges[i].what << " overlaps " << ranges[j].what;
  }
}

// Replays a block's forward (discard and keep mode) and backward following block.hpp's protocol,
// computing lifetimes and the saved set from the ops alone, and checks every layout.
void checkLayout(const BlockGraph& g, const std::string& where) {
  const std::size_t out = g.tensors.size() - 1;
  const std::size_t m = g.ops.size();
  ASSERT_GE(g.tensors.size(), 2u) << where;  // a one-op block (ShuffleNetV2's channel shuffle) has no inner tensor
  // Readers of each tensor, and which tensors a backward reads. A channel slice that does not
  // write the block's output is a view: a backward that reads it reads (keeps) the tensor that
  // owns its buffer, and that buffer lives until the view's last reader.
  std::map<std::size_t, std::size_t> lastReader;
  std::set<std::size_t> backwardReads;
  std::vector<std::size_t> ownerOf(g.tensors.size());
  for (std::size_t t = 0; t < g.tensors.size(); ++t) ownerOf[t] = t;
  std::uint64_t statsTotal = 0;
  for (std::size_t i = 0; i < m; ++i) {
    const BlockOp& op = g.ops[i];
    EXPECT_EQ(g.tensors[op.output].producer, i) << where;
    const bool view = op.kind == BlockOpKind::Slice && op.output != out;
    if (view) ownerOf[op.output] = ownerOf[op.inputs[0]];
    EXPECT_EQ(g.tensors[op.output].isView(), view) << where << " " << op.layer.name;
    if (view) {
      EXPECT_EQ(g.tensors[op.output].viewOf, ownerOf[op.inputs[0]]) << where << " " << op.layer.name;
    }
    for (std::size_t in : op.inputs) {
      if (in != 0) {
        EXPECT_LT(g.tensors[in].producer, i) << where;  // ops are in a valid forward order
      }
      lastReader[in] = i;
    }
    const bool conv = op.kind == BlockOpKind::Conv2d;
    const bool bn = op.kind == BlockOpKind::BatchNorm;
    // ConvNeXt's layer norm over the channels reads its input and keeps a mean and rstd per
    // position; its layer_scale reads its input (the other operand is a parameter).
    const bool ln = op.kind == BlockOpKind::LayerNorm;
    const bool scale = op.kind == BlockOpKind::LayerScale;
    // mul and div read both operands (derivatives.yaml mul.Tensor, div.Tensor); add and sub none
    const bool mul = op.kind == BlockOpKind::Mul || op.kind == BlockOpKind::Div;
    // Inception's pool branches: max_pool2d_with_indices keeps its input and int64 indices (E),
    // avg_pool2d its input.
    const bool maxPool = op.kind == BlockOpKind::MaxPool;
    const bool pool = maxPool || op.kind == BlockOpKind::AvgPool;
    // A pointwise activation reads what its description says (relu its output, relu6 its input as
    // PyTorch's hardtanh, ...); global average pooling reads nothing but shapes.
    const std::optional<LayerKind> layer = blockOpInfo(op.kind).layer;
    const bool pointwise = layer && isPointwise(*layer);
    const bool readsIn = pointwise && operatorInfo(*layer).backwardReads == BackwardReads::Input;
    const bool readsOut = pointwise && operatorInfo(*layer).backwardReads == BackwardReads::Output;
    EXPECT_EQ(op.readsInput, conv || bn || ln || scale || readsIn || mul || pool) << where << " " << op.layer.name;
    EXPECT_EQ(op.readsOutput, readsOut) << where << " " << op.layer.name;
    EXPECT_EQ(op.readsSecondInput, mul) << where << " " << op.layer.name;
    if (conv || bn || ln || scale || readsIn || mul || pool) backwardReads.insert(ownerOf[op.inputs[0]]);
    if (mul) backwardReads.insert(ownerOf[op.inputs[1]]);
    if (readsOut) backwardReads.insert(op.output);
    const Shape& y = g.tensors[op.output].shape;
    const std::uint64_t stats = bn        ? 2 * static_cast<std::uint64_t>(y[1]) * 4
                                : ln      ? 2 * static_cast<std::uint64_t>(y[0] * y[2] * y[3]) * 4
                                : maxPool ? elementCount(y) * kMaxPoolIndexBytes
                                          : 0u;
    EXPECT_EQ(op.statsBytes, stats) << where;
    statsTotal += op.statsBytes;
  }
  EXPECT_EQ(g.needsInput, backwardReads.count(0) > 0) << where;
  EXPECT_EQ(g.needsOutput, backwardReads.count(out) > 0) << where;

  std::map<std::size_t, std::size_t> storageLast = lastReader;
  for (std::size_t t = 1; t < out; ++t) storageLast[ownerOf[t]] = std::max(storageLast[ownerOf[t]], lastReader[t]);
  // A view read by an op other than concat, slice or shuffle is gathered into a copy of its own
  // during that op (and during its backward when the backward reads it).
  auto gathers = [&](const BlockOp& op, std::size_t j, bool backward) {
    const bool inPlace =
        op.kind == BlockOpKind::Concat || op.kind == BlockOpKind::Slice || op.kind == BlockOpKind::ChannelShuffle;
    const bool read = !backward || (j == 0 ? op.readsInput : op.readsSecondInput);
    return ownerOf[op.inputs[j]] != op.inputs[j] && !inPlace && read;
  };
  auto gatherRanges = [&](const BlockOp& op, bool backward, std::vector<Range>& live) {
    ASSERT_EQ(op.gatherOffset.size(), op.inputs.size()) << where;
    ASSERT_EQ(op.gatherGradOffset.size(), op.inputs.size()) << where;
    for (std::size_t j = 0; j < op.inputs.size(); ++j) {
      const std::uint64_t offset = backward ? op.gatherGradOffset[j] : op.gatherOffset[j];
      EXPECT_EQ(offset != kBlockNoOffset, gathers(op, j, backward)) << where << " " << op.layer.name;
      if (offset == kBlockNoOffset) continue;
      EXPECT_EQ(offset % kBlockTensorAlignBytes, 0u) << where;
      live.push_back({offset, offset + g.tensors[op.inputs[j]].bytes, op.layer.name + " gathered input"});
    }
  };
  // Forward, discard mode: inner tensors that own their bytes in the workspace, alive from their
  // producer to their last reader or their views' last reader. Keep mode uses the same offsets for
  // the unsaved ones, so it is covered.
  for (std::size_t i = 0; i < m; ++i) {
    std::vector<Range> live;
    for (std::size_t t = 1; t < out; ++t) {
      const BlockTensor& x = g.tensors[t];
      if (x.isView()) {
        EXPECT_EQ(x.arenaOffset, kBlockNoOffset) << where;
        continue;
      }
      if (x.producer <= i && i <= storageLast[t]) {
        EXPECT_EQ(x.arenaOffset % kBlockTensorAlignBytes, 0u) << where;
        live.push_back({x.arenaOffset, x.arenaOffset + x.bytes, x.name});
      }
    }
    gatherRanges(g.ops[i], false, live);
    expectDisjoint(live, g.fwdWorkspaceBytes, where + " forward op " + std::to_string(i));
  }
  // E: the saved tensors and the statistics, all at once. e is exactly their total when every
  // tensor is a multiple of the alignment (true of the zoo at batch 64).
  std::vector<Range> extras;
  std::uint64_t savedTotal = 0;
  bool aligned = true;
  for (std::size_t t = 1; t < out; ++t) {
    const BlockTensor& x = g.tensors[t];
    EXPECT_EQ(x.saved, backwardReads.count(t) > 0) << where << " " << x.name;
    if (!x.saved) {
      EXPECT_EQ(x.extrasOffset, kBlockNoOffset) << where;
      continue;
    }
    extras.push_back({x.extrasOffset, x.extrasOffset + x.bytes, x.name});
    savedTotal += x.bytes;
    aligned = aligned && x.bytes % kBlockTensorAlignBytes == 0;
  }
  for (const auto& op : g.ops) {
    if (op.statsBytes == 0) continue;
    EXPECT_EQ(op.statsOffset % kBlockStatsAlignBytes, 0u) << where;
    extras.push_back({op.statsOffset, op.statsOffset + op.statsBytes, op.layer.name + " stats"});
    aligned = aligned && op.statsBytes % kBlockStatsAlignBytes == 0;
  }
  expectDisjoint(extras, g.extraBytes, where + " E");
  if (aligned) {
    EXPECT_EQ(g.extraBytes, savedTotal + statsTotal) << where;
  }

  // Backward in reverse op order: d(t) exists from its first write to its producer's backward.
  std::set<std::size_t> liveGrads;
  std::set<std::size_t> written;
  for (std::size_t i = m; i-- > 0;) {
    const BlockOp& op = g.ops[i];
    ASSERT_EQ(op.gradAccumulate.size(), op.inputs.size()) << where;
    if (op.output != out) {
      EXPECT_TRUE(liveGrads.count(op.output)) << where << " d(" << op.layer.name << ") missing";
    }
    for (std::size_t j = 0; j < op.inputs.size(); ++j) {
      const std::size_t in = op.inputs[j];
      EXPECT_EQ(op.gradAccumulate[j], written.count(in) > 0) << where << " " << op.layer.name;
      written.insert(in);
      if (in != 0) liveGrads.insert(in);
    }
    std::vector<Range> live;
    for (std::size_t t : liveGrads) {
      const BlockTensor& x = g.tensors[t];
      EXPECT_EQ(x.gradOffset % kBlockTensorAlignBytes, 0u) << where;
      live.push_back({x.gradOffset, x.gradOffset + x.bytes, "d(" + x.name + ")"});
    }
    gatherRanges(op, true, live);
    expectDisjoint(live, g.bwdWorkspaceBytes, where + " backward op " + std::to_string(i));
    liveGrads.erase(op.output);
  }
  EXPECT_TRUE(liveGrads.empty()) << where;
  // The layout is tight: the arenas are as small as the most bytes ever alive at once.
  EXPECT_EQ(g.fwdWorkspaceBytes, g.fwdLiveLowerBoundBytes) << where;
  EXPECT_EQ(g.bwdWorkspaceBytes, g.bwdLiveLowerBoundBytes) << where;
}

TEST(BasicBlock, IdentityHandComputed) {
  // Every tensor is [2, 4, 4, 4] float32 = 512 bytes (two 256-byte slots).
  const BlockGraph g = mustBuild(blockSpec(LayerKind::BasicBlock, 4, 1), {2, 4, 4, 4});
  EXPECT_EQ(opNames(g),
            (std::vector<std::string>{"b.conv1", "b.bn1", "b.relu", "b.conv2", "b.bn2", "b.add", "b.relu"}));
  EXPECT_EQ(g.ops[5].inputs, (std::vector<std::size_t>{5, 0}));  // identity skip
  EXPECT_EQ(g.tensors.back().shape, (Shape{2, 4, 4, 4}));
  EXPECT_EQ(g.outBytes, 512u);
  // Saved: conv1's output (bn1 reads it), relu's (relu and conv2 read it), conv2's (bn2);
  // plus two batch norms' mean and inverse std: 2 * 4 * 4 bytes each.
  EXPECT_EQ(g.extraBytes, 3u * 512 + 2 * 32);
  // At most two inner tensors alive at once, forward and backward.
  EXPECT_EQ(g.fwdWorkspaceBytes, 1024u);
  EXPECT_EQ(g.bwdWorkspaceBytes, 1024u);
  EXPECT_TRUE(g.needsInput);
  EXPECT_TRUE(g.needsOutput);
  EXPECT_EQ(g.paramCount, 2u * 4 * 4 * 9 + 2 * 8);
  // conv: 2 * 128 outputs * 36 MACs each; bn 4 per element; relu and add 1.
  EXPECT_DOUBLE_EQ(g.fwdCost, (2 * 2 * 128 * 36.0 + 2 * 4 * 128 + 2 * 128 + 128) / 1e9);
  // The add's backward writes d(input) first, conv1's adds into it.
  EXPECT_EQ(g.ops[5].gradAccumulate, (std::vector<bool>{false, false}));
  EXPECT_EQ(g.ops[0].gradAccumulate, (std::vector<bool>{true}));
  checkLayout(g, "tiny identity");
}

TEST(BasicBlock, DownsampleHandComputed) {
  // [2, 4, 4, 4] -> [2, 8, 2, 2]: every inner tensor is 64 floats = 256 bytes.
  const BlockGraph g = mustBuild(blockSpec(LayerKind::BasicBlock, 8, 2), {2, 4, 4, 4});
  EXPECT_EQ(opNames(g), (std::vector<std::string>{"b.conv1", "b.bn1", "b.relu", "b.conv2", "b.bn2", "b.downsample.0",
                                                  "b.downsample.1", "b.add", "b.relu"}));
  EXPECT_EQ(g.ops[5].layer.kernel, 1);
  EXPECT_EQ(g.ops[5].layer.stride, 2);
  EXPECT_FALSE(g.ops[5].layer.bias);
  EXPECT_EQ(g.ops[0].layer.stride, 2);
  EXPECT_EQ(g.ops[3].layer.stride, 1);
  EXPECT_EQ(g.tensors.back().shape, (Shape{2, 8, 2, 2}));
  // Saved: conv1, relu, conv2, downsample.0 outputs; three batch norms of 8 channels.
  EXPECT_EQ(g.extraBytes, 4u * 256 + 3 * 64);
  // bn2's output waits for the add while downsample.0 and .1 run: three alive.
  EXPECT_EQ(g.fwdWorkspaceBytes, 768u);
  EXPECT_EQ(g.bwdWorkspaceBytes, 768u);
  EXPECT_EQ(g.paramCount, 8u * 4 * 9 + 8u * 8 * 9 + 8u * 4 + 3 * 16);
  checkLayout(g, "tiny downsample");

  // Through buildChain the chain-level numbers are the graph's.
  auto chain = testing::chainFromLayers({2, 4, 4, 4}, {blockSpec(LayerKind::BasicBlock, 8, 2)});
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const LayerNumbers& m = chain->at(1);
  EXPECT_EQ(m.outBytes, 256u);
  EXPECT_EQ(m.extraBytes, g.extraBytes);
  EXPECT_EQ(m.fwdWorkspaceBytes, 768u);
  EXPECT_EQ(m.bwdWorkspaceBytes, 768u);
  EXPECT_TRUE(m.needsInput);
  EXPECT_TRUE(m.needsOutput);
  EXPECT_EQ(m.paramBytes, g.paramCount * 4);
  EXPECT_DOUBLE_EQ(m.fwdCost, g.fwdCost);
  EXPECT_DOUBLE_EQ(m.bwdCost, 2 * g.fwdCost);
  EXPECT_EQ(chain->layers[0].outputShape, (Shape{2, 8, 2, 2}));
}

TEST(BasicBlock, Float16HalvesTensorsNotStats) {
  const BlockGraph f32 = mustBuild(blockSpec(LayerKind::BasicBlock, 64, 1), {4, 64, 8, 8});
  const BlockGraph f16 = mustBuild(blockSpec(LayerKind::BasicBlock, 64, 1), {4, 64, 8, 8}, DType::Float16);
  EXPECT_EQ(f16.outBytes * 2, f32.outBytes);
  EXPECT_EQ(f16.fwdWorkspaceBytes * 2, f32.fwdWorkspaceBytes);
  const std::uint64_t stats = 2 * (2 * 64 * 4);
  EXPECT_EQ((f16.extraBytes - stats) * 2, f32.extraBytes - stats);
  checkLayout(f16, "float16");
}

TEST(Bottleneck, TorchvisionStructure) {
  // Identity: in = out = 8, width 2.
  const BlockGraph g = mustBuild(blockSpec(LayerKind::Bottleneck, 8, 1, 2), {2, 8, 4, 4});
  EXPECT_EQ(opNames(g), (std::vector<std::string>{"b.conv1", "b.bn1", "b.relu", "b.conv2", "b.bn2", "b.relu", "b.conv3",
                                                  "b.bn3", "b.add", "b.relu"}));
  EXPECT_EQ(g.paramCount, (8u * 2 + 4) + (2u * 2 * 9 + 4) + (2u * 8 + 16));
  // Saved: conv1 and conv2 outputs, both relu outputs ([2, 2, 4, 4] = 256 bytes), conv3's output
  // (1024 bytes); stats 2*2*4, 2*2*4, 2*8*4.
  EXPECT_EQ(g.extraBytes, 4u * 256 + 1024 + 16 + 16 + 64);
  checkLayout(g, "tiny bottleneck");
  // v1.5: the stride sits on the 3x3 conv; the downsample is conv1x1(stride) + bn.
  const BlockGraph d = mustBuild(blockSpec(LayerKind::Bottleneck, 16, 2, 4), {2, 8, 4, 4});
  EXPECT_EQ(d.ops[0].layer.stride, 1);
  EXPECT_EQ(d.ops[3].layer.stride, 2);
  EXPECT_EQ(d.ops[3].layer.kernel, 3);
  EXPECT_EQ(d.ops[8].layer.name, "b.downsample.0");
  EXPECT_EQ(d.ops[8].layer.stride, 2);
  EXPECT_EQ(d.tensors.back().shape, (Shape{2, 16, 2, 2}));
  checkLayout(d, "tiny bottleneck downsample");
}

TEST(InvertedResidual, TorchvisionStructure) {
  const BlockGraph g = mustBuild(blockSpec(LayerKind::InvertedResidual, 4, 1, 0, 6), {2, 4, 4, 4});
  EXPECT_EQ(opNames(g), (std::vector<std::string>{"b.conv.0.0", "b.conv.0.1", "b.conv.0.2", "b.conv.1.0", "b.conv.1.1",
                                                  "b.conv.1.2", "b.conv.2", "b.conv.3", "b.add"}));
  EXPECT_EQ(g.ops[0].layer.outChannels, 24);
  EXPECT_EQ(g.ops[3].layer.groups, 24);  // depthwise
  EXPECT_EQ(g.ops[3].layer.padding, 1);
  EXPECT_EQ(g.ops[2].kind, BlockOpKind::Relu6);
  EXPECT_EQ(g.paramCount, (4u * 24 + 48) + (24u * 9 + 48) + (24u * 4 + 8));
  EXPECT_TRUE(g.needsInput);
  EXPECT_FALSE(g.needsOutput);  // ends in the add
  checkLayout(g, "tiny inverted residual");
  // expand_ratio 1: no expansion conv; no residual when the channels change.
  const BlockGraph first = mustBuild(blockSpec(LayerKind::InvertedResidual, 16, 1, 0, 1), {2, 32, 4, 4});
  EXPECT_EQ(opNames(first),
            (std::vector<std::string>{"b.conv.0.0", "b.conv.0.1", "b.conv.0.2", "b.conv.1", "b.conv.2"}));
  EXPECT_FALSE(first.needsOutput);  // ends in a batch norm
  checkLayout(first, "tiny inverted residual, ratio 1");
  // No residual with stride 2 even when the channels match.
  const BlockGraph strided = mustBuild(blockSpec(LayerKind::InvertedResidual, 4, 2, 0, 6), {2, 4, 4, 4});
  EXPECT_EQ(strided.ops.back().kind, BlockOpKind::BatchNorm);
  EXPECT_EQ(strided.tensors.back().shape, (Shape{2, 4, 2, 2}));
}

// The checker itself notices broken layouts: run it with its failures intercepted.
bool checkerReports(const BlockGraph& g, const std::string& fragment) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    checkLayout(g, "broken");
  }
  for (int i = 0; i < results.size(); ++i)
    if (std::string(results.GetTestPartResult(i).message()).find(fragment) != std::string::npos) return true;
  return false;
}

TEST(Blocks, LayoutCheckerCatchesOverlaps) {
  const BlockGraph good = mustBuild(blockSpec(LayerKind::BasicBlock, 4, 1), {2, 4, 4, 4});
  EXPECT_FALSE(checkerReports(good, ""));
  BlockGraph bad = good;  // conv1's and bn1's outputs are alive together during bn1
  bad.tensors[2].arenaOffset = bad.tensors[1].arenaOffset;
  EXPECT_TRUE(checkerReports(bad, "b.conv1 overlaps b.bn1"));
  bad = good;
  bad.tensors[3].gradOffset = bad.tensors[2].gradOffset;
  EXPECT_TRUE(checkerReports(bad, "d(b.bn1) overlaps d(b.relu)"));
  bad = good;
  bad.ops[1].statsOffset = bad.tensors[1].extrasOffset;
  EXPECT_TRUE(checkerReports(bad, "overlaps b.bn1 stats"));
  bad = good;
  bad.fwdWorkspaceBytes -= 256;
  EXPECT_TRUE(checkerReports(bad, "past the end"));
  bad = good;
  bad.ops[0].gradAccumulate = {false};
  EXPECT_TRUE(checkerReports(bad, "b.conv1"));
}

void expectBlockError(const LayerSpec& spec, const Shape& input, const std::string& fragment) {
  auto graph = buildBlockGraph(spec, input, DType::Float32);
  ASSERT_FALSE(graph.isOk()) << fragment;
  EXPECT_EQ(graph.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(graph.status().message().find(fragment), std::string::npos) << graph.status().message();
}

TEST(Blocks, Errors) {
  expectBlockError(blockSpec(LayerKind::BasicBlock, 0, 1), {2, 4, 4, 4}, "out_channels");
  expectBlockError(blockSpec(LayerKind::BasicBlock, 4, 0), {2, 4, 4, 4}, "stride");
  expectBlockError(blockSpec(LayerKind::BasicBlock, 4, 1), {2, 4, 4}, "NCHW");
  expectBlockError(blockSpec(LayerKind::BasicBlock, 4, 1), {2, 0, 4, 4}, "positive input shape");
  expectBlockError(blockSpec(LayerKind::BasicBlock, 4, 1), {1 << 30, 1 << 30, 1 << 30, 4}, "overflows");
  // The output grows past 2^64 bytes inside the block (64x the channels).
  expectBlockError(blockSpec(LayerKind::BasicBlock, std::int64_t{1} << 30, 1), {1 << 20, 16, 1 << 10, 1 << 10},
                   "overflows");
  expectBlockError(blockSpec(LayerKind::Bottleneck, 16, 1, 0), {2, 4, 4, 4}, "width");
  expectBlockError(blockSpec(LayerKind::InvertedResidual, 16, 1, 0, 0), {2, 4, 4, 4}, "expand_ratio");
  expectBlockError(blockSpec(LayerKind::InvertedResidual, 16, 1, 0, std::int64_t{1} << 40), {2, 4, 4, 4},
                   "expand_ratio");
  // A batch norm inside that sees one value per channel names the inner op.
  expectBlockError(blockSpec(LayerKind::BasicBlock, 4, 1), {1, 4, 1, 1}, "inner op 'b.bn1'");

  auto chain = testing::chainFromLayers({2, 4, 4, 4}, {blockSpec(LayerKind::Bottleneck, 16, 1, -3)});
  ASSERT_FALSE(chain.isOk());
  EXPECT_NE(chain.status().message().find("layer 1 ('b', bottleneck): width"), std::string::npos)
      << chain.status().message();
}

TEST(Blocks, EveryZooBlockHasAValidTightLayout) {
  struct Case {
    ZooOptions options;
    std::string label;
  };
  // Batch 64 at 224 (every size a multiple of 256), and odd sizes that exercise the alignment.
  std::vector<Case> cases = {{ZooOptions{}, "batch 64, 224"},
                             {ZooOptions{3, 67, DType::Float16, 10}, "batch 3, 67, f16"}};
  std::size_t blocks = 0;
  for (const auto& c : cases) {
    for (const auto& entry : zooModels()) {
      // The transformers have no block graphs (their layers' numbers are transformer.cpp's and
      // swin.cpp's), ViT takes only whole 16x16 patches and Swin-T at least 196x196.
      if (entry.tokenModel || entry.name == "vit_b_16" || entry.name == "swin_t") continue;
      ZooOptions options = c.options;  // Inception-v3 takes 75 x 75 at least (odd too)
      options.resolution = std::max(options.resolution, entry.minResolution);
      auto spec = zooChain(entry.name, options);
      ASSERT_TRUE(spec.isOk()) << spec.status().message();
      auto chain = buildChain(*spec);
      ASSERT_TRUE(chain.isOk()) << chain.status().message();
      for (const auto& layer : chain->layers) {
        if (!isComposite(layer.kind)) continue;
        const BlockGraph g = mustBuild(spec->layers[layer.specIndex], layer.inputShape, c.options.dtype);
        const std::string where = entry.name + " " + layer.name + " (" + c.label + ")";
        checkLayout(g, where);
        EXPECT_EQ(g.tensors.back().shape, layer.outputShape) << where;
        EXPECT_EQ(layer.numbers.outBytes, g.outBytes) << where;
        EXPECT_EQ(layer.numbers.extraBytes, g.extraBytes) << where;
        EXPECT_EQ(layer.numbers.fwdWorkspaceBytes, g.fwdWorkspaceBytes) << where;
        EXPECT_EQ(layer.numbers.bwdWorkspaceBytes, g.bwdWorkspaceBytes) << where;
        EXPECT_EQ(layer.numbers.needsOutput, g.needsOutput) << where;
        EXPECT_EQ(layer.paramCount, g.paramCount) << where;
        // ResNet blocks end in a ReLU (out = yes); MobileNetV2 blocks in a batch norm or add;
        // EfficientNet's and MobileNetV3's in an add or SE's product (which reads its operands);
        // RegNetY's in a ReLU, whose backward reads its output; ShuffleNet's in a concat or shuffle;
        // ConvNeXt's in the residual add; Inception's in the concat.
        const bool endsInRelu = layer.kind == LayerKind::BasicBlock || layer.kind == LayerKind::Bottleneck ||
                                entry.name == "regnet_y_400mf";
        EXPECT_EQ(g.needsOutput, endsInRelu) << where;
        ++blocks;
      }
    }
  }
  EXPECT_EQ(blocks, 2u * (8 + 16 + 16 + 33 + 50 + 17 + 16 + 13 + 16 + 32 + 18 + 11));  // ..., convnext, inception
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

BlockOpSpec innerOp(BlockOpKind kind, std::string name, std::vector<std::size_t> inputs) {
  BlockOpSpec op;
  op.kind = kind;
  op.layer.name = std::move(name);
  op.inputs = std::move(inputs);
  return op;
}

BlockOpSpec innerConv(std::string name, std::vector<std::size_t> inputs, std::int64_t out, std::int64_t kernel,
                      std::int64_t stride, std::int64_t padding, bool bias) {
  BlockOpSpec op = innerOp(BlockOpKind::Conv2d, std::move(name), std::move(inputs));
  op.layer.outChannels = out;
  op.layer.kernel = kernel;
  op.layer.stride = stride;
  op.layer.padding = padding;
  op.layer.bias = bias;
  return op;
}

LayerSpec listedBlock(std::vector<BlockOpSpec> ops) {
  LayerSpec spec = testing::layerSpec("b", LayerKind::Block);
  spec.ops = std::move(ops);
  return spec;
}

// SqueezeNet's Fire expand: two convs with bias on the same input, each with its relu, concatenated.
LayerSpec fireExpand() {
  return listedBlock({innerConv("e1", {0}, 4, 1, 1, 0, true), innerOp(BlockOpKind::Relu, "r1", {1}),
                      innerConv("e3", {0}, 4, 3, 1, 1, true), innerOp(BlockOpKind::Relu, "r3", {3}),
                      innerOp(BlockOpKind::Concat, "cat", {2, 4})});
}

TEST(ListedBlock, FireExpandHandComputed) {
  const BlockGraph g = mustBuild(fireExpand(), {2, 4, 4, 4});
  checkLayout(g, "fire");
  EXPECT_EQ(opNames(g), (std::vector<std::string>{"b.e1", "b.r1", "b.e3", "b.r3", "b.cat"}));
  EXPECT_EQ(g.tensors.back().shape, (Shape{2, 8, 4, 4}));
  EXPECT_EQ(g.outBytes, 1024u);
  EXPECT_TRUE(g.needsInput);       // both convs read x(l-1)
  EXPECT_FALSE(g.needsOutput);     // the concat's backward reads nothing
  EXPECT_EQ(g.extraBytes, 1024u);  // the two relu outputs (512 B each)
  // t1 [0,1], t2 [1,4], t3 [2,3], t4 [3,4], 512 B each: t1 at 0, t2 at 512, t3 back at 0, t4 at 1024.
  EXPECT_EQ(g.fwdWorkspaceBytes, 1536u);
  EXPECT_EQ(g.bwdWorkspaceBytes, 1536u);
  EXPECT_EQ(g.fwdLiveLowerBoundBytes, 1536u);
  EXPECT_EQ(g.paramCount, (16u + 4) + (144u + 4));
  // 2 * MACs + bias adds per conv, one op per element for the relus and the concat's copy.
  EXPECT_DOUBLE_EQ(g.fwdCost, (1024.0 + 128 + 128 + 9216 + 128 + 128 + 256) / 1e9);
  // d(x) is written by the second conv's backward (it runs first), added into by the first's.
  EXPECT_EQ(g.ops[2].gradAccumulate, (std::vector<bool>{false}));
  EXPECT_EQ(g.ops[0].gradAccumulate, (std::vector<bool>{true}));
  EXPECT_EQ(g.ops[4].gradAccumulate, (std::vector<bool>{false, false}));
}

// A block whose ops are a BasicBlock's has the basic_block's numbers, whichever way its add reads.
TEST(ListedBlock, TheOpsOfABasicBlockHaveItsNumbers) {
  const Shape input = {2, 4, 6, 6};
  const BlockGraph basic = mustBuild(blockSpec(LayerKind::BasicBlock, 8, 2), input);
  for (bool swapAdd : {false, true}) {
    std::vector<BlockOpSpec> ops;
    for (const BlockOp& op : basic.ops) {
      BlockOpSpec spec = innerOp(op.kind, op.layer.name.substr(2), op.inputs);
      if (op.kind == BlockOpKind::Conv2d)
        spec = innerConv(spec.layer.name, op.inputs, op.layer.outChannels, op.layer.kernel, op.layer.stride,
                         op.layer.padding, false);
      if (op.kind == BlockOpKind::Add && swapAdd) std::swap(spec.inputs[0], spec.inputs[1]);
      ops.push_back(spec);
    }
    const BlockGraph listed = mustBuild(listedBlock(ops), input);
    checkLayout(listed, "listed basic block");
    EXPECT_EQ(opNames(listed), opNames(basic));
    EXPECT_EQ(listed.outBytes, basic.outBytes);
    EXPECT_EQ(listed.extraBytes, basic.extraBytes);
    EXPECT_EQ(listed.fwdWorkspaceBytes, basic.fwdWorkspaceBytes);
    EXPECT_EQ(listed.bwdWorkspaceBytes, basic.bwdWorkspaceBytes);
    EXPECT_EQ(listed.needsInput, basic.needsInput);
    EXPECT_EQ(listed.needsOutput, basic.needsOutput);
    EXPECT_EQ(listed.paramCount, basic.paramCount);
  }
}

// DenseNet's dense layers: each reads the concatenation of the block input and every earlier
// layer's output; the block ends in the concatenation of them all.
TEST(ListedBlock, DenseLayersHaveAValidLayout) {
  std::vector<BlockOpSpec> ops = {
      innerOp(BlockOpKind::Concat, "l1.cat", {0}),    innerOp(BlockOpKind::BatchNorm, "l1.norm", {1}),
      innerOp(BlockOpKind::Relu, "l1.relu", {2}),     innerConv("l1.conv", {3}, 2, 3, 1, 1, false),
      innerOp(BlockOpKind::Concat, "l2.cat", {0, 4}), innerOp(BlockOpKind::BatchNorm, "l2.norm", {5}),
      innerOp(BlockOpKind::Relu, "l2.relu", {6}),     innerConv("l2.conv", {7}, 2, 3, 1, 1, false),
      innerOp(BlockOpKind::Concat, "cat", {0, 4, 8})};
  const BlockGraph g = mustBuild(listedBlock(ops), {2, 3, 5, 5});
  checkLayout(g, "dense");
  EXPECT_EQ(g.tensors.back().shape, (Shape{2, 7, 5, 5}));
  EXPECT_FALSE(g.needsInput);  // only concats read x(l-1), and their backward reads nothing
  EXPECT_EQ(g.ops[8].gradAccumulate, (std::vector<bool>{false, false, false}));
  EXPECT_EQ(g.ops[4].gradAccumulate, (std::vector<bool>{true, true}));
  EXPECT_EQ(g.ops[0].gradAccumulate, (std::vector<bool>{true}));
}

TEST(ListedBlock, Errors) {
  const Shape input = {2, 4, 4, 4};
  expectBlockError(listedBlock({}), input, "field 'ops' is empty");
  expectBlockError(listedBlock({innerOp(BlockOpKind::Relu, "r", {3})}), input,
                   "inner op 0 ('r', relu): input 3 is not written before it");
  expectBlockError(listedBlock({innerOp(BlockOpKind::Add, "a", {0})}), input, "add takes two inputs, it has 1");
  expectBlockError(listedBlock({innerOp(BlockOpKind::Relu, "r", {0, 0})}), input, "relu takes one input");
  expectBlockError(listedBlock({innerOp(BlockOpKind::Concat, "c", {})}), input, "concat takes one or more inputs");
  expectBlockError(listedBlock({innerOp(BlockOpKind::Relu, "r", {0}), innerOp(BlockOpKind::Relu, "s", {0})}), input,
                   "the output of inner op 0 ('b.r') is read by no later op");
  expectBlockError(listedBlock({innerConv("c", {0}, 4, 3, 2, 1, true), innerOp(BlockOpKind::Concat, "cat", {0, 1})}),
                   input, "inner op 'b.cat' concatenates [2, 4, 4, 4] and [2, 4, 2, 2]");
  expectBlockError(listedBlock({innerConv("c", {0}, 8, 1, 1, 0, true), innerOp(BlockOpKind::Add, "add", {0, 1})}),
                   input, "inner op 'b.add' adds [2, 4, 4, 4] and [2, 8, 4, 4]");
  expectBlockError(listedBlock({innerConv("c", {0}, 4, 9, 1, 0, true)}), input, "inner op 0 ('c', conv2d)");
}

}  // namespace
}  // namespace remat
