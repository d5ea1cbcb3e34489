// CPU paged attention throughput over an f16 (or q8_0) KV cache: decode (one token per
// sequence, attending to its whole context) and prefill (every position of
// one sequence), on the 0.85B shape's heads (32 query heads, 8 KV heads,
// head_dim 64) or head_dim 128. Reports GB/s of K and V read (decode: every
// row once per token) and GFLOP/s (2 * 2 * head_dim per query head and
// position). Blocks are scattered in the pool, as a long-running server
// leaves them, and the caches rotate through copies larger than the last-level
// cache (decode reads K and V from memory). The caches live in memory from
// allocate_host_pages, as the engine's KV pools do (huge pages; compare with
// PAGELLM_HUGEPAGES=0).
//
//   bench_attention [--benchmark_filter=...]     (PAGELLM_BENCH_THREADS, default 2)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/paged_attention.h"
#include "bench_pool.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"
#include "util/host_pages.h"
#include "util/thread_pool.h"

namespace {

using namespace pagellm;

using bench::pool;

constexpr int kBlock = 16;

// Query heads, KV heads, head size and (MLA's latent cache) v_dim: 0 for
// separate K and V caches, else one row per position (K = the row, V = its
// first v_dim values) and no V cache.
struct Shape {
  int heads = 32, kv_heads = 8, d = 64, v_dim = 0;
};

// K and V caches rotate through enough copies to exceed the last-level cache,
// so decode reads them from memory, as a model's layers do.
constexpr size_t kRotateBytes = 256ull << 20;

struct Setup {
  Shape sh;
  int d, seqs, ctx;
  DType kv;
  size_t row_bytes;  // one head row of the cache
  using Cache = std::unique_ptr<uint8_t, HostPagesFree>;
  std::vector<Cache> k, v;  // one pair per copy
  std::vector<std::vector<int32_t>> tables;
  std::vector<const int32_t*> rows;

  Setup(Shape sh_, int seqs_, int ctx_, DType kv_)
      : sh(sh_), d(sh_.d), seqs(seqs_), ctx(ctx_), kv(kv_), row_bytes(dtype_row_bytes(kv_, sh_.d)) {
    const int blocks_per_seq = (ctx + kBlock - 1) / kBlock;
    const int blocks = blocks_per_seq * seqs;
    const size_t n_rows = static_cast<size_t>(blocks) * kBlock * sh.kv_heads;
    const size_t bytes = n_rows * row_bytes;
    const int n_caches = sh.v_dim > 0 ? 1 : 2;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    std::vector<float> row(static_cast<size_t>(d));
    const size_t copies = std::max<size_t>(1, kRotateBytes / (n_caches * bytes));
    for (size_t c = 0; c < copies; ++c) {
      for (auto* cache : {&k, &v}) {
        if (cache == &v && n_caches == 1) break;
        cache->emplace_back(static_cast<uint8_t*>(allocate_host_pages(bytes)),
                            HostPagesFree{bytes});
        uint8_t* x = cache->back().get();
        for (size_t r = 0; r < n_rows; ++r) {
          for (auto& e : row) e = nd(rng);
          quantize_row(kv, row.data(), x + r * row_bytes, d);
        }
      }
    }
    std::vector<int32_t> ids(blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int s = 0; s < seqs; ++s)
      tables.emplace_back(ids.begin() + s * blocks_per_seq, ids.begin() + (s + 1) * blocks_per_seq);
    for (const auto& t : tables) rows.push_back(t.data());
  }
};

// decode: `seqs` sequences, one token each at position ctx - 1. Otherwise a
// prompt of ctx tokens, plus (mixed) one decode token of a second sequence,
// as in a serving step where a prompt joins running sequences. window /
// softcap: Gemma 2/3's sliding window and score soft cap.
void run(benchmark::State& state, bool decode, bool mixed = false, DType kv = DType::F16,
         int window = 0, float softcap = 0.0f, Shape sh = {}) {
  if (state.range(0) > 0) sh.d = static_cast<int>(state.range(0));
  const int d = sh.d, kHeads = sh.heads, kKvHeads = sh.kv_heads;
  const int ctx = static_cast<int>(state.range(1));
  const int seqs = decode ? static_cast<int>(state.range(2)) : mixed ? 2 : 1;
  Setup s(sh, seqs, ctx, kv);
  std::vector<int32_t> tok_seq, tok_pos;
  for (int q = 0; q < seqs; ++q) {
    if (decode) {
      tok_seq.push_back(q), tok_pos.push_back(ctx - 1);
    } else if (q == 0) {
      for (int p = 0; p < ctx; ++p) tok_seq.push_back(q), tok_pos.push_back(p);
    } else {
      tok_seq.push_back(q), tok_pos.push_back(ctx - 1);
    }
  }
  const int n = static_cast<int>(tok_seq.size());
  std::vector<float> q(static_cast<size_t>(n) * kHeads * d, 0.1f), out(q.size());
  PagedAttentionArgs a;
  a.q = q.data();
  a.q_stride = kHeads * d;
  a.out = out.data();
  a.out_stride = kHeads * d;
  a.n_tokens = n;
  a.n_heads = kHeads;
  a.n_kv_heads = kKvHeads;
  a.head_dim = d;
  a.v_dim = sh.v_dim;
  a.out_stride = kHeads * (sh.v_dim > 0 ? sh.v_dim : d);
  out.resize(static_cast<size_t>(n) * a.out_stride);
  a.out = out.data();
  a.kv_type = kv;
  a.block_size = kBlock;
  a.token_seq = tok_seq.data();
  a.token_pos = tok_pos.data();
  a.block_tables = s.rows.data();
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.window = window;
  a.softcap = softcap;
  size_t copy = 0;
  for (auto _ : state) {
    a.k_cache = s.k[copy].get();
    a.v_cache = sh.v_dim > 0 ? a.k_cache : s.v[copy].get();
    copy = (copy + 1) % s.k.size();
    paged_attention(a, pool());
    benchmark::DoNotOptimize(out.data());
  }
  double positions = 0;  // (query token, position) pairs attended
  for (int i = 0; i < n; ++i)
    positions += window > 0 ? std::min(tok_pos[i] + 1, window) : tok_pos[i] + 1;
  const double kv_bytes = positions * kKvHeads * (sh.v_dim > 0 ? 1.0 : 2.0) *
                          static_cast<double>(s.row_bytes);  // K, V (a latent row once)
  const double flops = positions * kHeads * 2.0 * (d + (sh.v_dim > 0 ? sh.v_dim : d));
  const double it = static_cast<double>(state.iterations());
  if (decode)
    state.counters["GB/s"] = benchmark::Counter(kv_bytes * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * it / 1e9, benchmark::Counter::kIsRate);
}

void BM_AttentionDecode(benchmark::State& state) {
  run(state, true);
}
void BM_AttentionDecodeQ8(benchmark::State& state) {
  run(state, true, false, DType::Q8_0);
}
void BM_AttentionPrefill(benchmark::State& state) {
  run(state, false);
}
void BM_AttentionMixed(benchmark::State& state) {
  run(state, false, true);
}
// Gemma-like: the window and the soft cap (50: Gemma 2's) from the arguments.
void BM_AttentionPrefillWindowed(benchmark::State& state) {
  run(state, false, false, DType::F16, static_cast<int>(state.range(2)),
      static_cast<float>(state.range(3)));
}
void BM_AttentionDecodeWindowed(benchmark::State& state) {
  run(state, true, false, DType::F16, static_cast<int>(state.range(3)),
      static_cast<float>(state.range(4)));
}

// issue 56's bench/mla_bench.sh shapes, one layer: MLA (16 heads over a
// latent row of 256 + 64, values its first 256) against its GQA twin (16
// heads, 4 KV heads of 128): decode, and a prompt of ctx tokens.
constexpr Shape kMla{16, 1, 320, 256}, kGqaTwin{16, 4, 128, 0};
void BM_MlaDecode(benchmark::State& state) { run(state, true, false, DType::F16, 0, 0, kMla); }
void BM_MlaDecodeQ8(benchmark::State& state) { run(state, true, false, DType::Q8_0, 0, 0, kMla); }
void BM_MlaTwinDecode(benchmark::State& state) {
  run(state, true, false, DType::F16, 0, 0, kGqaTwin);
}
void BM_MlaPrefill(benchmark::State& state) { run(state, false, false, DType::F16, 0, 0, kMla); }
void BM_MlaTwinPrefill(benchmark::State& state) {
  run(state, false, false, DType::F16, 0, 0, kGqaTwin);
}
BENCHMARK(BM_MlaDecode)->ArgNames({"", "ctx", "seqs"})->Args({0, 4096, 1})->UseRealTime();
BENCHMARK(BM_MlaDecodeQ8)->ArgNames({"", "ctx", "seqs"})->Args({0, 4096, 1})->UseRealTime();
BENCHMARK(BM_MlaTwinDecode)->ArgNames({"", "ctx", "seqs"})->Args({0, 4096, 1})->UseRealTime();
BENCHMARK(BM_MlaPrefill)->ArgNames({"", "ctx"})->Args({0, 1024})->UseRealTime();
BENCHMARK(BM_MlaTwinPrefill)->ArgNames({"", "ctx"})->Args({0, 1024})->UseRealTime();

// issue 56: one MLA layer's prefill of a ctx-token prompt in one chunk at a
// DeepSeek-V2-Lite shape (16 heads, latent 512, rope 64, nope 128, values
// 128; f16 latent cache, q8_0 attn_k_b / attn_v_b), attention and the
// per-head products only (the q/kv_a projections and attn_output are the same
// in both forms). form 0, absorbed: q_nope through attn_k_b into latent
// space, the latent kernel over rows of 576 with 512 values, attn_v_b.
// form 1, plain: the context's latents (f16 -> f32), then head by head:
// through attn_k_b^T (f32) and attn_v_b, the head's K [k_nope | k_pe] and V
// (padded to 192) rows into an f32 scratch cache, the dense kernel with one
// head of 192 (form 2: the scratch in f16, converted after the expansion). GFLOP/s counts the absorbed form's work for both,
// so the counters compare as times do.
struct MlaLayerShape {
  int H = 16, L = 512, dr = 64, dn = 128, dv = 128;
};
struct QuantMatrix {
  std::vector<uint8_t> data;
  MatrixView view;
  QuantMatrix(int64_t n_in, int64_t n_out, DType t, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 0.05f);
    const size_t rb = dtype_row_bytes(t, n_in);
    data.resize(rb * n_out);
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      for (auto& e : row) e = nd(rng);
      quantize_row(t, row.data(), data.data() + r * rb, n_in);
    }
    view = {t, n_in, n_out, data.data(), rb, WeightLayout::Rows};
  }
  MatrixView rows(int64_t first, int64_t n) const {
    MatrixView v = view;
    v.n_out = n;
    v.data = data.data() + first * view.row_stride;
    return v;
  }
};

void BM_MlaPrefillForm(benchmark::State& state) {
  const MlaLayerShape m;
  const int ctx = static_cast<int>(state.range(0));
  const bool plain = state.range(1) != 0, f16 = state.range(1) == 2;
  const int dk = m.L + m.dr, dq = m.dn + m.dr;
  static cpu::CpuBackend backend(&pool());
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  const DType wt = DType::Q8_0;
  // attn_k_b [H][L][dn], its transpose [H][dn][L], attn_v_b [H][dv][L].
  // attn_k_b^T in f32, as model/mla_block.cpp makes it per step.
  QuantMatrix kb(m.dn, int64_t{m.H} * m.L, wt, rng), kbt(m.L, int64_t{m.H} * m.dn, DType::F32, rng),
      vb(m.L, int64_t{m.H} * m.dv, wt, rng);
  std::vector<MatrixView> kbh, vbh;
  for (int h = 0; h < m.H; ++h) kbh.push_back(kb.rows(int64_t{h} * m.L, m.L));
  for (int h = 0; h < m.H; ++h) vbh.push_back(vb.rows(int64_t{h} * m.dv, m.dv));
  // The latent cache: ctx rows of [latent | k_pe], f16, contiguous blocks.
  const size_t lrb = dtype_row_bytes(DType::F16, dk);
  std::vector<uint8_t> cache(lrb * ctx);
  {
    std::vector<float> row(static_cast<size_t>(dk));
    for (int p = 0; p < ctx; ++p) {
      for (auto& e : row) e = nd(rng);
      quantize_row(DType::F16, row.data(), cache.data() + p * lrb, dk);
    }
  }
  std::vector<int32_t> table((ctx + kBlock - 1) / kBlock);
  std::iota(table.begin(), table.end(), 0);
  const int32_t* tables[1] = {table.data()};
  std::vector<int32_t> tok_seq(ctx, 0), tok_pos(ctx);
  std::iota(tok_pos.begin(), tok_pos.end(), 0);
  const size_t T = ctx;
  std::vector<float> P(T * m.H * dq), N(T * m.H * m.dn), QL(T * m.H * m.L), q(T * m.H * dk),
      att(T * m.H * m.L), VH(T * m.H * m.dv);
  for (auto& e : P) e = nd(rng);
  for (auto& e : N) e = nd(rng);
  for (auto& e : q) e = nd(rng);
  // plain: latents, K nope / V per head, the scratch cache (K, V of 192).
  std::vector<float> lat, latent, kn, vv, kc, vc, out;
  std::vector<uint16_t> kc16, vc16;
  if (plain) {
    lat.resize(T * dk), latent.resize(T * m.L), kn.resize(T * m.H * m.dn), vv.resize(T * m.H * m.dv);
    kc.resize(T * dq), vc.assign(T * dq, 0.0f), out.resize(T * m.H * dq);
    if (f16) kc16.resize(kc.size()), vc16.resize(vc.size());
  }
  PagedAttentionArgs a;
  a.n_tokens = ctx;
  a.block_size = kBlock;
  a.token_seq = tok_seq.data();
  a.token_pos = tok_pos.data();
  a.block_tables = tables;
  a.scale = 1.0f / std::sqrt(static_cast<float>(dq));
  a.n_heads = m.H;
  if (plain) {
    a.q = P.data(), a.q_stride = int64_t{m.H} * dq;
    a.out = out.data(), a.out_stride = int64_t{m.H} * dq;
    a.n_heads = 1, a.n_kv_heads = 1, a.head_dim = dq, a.kv_type = f16 ? DType::F16 : DType::F32;
    a.k_cache = f16 ? static_cast<const void*>(kc16.data()) : kc.data();
    a.v_cache = f16 ? static_cast<const void*>(vc16.data()) : vc.data();
  } else {
    a.q = q.data(), a.q_stride = int64_t{m.H} * dk;
    a.out = att.data(), a.out_stride = int64_t{m.H} * m.L;
    a.n_kv_heads = 1, a.head_dim = dk, a.v_dim = m.L, a.kv_type = DType::F16;
    a.k_cache = a.v_cache = cache.data();
  }
  for (auto _ : state) {
    if (plain) {
      for (size_t p = 0; p < T; ++p)
        dequantize_row(DType::F16, cache.data() + p * lrb, lat.data() + p * dk, dk);
      // The latents as rows of L (n_in), apart from k_pe.
      for (size_t p = 0; p < T; ++p)
        std::memcpy(latent.data() + p * m.L, lat.data() + p * dk, sizeof(float) * m.L);
      // Head by head (model/mla_block.cpp's order: one head's K and V at a
      // time, which the threads then read for every query token).
      for (int h = 0; h < m.H; ++h) {
        const MatrixView kth = kbt.rows(int64_t{h} * m.dn, m.dn);
        backend.matmul(latent.data(), ctx, {{.w = &kth, .y = kn.data()}, {.w = &vbh[h], .y = vv.data()}});
        for (size_t p = 0; p < T; ++p) {
          float* k = kc.data() + p * dq;
          std::memcpy(k, kn.data() + p * m.dn, sizeof(float) * m.dn);
          std::memcpy(k + m.dn, lat.data() + p * dk + m.L, sizeof(float) * m.dr);
          std::memcpy(vc.data() + p * dq, vv.data() + p * m.dv, sizeof(float) * m.dv);
        }
        if (f16) {
          quantize_row(DType::F16, kc.data(), kc16.data(), int64_t{ctx} * dq);
          quantize_row(DType::F16, vc.data(), vc16.data(), int64_t{ctx} * dq);
        }
        a.q = P.data() + h * dq;
        a.out = out.data() + h * dq;
        paged_attention(a, pool());
      }
    } else {
      backend.matmul_groups(N.data(), ctx, kbh.data(), m.H, QL.data());
      paged_attention(a, pool());
      backend.matmul_groups(att.data(), ctx, vbh.data(), m.H, VH.data());
    }
    benchmark::DoNotOptimize(plain ? out.data() : VH.data());
  }
  const double pairs = 0.5 * ctx * (ctx + 1.0);
  const double flops = pairs * m.H * 2.0 * (dk + m.L) + 2.0 * 2.0 * ctx * m.H * m.dn * m.L;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlaPrefillForm)
    ->ArgNames({"ctx", "plain"})
    ->ArgsProduct({{512, 1024, 2048, 4096}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"head_dim", "ctx", "seqs"})
    ->Args({64, 256, 1})
    ->Args({64, 2048, 1})
    ->Args({64, 2048, 16})
    ->Args({128, 2048, 1})
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeQ8)
    ->ArgNames({"head_dim", "ctx", "seqs"})
    ->Args({64, 2048, 1})
    ->Args({64, 2048, 16})
    ->UseRealTime();
BENCHMARK(BM_AttentionMixed)->ArgNames({"head_dim", "ctx"})->Args({64, 512})->UseRealTime();
BENCHMARK(BM_AttentionPrefill)
    ->ArgNames({"head_dim", "ctx"})
    ->Args({64, 512})
    ->Args({64, 2048})
    ->Args({128, 512})
    ->UseRealTime();
BENCHMARK(BM_AttentionPrefillWindowed)
    ->ArgNames({"head_dim", "ctx", "window", "softcap"})
    ->Args({64, 512, 32, 50})
    ->Args({256, 512, 512, 0})
    ->Args({256, 2048, 512, 50})
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeWindowed)
    ->ArgNames({"head_dim", "ctx", "seqs", "window", "softcap"})
    ->Args({256, 2048, 16, 512, 50})
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
