// gemma4: Gemma 4 (text, dense). The Gemma 3 block (per-head q/k RMSNorm,
// post-attention and post-FFN norms, GELU, embeddings times sqrt(n_embd),
// final soft cap) with:
// - sliding and full layers of different shapes (attention.sliding_window_
//   pattern): sliding ones with key_length_swa heads, head_count_kv[l] KV
//   heads and their own RoPE table (rope.freq_base_swa, dimension_count_swa);
//   full ones with key_length heads and "proportional" RoPE (rope_freqs: a
//   factor per pair, 1e30 leaving a pair unrotated);
// - an unweighted RMSNorm of v and attention scale 1;
// - KV sharing: the last attention.shared_kv_layers layers have no k/v and
//   attend to the cache of the last earlier layer of their kind (llama.cpp:
//   n_kv - 2 if sliding, n_kv - 1 if full, n_kv the layers with KV);
// - per-layer inputs (model/per_layer_inputs.h) after the FFN, then the
//   whole hidden state times layer_output_scale;
// - per-layer feed_forward_length (double-wide on the shared layers).
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "model/blocks.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr AttentionOptions kAttention{.qk_norm = QkNorm::kPerHead, .post_norm = true, .v_norm = true};
constexpr FfnOptions kFfn{.post_norm = true};

// The scalar F32 tensor `name` when the file has it (a header-only file, as
// make-model reads back, has none), else 1.
float scalar_tensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t || !t->data) return 1.0f;
  if (t->type != DType::F32 || t->n_elements() != 1)
    throw FormatError(fmt::format("{}: tensor '{}' must be one F32 value", f.path(), name));
  float v;
  std::memcpy(&v, t->data, sizeof v);
  return v;
}

class Gemma4 final : public Architecture {
 public:
  const char* name() const override { return "gemma4"; }

  void configure(const GgufFile& f, ModelHParams& hp) const override {
    const std::string a = "gemma4.";
    set_gemma_common(hp, -1);
    hp.attn_scale = 1.0f;
    hp.final_softcap = positive_f32_key(f, a + "final_logit_softcapping", 0);
    hp.n_embd_per_layer = f.find(a + "embedding_length_per_layer_input")
                              ? require_positive_key(f, a + "embedding_length_per_layer_input", 1 << 16)
                              : 0;
    const int32_t window = window_key(f, a + "attention.sliding_window");
    const int32_t swa_dim = f.find(a + "attention.key_length_swa")
                                ? require_positive_key(f, a + "attention.key_length_swa", hp.head_dim)
                                : hp.head_dim;
    if (auto v = f.get_u64(a + "attention.value_length_swa"); v && static_cast<int32_t>(*v) != swa_dim)
      throw FormatError(fmt::format("{}: attention.value_length_swa {} != key_length_swa {}",
                                    f.path(), *v, swa_dim));
    const int32_t swa_rot = f.find(a + "rope.dimension_count_swa")
                                ? require_positive_key(f, a + "rope.dimension_count_swa", swa_dim)
                                : swa_dim;
    // Table 0: the full layers' (proportional when the file has rope_freqs);
    // table 1: the sliding layers'.
    if (f.find_tensor("rope_freqs.weight")) hp.rope_tables[0].factors = "rope_freqs.weight";
    RopeTableSpec swa{positive_f32_key(f, a + "rope.freq_base_swa", 10000.0f), 1.0f};
    swa.n_rot = swa_rot;
    hp.rope_tables.push_back(swa);
    std::vector<bool> sliding(static_cast<size_t>(hp.n_layer), false);
    if (const GgufValue* v = f.find(a + "attention.sliding_window_pattern")) {
      const auto& flags = v->as_array(a + "attention.sliding_window_pattern");
      if (flags.size() != static_cast<size_t>(hp.n_layer))
        throw FormatError(fmt::format("{}: attention.sliding_window_pattern has {} entries for {} layers",
                                      f.path(), flags.size(), hp.n_layer));
      for (size_t l = 0; l < flags.size(); ++l) sliding[l] = flags[l].as_bool(a + "attention.sliding_window_pattern");
    }
    for (int32_t l = 0; l < hp.n_layer; ++l) {
      LayerSpec& s = hp.layers[static_cast<size_t>(l)];
      if (sliding[static_cast<size_t>(l)]) {
        s.window = window;
        s.head_dim = swa_dim;
        s.rope_table = 1;
      }
      s.output_scale = scalar_tensor(f, fmt::format("blk.{}.layer_output_scale.weight", l));
    }
    const auto shared = f.get_u64(a + "attention.shared_kv_layers").value_or(0);
    if (shared >= static_cast<uint64_t>(hp.n_layer))
      throw FormatError(fmt::format("{}: attention.shared_kv_layers {} leaves no layer with KV of its own",
                                    f.path(), shared));
    const int32_t n_kv = hp.n_layer - static_cast<int32_t>(shared);
    for (int32_t l = n_kv; l < hp.n_layer; ++l) {
      const bool swa = sliding[static_cast<size_t>(l)];
      const int32_t src = n_kv - (swa ? 2 : 1);
      if (src < 0 || sliding[static_cast<size_t>(src)] != swa)
        throw FormatError(fmt::format("{}: shared layer {} has no earlier {} layer to read KV from",
                                      f.path(), l, swa ? "sliding" : "full"));
      hp.layers[static_cast<size_t>(l)].kv_source = src;
    }
  }

  void model_tensors(const ModelHParams& hp, TensorList& out) const override {
    if (hp.n_embd_per_layer > 0) {
      const int64_t LP = static_cast<int64_t>(hp.n_layer) * hp.n_embd_per_layer;
      out.push_back(TensorSpec::mat(MatrixRole::kPerLayerTokenEmbd, "per_layer_token_embd.weight", LP, hp.n_vocab));
      out.push_back(TensorSpec::mat(MatrixRole::kPerLayerModelProj, "per_layer_model_proj.weight", hp.n_embd, LP));
      out.push_back(TensorSpec::vec(VectorRole::kPerLayerProjNorm, "per_layer_proj_norm.weight", hp.n_embd_per_layer));
    }
    out.push_back(TensorSpec::vec(VectorRole::kRopeFreqs, "rope_freqs.weight", hp.n_rot / 2, /*optional=*/true));
  }

  void layer_tensors(const ModelHParams& hp, int32_t l, TensorList& out) const override {
    attention_tensors(hp, l, kAttention, out);
    ffn_tensors(hp, l, kFfn, out);
    if (hp.n_embd_per_layer > 0) per_layer_input_tensors(hp, l, out);
  }

  void run_layer(LayerContext& c) const override {
    attention_block(c, kAttention);
    ffn_block(c, kFfn);
    if (c.hp.n_embd_per_layer > 0) per_layer_input_block(c);
  }
};

}  // namespace

std::unique_ptr<Architecture> make_gemma4() { return std::make_unique<Gemma4>(); }

}  // namespace pagellm
