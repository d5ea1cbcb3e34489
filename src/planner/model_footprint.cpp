#include "planner/model_footprint.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/backend_sizes.h"
#include "model/blocks.h"
#include "model/mla_block.h"
#include "util/error.h"

namespace pagellm {

uint64_t ModelFootprint::total_layer_weight_bytes() const {
  uint64_t s = 0;
  for (uint64_t b : layer_weight_bytes) s += b;
  return s;
}

uint64_t ModelFootprint::total_expert_bytes() const {
  uint64_t s = 0;
  for (uint64_t b : layer_expert_bytes) s += b;
  return s;
}

uint64_t ModelFootprint::total_weight_bytes() const {
  return total_layer_weight_bytes() + host_weight_bytes + output_weight_bytes_on_host;
}

int32_t ModelFootprint::n_recurrent() const {
  return static_cast<int32_t>(std::count(layer_recurrent.begin(), layer_recurrent.end(), true));
}

uint64_t ModelFootprint::layer_kv_bytes(int32_t l) const {
  if (static_cast<size_t>(l) < layer_kv_bytes_per_token.size())
    return layer_kv_bytes_per_token[static_cast<size_t>(l)];
  return recurrent(l) ? 0 : kv_bytes_per_token_layer;
}

int32_t ModelFootprint::n_shared_kv() const {
  return static_cast<int32_t>(
      std::count_if(layer_kv_source.begin(), layer_kv_source.end(), [](int32_t s) { return s >= 0; }));
}

uint64_t kv_bytes_per_token_layer(DType kv_type, int32_t n_kv_heads, int32_t head_dim, bool latent) {
  if (kv_type != DType::F16 && kv_type != DType::F32 && kv_type != DType::Q8_0)
    throw ConfigError(
        fmt::format("KV cache type '{}' is not supported (f16, f32, q8_0)", dtype_name(kv_type)));
  if (n_kv_heads <= 0 || head_dim <= 0)
    throw ConfigError(fmt::format("invalid KV shape: {} heads of {}", n_kv_heads, head_dim));
  if (head_dim % dtype_block_size(kv_type) != 0)
    throw ConfigError(
        fmt::format("KV cache type '{}' needs a head size that is a multiple of {} "
                    "(the model's is {})",
                    dtype_name(kv_type), dtype_block_size(kv_type), head_dim));
  return (latent ? 1 : 2) * static_cast<uint64_t>(n_kv_heads) * dtype_row_bytes(kv_type, head_dim);
}

namespace {

// Layer index of "blk.N.rest", or -1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return -1;
  int64_t v = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (1 << 20)) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// Bytes of tensor t once loaded: the layers' matrices and an untied output
// projection are repacked when the type has a Rows16 layout (as
// ModelWeights::repack does).
uint64_t loaded_bytes(const TensorSize& t, bool in_layer, const FootprintOptions& opts) {
  const bool matrix = in_layer || t.name == "output.weight";
  if (!opts.repack || !matrix || !cpu_repacks(t.type) || t.n_in <= 0 || t.n_out <= 0 ||
      t.n_in % dtype_block_size(t.type) != 0 || t.n_in % 32 != 0)
    return t.bytes;
  return cpu_repacked_bytes(t.type, t.n_in, t.n_out);
}

}  // namespace

ModelFootprint model_footprint(const ModelHParams& hp, const std::vector<TensorSize>& tensors,
                               const FootprintOptions& opts) {
  if (opts.max_batched_tokens <= 0)
    throw ConfigError(
        fmt::format("--max-batched-tokens must be positive (got {})", opts.max_batched_tokens));
  if (opts.max_num_seqs <= 0)
    throw ConfigError(fmt::format("--max-num-seqs must be positive (got {})", opts.max_num_seqs));
  ModelFootprint fp;
  fp.arch = hp.arch;
  fp.n_layer = hp.n_layer;
  fp.n_ctx_train = hp.n_ctx_train;
  fp.n_kv_heads = hp.n_head_kv;
  fp.head_dim = hp.head_dim;
  fp.layer_weight_bytes.assign(static_cast<size_t>(hp.n_layer), 0);
  fp.layer_expert_bytes.assign(static_cast<size_t>(hp.n_layer), 0);
  if (hp.moe())
    fp.expert_read_fraction = static_cast<double>(hp.n_expert_used) / hp.n_expert;
  fp.layer_types.assign(static_cast<size_t>(hp.n_layer), {});

  bool has_output = false;
  uint64_t embd_bytes = 0, output_bytes = 0, output_norm_bytes = 0;
  DType embd_type = DType::F32;
  uint64_t largest_expanded = 0;  // elements of the largest matrix cuBLAS sees as an f16 copy
  for (const auto& ts : tensors) {
    const int64_t layer = layer_of(ts.name);
    const bool gpu_matrix =
        layer >= 0 || ts.name == "output.weight" || ts.name == "token_embd.weight";
    if (gpu_matrix && ts.type != DType::F16 && ts.type != DType::F32 && ts.n_in > 0 && ts.n_out > 0)
      largest_expanded = std::max(largest_expanded,
                                  static_cast<uint64_t>(ts.n_in) * static_cast<uint64_t>(ts.n_out));
    TensorSize t = ts;
    t.bytes = loaded_bytes(ts, layer >= 0, opts);
    fp.weight_bytes_by_type[dtype_name(t.type)] += t.bytes;
    if (layer >= 0) {
      if (layer >= hp.n_layer)
        throw FormatError(
            fmt::format("tensor '{}' belongs to layer {}, but the model has {} layers", t.name,
                        layer, hp.n_layer));
      fp.layer_weight_bytes[static_cast<size_t>(layer)] += t.bytes;
      if (t.name.size() > 12 && t.name.compare(t.name.size() - 12, 12, "_exps.weight") == 0)
        fp.layer_expert_bytes[static_cast<size_t>(layer)] += t.bytes;
      auto& types = fp.layer_types[static_cast<size_t>(layer)];
      if (std::find(types.begin(), types.end(), t.type) == types.end()) types.push_back(t.type);
    } else if (t.name == "output.weight") {
      has_output = true;
      output_bytes = t.bytes;
      fp.output_type = t.type;
    } else if (t.name == "output_norm.weight") {
      output_norm_bytes = t.bytes;
    } else {
      if (t.name == "token_embd.weight") {
        embd_bytes = t.bytes;
        embd_type = t.type;
      }
      fp.host_weight_bytes += t.bytes;  // embeddings and anything else outside the layers
    }
  }
  // Tied output: the projection reads the embedding matrix; on another device
  // it needs its own copy.
  fp.output_weight_bytes = output_norm_bytes + (has_output ? output_bytes : embd_bytes);
  if (!has_output) fp.output_type = embd_type;
  fp.embedding_bytes = embd_bytes;
  fp.tied_output = !has_output;
  fp.output_weight_bytes_on_host = output_norm_bytes + (has_output ? output_bytes : 0);

  fp.kv_type = opts.kv_type;
  fp.kv_bytes_per_token_layer =
      kv_bytes_per_token_layer(opts.kv_type, hp.n_head_kv, hp.head_dim, hp.mla.enabled());
  // Layers of their own shapes or sharing KV: each layer's own bytes, as
  // KvCacheStorage allocates them (a pool per distinct shape, none for a
  // layer that reads another's cache).
  bool uniform = true;
  for (int32_t l = 0; l < static_cast<int32_t>(hp.layers.size()); ++l) {
    const LayerSpec& s = hp.layer(l);
    uniform = uniform && s.kv_source < 0 && (s.n_head_kv == 0 || s.n_head_kv == hp.n_head_kv) &&
              (s.head_dim == 0 || s.head_dim == hp.head_dim);
  }
  if (!uniform)
    for (int32_t l = 0; l < static_cast<int32_t>(hp.layers.size()); ++l) {
      const LayerSpec& s = hp.layer(l);
      fp.layer_kv_source.push_back(s.recurrent ? -1 : s.kv_source);
      fp.layer_kv_bytes_per_token.push_back(
          !hp.owns_kv(l) ? 0
                         : kv_bytes_per_token_layer(opts.kv_type, s.n_head_kv > 0 ? s.n_head_kv : hp.n_head_kv,
                                                    s.head_dim > 0 ? s.head_dim : hp.head_dim,
                                                    hp.mla.enabled()));
    }
  if (hp.mla.enabled()) {
    fp.latent_kv = true;
    const uint64_t values = static_cast<uint64_t>(hp.n_head) *
                            static_cast<uint64_t>(hp.mla.qk_nope + hp.n_rot + hp.mla.v_head);
    const uint64_t bs = static_cast<uint64_t>(dtype_block_size(opts.kv_type));
    fp.gqa_kv_bytes_per_token_layer = (values * dtype_row_bytes(opts.kv_type, static_cast<int64_t>(bs)) + bs - 1) / bs;
    const int64_t fixed = mla_plain_floats(hp, 1, opts.max_batched_tokens);
    fp.mla_plain_bytes_per_position = 4 * static_cast<uint64_t>(mla_plain_floats(hp, 2, 0) -
                                                                mla_plain_floats(hp, 1, 0));
    fp.mla_plain_bytes = 4 * static_cast<uint64_t>(fixed) - fp.mla_plain_bytes_per_position;
    fp.mla_plain_min_prompt = hp.mla.plain_min_prompt;
  }

  const uint64_t T = static_cast<uint64_t>(opts.max_batched_tokens);
  const uint64_t R = std::min<uint64_t>(
      T, static_cast<uint64_t>(opts.max_num_seqs) + static_cast<uint64_t>(std::max(opts.draft_rows, 0)));
  const uint64_t E = static_cast<uint64_t>(hp.n_embd), KV = static_cast<uint64_t>(hp.n_embd_kv()),
                 Q = static_cast<uint64_t>(hp.n_embd_q()), F = static_cast<uint64_t>(hp.n_ff),
                 V = static_cast<uint64_t>(hp.n_vocab);
  const uint64_t widest = std::max({E, F, Q});
  fp.max_batched_tokens = opts.max_batched_tokens;
  fp.max_num_seqs = opts.max_num_seqs;
  for (const LayerSpec& l : hp.layers) fp.layer_windows.push_back(l.window);
  if (hp.has_recurrent()) {
    for (const LayerSpec& l : hp.layers) fp.layer_recurrent.push_back(l.recurrent);
    fp.state_bytes_per_seq_layer = static_cast<uint64_t>(hp.delta_net.state_floats()) * sizeof(float);
  }
  const uint64_t X = static_cast<uint64_t>(hp.n_expert), K = static_cast<uint64_t>(hp.n_expert_used),
                 FX = static_cast<uint64_t>(hp.n_ff_exp);
  const uint64_t FF = std::max(F, K * FX);  // gate/up: every (token, expert) pair's rows
  fp.layer_workspace_bytes = 4 * T * (3 * E + 2 * Q + 2 * KV + 2 * FF) +
                             4 * T * (X + 2 * K * E) +
                             2 * T * std::max((widest + 255) / 256, K * ((std::max(E, FX) + 255) / 256)) * 320 +
                             4 * T * static_cast<uint64_t>(hp.n_rot) +
                             4 * T * static_cast<uint64_t>(workspace_extra_floats(hp)) +
                             (uint64_t{1} << 20);
  fp.host_expert_workspace_bytes = hp.moe() ? 4 * T * (E + 2 * K * FX + 2 * K * E) : 0;
  fp.output_workspace_bytes = 4 * R * (V + E);
  fp.host_workspace_bytes = 4 * R * V;
  fp.cuda_matmul_scratch_bytes =
      2 * largest_expanded + 2 * T * widest + kCudaAttentionMaxWorkspace;
  fp.cuda_host_runtime_bytes = kCudaHostRuntimeBytes;
  return fp;
}

ModelFootprint model_footprint(const GgufFile& f, const ModelHParams& hp,
                               const FootprintOptions& opts) {
  std::vector<TensorSize> sizes;
  sizes.reserve(f.tensors().size());
  for (const auto& t : f.tensors())
    sizes.push_back({t.name, t.type, t.n_bytes, t.ne.empty() ? 0 : t.ne[0], t.n_rows()});
  return model_footprint(hp, sizes, opts);
}

}  // namespace pagellm
