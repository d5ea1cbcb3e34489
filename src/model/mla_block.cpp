#include "model/mla_block.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
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

int32_t mla_plain_min_prompt() {
  const char* s = std::getenv("PAGELLM_MLA_PLAIN_MIN_PROMPT");
  if (!s || !*s) return std::numeric_limits<int32_t>::max();  // never (mla_block.h)
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  if (*end != '\0' || n < 0 || n > (1L << 30))
    throw ConfigError(fmt::format("PAGELLM_MLA_PLAIN_MIN_PROMPT={}: not a token count", s));
  return static_cast<int32_t>(n);
}

int64_t mla_plain_floats(const ModelHParams& hp, int64_t n_ctx, int64_t tokens) {
  if (!hp.mla.enabled() || n_ctx <= 0) return 0;
  const MlaDims d(hp);
  // identity, attn_k_b^T per head; per context position: latent, k_pe, one
  // head's k_nope, v, K row, V row; per token: one head's query.
  return d.dn * d.dn + d.H * d.dn * d.L + n_ctx * (d.L + d.dr + d.dn + d.dv + 2 * d.dq) +
         tokens * d.dq;
}

namespace {

// Row indices in pieces of g floats.
struct Pieces {
  std::vector<int32_t> rows;
  int64_t g;
  void add(int64_t first, int64_t n) {
    for (int64_t j = 0; j < n; ++j) rows.push_back(static_cast<int32_t>((first + j)));
  }
  // n floats from float offset `at` (both multiples of g).
  void floats(int64_t at, int64_t n) { add(at / g, n / g); }
  int64_t count() const { return static_cast<int64_t>(rows.size()); }
};

// The plain form for the step's tokens `plain` (prompt positions), grouped
// by sequence: each sequence's context [0, last plain position] read back
// from the latent cache and expanded head by head (K_h = [c W_kb_h | k_pe],
// V_h = c W_vb_h, V padded to K's 192 with k_pe: its columns are not read),
// ordinary attention over them. Out: [H][n_plain][dq] at `out` (the first dv
// of each row are the head's values). P holds the roped queries [T][H][dq].
void mla_plain_attention(LayerContext& c, const MlaDims& d, const std::vector<int32_t>& plain,
                         const float* P, float* out) {
  Backend& b = c.b;
  const Batch& batch = *c.batch;
  const int64_t g = d.g, np = static_cast<int64_t>(plain.size());
  const WeightMatrix& vb = c.w.matrix(MatrixRole::kVB);
  int64_t n_ctx = 0;
  for (int32_t t : plain) n_ctx = std::max<int64_t>(n_ctx, batch.positions[static_cast<size_t>(t)] + 1);
  float* I = c.mla_plain;              // [dn][dn] identity
  float* KBT = I + d.dn * d.dn;        // [H][dn][L]  attn_k_b^T
  float* LAT = KBT + d.H * d.dn * d.L; // [n][L]
  float* KPE = LAT + n_ctx * d.L;      // [n][dr]
  float* KN = KPE + n_ctx * d.dr;      // [n][dn]  one head's k_nope
  float* VV = KN + n_ctx * d.dn;       // [n][dv]
  float* KC = VV + n_ctx * d.dv;       // [n][dq]  K rows, then [n][dq] V rows
  float* QG = KC + 2 * n_ctx * d.dq;   // [nt][dq] the head's queries
  // attn_k_b^T (n_in L) for the expansion, as I W_kb_h^T: exact for float
  // weights, the same bits in every step.
  std::vector<float> eye(static_cast<size_t>(d.dn * d.dn), 0.0f);
  for (int64_t i = 0; i < d.dn; ++i) eye[static_cast<size_t>(i * d.dn + i)] = 1.0f;
  b.upload(I, eye.data(), eye.size() * sizeof(float));
  std::vector<MatrixView> kbt(static_cast<size_t>(d.H));
  std::vector<MatmulOutput> kbt_out(static_cast<size_t>(d.H));
  std::vector<MatrixView> kbh(static_cast<size_t>(d.H));
  for (int64_t h = 0; h < d.H; ++h) {
    const size_t i = static_cast<size_t>(h);
    kbh[i] = c.w.matrix(MatrixRole::kKB).rows(h * d.L, d.L).view();
    kbt_out[i] = {.w = &kbh[i], .y = KBT + h * d.dn * d.L};
    kbt[i] = MatrixView{DType::F32, d.L, d.dn, KBT + h * d.dn * d.L,
                        static_cast<size_t>(d.L) * sizeof(float), WeightLayout::Rows};
  }
  b.matmul(I, d.dn, kbt_out.data(), kbt_out.size());

  Pieces pc{{}, g};
  for (int64_t j0 = 0; j0 < np;) {
    // This sequence's plain tokens: plain[j0, j1), in position order.
    const int32_t seq = batch.token_seq[static_cast<size_t>(plain[static_cast<size_t>(j0)])];
    int64_t j1 = j0;
    int32_t last = 0;
    std::vector<int32_t> pos;
    while (j1 < np && batch.token_seq[static_cast<size_t>(plain[static_cast<size_t>(j1)])] == seq) {
      pos.push_back(batch.positions[static_cast<size_t>(plain[static_cast<size_t>(j1)])]);
      last = std::max(last, pos.back());
      ++j1;
    }
    const int64_t n = last + 1, nt = j1 - j0;
    b.kv_read(c.cache, seq, 0, static_cast<int32_t>(n), 0, static_cast<int32_t>(d.L), LAT);
    b.kv_read(c.cache, seq, 0, static_cast<int32_t>(n), static_cast<int32_t>(d.L),
              static_cast<int32_t>(d.dr), KPE);
    for (int64_t h = 0; h < d.H; ++h) {
      const MatrixView vbh = vb.rows(h * d.dv, d.dv).view();
      b.matmul(LAT, n, {{.w = &kbt[static_cast<size_t>(h)], .y = KN}, {.w = &vbh, .y = VV}});
      // K rows [k_nope | k_pe], V rows [v | k_pe] (offsets from LAT).
      pc.rows.clear();
      for (int64_t p = 0; p < n; ++p) {
        pc.floats(KN - LAT + p * d.dn, d.dn);
        pc.floats(KPE - LAT + p * d.dr, d.dr);
      }
      for (int64_t p = 0; p < n; ++p) {
        pc.floats(VV - LAT + p * d.dv, d.dv);
        pc.floats(p * d.L, d.dq - d.dv);
      }
      b.gather_rows(LAT, g, pc.rows.data(), pc.count(), KC);
      pc.rows.clear();
      for (int64_t j = j0; j < j1; ++j)
        pc.floats((plain[static_cast<size_t>(j)] * d.H + h) * d.dq, d.dq);
      b.gather_rows(P, g, pc.rows.data(), pc.count(), QG);
      // (The gather wrote the n V rows right after the n K rows.)
      b.attention_rows(QG, KC, KC + n * d.dq, out + (h * np + j0) * d.dq, static_cast<int32_t>(nt), pos.data(),
                       1, 1, static_cast<int32_t>(d.dq), c.hp.attn_scale);
    }
    j0 = j1;
  }
}

}  // namespace

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

  // q_pe rotated in place (each head's [q_nope | q_pe]: its q_pe as a head of dq).
  b.rope(P + d.dn, d.H * d.dq, static_cast<int32_t>(d.H), static_cast<int32_t>(d.dq),
         hp.rope_style, spec.rope_table);
  // Prompt positions take the plain form where the backend runs it, decoded
  // ones the absorbed form: by position, so a token's bits never depend on
  // its batch, its chunk or a preemption (Batch::step_from: the prompt's end).
  std::vector<int32_t> plain, absorbed;
  const bool can_plain = c.batch && c.mla_plain && !c.batch->step_from.empty() &&
                         b.mla_plain_form() && d.dv <= d.dq;
  for (int32_t t = 0; t < static_cast<int32_t>(T); ++t) {
    const size_t i = static_cast<size_t>(t);
    const bool prompt =
        can_plain && mla_runs_plain(hp, c.batch->positions[i],
                                    c.batch->step_from[static_cast<size_t>(c.batch->token_seq[i])]);
    (prompt ? plain : absorbed).push_back(t);
  }
  const int64_t Ta = static_cast<int64_t>(absorbed.size()), Tp = T - Ta;

  const WeightMatrix& kb = w.matrix(MatrixRole::kKB);
  const WeightMatrix& vb = w.matrix(MatrixRole::kVB);
  if (Ta > 0) {
    // q_nope head-major, then into latent space head by head (attn_k_b).
    rows.clear();
    for (int64_t h = 0; h < d.H; ++h)
      for (int32_t t : absorbed) add((t * d.H + h) * d.dq / g, d.dn / g);
    b.gather_rows(P, g, rows.data(), static_cast<int64_t>(rows.size()), N);
    // Each head's slice of attn_k_b / attn_v_b, for one grouped product each.
    std::vector<MatrixView> kbh(static_cast<size_t>(d.H)), vbh(static_cast<size_t>(d.H));
    for (int64_t h = 0; h < d.H; ++h) {
      kbh[static_cast<size_t>(h)] = kb.rows(h * d.L, d.L).view();
      vbh[static_cast<size_t>(h)] = vb.rows(h * d.dv, d.dv).view();
    }
    b.matmul_groups(N, Ta, kbh.data(), d.H, QL);
    // The attention query [q latent | q_pe] per head.
    rows.clear();
    for (int64_t k = 0; k < Ta; ++k)
      for (int64_t h = 0; h < d.H; ++h) {
        add((T * d.H * d.dq + (h * Ta + k) * d.L) / g, d.L / g);
        add(((absorbed[static_cast<size_t>(k)] * d.H + h) * d.dq + d.dn) / g, d.dr / g);
      }
    b.gather_rows(P, g, rows.data(), static_cast<int64_t>(rows.size()), c.q);
    // MQA over the latent rows: out [Ta][H][L], values = the latent.
    if (Tp == 0)
      b.paged_attention(c.cache, c.q, c.attn, static_cast<int32_t>(d.H), hp.attn_scale);
    else
      b.paged_attention_tokens(c.cache, c.q, c.attn, static_cast<int32_t>(d.H), hp.attn_scale,
                               static_cast<int32_t>(Ta), absorbed.data());
    // Head-major (into QL, free now), each head's values (attn_v_b).
    rows.clear();
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t k = 0; k < Ta; ++k) rows.push_back(static_cast<int32_t>(k * d.H + h));
    b.gather_rows(c.attn, d.L, rows.data(), static_cast<int64_t>(rows.size()), QL);
    b.matmul_groups(QL, Ta, vbh.data(), d.H, VH);
  }
  if (Tp == 0) {  // back token-major
    rows.clear();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < d.H; ++h) rows.push_back(static_cast<int32_t>(h * T + t));
    b.gather_rows(VH, d.dv, rows.data(), static_cast<int64_t>(rows.size()), VT);
  } else {
    // c.attn: the plain heads' rows [H][Tp][dq], then the absorbed ones' values [H][Ta][dv].
    float* AV = c.attn + Tp * d.H * d.dq;
    if (Ta > 0) {
      rows.resize(static_cast<size_t>(d.H * Ta));
      std::iota(rows.begin(), rows.end(), 0);
      b.gather_rows(VH, d.dv, rows.data(), static_cast<int64_t>(rows.size()), AV);
    }
    mla_plain_attention(c, d, plain, P, c.attn);
    std::vector<int64_t> index(static_cast<size_t>(T));  // each token's place in its list
    for (int64_t j = 0; j < Tp; ++j) index[static_cast<size_t>(plain[static_cast<size_t>(j)])] = j;
    for (int64_t k = 0; k < Ta; ++k)
      index[static_cast<size_t>(absorbed[static_cast<size_t>(k)])] = k;
    std::vector<bool> is_plain(static_cast<size_t>(T), false);
    for (int32_t t : plain) is_plain[static_cast<size_t>(t)] = true;
    rows.clear();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < d.H; ++h) {
        const int64_t j = index[static_cast<size_t>(t)];
        add((is_plain[static_cast<size_t>(t)] ? (h * Tp + j) * d.dq
                                              : Tp * d.H * d.dq + (h * Ta + j) * d.dv) / g,
            d.dv / g);
      }
    b.gather_rows(c.attn, g, rows.data(), static_cast<int64_t>(rows.size()), VT);
  }
  const MatrixView wo = w.matrix(MatrixRole::kOut).view();
  b.matmul(VT, T, {{.w = &wo, .y = c.h, .add_to = c.x}});
}

}  // namespace pagellm
