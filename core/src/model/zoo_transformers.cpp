// GPT-2 small (Hugging Face's gpt2 / nanoGPT's GPT), BERT-base (bert-base-uncased's BertModel with its
// pooler) and ViT-B/16 (torchvision's vit_b_16) as chains: one layer per embedding, per encoder or
// decoder layer and per head; the residual stream between layers is the cut. Layer names follow the
// reference implementations' module paths; a layer that covers several modules joins them with '+'.
#include "zoo_transformers.hpp"

#include <algorithm>
#include <string>

#include "layers_common.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {
namespace {

struct Dims {
  std::int64_t width = 768, heads = 12, hidden = 3072, layers = 12;
  double dropout = 0.1, epsilon = 1e-5;
};

LayerSpec layer(std::string name, LayerKind kind) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  return l;
}

void addBlocks(ChainSpec& spec, const std::string& prefix, const Dims& dims, bool causal, bool preNorm, bool fused) {
  for (std::int64_t i = 0; i < dims.layers; ++i) {
    LayerSpec b = layer(prefix + std::to_string(i), LayerKind::TransformerBlock);
    b.heads = dims.heads;
    b.hidden = dims.hidden;
    b.causal = causal;
    b.preNorm = preNorm;
    b.fusedAttention = fused;
    b.dropoutP = dims.dropout;
    b.epsilon = dims.epsilon;
    spec.layers.push_back(std::move(b));
  }
}

constexpr std::int64_t kGpt2Context = 1024;
constexpr std::int64_t kBertContext = 512;
constexpr std::int64_t kPatch = 16;  // ViT-B/16

// GPT-2 small: wte + wpe, 12 pre-norm causal blocks, ln_f and the LM head tied to wte.
// 124,439,808 parameters. Past 1,024 tokens the position table grows with the sequence.
ChainSpec gpt2(const ZooOptions& o) {
  const Dims dims;
  const std::int64_t seq = o.sequence > 0 ? o.sequence : kGpt2Context;
  ChainSpec spec;
  spec.input.shape = {o.batch, seq};
  LayerSpec emb = layer("transformer.wte+wpe", LayerKind::TokenEmbedding);
  emb.vocab = 50257;
  emb.positions = std::max(seq, kGpt2Context);
  emb.width = dims.width;
  emb.dropoutP = dims.dropout;
  spec.layers.push_back(emb);
  addBlocks(spec, "transformer.h.", dims, true, true, o.fusedAttention);
  LayerSpec head = layer("transformer.ln_f+lm_head", LayerKind::LmHead);
  head.vocab = 50257;
  head.tied = true;
  head.norm = true;
  spec.layers.push_back(head);
  return spec;
}

// bert-base-uncased's BertModel: word + position + token type embeddings with LayerNorm, 12
// post-norm blocks, the pooler (dense + tanh on [CLS]). 109,482,240 parameters.
ChainSpec bertBase(const ZooOptions& o) {
  Dims dims;
  dims.epsilon = 1e-12;
  const std::int64_t seq = o.sequence > 0 ? o.sequence : kBertContext;
  ChainSpec spec;
  spec.input.shape = {o.batch, seq};
  LayerSpec emb = layer("embeddings", LayerKind::TokenEmbedding);
  emb.vocab = 30522;
  emb.positions = kBertContext;
  emb.segments = 2;
  emb.width = dims.width;
  emb.embeddingNorm = true;
  emb.epsilon = dims.epsilon;
  emb.dropoutP = dims.dropout;
  spec.layers.push_back(emb);
  addBlocks(spec, "encoder.layer.", dims, false, false, o.fusedAttention);
  LayerSpec pooler = layer("pooler", LayerKind::ClsHead);
  pooler.outFeatures = dims.width;
  pooler.norm = false;
  pooler.tanhOut = true;
  spec.layers.push_back(pooler);
  return spec;
}

// torchvision's vit_b_16: 16x16 patches, class token, 12 pre-norm blocks (dropout 0), encoder.ln and
// the linear head on the class token. 86,567,656 parameters at 224x224 and 1,000 classes.
ChainSpec vitB16(const ZooOptions& o) {
  Dims dims;
  dims.dropout = 0.0;
  dims.epsilon = 1e-6;
  ChainSpec spec;
  spec.input.shape = {o.batch, 3, o.resolution, o.resolution};
  LayerSpec emb = layer("conv_proj+class_token+encoder.pos_embedding", LayerKind::PatchEmbedding);
  emb.kernel = kPatch;
  emb.width = dims.width;
  emb.dropoutP = 0.0;
  spec.layers.push_back(emb);
  addBlocks(spec, "encoder.layers.encoder_layer_", dims, false, true, o.fusedAttention);
  LayerSpec head = layer("encoder.ln+heads", LayerKind::ClsHead);
  head.outFeatures = o.numClasses;
  head.norm = true;
  head.epsilon = dims.epsilon;
  spec.layers.push_back(head);
  return spec;
}

}  // namespace

std::vector<ZooEntry> transformerZooModels() {
  return {{"gpt2",
           "GPT-2 small: token + position embedding, 12 causal pre-norm transformer blocks, tied LM head, 124.4M "
           "parameters (--sequence, default 1024)",
           1, true},
          {"bert_base",
           "BERT-base (uncased): embeddings, 12 post-norm transformer blocks, pooler, 109.5M parameters "
           "(--sequence, default 512)",
           1, true},
          {"vit_b_16",
           "ViT-B/16: 16x16 patch embedding, 12 pre-norm transformer blocks, class-token head, 86.6M parameters", 16,
           false}};
}

namespace {

Result<ChainSpec> checkedZooChain(std::string_view name, ChainSpec (*build)(const ZooOptions&),
                                  const ZooOptions& options) {
  const std::string label = "zoo model '" + std::string(name) + "'";
  REMAT_RETURN_IF_ERROR(checkPositiveField("batch", options.batch).withContext(label));
  REMAT_RETURN_IF_ERROR(checkNonNegativeField("sequence", options.sequence).withContext(label));
  if (name == "vit_b_16") {
    REMAT_RETURN_IF_ERROR(checkPositiveField("resolution", options.resolution).withContext(label));
    REMAT_RETURN_IF_ERROR(checkPositiveField("num_classes", options.numClasses).withContext(label));
    if (options.resolution < kPatch)
      return Status::invalid(label + ": resolution " + std::to_string(options.resolution) + " is below its minimum " +
                             std::to_string(kPatch) + " (one patch)");
    if (options.sequence > 0)
      return Status::invalid(label + ": --sequence applies to token models; its sequence is 1 + (resolution/16)^2");
  } else if (options.sequence > kMaxIntegerField) {
    return Status::invalid(label + ": sequence " + std::to_string(options.sequence) + " is more than " +
                           std::to_string(kMaxIntegerField));
  }
  ChainSpec spec = build(options);
  spec.name = std::string(name);
  spec.input.dtype = options.dtype;
  auto chain = buildChain(spec);
  if (!chain)
    return chain.status().withContext(label + " at batch " + std::to_string(options.batch) +
                                      (spec.input.shape.size() == 2
                                           ? ", sequence " + std::to_string(spec.input.shape[1])
                                           : ", resolution " + std::to_string(options.resolution)));
  return spec;
}

}  // namespace

std::optional<Result<ChainSpec>> transformerZooChain(std::string_view name, const ZooOptions& options) {
  if (name == "gpt2") return checkedZooChain(name, gpt2, options);
  if (name == "bert_base") return checkedZooChain(name, bertBase, options);
  if (name == "vit_b_16") return checkedZooChain(name, vitB16, options);
  return std::nullopt;
}

}  // namespace remat::detail
