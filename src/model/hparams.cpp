#include "model/hparams.h"

#include <fmt/format.h>

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

ModelHParams ModelHParams::from_gguf(const GgufFile& f) {
  ModelHParams hp;
  hp.arch = f.require_str("general.architecture");
  const Architecture& arch = find_architecture(hp.arch, f.path());
  const std::string a = hp.arch + ".";
  hp.n_embd = require_positive_key(f, a + "embedding_length");
  hp.n_layer = require_positive_key(f, a + "block_count", 4096);
  hp.n_head = require_positive_key(f, a + "attention.head_count", 4096);
  hp.n_ff = require_positive_key(f, a + "feed_forward_length");
  hp.n_ctx_train = require_positive_key(f, a + "context_length");
  hp.n_head_kv = f.find(a + "attention.head_count_kv")
                     ? require_positive_key(f, a + "attention.head_count_kv", 4096)
                     : hp.n_head;
  if (hp.n_head % hp.n_head_kv != 0)
    throw FormatError(fmt::format("{}: head_count {} is not a multiple of head_count_kv {}",
                                  f.path(), hp.n_head, hp.n_head_kv));
  if (f.find(a + "attention.key_length")) {
    hp.head_dim = require_positive_key(f, a + "attention.key_length", 1 << 16);
  } else {
    if (hp.n_embd % hp.n_head != 0)
      throw FormatError(fmt::format("{}: embedding_length {} is not a multiple of head_count {}",
                                    f.path(), hp.n_embd, hp.n_head));
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  if (auto vl = f.get_u64(a + "attention.value_length");
      vl && static_cast<int32_t>(*vl) != hp.head_dim)
    throw FormatError(
        fmt::format("{}: attention.value_length {} != key_length {} (not supported)", f.path(),
                    *vl, hp.head_dim));
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
  if (type && *type != "linear" && *type != "none" && *type != "longrope" && *type != "llama3")
    throw FormatError(fmt::format(
        "{}: rope scaling type '{}' is not supported (supported: linear, llama3, longrope)",
        f.path(), *type));
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
  hp.rope_tables = {{hp.rope_freq_base, hp.rope_freq_scale, "", 1.0f}};
  hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerSpec{});
  arch.configure(f, hp);
  for (const LayerSpec& l : hp.layers)
    if (l.rope_table < 0 || static_cast<size_t>(l.rope_table) >= hp.rope_tables.size() ||
        l.window < 0)
      throw FormatError(fmt::format("{}: bad layer spec from architecture '{}'", f.path(), hp.arch));
  return hp;
}

}  // namespace pagellm
