#include "model/make_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include <cmath>
#include <optional>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/convert.h"
#include "model/architecture.h"
#include "model/registry.h"
#include "model/hparams.h"
#include "util/error.h"

namespace pagellm {

namespace {

// SplitMix64: a small, fast, well-mixed generator; one stream per chunk of
// rows so the output does not depend on the thread count.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() {
    return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
};

// Fills x with mean + std * N(0,1) (Box-Muller).
void fill_normal(SplitMix& rng, float* x, int64_t n, float mean, float std) {
  for (int64_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(rng.uniform()));
    const double th = 2.0 * M_PI * rng.uniform();
    x[i] = mean + std * static_cast<float>(r * std::cos(th));
    if (i + 1 < n) x[i + 1] = mean + std * static_cast<float>(r * std::sin(th));
  }
}

uint64_t stream_seed(uint64_t seed, uint64_t tensor, uint64_t row) {
  SplitMix m{seed ^ (tensor * 0x100000001b3ull) ^ (row * 0xc2b2ae3d27d4eb4full)};
  return m.next();
}

}  // namespace

namespace {

// Gemma 4 as the E2B-like reference (golden/arch2026): even layers sliding
// (window sliding_window or 32) with half-size heads and n_head_kv KV heads,
// odd layers full with half as many KV heads; the second half of the layers
// share KV (double-wide FFN there); per-layer inputs of 32 (or one block).
void set_gemma4_keys(const MakeModelSpec& s, GgufWriter& w) {
  const std::string a = "gemma4.";
  const int32_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int32_t shared = s.n_layer / 2 / 2 * 2;  // even: the sources stay one of each kind
  std::vector<int32_t> ff, kv;
  std::vector<GgufValue> sliding;
  for (int32_t l = 0; l < s.n_layer; ++l) {
    ff.push_back(l >= s.n_layer - shared ? 2 * s.n_ff : s.n_ff);
    kv.push_back(l % 2 == 0 ? s.n_head_kv : std::max(1, s.n_head_kv / 2));
    sliding.push_back(GgufValue::boolean(l % 2 == 0));
  }
  w.set(a + "feed_forward_length", GgufValue::i32_array(ff));
  w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
  w.set(a + "attention.sliding_window_pattern", GgufValue::array(GgufType::BOOL, std::move(sliding)));
  w.set(a + "attention.sliding_window",
        GgufValue::u32(static_cast<uint32_t>(s.sliding_window > 0 ? s.sliding_window : 32)));
  w.set(a + "attention.key_length", GgufValue::u32(static_cast<uint32_t>(head_dim)));
  w.set(a + "attention.value_length", GgufValue::u32(static_cast<uint32_t>(head_dim)));
  w.set(a + "attention.key_length_swa", GgufValue::u32(static_cast<uint32_t>(head_dim / 2)));
  w.set(a + "attention.value_length_swa", GgufValue::u32(static_cast<uint32_t>(head_dim / 2)));
  w.set(a + "rope.dimension_count_swa", GgufValue::u32(static_cast<uint32_t>(head_dim / 2)));
  w.set(a + "rope.freq_base_swa", GgufValue::f32(10000.0f));
  w.set(a + "attention.shared_kv_layers", GgufValue::u32(static_cast<uint32_t>(shared)));
  w.set(a + "embedding_length_per_layer_input",
        GgufValue::u32(static_cast<uint32_t>(std::max<int64_t>(32, dtype_traits(s.type).block_size))));
  w.set(a + "final_logit_softcapping", GgufValue::f32(30.0f));
}

// gpt-oss's YaRN as the real models have it (factor 32), over a quarter of
// the context as the original one.
void set_gpt_oss_keys(const MakeModelSpec& s, GgufWriter& w) {
  const std::string a = "gpt-oss.";
  w.set(a + "rope.scaling.type", GgufValue::str("yarn"));
  w.set(a + "rope.scaling.factor", GgufValue::f32(32.0f));
  w.set(a + "rope.scaling.original_context_length",
        GgufValue::u32(static_cast<uint32_t>(std::max(1, s.n_ctx / 4))));
  w.set(a + "rope.scaling.yarn_beta_fast", GgufValue::f32(32.0f));
  w.set(a + "rope.scaling.yarn_beta_slow", GgufValue::f32(1.0f));
}

// deepseek2 as the current converter writes it (golden/arch2026's keys).
void set_deepseek2_keys(const MakeModelSpec& s, GgufWriter& w) {
  const std::string a = "deepseek2.";
  const int32_t qk = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.set(a + "attention.kv_lora_rank", u32(s.kv_lora_rank));
  w.set(a + "attention.q_lora_rank", u32(0));
  w.set(a + "attention.key_length", u32(s.kv_lora_rank + s.rope_dims));
  w.set(a + "attention.value_length", u32(s.kv_lora_rank));
  w.set(a + "attention.key_length_mla", u32(qk));
  w.set(a + "attention.value_length_mla", u32(qk));
  w.set(a + "rope.scaling.type", GgufValue::str("yarn"));
  w.set(a + "rope.scaling.factor", GgufValue::f32(4.0f));
  w.set(a + "rope.scaling.original_context_length", u32(std::max(1, s.n_ctx / 4)));
  w.set(a + "rope.scaling.yarn_log_multiplier", GgufValue::f32(0.1f));
  w.set(a + "leading_dense_block_count", u32(1));
  w.set(a + "expert_shared_count", u32(1));
  w.set(a + "expert_weights_scale", GgufValue::f32(2.5f));
  w.set(a + "expert_gating_func", u32(s.expert_gating));
}

// The family's keys beyond the common ones, as make-model sets them.
void set_family_keys(const MakeModelSpec& s, GgufWriter& w) {
  const std::string a = s.arch + ".";
  if (s.n_expert > 0) {
    w.set(a + "expert_count", GgufValue::u32(static_cast<uint32_t>(s.n_expert)));
    w.set(a + "expert_used_count", GgufValue::u32(static_cast<uint32_t>(s.n_expert_used)));
    if (s.n_ff_exp > 0)
      w.set(a + "expert_feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.n_ff_exp)));
  }
  if (s.head_dim > 0 && s.arch != "deepseek2") {
    w.set(a + "attention.key_length", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
    w.set(a + "attention.value_length", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
  }
  if (s.sliding_window > 0)
    w.set(a + "attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(s.sliding_window)));
  if (s.arch == "qwen35" || s.arch == "qwen35moe") {
    w.set(a + "ssm.conv_kernel", GgufValue::u32(static_cast<uint32_t>(s.ssm_conv_kernel)));
    w.set(a + "ssm.state_size", GgufValue::u32(static_cast<uint32_t>(s.ssm_state_size)));
    w.set(a + "ssm.group_count", GgufValue::u32(static_cast<uint32_t>(s.ssm_group_count)));
    w.set(a + "ssm.time_step_rank", GgufValue::u32(static_cast<uint32_t>(s.ssm_v_heads)));
    // Qwen3.5's v heads are as wide as its q/k heads.
    w.set(a + "ssm.inner_size",
          GgufValue::u32(static_cast<uint32_t>(s.ssm_v_heads * s.ssm_state_size)));
    w.set(a + "full_attention_interval",
          GgufValue::u32(static_cast<uint32_t>(s.full_attention_interval)));
    std::vector<GgufValue> recurrent;
    for (int32_t l = 0; l < s.n_layer; ++l)
      recurrent.push_back(GgufValue::boolean((l + 1) % s.full_attention_interval != 0));
    w.set(a + "attention.recurrent_layers", GgufValue::array(GgufType::BOOL, std::move(recurrent)));
    // imrope's sections over the rotated pairs (text positions: t = h = w,
    // so they do not change the rotation; llama.cpp requires the key).
    const int32_t pairs = s.rope_dims / 2, t = std::min((pairs + 2) / 3, pairs / 2);
    w.set(a + "rope.dimension_sections", GgufValue::i32_array({t, t, pairs - 2 * t, 0}));
    if (s.n_ff_shexp > 0)
      w.set(a + "expert_shared_feed_forward_length",
            GgufValue::u32(static_cast<uint32_t>(s.n_ff_shexp)));
  }
  if (s.arch == "deepseek2") set_deepseek2_keys(s, w);
  if (s.arch == "gpt-oss") set_gpt_oss_keys(s, w);
  if (s.arch == "gemma2") {
    w.set(a + "attn_logit_softcapping", GgufValue::f32(50.0f));
    w.set(a + "final_logit_softcapping", GgufValue::f32(30.0f));
  }
  if (s.arch == "gemma4") set_gemma4_keys(s, w);
}

// The tensor table of every layer, read back through the architecture from
// the metadata as written (a header-only file next to `path`).
std::vector<TensorSpec> layer_tables(GgufWriter meta, const std::string& path, DType type,
                                     int64_t n_embd, int64_t n_vocab, ModelHParams& hp) {
  const std::string tmp = path + ".meta.tmp";
  // The vocabulary size comes from the embedding's shape: a zeroed one.
  meta.add_tensor("token_embd.weight", type, {n_embd, n_vocab},
                  [](uint8_t* dst, size_t n) { std::fill(dst, dst + n, uint8_t{0}); });
  meta.write_file(tmp);
  std::vector<TensorSpec> out;
  try {
    auto f = GgufFile::open(tmp);
    hp = ModelHParams::from_gguf(*f);
    const Architecture& arch = find_architecture(hp.arch, f->path());
    arch.model_tensors(hp, out);
    for (int32_t l = 0; l < hp.n_layer; ++l) arch.layer_tensors(hp, l, out);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  std::remove(tmp.c_str());
  return out;
}

}  // namespace

std::vector<std::string> make_model_architectures() {
  std::vector<std::string> names = architecture_names();
  names.emplace_back("mixtral");
  return names;
}

void make_model(const MakeModelSpec& spec, const std::string& path, ThreadPool& pool) {
  MakeModelSpec s = spec;
  const bool hybrid = s.arch == "qwen35" || s.arch == "qwen35moe";
  if (s.arch == "deepseek2") {
    if (s.n_expert == 0) s.n_expert = 4;
    // Heads of at least two weight blocks, so the non-rotated half (attn_k_b's
    // rows) is whole blocks.
    const int64_t block = dtype_traits(s.type).block_size;
    if (s.head_dim == 0 && s.n_head > 0)
      s.head_dim = static_cast<int32_t>(std::max<int64_t>(s.n_embd / s.n_head, 2 * block));
    const int32_t qk = s.head_dim;
    if (s.rope_dims == 0) s.rope_dims = qk / 2 / 2 * 2;
    if (s.kv_lora_rank == 0) s.kv_lora_rank = 2 * qk;
    s.n_head_kv = 1;  // one latent per token
    if (s.kv_lora_rank < 0 || s.rope_dims >= qk || (s.expert_gating != 1 && s.expert_gating != 2) ||
        (qk - s.rope_dims) % block != 0 || s.kv_lora_rank % block != 0)
      throw ConfigError(fmt::format(
          "deepseek2: --kv-lora-rank {} must be a positive multiple of the weight block {}, as the "
          "head size {} less --rope-dims {}; --expert-gating 1 or 2",
          s.kv_lora_rank, block, qk, s.rope_dims));
  } else if (s.kv_lora_rank != 0 || s.expert_gating != 1) {
    throw ConfigError("--kv-lora-rank and --expert-gating are for deepseek2");
  }
  if (s.arch == "gpt-oss" && s.sliding_window == 0) s.sliding_window = 32;
  if (s.arch == "mixtral" || s.arch == "qwen3moe" || s.arch == "qwen35moe" || s.arch == "deepseek2" ||
      s.arch == "gpt-oss") {
    if (s.n_expert == 0) s.n_expert = 8;
    if (s.n_expert_used == 0) s.n_expert_used = std::min(2, s.n_expert);
    if (s.arch == "mixtral") s.arch = "llama";
  }
  if (!lookup_architecture(s.arch))
    throw ConfigError(fmt::format("unknown architecture '{}' (expected one of: {})", s.arch,
                                  fmt::join(make_model_architectures(), ", ")));
  if (s.n_expert < 0 || s.n_expert_used < 0 || s.n_ff_exp < 0 ||
      (s.n_expert > 0 && (s.n_expert_used == 0 || s.n_expert_used > s.n_expert)) ||
      (s.n_expert == 0 && (s.n_expert_used > 0 || s.n_ff_exp > 0)))
    throw ConfigError(fmt::format(
        "experts: --n-expert-used must be in 1..--n-expert ({} used of {}, expert ff {})",
        s.n_expert_used, s.n_expert, s.n_ff_exp));
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 ||
      s.n_ctx <= 0 || s.head_dim < 0 || s.sliding_window < 0)
    throw ConfigError("model dimensions must be positive");
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0)
    throw ConfigError(fmt::format("n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head));
  if (s.n_head % s.n_head_kv != 0)
    throw ConfigError(
        fmt::format("n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv));
  const int32_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  if (head_dim % 2 != 0) throw ConfigError("head size must be even (RoPE pairs)");
  if (s.rope_dims == 0) s.rope_dims = hybrid ? std::max(2, head_dim / 4 / 2 * 2) : head_dim;
  if (s.rope_dims < 0 || s.rope_dims > head_dim || s.rope_dims % 2 != 0)
    throw ConfigError(fmt::format("--rope-dims {} must be even and at most the head size {}",
                                  s.rope_dims, head_dim));
  if (s.n_ff_shexp < 0 || (s.n_ff_shexp > 0 && s.arch != "qwen35moe"))
    throw ConfigError("--n-ff-shexp is for qwen35moe (its shared expert)");
  if (s.arch == "qwen35moe") {  // both sizes written, as converters do
    if (s.n_ff_shexp == 0) s.n_ff_shexp = s.n_ff;
    if (s.n_ff_exp == 0) s.n_ff_exp = s.n_ff;
  }
  if (hybrid && (s.full_attention_interval <= 0 || s.ssm_conv_kernel < 2 ||
                 s.ssm_conv_kernel > 64 || s.ssm_state_size <= 0 || s.ssm_group_count <= 0 ||
                 s.ssm_v_heads <= 0 || s.ssm_v_heads % s.ssm_group_count != 0))
    throw ConfigError(fmt::format(
        "hybrid shapes: --full-attention-interval {} and --ssm-state-size {} must be positive, "
        "--ssm-conv-kernel {} in 2..64, --ssm-v-heads {} a positive multiple of "
        "--ssm-group-count {}",
        s.full_attention_interval, s.ssm_state_size, s.ssm_conv_kernel, s.ssm_v_heads,
        s.ssm_group_count));
  const auto& tr = dtype_traits(s.type);
  if (!tr.can_quantize || s.type == DType::Q8_K || s.type == DType::Q8_1)
    throw ConfigError(fmt::format("cannot write weights of type '{}'", tr.name));
  if (s.expert_type) {
    const auto& et = dtype_traits(*s.expert_type);
    if (s.n_expert == 0) throw ConfigError("--expert-type needs a model with experts");
    if (!et.can_quantize || et.type == DType::Q8_K || et.type == DType::Q8_1)
      throw ConfigError(fmt::format("cannot write experts of type '{}'", et.name));
    for (int64_t n : {int64_t{s.n_embd}, int64_t{s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff}})
      if (n % et.block_size != 0)
        throw ConfigError(fmt::format("expert row length {} is not a multiple of the {} block size {}",
                                      n, et.name, et.block_size));
  }
  for (int64_t n : {int64_t{s.n_embd}, int64_t{s.n_ff}, int64_t{head_dim} * s.n_head,
                    int64_t{s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff},
                    int64_t{s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff},
                    hybrid ? int64_t{s.ssm_v_heads} * s.ssm_state_size : int64_t{s.n_embd}})
    if (n % tr.block_size != 0)
      throw ConfigError(fmt::format("row length {} is not a multiple of the {} block size {}", n,
                                    tr.name, tr.block_size));
  if (s.vocab_from.empty()) throw ConfigError("make-model needs a vocabulary file (--vocab-from)");
  auto vocab = GgufFile::open(s.vocab_from);
  const GgufValue* tokens = vocab->find("tokenizer.ggml.tokens");
  if (!tokens) throw ConfigError(fmt::format("'{}' has no tokenizer.ggml.tokens", s.vocab_from));
  const int64_t n_vocab = static_cast<int64_t>(tokens->as_array("tokenizer.ggml.tokens").size());
  if (n_vocab == 0) throw ConfigError(fmt::format("'{}' has an empty vocabulary", s.vocab_from));

  const std::string a = s.arch + ".";
  const int64_t E = s.n_embd;
  GgufWriter w;
  w.set("general.architecture", GgufValue::str(s.arch));
  w.set("general.name", GgufValue::str(fmt::format("pagellm random {} {}", s.arch, tr.name)));
  w.set(a + "context_length", GgufValue::u32(static_cast<uint32_t>(s.n_ctx)));
  w.set(a + "embedding_length", GgufValue::u32(static_cast<uint32_t>(E)));
  w.set(a + "block_count", GgufValue::u32(static_cast<uint32_t>(s.n_layer)));
  w.set(a + "feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.n_ff)));
  w.set(a + "attention.head_count", GgufValue::u32(static_cast<uint32_t>(s.n_head)));
  w.set(a + "attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(s.n_head_kv)));
  w.set(a + "rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(s.rope_dims)));
  w.set(a + "rope.freq_base", GgufValue::f32(s.rope_freq_base));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
  set_family_keys(s, w);
  for (const auto& kv : vocab->metadata())
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);
  ModelHParams hp;
  const std::vector<TensorSpec> table = layer_tables(w, path, s.type, E, n_vocab, hp);

  uint64_t tensor_index = 0;
  // n_expert > 0: a stack of n_expert matrices (ne = [n_in, n_out, n_expert]).
  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out_each,
                    int64_t n_expert = 0, std::optional<DType> as = std::nullopt) {
    const uint64_t ti = tensor_index++;
    const DType type = as.value_or(s.type);
    const uint64_t seed = s.seed;
    const int64_t n_out = n_out_each * std::max<int64_t>(1, n_expert);
    std::vector<int64_t> shape = {n_in, n_out_each};
    if (n_expert > 0) shape.push_back(n_expert);
    w.add_tensor(
        name, type, shape, [&pool, type, seed, ti, n_in, n_out](uint8_t* dst, size_t) {
          const size_t row_bytes = dtype_row_bytes(type, n_in);
          pool.parallel_for(n_out, [&](int64_t b, int64_t e, int) {
            std::vector<float> row(static_cast<size_t>(n_in));
            for (int64_t r = b; r < e; ++r) {
              SplitMix rng{stream_seed(seed, ti, static_cast<uint64_t>(r))};
              fill_normal(rng, row.data(), n_in, 0.0f, 0.02f);
              quantize_row(type, row.data(), dst + static_cast<size_t>(r) * row_bytes, n_in);
            }
          });
        });
  };
  // F32 values mean + std N(0,1), of shape {n} or {n, n1}; `decay`: -exp of
  // them instead (ssm_a holds -exp(A_log): negative, so the state decays).
  auto vec = [&](const std::string& name, int64_t n, float mean, int64_t n1 = 0,
                 float std = 0.02f, bool decay = false) {
    const uint64_t ti = tensor_index++;
    const uint64_t seed = s.seed;
    std::vector<int64_t> shape = {n};
    if (n1 > 0) shape.push_back(n1);
    const int64_t count = n * std::max<int64_t>(1, n1);
    w.add_tensor(name, DType::F32, shape, [=](uint8_t* dst, size_t) {
      SplitMix rng{stream_seed(seed, ti, 0)};
      float* x = reinterpret_cast<float*>(dst);
      fill_normal(rng, x, count, mean, std);
      if (decay)
        for (int64_t i = 0; i < count; ++i) x[i] = -std::exp(x[i]);
    });
  };

  matrix("token_embd.weight", E, n_vocab);
  vec("output_norm.weight", E, 1.0f);
  if (!s.tied) matrix("output.weight", E, n_vocab);
  std::string last_fused;
  for (const TensorSpec& t : table) {
    // The router's selection bias goes with sigmoid routing only.
    if (!t.matrix && t.role == static_cast<uint8_t>(VectorRole::kExpProbsB) && s.expert_gating != 2)
      continue;
    if (t.role == static_cast<uint8_t>(MatrixRole::kShexpGate) && t.matrix) {
      vec(t.name, t.n_in, 0.0f);  // a 1-D row, F32 as converters write it
    } else if (!t.matrix && t.role == static_cast<uint8_t>(VectorRole::kSsmA)) {
      vec(t.name, t.n_in, 0.0f, 0, 0.5f, /*decay=*/true);
    } else if (!t.matrix && t.role == static_cast<uint8_t>(VectorRole::kRopeFreqs)) {
      // Proportional RoPE (Gemma 4): a quarter of the pairs rotate, the rest not.
      const int64_t n = t.n_in;
      w.add_tensor(t.name, DType::F32, {n}, [n](uint8_t* dst, size_t) {
        float* x = reinterpret_cast<float*>(dst);
        for (int64_t i = 0; i < n; ++i) x[i] = i < n / 4 ? 1.0f : 1e30f;
      });
      ++tensor_index;
    } else if (!t.matrix && t.role == static_cast<uint8_t>(VectorRole::kLayerOutScale)) {
      vec(t.name, t.n_in, 1.0f);  // 1 + 0.02 N, as the norms
    } else if (t.matrix && t.role == static_cast<uint8_t>(MatrixRole::kPerLayerModelProj)) {
      matrix(t.name, t.n_in, t.n_out, 0, DType::F32);  // F32, as converters write it
    } else if (!t.matrix && t.role == static_cast<uint8_t>(VectorRole::kSsmConv)) {
      vec(t.name, t.n_in, 0.0f, t.n_out, 0.2f);  // [kernel, channels]
    } else if (!t.matrix && t.role == static_cast<uint8_t>(VectorRole::kAttnSinks)) {
      vec(t.name, t.n_in, 0.0f, 0, 1.0f);  // logits of the scores' order, so they matter
    } else if (!t.matrix) {  // norms, biases (2-D: the experts')
      vec(t.name, t.n_in, t.name.find("norm") != std::string::npos ? 1.0f : 0.0f, t.n_out);
    } else if (t.n_expert > 0) {
      matrix(t.name, t.n_in, t.n_out, t.n_expert, s.expert_type);
    } else if (t.n_heads > 0) {  // a stack of per-head matrices (MLA's attn_k_b / attn_v_b)
      matrix(t.name, t.n_in, t.n_out, t.n_heads);
    } else if (t.role == static_cast<uint8_t>(MatrixRole::kRouter)) {
      matrix(t.name, t.n_in, t.n_out, 0, DType::F32);  // routers stay F32, as converters write them
    } else if (t.fused_rows > 0) {  // one tensor for its parts (listed together)
      if (t.name != last_fused) matrix(t.name, t.n_in, t.fused_rows);
      last_fused = t.name;
    } else {
      matrix(t.name, t.n_in, t.n_out);
    }
  }
  w.write_file(path);
}

}  // namespace pagellm
