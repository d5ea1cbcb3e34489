// Paged attention over MLA's latent cache (PagedAttentionArgs::v_dim: one row
// per position, K = the row, V = its first v_dim values, one KV head for every
// query head) against a naive float64 rendition, for every kernel variant
// this CPU runs (scalar: paged_attention's loop; AVX2 and AVX-512: the latent
// kernel), with scrambled block tables, prompts, chunked-prefill runs and
// decode tokens, contexts across the kernel's segments; each token alone, with
// one thread, gives its bits in the batch; AVX2 and AVX-512 agree bit for bit.
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/paged_attention_latent.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tensor/convert.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm {
namespace {

struct LatentCache {
  int d = 96, dv = 64, n_heads = 4, bs = 16;
  DType type = DType::F32;
  std::vector<float> rows;    // [slots][d] as the kernel reads them (rounded to the type)
  std::vector<uint8_t> data;  // the cache in `type`
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> sinks;  // empty or one per query head

  void build(std::mt19937& rng, const std::vector<int>& lens, DType t) {
    type = t;
    int n_blocks = 0;
    for (int len : lens) n_blocks += (len + bs - 1) / bs;
    n_blocks += 3;  // unused blocks among them
    const size_t n_rows = static_cast<size_t>(n_blocks) * bs;
    rows.resize(n_rows * d);
    std::normal_distribution<float> nd;
    for (auto& x : rows) x = nd(rng);
    const size_t rb = dtype_row_bytes(t, d);
    data.resize(n_rows * rb);
    for (size_t r = 0; r < n_rows; ++r) {
      quantize_row(t, &rows[r * d], &data[r * rb], d);
      dequantize_row(t, &data[r * rb], &rows[r * d], d);
    }
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    tables.clear();
    for (int len : lens) {
      std::vector<int32_t> tab;
      for (int i = 0; i < (len + bs - 1) / bs; ++i) tab.push_back(ids[next++]);
      tables.push_back(tab);
    }
  }
  const float* row(int seq, int p) const {
    return &rows[(static_cast<size_t>(tables[seq][p / bs]) * bs + p % bs) * d];
  }
};

struct Tokens {
  std::vector<int32_t> seq, pos;
  std::vector<float> q;  // [token][n_heads][d]
};

float scale_of(const LatentCache& c) { return 1.0f / std::sqrt(static_cast<float>(c.d)); }

// Naive, in double: softmax over positions 0..pos of q_h . row_p * scale (a
// sink logit joins the max and the sum with no value), values row_p[0, dv).
std::vector<double> naive(const LatentCache& c, int seq, int pos, const float* q) {
  std::vector<double> out(static_cast<size_t>(c.n_heads) * c.dv);
  std::vector<double> s(pos + 1);
  for (int h = 0; h < c.n_heads; ++h) {
    double mx = -INFINITY;
    for (int p = 0; p <= pos; ++p) {
      double dot = 0;
      for (int i = 0; i < c.d; ++i) dot += double{q[h * c.d + i]} * c.row(seq, p)[i];
      mx = std::max(mx, s[p] = dot * scale_of(c));
    }
    if (!c.sinks.empty()) mx = std::max(mx, double{c.sinks[h]});
    double sum = c.sinks.empty() ? 0.0 : std::exp(c.sinks[h] - mx);
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (int i = 0; i < c.dv; ++i) {
      double acc = 0;
      for (int p = 0; p <= pos; ++p) acc += s[p] * c.row(seq, p)[i];
      out[static_cast<size_t>(h) * c.dv + i] = acc / sum;
    }
  }
  return out;
}

// One pool per thread count, kept between runs.
ThreadPool& pool_of(int threads) {
  static std::vector<std::unique_ptr<ThreadPool>> pools(8);
  auto& p = pools.at(static_cast<size_t>(threads));
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

std::vector<float> run(const LatentCache& c, const Tokens& t, int threads, cpu::CpuIsa isa) {
  std::vector<const int32_t*> tabs;
  for (const auto& tab : c.tables) tabs.push_back(tab.data());
  const int out_row = c.n_heads * c.dv;
  std::vector<float> out(t.seq.size() * out_row, -1.0f);
  PagedAttentionArgs a;
  a.q = t.q.data();
  a.q_stride = static_cast<int64_t>(c.n_heads) * c.d;
  a.out = out.data();
  a.out_stride = out_row;
  a.n_tokens = static_cast<int32_t>(t.seq.size());
  a.n_heads = c.n_heads;
  a.n_kv_heads = 1;
  a.head_dim = c.d;
  a.v_dim = c.dv;
  a.k_cache = a.v_cache = c.data.data();
  a.kv_type = c.type;
  a.block_size = c.bs;
  a.token_seq = t.seq.data();
  a.token_pos = t.pos.data();
  a.block_tables = tabs.data();
  a.scale = scale_of(c);
  a.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
  paged_attention(a, pool_of(threads), isa);
  return out;
}

void random_queries(const LatentCache& c, Tokens& t, std::mt19937& rng) {
  t.q.resize(t.seq.size() * c.n_heads * c.d);
  std::normal_distribution<float> nd;
  for (auto& x : t.q) x = nd(rng);
}

// Token i of t on its own.
Tokens alone(const LatentCache& c, const Tokens& t, size_t i) {
  const size_t row = static_cast<size_t>(c.n_heads) * c.d;
  return {{t.seq[i]}, {t.pos[i]}, {t.q.begin() + i * row, t.q.begin() + (i + 1) * row}};
}

// t with each thread count: within 2e-5 of naive (as every attention kernel),
// and every token, bit for bit, itself alone with one thread.
void expect_naive_and_alone(const LatentCache& c, const Tokens& t, std::initializer_list<int> threads,
                            cpu::CpuIsa isa, const std::string& what) {
  const size_t out_row = static_cast<size_t>(c.n_heads) * c.dv;
  std::vector<std::vector<double>> ref;
  for (size_t i = 0; i < t.seq.size(); ++i)
    ref.push_back(naive(c, t.seq[i], t.pos[i], t.q.data() + i * c.n_heads * c.d));
  for (int n : threads) {
    const auto out = run(c, t, n, isa);
    double worst = 0;
    for (size_t i = 0; i < t.seq.size(); ++i)
      for (size_t j = 0; j < out_row; ++j)
        worst = std::max(worst, std::abs(out[i * out_row + j] - ref[i][j]));
    EXPECT_LT(worst, 2e-5) << what << " threads " << n;
    for (size_t i = 0; i < t.seq.size(); ++i) {
      const auto one = run(c, alone(c, t, i), 1, isa);
      for (size_t j = 0; j < out_row; ++j)
        ASSERT_EQ(one[j], out[i * out_row + j]) << what << " threads " << n << " token " << i;
    }
  }
}

class LatentAttention : public ::testing::TestWithParam<cpu::CpuIsa> {};

std::string name(const LatentCache& c) {
  return std::string(dtype_name(c.type)) + " d " + std::to_string(c.d) + " dv " +
         std::to_string(c.dv) + " heads " + std::to_string(c.n_heads) + " block " +
         std::to_string(c.bs);
}

// Latent shapes (the test model's 96 = 64 + 32, DeepSeek-V2-Lite's and V3's
// 576 = 512 + 64, a bench's 320, a latent that is not whole Q8_0 blocks),
// head counts below, at and above the vector widths (1, 4, 6, 16, 20, and
// 72: two work units per token with AVX-512), every cache type the latent
// cache allows: a prompt from position 0, a chunked prefill's run that crosses
// a segment end (250..269), tokens out of order, decode tokens at 1, 257 and
// 530 positions.
TEST_P(LatentAttention, MatchesNaiveForPromptsChunksAndDecode) {
  struct Case {
    int d, dv, n_heads, bs;
  };
  for (Case k : {Case{96, 64, 4, 16}, Case{96, 64, 1, 4}, Case{320, 256, 16, 32},
                 Case{576, 512, 6, 16}, Case{96, 64, 20, 8}, Case{128, 64, 72, 16},
                 Case{56, 48, 3, 16}})
    for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
      if (type == DType::Q8_0 && (k.d % 32 != 0 || k.dv % 32 != 0)) continue;
      std::mt19937 rng(k.d * 31 + k.n_heads * 7 + static_cast<int>(type));
      LatentCache c;
      c.d = k.d, c.dv = k.dv, c.n_heads = k.n_heads, c.bs = k.bs;
      c.build(rng, {23, 270, 530, 257}, type);
      Tokens t;
      for (int p = 0; p < 23; ++p) t.seq.push_back(0), t.pos.push_back(p);
      for (int p = 250; p < 270; ++p) t.seq.push_back(1), t.pos.push_back(p);
      for (int p : {529, 3, 300}) t.seq.push_back(2), t.pos.push_back(p);
      t.seq.push_back(3), t.pos.push_back(256);
      t.seq.push_back(1), t.pos.push_back(0);
      random_queries(c, t, rng);
      expect_naive_and_alone(c, t, {2, 3}, GetParam(), name(c));
    }
}

// Decode tokens alone in the batch (one, then three): with several threads
// the latent kernel spreads each one's segments over them and folds their
// states after; the same bits as the token alone with one thread (one unit).
TEST_P(LatentAttention, DecodeTokensSplitBySegmentEqualOneUnit) {
  for (DType type : {DType::F16, DType::Q8_0}) {
    std::mt19937 rng(404 + static_cast<int>(type));
    LatentCache c;
    c.d = 320, c.dv = 256, c.n_heads = 16, c.bs = 16;
    c.build(rng, {1100, 700, 40}, type);
    Tokens one;
    one.seq.push_back(0), one.pos.push_back(1099);
    random_queries(c, one, rng);
    expect_naive_and_alone(c, one, {2, 4}, GetParam(), name(c) + " one token");
    Tokens three;
    for (int s = 0; s < 3; ++s) three.seq.push_back(s), three.pos.push_back(s == 0 ? 1099 : s == 1 ? 699 : 39);
    random_queries(c, three, rng);
    expect_naive_and_alone(c, three, {2, 3}, GetParam(), name(c) + " three tokens");
  }
}

// Attention sinks (a raw logit per query head, no value) fold in once at the
// end, as in the other kernels.
TEST_P(LatentAttention, SinksMatchNaive) {
  std::mt19937 rng(77);
  LatentCache c;
  c.d = 96, c.dv = 64, c.n_heads = 20;
  c.build(rng, {300, 17}, DType::F16);
  std::normal_distribution<float> nd(1.0f, 2.0f);
  for (int h = 0; h < c.n_heads; ++h) c.sinks.push_back(nd(rng));
  Tokens t;
  for (int p = 280; p < 300; ++p) t.seq.push_back(0), t.pos.push_back(p);
  t.seq.push_back(1), t.pos.push_back(16);
  random_queries(c, t, rng);
  expect_naive_and_alone(c, t, {2}, GetParam(), name(c) + " sinks");
}

INSTANTIATE_TEST_SUITE_P(Isa, LatentAttention, ::testing::ValuesIn(cpu::available_isas()),
                         [](const ::testing::TestParamInfo<cpu::CpuIsa>& i) {
                           return std::string(cpu::isa_name(i.param));
                         });

// Every lane takes the same operations in either width: AVX2 (8 heads per
// vector) and AVX-512 (16) give the same bits.
TEST(LatentAttentionIsa, Avx2AndAvx512GiveTheSameBits) {
  if (!cpu::isa_available(cpu::CpuIsa::Avx512)) GTEST_SKIP() << "no AVX-512 here";
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    std::mt19937 rng(9 + static_cast<int>(type));
    LatentCache c;
    c.d = 576, c.dv = 512, c.n_heads = 20;
    c.build(rng, {600, 33}, type);
    Tokens t;
    for (int p = 250; p < 262; ++p) t.seq.push_back(0), t.pos.push_back(p);
    t.seq.push_back(0), t.pos.push_back(599);
    t.seq.push_back(1), t.pos.push_back(32);
    random_queries(c, t, rng);
    for (int threads : {1, 2}) {
      const auto a = run(c, t, threads, cpu::CpuIsa::Avx2);
      const auto b = run(c, t, threads, cpu::CpuIsa::Avx512);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << dtype_name(type) << " " << i;
    }
  }
}

// The latent kernel refuses what it does not do (the scalar variant, a GQA
// cache, windows) with an error, not a wrong answer.
TEST(LatentAttentionIsa, RefusesOtherShapes) {
  PagedAttentionArgs a;
  a.n_tokens = 1, a.n_heads = 4, a.n_kv_heads = 1, a.head_dim = 96, a.v_dim = 64;
  ThreadPool pool(1);
  EXPECT_THROW(cpu::detail::latent_attention(a, pool, cpu::CpuIsa::Scalar), Error);
  if (!cpu::isa_available(cpu::CpuIsa::Avx2)) return;
  PagedAttentionArgs gqa = a;
  gqa.n_kv_heads = 2;
  EXPECT_THROW(cpu::detail::latent_attention(gqa, pool, cpu::CpuIsa::Avx2), Error);
  PagedAttentionArgs windowed = a;
  windowed.window = 8;
  EXPECT_THROW(cpu::detail::latent_attention(windowed, pool, cpu::CpuIsa::Avx2), Error);
  PagedAttentionArgs no_latent = a;
  no_latent.v_dim = 0;
  EXPECT_THROW(cpu::detail::latent_attention(no_latent, pool, cpu::CpuIsa::Avx2), Error);
}

}  // namespace
}  // namespace pagellm
