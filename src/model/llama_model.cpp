#include "model/llama_model.h"

#include <fmt/format.h>

#include <cmath>
#include <new>

#include "backend/cpu/ops.h"
#include "backend/cpu/paged_attention.h"
#include "model/linear.h"
#include "tensor/convert.h"
#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {

struct LlamaModel::Workspace {
  explicit Workspace(const ModelHParams& hp)
      : rope(hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale) {}
  void resize(const ModelHParams& hp, int64_t n_tokens) {
    if (FaultInjector::hit("model.workspace")) throw std::bad_alloc();
    auto grow = [](std::vector<float>& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    };
    grow(x, n_tokens * hp.n_embd);
    grow(x_next, n_tokens * hp.n_embd);
    grow(h, n_tokens * hp.n_embd);
    grow(q, n_tokens * hp.n_embd);
    grow(k, n_tokens * hp.n_embd_kv());
    grow(v, n_tokens * hp.n_embd_kv());
    grow(attn, n_tokens * hp.n_embd);
    grow(gate, n_tokens * hp.n_ff);
    grow(up, n_tokens * hp.n_ff);
  }
  std::vector<float> x, x_next, h, q, k, v, attn, gate, up;
  std::vector<const int32_t*> tables;
  RopeCache rope;
  Linear linear;
};

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, ModelLoadOptions opts) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = GgufFile::open(path, {.use_mmap = opts.use_mmap, .mlock = opts.mlock});
  m->hp_ = ModelHParams::from_gguf(*m->file_);
  m->w_ = ModelWeights::load(*m->file_, m->hp_);
  if (opts.repack) m->w_.repack(*m->file_, opts.mlock);
  m->ws_ = std::make_unique<Workspace>(m->hp_);
  return m;
}

LlamaModel::~LlamaModel() = default;

KvPoolShape LlamaModel::kv_shape(int32_t num_blocks, int32_t block_size, DType kv_type) const {
  KvPoolShape s;
  s.layer_begin = 0;
  s.layer_end = hp_.n_layer;
  s.num_blocks = num_blocks;
  s.block_size = block_size;
  s.n_kv_heads = hp_.n_head_kv;
  s.head_dim = hp_.head_dim;
  s.dtype = kv_type;
  return s;
}

void LlamaModel::reserve_workspace(int64_t max_tokens, int64_t max_logit_rows) {
  ws_->resize(hp_, max_tokens);
  for (const auto& L : w_.layers)
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      ws_->linear.reserve(*m, max_tokens);
  ws_->linear.reserve(w_.output, max_logit_rows);
}

void LlamaModel::forward(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
                         std::vector<float>& logits) {
  const int64_t T = batch.n_tokens();
  const int64_t E = hp_.n_embd, KV = hp_.n_embd_kv(), F = hp_.n_ff, V = hp_.n_vocab;
  Workspace& ws = *ws_;
  // A model file truncated under its mapping fails the step cleanly (see
  // SigbusGuard) instead of killing the process: checked before and after.
  file_->check_intact();
  ws.resize(hp_, T);
  if (T == 0) {
    logits.clear();
    return;
  }
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= V)
      throw ConfigError(fmt::format("token id {} is outside the vocabulary (0..{})", id, V - 1));
    dequantize_row(w_.token_embd.type, w_.token_embd.row(id), ws.x.data() + t * E, E);
  }
  ws.rope.prepare(batch.positions.data(), T);
  ws.tables.resize(static_cast<size_t>(batch.n_seqs()));
  for (int32_t s = 0; s < batch.n_seqs(); ++s)
    ws.tables[static_cast<size_t>(s)] = batch.block_tables[static_cast<size_t>(s)]->blocks().data();

  PagedAttentionArgs pa;
  pa.q = ws.q.data();
  pa.q_stride = E;
  pa.out = ws.attn.data();
  pa.out_stride = E;
  pa.n_tokens = static_cast<int32_t>(T);
  pa.n_heads = hp_.n_head;
  pa.n_kv_heads = hp_.n_head_kv;
  pa.head_dim = hp_.head_dim;
  pa.kv_type = kv.pools().front()->shape().dtype;
  pa.block_size = kv.pools().front()->shape().block_size;
  pa.token_seq = batch.token_seq.data();
  pa.token_pos = batch.positions.data();
  pa.block_tables = ws.tables.data();
  pa.scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));

  KvPool* prev_pool = nullptr;
  for (int32_t l = 0; l < hp_.n_layer; ++l) {
    const LayerWeights& L = w_.layers[static_cast<size_t>(l)];
    KvPool& pool_l = kv.pool_for_layer(l);
    if (prev_pool && prev_pool != &pool_l) {
      // Device boundary: the next device receives the hidden state in its own buffer.
      std::swap(ws.x, ws.x_next);
      std::copy(ws.x_next.begin(), ws.x_next.begin() + T * E, ws.x.begin());
      transfer_bytes_ += static_cast<uint64_t>(T * E) * sizeof(float);
    }
    prev_pool = &pool_l;
    rms_norm(ws.x.data(), L.attn_norm, ws.h.data(), T, E, hp_.rms_eps);
    ws.linear(ws.h.data(), T, {{&L.wq, ws.q.data()}, {&L.wk, ws.k.data()}, {&L.wv, ws.v.data()}},
              pool);
    if (L.bq) add_bias(ws.q.data(), L.bq, T, E, E);
    if (L.bk) add_bias(ws.k.data(), L.bk, T, KV, KV);
    if (L.bv) add_bias(ws.v.data(), L.bv, T, KV, KV);
    ws.rope.apply(ws.q.data(), T, E, hp_.n_head, hp_.head_dim, hp_.rope_style);
    ws.rope.apply(ws.k.data(), T, KV, hp_.n_head_kv, hp_.head_dim, hp_.rope_style);
    // Attention reads every K/V back from the cache, after rounding to its
    // dtype, including this step's tokens: results do not depend on chunking.
    for (int64_t t = 0; t < T; ++t)
      pool_l.write(l, batch.slots[static_cast<size_t>(t)], ws.k.data() + t * KV,
                   ws.v.data() + t * KV);
    pa.k_cache = pool_l.k(l);
    pa.v_cache = pool_l.v(l);
    paged_attention(pa, pool);
    ws.linear(L.wo, ws.attn.data(), T, ws.h.data(), pool);
    add_inplace(ws.x.data(), ws.h.data(), T * E);

    rms_norm(ws.x.data(), L.ffn_norm, ws.h.data(), T, E, hp_.rms_eps);
    ws.linear(ws.h.data(), T, {{&L.w_gate, ws.gate.data()}, {&L.w_up, ws.up.data()}}, pool);
    pool.parallel_for(T, [&](int64_t b, int64_t e, int) {
      silu_mul(ws.gate.data() + b * F, ws.up.data() + b * F, (e - b) * F);
    });
    ws.linear(L.w_down, ws.gate.data(), T, ws.h.data(), pool);
    add_inplace(ws.x.data(), ws.h.data(), T * E);
  }

  const int64_t n_out = static_cast<int64_t>(batch.logit_tokens.size());
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t t = batch.logit_tokens[static_cast<size_t>(i)];
    rms_norm(ws.x.data() + t * E, w_.output_norm, ws.h.data() + i * E, 1, E, hp_.rms_eps);
  }
  logits.resize(static_cast<size_t>(n_out * V));
  ws.linear(w_.output, ws.h.data(), n_out, logits.data(), pool);
  file_->check_intact();
}

}  // namespace pagellm
