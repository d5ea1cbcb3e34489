// The Llama-family decoder (llama, qwen2) on the CPU backend: embeddings,
// n_layer blocks of rmsnorm -> q/k/v (+bias) -> RoPE -> K/V into the paged
// cache -> paged attention -> o-proj -> residual -> rmsnorm -> SwiGLU FFN ->
// residual, then the output norm and the vocabulary projection.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kvcache/kv_cache_storage.h"
#include "kvcache/kv_pool.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace pagellm {

struct ModelLoadOptions {
  bool use_mmap = true;
  bool mlock = false;
  // Copy Q4_0 / Q8_0 matrices into the CPU kernels' Rows16 layout at load
  // (ModelWeights::repack); off keeps every matrix in the file (zero-copy).
  bool repack = true;
};

class LlamaModel {
 public:
  // Opens, validates and maps the model. Throws SystemError / FormatError.
  static std::unique_ptr<LlamaModel> load(const std::string& path, ModelLoadOptions opts = {});
  ~LlamaModel();

  const ModelHParams& hparams() const { return hp_; }
  const ModelWeights& weights() const { return w_; }
  const GgufFile& file() const { return *file_; }

  // Shape of a KV pool holding every layer of this model.
  KvPoolShape kv_shape(int32_t num_blocks, int32_t block_size, DType kv_type) const;

  // Runs one step: writes every token's K/V at its slot, then returns the
  // logits of batch.logit_tokens, row after row, in `logits`
  // ([logit_tokens.size()][n_vocab]). Throws ConfigError on a bad token id.
  // Each layer uses the pool that holds it; where consecutive layers sit on
  // different devices the hidden state is handed over (copied) between them.
  void forward(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
               std::vector<float>& logits);
  // Allocates and touches the activation workspace for batches of up to
  // `max_tokens` tokens and `max_logit_rows` rows of logits, so that the
  // memory the plan counted is resident from the start and steps never grow it.
  void reserve_workspace(int64_t max_tokens, int64_t max_logit_rows);
  // Bytes of hidden state moved between devices so far.
  uint64_t transfer_bytes() const { return transfer_bytes_; }

 private:
  LlamaModel() = default;
  struct Workspace;

  std::unique_ptr<GgufFile> file_;
  ModelHParams hp_;
  ModelWeights w_;
  std::unique_ptr<Workspace> ws_;
  uint64_t transfer_bytes_ = 0;
};

}  // namespace pagellm
