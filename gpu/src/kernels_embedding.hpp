#pragma once
// The transformer ends' own CUDA kernels (kernels_embedding.cu), mirroring core/src/cpu/run_embeddings.cpp
// and run_heads.cpp: the token embedding's lookups and sum, its position arange, the scatter-add of
// d(x1) into the tables (one thread per column, tokens summed in order: no atomics, bitwise
// reproducible), the language-model head's row log-softmax and its backward, and the per-token
// negative log-likelihood seed. The ids (int64, PyTorch's torch.long) were checked on the host to lie in [0, vocab).
// Internal to gpu/.
#include "kernels.hpp"

namespace remat::gpu::kernels {

// Parameters (floats from the layer's start) and extents of a token embedding: wte [V, d], wpe [P, d]
// at positionTable, BERT's tte at typeTable (0: none; every token reads its row 0).
struct EmbeddingShape {
  Index tokens = 0, seq = 0, width = 0;
  Index positionTable = 0, typeTable = 0;
};

// tokens[t] = wte[id_t], positions = wpe[0..S), types[t] = tte[0] (when not null), and
// sum = (tokens + types) + positions[t % S].
Status embeddingLookUp(cudaStream_t stream, const EmbeddingShape& e, const std::int64_t* ids, const float* params,
                       float* tokens, float* positions, float* types, float* sum);
// The int64 position ids 0 .. seq-1, as PyTorch's arange.
Status writeArange(cudaStream_t stream, Index seq, std::int64_t* arange);
// grads[id_t] += g_t, grads[wpe + arange[t % S]] += g_t and, with a type table, grads[tte + 0] += g_t,
// where g = dy, or mask ? dy * scale : 0 when mask is not null.
Status embeddingScatter(cudaStream_t stream, const EmbeddingShape& e, const std::int64_t* ids,
                        const std::int64_t* arange, const float* dy, const std::uint8_t* mask, float scale,
                        float* grads);

// y = log_softmax(logits) by rows; dx = dy - exp(y) * sum(dy).
Status logSoftmaxRows(cudaStream_t stream, Index rows, Index width, const float* logits, float* y);
Status logSoftmaxBackwardRows(cudaStream_t stream, Index rows, Index width, const float* y, const float* dy, float* dx);
// grad[t] = 0 except -1/tokens at labels[t] (the mean negative log-likelihood's gradient).
Status nllLossBackward(cudaStream_t stream, Index tokens, Index vocab, const std::int64_t* labels, float* grad);

}  // namespace remat::gpu::kernels

namespace remat::gpu::kernels {

// ViT's patch embedding (kernels_embedding.cu). The conv's NCHW output [N, d, P] is transposed into
// the patch rows: joined[n][0] = the class token, joined[n][1 + p][c] = conv[n][c][p] (torch.cat),
// y = joined + positions [S, d] broadcast over the batch.
struct PatchShape {
  Index batch = 0, seq = 0, width = 0;  // seq = P + 1
};
Status patchJoin(cudaStream_t stream, const PatchShape& v, const float* conv, const float* classToken,
                 const float* positions, float* joined, float* y);
// With g = dy, or mask ? dy * scale : 0 when mask is not null: dPositions[i] += sum over n of g[n][i],
// dClassToken += token 0's part (one thread per element, samples in order), and dConv[n][c][p] =
// g[n][1 + p][c] (written).
Status patchBackward(cudaStream_t stream, const PatchShape& v, const float* dy, const std::uint8_t* mask, float scale,
                     float* dPositions, float* dClassToken, float* dConv);

}  // namespace remat::gpu::kernels
