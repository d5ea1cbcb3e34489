#include "model/mla_block.h"

#include <fmt/format.h>

#include <numeric>
#include <vector>

#include "util/error.h"

namespace pagellm {

namespace {

std::string layer_name(int32_t layer, const char* what) {
  return fmt::format("blk.{}.{}.weight", layer, what);
}

// The block's sizes. Rows are moved between buffers with gather_rows in
// pieces of g floats (g divides every part of a row).
struct MlaDims {
  int64_t H, dn, dr, dq, L, dv, dk, ql, g;
  explicit MlaDims(const ModelHParams& hp)
      : H(hp.n_head),
        dn(hp.mla.qk_nope),
        dr(hp.n_rot),
        dq(dn + dr),
        L(hp.mla.kv_lora_rank),
        dv(hp.mla.v_head),
        dk(L + dr),
        ql(hp.mla.q_lora_rank),
        g(std::gcd(std::gcd(dn, dr), std::gcd(L, dv))) {}
};

}  // namespace

void mla_attention_tensors(const ModelHParams& hp, int32_t l, TensorList& out) {
  const MlaDims d(hp);
  const int64_t E = hp.n_embd;
  out.push_back(TensorSpec::vec(VectorRole::kAttnNorm, layer_name(l, "attn_norm"), E));
  if (d.ql > 0) {
    out.push_back(TensorSpec::mat(MatrixRole::kQA, layer_name(l, "attn_q_a"), E, d.ql));
    out.push_back(TensorSpec::vec(VectorRole::kQANorm, layer_name(l, "attn_q_a_norm"), d.ql));
    out.push_back(TensorSpec::mat(MatrixRole::kQB, layer_name(l, "attn_q_b"), d.ql, d.H * d.dq));
  } else {
    out.push_back(TensorSpec::mat(MatrixRole::kQ, layer_name(l, "attn_q"), E, d.H * d.dq));
  }
  out.push_back(TensorSpec::mat(MatrixRole::kKvA, layer_name(l, "attn_kv_a_mqa"), E, d.dk));
  out.push_back(TensorSpec::vec(VectorRole::kKvANorm, layer_name(l, "attn_kv_a_norm"), d.L));
  out.push_back(TensorSpec::heads(MatrixRole::kKB, layer_name(l, "attn_k_b"), d.dn, d.L, d.H));
  out.push_back(TensorSpec::heads(MatrixRole::kVB, layer_name(l, "attn_v_b"), d.L, d.dv, d.H));
  out.push_back(TensorSpec::mat(MatrixRole::kOut, layer_name(l, "attn_output"), d.H * d.dv, E));
}

int64_t mla_workspace_floats(const ModelHParams& hp) {
  if (!hp.mla.enabled()) return 0;
  const MlaDims d(hp);
  // q | q latent, kv_a | normed latent, q_nope, per-head values, their rows,
  // the q LoRA latent.
  return d.H * d.dq + d.H * d.L + d.dk + d.L + d.H * d.dn + 2 * d.H * d.dv + d.ql;
}

void mla_attention_block(LayerContext& c) {
  const ModelHParams& hp = c.hp;
  const LayerWeights& w = c.w;
  Backend& b = c.b;
  const MlaDims d(hp);
  const int64_t T = c.T, g = d.g;
  // Workspace regions ([T][...] each); q and its latent, kv_a and the normed
  // latent sit back to back so that one gather_rows assembles a row from both.
  float* P = c.extra;          // [T][H][dn | dr]  the heads' q
  float* QL = P + T * d.H * d.dq;  // [H][T][L]  q_nope in latent space (then the attention out)
  float* A = QL + T * d.H * d.L;   // [T][L | dr]  kv_a: latent, k_pe
  float* LN = A + T * d.dk;        // [T][L]  the normed latent
  float* N = LN + T * d.L;         // [H][T][dn]  q_nope, head-major
  float* VH = N + T * d.H * d.dn;  // [H][T][dv]  the heads' values
  float* VT = VH + T * d.H * d.dv; // [T][H][dv]
  float* QA = VT + T * d.H * d.dv; // [T][ql]  the q LoRA latent

  const MatrixView wkva = w.matrix(MatrixRole::kKvA).view();
  const float* norm = w.vector(VectorRole::kAttnNorm);
  if (d.ql > 0) {
    const MatrixView wqa = w.matrix(MatrixRole::kQA).view(), wqb = w.matrix(MatrixRole::kQB).view();
    b.norm_matmul(c.x, norm, hp.rms_eps, c.h, T, {{&wqa, QA}, {&wkva, A}});
    b.rms_norm(QA, w.vector(VectorRole::kQANorm), QA, T, d.ql, hp.rms_eps);
    b.matmul(QA, T, {{&wqb, P}});
  } else {
    const MatrixView wq = w.matrix(MatrixRole::kQ).view();
    b.norm_matmul(c.x, norm, hp.rms_eps, c.h, T, {{&wq, P}, {&wkva, A}});
  }

  // Row indices, in pieces of g floats.
  std::vector<int32_t> rows;
  const auto add = [&rows](int64_t first, int64_t n) {
    for (int64_t j = 0; j < n; ++j) rows.push_back(static_cast<int32_t>(first + j));
  };
  // The latent apart, normed.
  rows.clear();
  for (int64_t t = 0; t < T; ++t) add(t * d.dk / g, d.L / g);
  b.gather_rows(A, g, rows.data(), static_cast<int64_t>(rows.size()), LN);
  b.rms_norm(LN, w.vector(VectorRole::kKvANorm), LN, T, d.L, hp.rms_eps);
  // The cache row [normed latent | k_pe] into k, k_pe rotated.
  rows.clear();
  for (int64_t t = 0; t < T; ++t) {
    add((T * d.dk + t * d.L) / g, d.L / g);
    add((t * d.dk + d.L) / g, d.dr / g);
  }
  b.gather_rows(A, g, rows.data(), static_cast<int64_t>(rows.size()), c.k);
  const LayerSpec& spec = hp.layers[static_cast<size_t>(c.layer)];
  b.rope(c.k + d.L, d.dk, 1, static_cast<int32_t>(d.dk), hp.rope_style, spec.rope_table);
  b.kv_write(c.cache, c.k, c.k);

  // q_nope head-major, then into latent space head by head (attn_k_b).
  rows.clear();
  for (int64_t h = 0; h < d.H; ++h)
    for (int64_t t = 0; t < T; ++t) add((t * d.H + h) * d.dq / g, d.dn / g);
  b.gather_rows(P, g, rows.data(), static_cast<int64_t>(rows.size()), N);
  const WeightMatrix& kb = w.matrix(MatrixRole::kKB);
  const WeightMatrix& vb = w.matrix(MatrixRole::kVB);
  // Each head's slice of attn_k_b / attn_v_b, for one grouped product each.
  std::vector<MatrixView> kbh(static_cast<size_t>(d.H)), vbh(static_cast<size_t>(d.H));
  for (int64_t h = 0; h < d.H; ++h) {
    kbh[static_cast<size_t>(h)] = kb.rows(h * d.L, d.L).view();
    vbh[static_cast<size_t>(h)] = vb.rows(h * d.dv, d.dv).view();
  }
  b.matmul_groups(N, T, kbh.data(), d.H, QL);
  // The attention query [q latent | q_pe] per head, q_pe rotated.
  rows.clear();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < d.H; ++h) {
      add((T * d.H * d.dq + (h * T + t) * d.L) / g, d.L / g);
      add(((t * d.H + h) * d.dq + d.dn) / g, d.dr / g);
    }
  b.gather_rows(P, g, rows.data(), static_cast<int64_t>(rows.size()), c.q);
  b.rope(c.q + d.L, d.H * d.dk, static_cast<int32_t>(d.H), static_cast<int32_t>(d.dk),
         hp.rope_style, spec.rope_table);

  // MQA over the latent rows: out [T][H][L], values = the latent.
  b.paged_attention(c.cache, c.q, c.attn, static_cast<int32_t>(d.H), hp.attn_scale);
  // Head-major (into QL, free now), each head's values (attn_v_b), back token-major.
  rows.clear();
  for (int64_t h = 0; h < d.H; ++h)
    for (int64_t t = 0; t < T; ++t) rows.push_back(static_cast<int32_t>(t * d.H + h));
  b.gather_rows(c.attn, d.L, rows.data(), static_cast<int64_t>(rows.size()), QL);
  b.matmul_groups(QL, T, vbh.data(), d.H, VH);
  rows.clear();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < d.H; ++h) rows.push_back(static_cast<int32_t>(h * T + t));
  b.gather_rows(VH, d.dv, rows.data(), static_cast<int64_t>(rows.size()), VT);
  const MatrixView wo = w.matrix(MatrixRole::kOut).view();
  b.matmul(VT, T, {{.w = &wo, .y = c.h, .add_to = c.x}});
}

}  // namespace pagellm
