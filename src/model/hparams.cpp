#include "model/hparams.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/registry.h"
#include "util/error.h"

namespace pagellm {

int32_t require_positive_key(const GgufFile& f, const std::string& key, int64_t max) {
  uint64_t v = f.require_u64(key);
  if (v == 0 || v > static_cast<uint64_t>(max))
    throw FormatError(
        fmt::format("{}: key '{}': value {} out of range [1, {}]", f.path(), key, v, max));
  return static_cast<int32_t>(v);
}

std::vector<int32_t> per_layer_key(const GgufFile& f, const std::string& key, int32_t n,
                                   int64_t max) {
  const GgufValue* v = f.find(key);
  if (!v || v->type() != GgufType::ARRAY)
    return std::vector<int32_t>(static_cast<size_t>(n), require_positive_key(f, key, max));
  const auto& a = v->as_array(key);
  if (a.size() != static_cast<size_t>(n))
    throw FormatError(
        fmt::format("{}: key '{}' has {} values for {} layers", f.path(), key, a.size(), n));
  std::vector<int32_t> out;
  for (const GgufValue& e : a) {
    const int64_t x = e.as_i64(key);
    if (x <= 0 || x > max)
      throw FormatError(
          fmt::format("{}: key '{}': value {} out of range [1, {}]", f.path(), key, x, max));
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

namespace {

// Fills each layer's head size from the model's where the family left it,
// and checks the per-layer shapes and KV sharing against the model's.
void check_layer_shapes(const GgufFile& f, ModelHParams& hp) {
  for (int32_t i = 0; i < hp.n_layer; ++i) {
    LayerSpec& l = hp.layers[static_cast<size_t>(i)];
    if (l.head_dim == 0) l.head_dim = hp.head_dim;
    const int32_t src = l.kv_source;
    if (l.head_dim > hp.head_dim || l.n_ff > hp.n_ff || l.n_head_kv > hp.n_head_kv || src >= i ||
        (src >= 0 && (!hp.owns_kv(src) || hp.layer(src).window != l.window ||
                      hp.layer(src).head_dim != l.head_dim ||
                      hp.layer(src).n_head_kv != l.n_head_kv)))
      throw FormatError(fmt::format("{}: bad shape or KV sharing of layer {} from architecture '{}'",
                                    f.path(), i, hp.arch));
  }
}

}  // namespace

const char* ModelHParams::no_prefix_tier_reason() const {
  if (has_recurrent())
    return "models with recurrent layers would need their state checkpoints in the tier too";
  // Windowed layers form KV groups beside the full one (kvcache/kv_group.h).
  if (std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.window > 0; }))
    return "sliding-window layers keep no whole prefix";
  return nullptr;
}

ModelHParams ModelHParams::from_gguf(const GgufFile& f) {
  ModelHParams hp;
  hp.arch = f.require_str("general.architecture");
  const Architecture& arch = find_architecture(hp.arch, f.path());
  const std::string a = hp.arch + ".";
  hp.n_embd = require_positive_key(f, a + "embedding_length");
  hp.n_layer = require_positive_key(f, a + "block_count", 4096);
  hp.n_head = require_positive_key(f, a + "attention.head_count", 4096);
  // feed_forward_length and head_count_kv may be per-layer arrays (Gemma 4):
  // the model's values are the largest, each layer's go to its LayerSpec.
  const std::vector<int32_t> n_ff = per_layer_key(f, a + "feed_forward_length", hp.n_layer);
  hp.n_ff = *std::max_element(n_ff.begin(), n_ff.end());
  hp.n_ctx_train = require_positive_key(f, a + "context_length");
  const std::vector<int32_t> n_head_kv =
      f.find(a + "attention.head_count_kv")
          ? per_layer_key(f, a + "attention.head_count_kv", hp.n_layer, 4096)
          : std::vector<int32_t>(static_cast<size_t>(hp.n_layer), hp.n_head);
  hp.n_head_kv = *std::max_element(n_head_kv.begin(), n_head_kv.end());
  for (int32_t kv : n_head_kv)
    if (hp.n_head % kv != 0)
      throw FormatError(fmt::format("{}: head_count {} is not a multiple of head_count_kv {}",
                                    f.path(), hp.n_head, kv));
  if (f.find(a + "attention.key_length")) {
    hp.head_dim = require_positive_key(f, a + "attention.key_length", 1 << 16);
  } else {
    if (hp.n_embd % hp.n_head != 0)
      throw FormatError(fmt::format("{}: embedding_length {} is not a multiple of head_count {}",
                                    f.path(), hp.n_embd, hp.n_head));
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  hp.n_rot = f.find(a + "rope.dimension_count") ? require_positive_key(f, a + "rope.dimension_count")
                                                : hp.head_dim;
  if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0)
    throw FormatError(
        fmt::format("{}: rope.dimension_count {} must be even and at most the head "
                    "size {}",
                    f.path(), hp.n_rot, hp.head_dim));
  if (auto base = f.get_f64(a + "rope.freq_base")) hp.rope_freq_base = static_cast<float>(*base);
  if (!(hp.rope_freq_base > 0))
    throw FormatError(fmt::format("{}: rope.freq_base must be positive", f.path()));
  // Linear scaling: "rope.scaling.type" = "linear" with "rope.scaling.factor", or
  // the older "rope.scale_linear". LongRoPE (Phi-3) and Llama 3 scaling come as
  // frequency-factor tensors, which the family names.
  double factor = 1.0;
  auto type = f.get_str(a + "rope.scaling.type");
  if (auto fac = f.get_f64(a + "rope.scaling.factor"); fac && (!type || *type == "linear"))
    factor = *fac;
  else if (auto lin = f.get_f64(a + "rope.scale_linear"))
    factor = *lin;
  if (type && *type != "linear" && *type != "none" && *type != "longrope" && *type != "llama3" &&
      *type != "yarn")
    throw FormatError(fmt::format(
        "{}: rope scaling type '{}' is not supported (supported: linear, llama3, longrope, yarn)",
        f.path(), *type));
  // YaRN: the factor goes into per-pair divisors (model/rope_yarn.h), not the
  // linear scale; the original context defaults to context_length as in llama.cpp.
  YarnSpec yarn;
  if (type && *type == "yarn") {
    yarn.factor = static_cast<float>(f.get_f64(a + "rope.scaling.factor").value_or(1.0));
    if (!(yarn.factor >= 1))
      throw FormatError(fmt::format("{}: YaRN scaling factor must be at least 1", f.path()));
    yarn.orig_ctx = f.find(a + "rope.scaling.original_context_length")
                        ? require_positive_key(f, a + "rope.scaling.original_context_length")
                        : require_positive_key(f, a + "context_length");
    yarn.beta_fast = static_cast<float>(f.get_f64(a + "rope.scaling.yarn_beta_fast").value_or(32.0));
    yarn.beta_slow = static_cast<float>(f.get_f64(a + "rope.scaling.yarn_beta_slow").value_or(1.0));
    if (!(yarn.beta_fast > 0) || !(yarn.beta_slow > 0))
      throw FormatError(fmt::format("{}: YaRN betas must be positive", f.path()));
    factor = 1.0;
  }
  if (!(factor > 0))
    throw FormatError(fmt::format("{}: rope scaling factor must be positive", f.path()));
  hp.rope_freq_scale = static_cast<float>(1.0 / factor);
  if (auto eps = f.get_f64(a + "attention.layer_norm_rms_epsilon"))
    hp.rms_eps = static_cast<float>(*eps);

  if (const auto n = f.get_u64(a + "expert_count"); n && *n > 0) {
    hp.n_expert = require_positive_key(f, a + "expert_count", 4096);
    if (!f.find(a + "expert_used_count"))
      throw FormatError(fmt::format("{}: missing key '{}expert_used_count' (expert_count is {})",
                                    f.path(), a, hp.n_expert));
    hp.n_expert_used = require_positive_key(f, a + "expert_used_count", hp.n_expert);
    hp.n_ff_exp = f.find(a + "expert_feed_forward_length")
                      ? require_positive_key(f, a + "expert_feed_forward_length")
                      : hp.n_ff;
  }

  const auto* emb = f.find_tensor("token_embd.weight");
  if (!emb) throw FormatError(fmt::format("{}: missing tensor 'token_embd.weight'", f.path()));
  if (emb->ne.size() != 2 || emb->ne[0] != hp.n_embd)
    throw FormatError(fmt::format("{}: tensor 'token_embd.weight' has the wrong shape", f.path()));
  hp.n_vocab = static_cast<int32_t>(emb->ne[1]);

  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  hp.rope_tables = {{.freq_base = hp.rope_freq_base,
                     .freq_scale = hp.rope_freq_scale,
                     .attn_factor = yarn_magnitude(yarn.factor),
                     .yarn = yarn}};
  hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerSpec{});
  for (int32_t l = 0; l < hp.n_layer; ++l) {
    hp.layers[static_cast<size_t>(l)].n_ff = n_ff[static_cast<size_t>(l)];
    hp.layers[static_cast<size_t>(l)].n_head_kv = n_head_kv[static_cast<size_t>(l)];
  }
  arch.configure(f, hp);
  check_layer_shapes(f, hp);
  // MLA's value_length is its latent size (the family checks it).
  if (auto vl = f.get_u64(a + "attention.value_length");
      vl && static_cast<int32_t>(*vl) != hp.head_dim && !hp.mla.enabled())
    throw FormatError(
        fmt::format("{}: attention.value_length {} != key_length {} (not supported)", f.path(),
                    *vl, hp.head_dim));
  for (const LayerSpec& l : hp.layers)
    if (l.rope_table < 0 || static_cast<size_t>(l.rope_table) >= hp.rope_tables.size() ||
        l.window < 0)
      throw FormatError(fmt::format("{}: bad layer spec from architecture '{}'", f.path(), hp.arch));
  return hp;
}

}  // namespace pagellm
