// What a model needs in memory, from its GGUF metadata and tensor table only
// (no weight is read): weight bytes per layer and outside the layers, KV bytes
// per token per layer for a KV cache type, and the activation workspace for
// the largest batch.
//
// Workspace (bytes), with T = max_batched_tokens, R = min(T, max_num_seqs + draft_rows)
// rows of logits, E = n_embd, KV = n_head_kv * head_dim, F = n_ff, V = n_vocab:
//   per device that runs layers:
//     4*T*(3E + 2Q + 2KV + 2F)             f32 activations x, x (next device), h, q, attn
//                                          (Q = n_head * head_dim), k, v, gate, up
//     + 2 * T * ceil(max(E,F,Q)/256) * 320 quantized activations (up to two Q8 formats,
//                                          at most 320 bytes per 256 values: split Q8_0
//                                          for Rows16 weights)
//     + 4*T*n_rot                          RoPE cos/sin for the batch's positions
//     + 1 MiB                              block-table pointers, per-thread scratch
//     + 4*T*X_extra                        the gated attention's q|gate rows and the
//                                          delta-net block's projections
//                                          (model/blocks.h: workspace_extra_floats)
//     MoE (X experts, K used, FX = expert ff): gate/up hold T*max(F, K*FX)
//     rows' worth, + 4*T*(X + 2*K*E)       router logits, grouped rows, outputs
//     + 4*T*(E + 2*K*FX + 2*K*E)           the same on the host for experts
//                                          placed there (counted on the host)
//   on the device of the last layer:  4*R*(V + E)   output-norm rows and logits
//   on the host:                      4*R*V         logits back for sampling
//                                     + kCudaHostRuntimeBytes when a GPU is planned
//   on a CUDA device that runs layers: 2*(largest quantized matrix) + 2*T*max(E,F)
//                                      f16 copies of a weight matrix and of the
//                                      activations for cuBLAS (backend/cuda/gemm.h)
//                                      + 16 MiB partials of split attention
//                                      (backend/backend_sizes.h)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "tensor/dtype.h"

namespace pagellm {

struct FootprintOptions {
  DType kv_type = DType::F16;  // f16, f32 or q8_0 (34 bytes per 32 values)
  // The model repacks its matrices into the CPU kernels' Rows16 layout
  // (ModelLoadOptions::repack): count those at their packed size.
  bool repack = true;
  int32_t max_batched_tokens = 2048;
  int32_t max_num_seqs = 64;  // bounds the rows of logits per step
  int32_t draft_rows = 0;     // more logit rows, for drafted tokens (speculative decoding)
};

// Host RAM that a process using CUDA devices holds for the CUDA runtime:
// cuBLAS and cuBLASLt once loaded (~150 MiB resident, measured) and the
// driver's context.
constexpr uint64_t kCudaHostRuntimeBytes = uint64_t{512} << 20;

struct ModelFootprint {
  std::string arch;
  int32_t n_layer = 0;
  int32_t n_ctx_train = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;

  // Weights: bytes in memory once loaded (as stored, or as repacked: Q4_K and
  // Q5_K grow by 2.8% / 2.3% when their scales are unpacked).
  std::vector<uint64_t> layer_weight_bytes;  // "blk.N.*", per layer (experts included)
  // Mixture of experts: the part of each layer's bytes in its expert stacks
  // ("*_exps"), which the planner may place on the host apart from the rest
  // of the layer; and the share of them one token reads (used / count).
  std::vector<uint64_t> layer_expert_bytes;
  double expert_read_fraction = 0;
  uint64_t embedding_bytes = 0;  // token_embd, read by rows (not streamed)
  bool tied_output = false;      // the output projection is the embedding
  uint64_t host_weight_bytes = 0;    // token embedding and other tensors outside the layers;
                                     // the embedding lookup runs on the host
  uint64_t output_weight_bytes = 0;  // output norm + projection, on the last layer's device
  // The same when that device is the host: a tied projection (no output.weight)
  // reuses the host's embedding rather than a copy.
  uint64_t output_weight_bytes_on_host = 0;
  std::map<std::string, uint64_t> weight_bytes_by_type;  // "q4_k" -> bytes, for display
  // The distinct tensor types of each layer, and the output projection's (the
  // embedding's when tied): a device runs only layers whose types its kernels
  // take (PlanDevice::runs_weight_type). Empty: no constraint.
  std::vector<std::vector<DType>> layer_types;
  DType output_type = DType::F32;

  // KV cache.
  DType kv_type = DType::F16;
  uint64_t kv_bytes_per_token_layer = 0;  // K + V of one token in one layer (the largest shape)
  // Per layer where layers differ (Gemma 4): K + V of one token in the
  // layer's own cache, by its own KV heads and head size
  // (kv_bytes_per_token_layer of them), 0 for a layer that keeps none (a
  // recurrent layer, or one that reads an earlier layer's cache); and the
  // layer whose cache it reads (-1: its own, LayerSpec::kv_source). Empty:
  // every non-recurrent layer holds kv_bytes_per_token_layer of its own.
  std::vector<uint64_t> layer_kv_bytes_per_token;
  std::vector<int32_t> layer_kv_source;
  // K + V of one token in layer l's own cache (what the planner charges where
  // l runs).
  uint64_t layer_kv_bytes(int32_t l) const;
  int32_t kv_source(int32_t l) const {
    return static_cast<size_t>(l) < layer_kv_source.size() ? layer_kv_source[static_cast<size_t>(l)] : -1;
  }
  // Layers that read an earlier layer's cache and keep none.
  int32_t n_shared_kv() const;
  // What layer l would hold if it kept its own cache: its source's shape.
  uint64_t unshared_layer_kv_bytes(int32_t l) const {
    return layer_kv_bytes(kv_source(l) >= 0 ? kv_source(l) : l);
  }
  // MLA (deepseek2): the cache keeps one latent row per token and layer
  // (kv_lora_rank + rope values, KvPoolShape::v_dim), which is
  // kv_bytes_per_token_layer; for comparison, what a GQA cache of the same
  // heads would take: n_head * (q/k head + value head) values.
  bool latent_kv = false;
  uint64_t gqa_kv_bytes_per_token_layer = 0;
  // Its plain prefill form's scratch on a device that runs it (not CUDA; model/
  // mla_block.h, mla_plain_floats): fixed bytes plus bytes per position of the
  // longest sequence (CostModel::workspace charges max_seq_len of them where
  // a prompt that long runs it).
  uint64_t mla_plain_bytes = 0;
  uint64_t mla_plain_bytes_per_position = 0;
  int32_t mla_plain_min_prompt = 0;  // none below it (MlaShape::plain_min_prompt)
  // Per layer: its sliding window (0: full attention). Windowed layers keep
  // their KV in window groups (kvcache/kv_group.h) of a bounded block count.
  std::vector<int32_t> layer_windows;
  int32_t max_num_seqs = 0;

  // Recurrent state (gated delta-net layers): per layer whether it keeps a
  // fixed-size state per sequence instead of K/V (empty: none does), and the
  // bytes of one sequence's state in one such layer (conv inputs + delta
  // state, f32: DeltaNetShape::state_floats() * 4). The engine keeps one
  // slot per max_num_seqs on the device that runs the layer.
  std::vector<bool> layer_recurrent;
  uint64_t state_bytes_per_seq_layer = 0;
  bool recurrent(int32_t layer) const {
    return static_cast<size_t>(layer) < layer_recurrent.size() &&
           layer_recurrent[static_cast<size_t>(layer)];
  }
  int32_t n_recurrent() const;
  // One sequence's state over every recurrent layer.
  uint64_t state_bytes_per_seq() const {
    return state_bytes_per_seq_layer * static_cast<uint64_t>(n_recurrent());
  }

  // Activation workspace (see the formula above).
  int32_t max_batched_tokens = 0;
  uint64_t layer_workspace_bytes = 0;
  uint64_t output_workspace_bytes = 0;
  uint64_t host_workspace_bytes = 0;
  // The host's buffers for experts of other devices' layers (MoE), when any
  // are placed there.
  uint64_t host_expert_workspace_bytes = 0;
  uint64_t cuda_matmul_scratch_bytes = 0;
  // Host RAM a process holds for the CUDA runtime once it uses a GPU
  // (kCudaHostRuntimeBytes); on the host whenever a CUDA device is planned.
  uint64_t cuda_host_runtime_bytes = 0;

  uint64_t total_layer_weight_bytes() const;
  uint64_t total_expert_bytes() const;
  bool has_experts() const { return total_expert_bytes() > 0; }
  uint64_t total_weight_bytes() const;  // layers + host + output (not counting a tied copy)
};

// Bytes of K + V for one token of one layer: 2 * n_kv_heads * row bytes of
// head_dim values in `kv_type` (latent: K rows only, KvPoolShape::v_dim).
// Throws ConfigError for a type the cache cannot hold (f16, f32 and q8_0 are
// allowed) or a head size that is not a multiple of its block.
uint64_t kv_bytes_per_token_layer(DType kv_type, int32_t n_kv_heads, int32_t head_dim,
                                  bool latent = false);

// The footprint from tensor names and sizes (the GGUF tensor table).
struct TensorSize {
  std::string name;
  DType type;
  uint64_t bytes;
  int64_t n_in = 0;   // row length (ne[0]); 0: unknown, counted as stored
  int64_t n_out = 0;  // rows (the other dimensions' product)
};
ModelFootprint model_footprint(const ModelHParams& hp, const std::vector<TensorSize>& tensors,
                               const FootprintOptions& opts = {});
// The same from an open GGUF file; reads metadata and the tensor table only.
ModelFootprint model_footprint(const GgufFile& f, const ModelHParams& hp,
                               const FootprintOptions& opts = {});

}  // namespace pagellm
