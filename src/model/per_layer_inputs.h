// Per-layer inputs (Gemma 4): besides the residual stream, each layer gets a
// vector of P = n_embd_per_layer floats per token, made once per step from
// the token and its embedding:
//   in_l = (rms_norm(W_proj x / sqrt(n_embd))_l * norm + T[token]_l * sqrt(P)) / sqrt(2)
// where x is the scaled token embedding, W_proj (per_layer_model_proj) maps it
// to n_layer * P values, the norm (per_layer_proj_norm) runs over each
// layer's P, and T (per_layer_token_embd) is a table of n_layer * P values
// per token. Computed on the host; the layers read their slices
// (LayerContext::layer_input, model/blocks.h: per_layer_input_block).
#pragma once

#include <cstdint>
#include <vector>

#include "model/hparams.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace pagellm {

class PerLayerInputs {
 public:
  // Keeps the tables of `w` (ModelWeights::extra) and an F32 copy of the
  // projection.
  void init(const ModelHParams& hp, const ModelWeights& w);
  // out = [layer_end - layer_begin][T][P]: the inputs of layers
  // [layer_begin, layer_end) for the step's tokens, layer after layer.
  void compute(const int32_t* tokens, int64_t T, int32_t layer_begin, int32_t layer_end,
               ThreadPool& pool, std::vector<float>& out) const;

 private:
  int64_t E_ = 0, P_ = 0, L_ = 0;
  float embd_scale_ = 1.0f, eps_ = 0;
  WeightMatrix token_embd_;
  WeightMatrix table_;       // per_layer_token_embd: [L * P] per token
  std::vector<float> proj_;  // per_layer_model_proj: [L * P][E]
  const float* norm_ = nullptr;  // [P]
};

}  // namespace pagellm
