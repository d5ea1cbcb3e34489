#include "model/blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/mla_block.h"
#include "util/error.h"

namespace pagellm {

namespace {

std::string layer_name(int32_t layer, const char* what) {
  return fmt::format("blk.{}.{}.weight", layer, what);
}

// y_i = x' W_i^T with x' = rms_norm(x) when there is a norm weight.
void maybe_norm_matmul(LayerContext& c, const float* norm, std::initializer_list<MatmulOutput> outs) {
  if (norm)
    c.b.norm_matmul(c.x, norm, c.hp.rms_eps, c.h, c.T, outs);
  else
    c.b.matmul(c.x, c.T, outs);
}

// The block's output y ([T][n_embd], not yet added): post-norm, then x += y.
void post_norm_add(LayerContext& c, float* y, const float* norm) {
  const int64_t E = c.hp.n_embd;
  c.b.rms_norm(y, norm, y, c.T, E, c.hp.rms_eps);
  c.b.add_inplace(c.x, y, c.T * E);
}

}  // namespace

int64_t workspace_extra_floats(const ModelHParams& hp) {
  int64_t n = hp.attn_output_gate ? 3 * static_cast<int64_t>(hp.n_embd_q()) : 0;
  if (hp.has_recurrent()) {
    const DeltaNetShape& d = hp.delta_net;
    n = std::max<int64_t>(n, 2 * d.channels() + 2 * d.inner() + 2 * d.n_v_heads);
  }
  return std::max(n, mla_workspace_floats(hp));
}

void set_window_pattern(ModelHParams& hp, int32_t window, int32_t pattern) {
  for (int32_t l = 0; l < hp.n_layer; ++l)
    hp.layers[static_cast<size_t>(l)].window = l % pattern < pattern - 1 ? window : 0;
}

void set_gemma_common(ModelHParams& hp, int32_t layers_27b) {
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.ffn_act = Activation::kGeluTanh;
  hp.rope_style = RopeStyle::kNeox;
  const int32_t d = hp.n_layer == layers_27b ? hp.n_embd / hp.n_head : hp.head_dim;
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(d));
}

int32_t window_key(const GgufFile& f, const std::string& key) {
  const auto v = f.get_u64(key);
  if (!v || *v == 0) return 0;
  return require_positive_key(f, key, 1 << 30);
}

float positive_f32_key(const GgufFile& f, const std::string& key, float fallback) {
  const auto v = f.get_f64(key);
  if (!v) return fallback;
  if (!(*v > 0)) throw FormatError(fmt::format("{}: key '{}' must be positive", f.path(), key));
  return static_cast<float>(*v);
}

void attention_tensors(const ModelHParams& hp, int32_t l, const AttentionOptions& o,
                       TensorList& out) {
  const int64_t E = hp.n_embd, Q = hp.n_embd_q(l), KV = hp.n_embd_kv(l), D = hp.layer(l).head_dim;
  const bool own_kv = hp.layer(l).kv_source < 0;
  if (o.pre_norm) out.push_back(TensorSpec::vec(VectorRole::kAttnNorm, layer_name(l, "attn_norm"), E));
  if (o.fused_qkv) {
    const std::string n = layer_name(l, "attn_qkv");
    const int64_t rows = Q + 2 * KV;
    out.push_back(TensorSpec::part(MatrixRole::kQ, n, E, 0, Q, rows));
    out.push_back(TensorSpec::part(MatrixRole::kK, n, E, Q, KV, rows));
    out.push_back(TensorSpec::part(MatrixRole::kV, n, E, Q + KV, KV, rows));
  } else {
    const auto bias = [&](VectorRole r, const char* what, int64_t n) {
      if (o.bias) out.push_back(TensorSpec::vec(r, fmt::format("blk.{}.{}.bias", l, what), n));
    };
    // A gated output: per head [q, gate] rows.
    out.push_back(TensorSpec::mat(MatrixRole::kQ, layer_name(l, "attn_q"), E,
                                  hp.attn_output_gate ? 2 * Q : Q));
    bias(VectorRole::kQBias, "attn_q", Q);
    if (own_kv) {
      out.push_back(TensorSpec::mat(MatrixRole::kK, layer_name(l, "attn_k"), E, KV));
      bias(VectorRole::kKBias, "attn_k", KV);
      out.push_back(TensorSpec::mat(MatrixRole::kV, layer_name(l, "attn_v"), E, KV));
      bias(VectorRole::kVBias, "attn_v", KV);
    }
  }
  if (o.qk_norm != QkNorm::kNone) {
    const bool whole = o.qk_norm == QkNorm::kWhole;
    out.push_back(TensorSpec::vec(VectorRole::kQNorm, layer_name(l, "attn_q_norm"), whole ? Q : D));
    if (own_kv)
      out.push_back(TensorSpec::vec(VectorRole::kKNorm, layer_name(l, "attn_k_norm"), whole ? KV : D));
  }
  out.push_back(TensorSpec::mat(MatrixRole::kOut, layer_name(l, "attn_output"), Q, E));
  if (o.out_bias)
    out.push_back(TensorSpec::vec(VectorRole::kOutBias, fmt::format("blk.{}.attn_output.bias", l), E));
  if (o.sinks) out.push_back(TensorSpec::vec(VectorRole::kAttnSinks, layer_name(l, "attn_sinks"), hp.n_head));
  if (o.post_norm)
    out.push_back(TensorSpec::vec(VectorRole::kAttnPostNorm, layer_name(l, o.post_norm_name), E));
}

static void dense_ffn_tensors(const ModelHParams& hp, int32_t l, const FfnOptions& o, TensorList& out);

void ffn_tensors(const ModelHParams& hp, int32_t l, const FfnOptions& o, TensorList& out) {
  const int64_t E = hp.n_embd;
  if (o.pre_norm) out.push_back(TensorSpec::vec(VectorRole::kFfnNorm, layer_name(l, o.pre_norm_name), E));
  if (hp.moe_layer(l)) {
    const int64_t X = hp.n_expert, FX = hp.n_ff_exp;
    out.push_back(TensorSpec::mat(MatrixRole::kRouter, layer_name(l, "ffn_gate_inp"), E, X));
    // The router's selection bias (DeepSeek V3's sigmoid routing), when the file has one.
    out.push_back(TensorSpec::vec(VectorRole::kExpProbsB, fmt::format("blk.{}.exp_probs_b.bias", l), X,
                                  /*optional=*/true));
    out.push_back(TensorSpec::experts(MatrixRole::kGateExps, layer_name(l, "ffn_gate_exps"), E, FX, X));
    out.push_back(TensorSpec::experts(MatrixRole::kUpExps, layer_name(l, "ffn_up_exps"), E, FX, X));
    out.push_back(TensorSpec::experts(MatrixRole::kDownExps, layer_name(l, "ffn_down_exps"), FX, E, X));
    if (o.expert_bias) {
      const auto bias = [&](VectorRole r, const char* what, int64_t n, int64_t n1) {
        out.push_back(TensorSpec::vec2(r, fmt::format("blk.{}.{}.bias", l, what), n, n1));
      };
      out.push_back(TensorSpec::vec(VectorRole::kRouterBias, fmt::format("blk.{}.ffn_gate_inp.bias", l), X));
      bias(VectorRole::kGateExpsBias, "ffn_gate_exps", FX, X);
      bias(VectorRole::kUpExpsBias, "ffn_up_exps", FX, X);
      bias(VectorRole::kDownExpsBias, "ffn_down_exps", E, X);
    }
    if (o.shared_expert) {
      const int64_t FS = hp.n_ff_shexp;
      if (o.shared_expert_gate)
        out.push_back(TensorSpec::mat(MatrixRole::kShexpGate, layer_name(l, "ffn_gate_inp_shexp"), E, 1));
      out.push_back(TensorSpec::mat(MatrixRole::kGateShexp, layer_name(l, "ffn_gate_shexp"), E, FS));
      out.push_back(TensorSpec::mat(MatrixRole::kUpShexp, layer_name(l, "ffn_up_shexp"), E, FS));
      out.push_back(TensorSpec::mat(MatrixRole::kDownShexp, layer_name(l, "ffn_down_shexp"), FS, E));
    }
  } else {
    dense_ffn_tensors(hp, l, o, out);
  }
  if (o.post_norm)
    out.push_back(TensorSpec::vec(VectorRole::kFfnPostNorm, layer_name(l, o.post_norm_name), E));
}

static void dense_ffn_tensors(const ModelHParams& hp, int32_t l, const FfnOptions& o, TensorList& out) {
  const int64_t E = hp.n_embd, F = hp.layer(l).n_ff;
  if (o.fused_gate_up) {
    const std::string n = layer_name(l, "ffn_up");
    out.push_back(TensorSpec::part(MatrixRole::kGate, n, E, 0, F, 2 * F));
    out.push_back(TensorSpec::part(MatrixRole::kUp, n, E, F, F, 2 * F));
  } else {
    out.push_back(TensorSpec::mat(MatrixRole::kGate, layer_name(l, "ffn_gate"), E, F));
    out.push_back(TensorSpec::mat(MatrixRole::kUp, layer_name(l, "ffn_up"), E, F));
  }
  out.push_back(TensorSpec::mat(MatrixRole::kDown, layer_name(l, "ffn_down"), F, E));
}

void attention_block(LayerContext& c, const AttentionOptions& o) {
  const ModelHParams& hp = c.hp;
  const LayerWeights& w = c.w;
  const LayerSpec& spec = hp.layer(c.layer);
  const bool own_kv = spec.kv_source < 0;
  const MatrixView wq = w.matrix(MatrixRole::kQ).view(), wk = w.matrix(MatrixRole::kK).view(),
                   wv = w.matrix(MatrixRole::kV).view(), wo = w.matrix(MatrixRole::kOut).view();
  // A gated output: the q projection's rows [q, gate] per head go to extra,
  // then q and gate apart (rows of head_dim: even ones q, odd ones gate).
  const bool gated = hp.attn_output_gate;
  const int64_t D = spec.head_dim, QT = c.T * hp.n_embd_q(c.layer);
  float* gate = gated ? c.extra + 2 * QT : nullptr;
  // Biases run as the products' epilogues.
  if (own_kv)
    maybe_norm_matmul(c, w.vector(VectorRole::kAttnNorm),
                      {{&wq, gated ? c.extra : c.q, w.vector(VectorRole::kQBias)},
                       {&wk, c.k, w.vector(VectorRole::kKBias)},
                       {&wv, c.v, w.vector(VectorRole::kVBias)}});
  else
    maybe_norm_matmul(c, w.vector(VectorRole::kAttnNorm),
                      {{&wq, gated ? c.extra : c.q, w.vector(VectorRole::kQBias)}});
  if (gated) {
    const int64_t heads = c.T * hp.n_head;
    std::vector<int32_t> rows(static_cast<size_t>(heads));
    for (int64_t i = 0; i < heads; ++i) rows[static_cast<size_t>(i)] = static_cast<int32_t>(2 * i);
    c.b.gather_rows(c.extra, D, rows.data(), heads, c.q);
    for (int32_t& r : rows) ++r;
    c.b.gather_rows(c.extra, D, rows.data(), heads, gate);
  }
  if (o.qk_norm != QkNorm::kNone) {
    // Per head: the rows are the heads; whole: the rows are the tokens.
    const bool head = o.qk_norm == QkNorm::kPerHead;
    c.b.rms_norm(c.q, w.vector(VectorRole::kQNorm), c.q, head ? c.T * hp.n_head : c.T,
                 head ? D : hp.n_embd_q(c.layer), hp.rms_eps);
    if (own_kv)
      c.b.rms_norm(c.k, w.vector(VectorRole::kKNorm), c.k, head ? c.T * spec.n_head_kv : c.T,
                   head ? D : hp.n_embd_kv(c.layer), hp.rms_eps);
  }
  if (o.v_norm && own_kv) c.b.rms_norm(c.v, nullptr, c.v, c.T * spec.n_head_kv, D, hp.rms_eps);
  // Attention reads every K/V back from the cache, after rounding to its
  // dtype, including this step's tokens: results do not depend on chunking.
  // A layer that shares KV only rotates q (its source wrote this step's K/V).
  if (!own_kv) {
    if (spec.rope)
      c.b.rope(c.q, hp.n_embd_q(c.layer), hp.n_head, static_cast<int32_t>(D), hp.rope_style,
               spec.rope_table);
  } else if (spec.rope) {
    c.b.rope_kv_write(c.cache, c.q, hp.n_head, c.k, c.v, hp.rope_style, spec.rope_table);
  } else {
    c.b.kv_write(c.cache, c.k, c.v);
  }
  c.cache.sinks = w.vector(VectorRole::kAttnSinks);
  const float* out_bias = w.vector(VectorRole::kOutBias);
  if (gated) {
    // out = W_o (sigmoid(gate) * attention), added to the residual stream.
    c.b.paged_attention(c.cache, c.q, c.attn, hp.n_head, hp.attn_scale);
    c.b.glu(Activation::kSigmoid, gate, c.attn, QT);
    c.b.matmul(gate, c.T,
               {{.w = &wo, .y = c.h, .bias = out_bias, .add_to = o.post_norm ? nullptr : c.x}});
    if (o.post_norm) post_norm_add(c, c.h, w.vector(VectorRole::kAttnPostNorm));
  } else if (o.post_norm) {
    c.b.attention_matmul(c.cache, c.q, c.attn, hp.n_head, hp.attn_scale, c.T,
                         {{&wo, c.h, out_bias}});
    post_norm_add(c, c.h, w.vector(VectorRole::kAttnPostNorm));
  } else {
    // The residual add (x += h) runs as the product's epilogue.
    c.b.attention_matmul(c.cache, c.q, c.attn, hp.n_head, hp.attn_scale, c.T,
                         {{.w = &wo, .y = c.h, .bias = out_bias, .add_to = c.x}});
  }
}

namespace {

void moe_ffn(LayerContext& c, const FfnOptions& o) {
  const ModelHParams& hp = c.hp;
  const LayerWeights& w = c.w;
  Backend& b = c.b;
  const int64_t E = hp.n_embd, FX = hp.n_ff_exp, X = hp.n_expert;
  const int32_t k = hp.n_expert_used;
  // x' (the normed rows) stays in h: the experts read it after routing.
  const float* xn = c.x;
  if (const float* norm = w.vector(VectorRole::kFfnNorm)) {
    b.rms_norm(c.x, norm, c.h, c.T, E, hp.rms_eps);
    xn = c.h;
  }
  const MatrixView router = w.matrix(MatrixRole::kRouter).view();
  const float* router_bias = w.vector(VectorRole::kRouterBias);
  // A shared expert: its gate logits follow the router's (one per token), and
  // it runs now on the layer's backend, before the routed experts (whose sum
  // may come back into h, where x' is).
  const bool shared = o.shared_expert;
  float* shared_y = nullptr;
  if (shared) {
    const MatrixView sg = o.shared_expert_gate ? w.matrix(MatrixRole::kShexpGate).view() : MatrixView{},
                     g = w.matrix(MatrixRole::kGateShexp).view(),
                     u = w.matrix(MatrixRole::kUpShexp).view(),
                     d = w.matrix(MatrixRole::kDownShexp).view();
    const int64_t FS = hp.n_ff_shexp;
    float* gate = c.shexp;
    float* up = gate + c.T * FS;
    shared_y = up + c.T * FS;
    if (o.shared_expert_gate)
      b.matmul(xn, c.T,
               {{&router, c.router, router_bias}, {&sg, c.router + c.T * X}, {&g, gate}, {&u, up}});
    else
      b.matmul(xn, c.T, {{&router, c.router, router_bias}, {&g, gate}, {&u, up}});
    b.glu_matmul(hp.ffn_act, gate, up, c.T, {{&d, shared_y}});
  } else {
    b.matmul(xn, c.T, {{&router, c.router, router_bias}});
  }
  // Routing runs on the host: which expert reads which rows decides the
  // products' shapes.
  std::vector<float> host_logits;
  const float* logits = c.router;
  if (!b.uses_host_memory()) {
    host_logits.resize(static_cast<size_t>(c.T * (X + (shared ? 1 : 0))));
    b.download(host_logits.data(), c.router, host_logits.size() * sizeof(float));
    logits = host_logits.data();
  }
  MoeRouting& r = *c.routing;
  route_tokens(logits, c.T, static_cast<int32_t>(X), k, hp.router ? *hp.router : o.router,
               w.vector(VectorRole::kExpProbsB), r);
  // Experts on another backend: the normed rows go there, the sum comes back.
  Backend& eb = c.expert_b ? *c.expert_b : b;
  const size_t rows_bytes = static_cast<size_t>(c.T * E) * sizeof(float);
  if (c.expert_b) {
    b.copy_to(eb, c.expert_rows, xn, rows_bytes);
    xn = c.expert_rows;
  }
  eb.gather_rows(xn, E, r.row_token.data(), c.T * k, c.moe_x);
  const WeightMatrix &gates = w.matrix(MatrixRole::kGateExps), &ups = w.matrix(MatrixRole::kUpExps),
                     &downs = w.matrix(MatrixRole::kDownExps);
  // Expert e's biases (when the family has them): rows e of [n_expert][n_out].
  const auto expert_bias = [&](VectorRole role, int32_t e, int64_t n) -> const float* {
    const float* v = w.vector(role);
    return v ? v + e * n : nullptr;
  };
  for (int32_t e = 0; e < static_cast<int32_t>(X); ++e) {
    const int64_t row0 = r.offsets[static_cast<size_t>(e)];
    const int64_t n = r.offsets[static_cast<size_t>(e) + 1] - row0;
    if (n == 0) continue;  // an expert no token chose is not read
    const MatrixView g = gates.expert(e).view(), u = ups.expert(e).view(),
                     d = downs.expert(e).view();
    float* gate = c.gate + row0 * FX;
    float* up = c.up + row0 * FX;
    eb.matmul(c.moe_x + row0 * E, n,
              {{&g, gate, expert_bias(VectorRole::kGateExpsBias, e, FX)},
               {&u, up, expert_bias(VectorRole::kUpExpsBias, e, FX)}});
    eb.glu_matmul(hp.ffn_act, gate, up, n,
                  {{&d, c.moe_y + row0 * E, expert_bias(VectorRole::kDownExpsBias, e, E)}});
  }
  if (!shared && !c.expert_b && !o.post_norm) {  // x += the routed sum, in one pass
    b.combine_rows(c.moe_y, E, r.slot_row.data(), r.weight.data(), c.T, k, c.x, /*add=*/true);
    return;
  }
  // h = the routed sum on b (+ sigmoid(gate logit) * the shared expert's
  // output), then x += h as combine_rows adds it (x + s), or the post-norm's
  // sum: one order of additions wherever the experts ran.
  if (c.expert_b) {
    eb.combine_rows(c.moe_y, E, r.slot_row.data(), r.weight.data(), c.T, k, c.expert_rows,
                    /*add=*/false);
    eb.copy_to(b, c.h, c.expert_rows, rows_bytes);
  } else {
    b.combine_rows(c.moe_y, E, r.slot_row.data(), r.weight.data(), c.T, k, c.h, /*add=*/false);
  }
  if (shared) {
    std::vector<int32_t> rows(static_cast<size_t>(c.T));
    std::vector<float> weights(static_cast<size_t>(c.T));
    for (int64_t t = 0; t < c.T; ++t) {
      rows[static_cast<size_t>(t)] = static_cast<int32_t>(t);
      weights[static_cast<size_t>(t)] =
          o.shared_expert_gate ? 1.0f / (1.0f + std::exp(-logits[c.T * X + t])) : 1.0f;
    }
    b.combine_rows(shared_y, E, rows.data(), weights.data(), c.T, 1, c.h, /*add=*/true);
  }
  if (o.post_norm)
    post_norm_add(c, c.h, w.vector(VectorRole::kFfnPostNorm));
  else
    b.add_inplace(c.x, c.h, c.T * E);
}

}  // namespace

void per_layer_input_tensors(const ModelHParams& hp, int32_t l, TensorList& out) {
  const int64_t E = hp.n_embd, P = hp.n_embd_per_layer;
  out.push_back(TensorSpec::mat(MatrixRole::kPleGate, layer_name(l, "inp_gate"), E, P));
  out.push_back(TensorSpec::mat(MatrixRole::kPleProj, layer_name(l, "proj"), P, E));
  out.push_back(TensorSpec::vec(VectorRole::kPleNorm, layer_name(l, "post_norm"), E));
  out.push_back(TensorSpec::vec(VectorRole::kLayerOutScale, layer_name(l, "layer_output_scale"), 1));
}

void per_layer_input_block(LayerContext& c) {
  const LayerWeights& w = c.w;
  const int64_t P = c.hp.n_embd_per_layer, E = c.hp.n_embd;
  const MatrixView wg = w.matrix(MatrixRole::kPleGate).view(), wp = w.matrix(MatrixRole::kPleProj).view();
  c.b.matmul(c.x, c.T, {{&wg, c.gate}});
  c.b.glu(Activation::kGeluTanh, c.gate, c.layer_input, c.T * P);
  c.b.matmul(c.gate, c.T, {{&wp, c.h}});
  post_norm_add(c, c.h, w.vector(VectorRole::kPleNorm));
  // x *= the layer's scale (read at load: LayerSpec::output_scale), as a
  // one-row weighted sum into h, copied back.
  const float scale = c.hp.layer(c.layer).output_scale;
  if (scale == 1.0f) return;
  std::vector<int32_t> rows(static_cast<size_t>(c.T));
  for (int64_t t = 0; t < c.T; ++t) rows[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const std::vector<float> weights(static_cast<size_t>(c.T), scale);
  c.b.combine_rows(c.x, E, rows.data(), weights.data(), c.T, 1, c.h, /*add=*/false);
  c.b.copy(c.x, c.h, static_cast<size_t>(c.T * E) * sizeof(float));
}

void ffn_block(LayerContext& c, const FfnOptions& o) {
  if (c.hp.moe_layer(c.layer)) return moe_ffn(c, o);
  const LayerWeights& w = c.w;
  const MatrixView wg = w.matrix(MatrixRole::kGate).view(), wu = w.matrix(MatrixRole::kUp).view(),
                   wd = w.matrix(MatrixRole::kDown).view();
  maybe_norm_matmul(c, w.vector(VectorRole::kFfnNorm), {{&wg, c.gate}, {&wu, c.up}});
  if (o.post_norm) {
    c.b.glu_matmul(c.hp.ffn_act, c.gate, c.up, c.T, {{&wd, c.h}});
    post_norm_add(c, c.h, w.vector(VectorRole::kFfnPostNorm));
  } else {
    c.b.glu_matmul(c.hp.ffn_act, c.gate, c.up, c.T, {{.w = &wd, .y = c.h, .add_to = c.x}});
  }
}

}  // namespace pagellm
