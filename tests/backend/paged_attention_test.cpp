// Paged attention against a naive contiguous implementation in double, with
// scrambled block tables, several sequences, GQA, and batch invariance, for
// every kernel variant this CPU runs (scalar, AVX2, AVX-512).
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/paged_attention_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>

#include "tensor/convert.h"
#include "tensor/fp16.h"

namespace pagellm {
namespace {

struct CacheFixture {
  int n_heads = 8, n_kv = 2, d = 32, bs = 4, n_blocks = 40;
  DType kv_type = DType::F32;
  std::vector<float> k, v;       // cache [slots][n_kv][d] as floats (already rounded)
  std::vector<uint16_t> kh, vh;  // f16 copy
  std::vector<uint8_t> kq, vq;   // q8_0 copy
  std::vector<std::vector<int32_t>> tables;
  std::vector<int> lens;
  int window = 0;            // > 0: each token sees its last `window` positions
  float softcap = 0.0f;      // > 0: scores become softcap * tanh(score / softcap)
  std::vector<float> sinks;  // non-empty: one sink logit per query head

  void build(std::mt19937& rng, std::vector<int> seq_lens, DType t) {
    kv_type = t;
    lens = seq_lens;
    std::normal_distribution<float> nd;
    const size_t slots = static_cast<size_t>(n_blocks) * bs;
    k.resize(slots * n_kv * d);
    v.resize(k.size());
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    if (t == DType::F16) {
      kh.resize(k.size());
      vh.resize(v.size());
      for (size_t i = 0; i < k.size(); ++i) {
        kh[i] = fp32_to_fp16(k[i]), k[i] = fp16_to_fp32(kh[i]);
        vh[i] = fp32_to_fp16(v[i]), v[i] = fp16_to_fp32(vh[i]);
      }
    }
    if (t == DType::Q8_0) {
      const size_t rb = dtype_row_bytes(DType::Q8_0, d), rows = k.size() / d;
      kq.resize(rows * rb);
      vq.resize(rows * rb);
      for (size_t r = 0; r < rows; ++r) {
        quantize_row(DType::Q8_0, &k[r * d], &kq[r * rb], d);
        quantize_row(DType::Q8_0, &v[r * d], &vq[r * rb], d);
        dequantize_row(DType::Q8_0, &kq[r * rb], &k[r * d], d);
        dequantize_row(DType::Q8_0, &vq[r * rb], &v[r * d], d);
      }
    }
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    for (int len : lens) {
      std::vector<int32_t> tab;
      for (int i = 0; i < (len + bs - 1) / bs; ++i) tab.push_back(ids[next++]);
      tables.push_back(tab);
    }
  }
  const void* kc() const {
    return kv_type == DType::F16    ? (const void*)kh.data()
           : kv_type == DType::Q8_0 ? (const void*)kq.data()
                                    : k.data();
  }
  const void* vc() const {
    return kv_type == DType::F16    ? (const void*)vh.data()
           : kv_type == DType::Q8_0 ? (const void*)vq.data()
                                    : v.data();
  }
};

// Naive: gather positions 0..pos of the sequence (the last `window` of them
// with a window) and do softmax in double (scores soft-capped with a
// softcap); a sink logit joins the max and the sum with no value.
void naive(const CacheFixture& s, int seq, int pos, const float* q, float* out) {
  const int group = s.n_heads / s.n_kv;
  const int first = s.window > 0 ? std::max(0, pos - s.window + 1) : 0;
  for (int h = 0; h < s.n_heads; ++h) {
    const int kvh = h / group;
    std::vector<double> scores(pos + 1, -INFINITY);
    for (int p = first; p <= pos; ++p) {
      const size_t slot = static_cast<size_t>(s.tables[seq][p / s.bs]) * s.bs + p % s.bs;
      double dot = 0;
      for (int i = 0; i < s.d; ++i) dot += q[h * s.d + i] * s.k[(slot * s.n_kv + kvh) * s.d + i];
      scores[p] = dot / std::sqrt(static_cast<double>(s.d));
      if (s.softcap > 0) scores[p] = s.softcap * std::tanh(scores[p] / s.softcap);
    }
    double mx = *std::max_element(scores.begin(), scores.end()), sum = 0;
    if (!s.sinks.empty()) mx = std::max(mx, double{s.sinks[h]});
    for (auto& x : scores) sum += (x = std::exp(x - mx));
    if (!s.sinks.empty()) sum += std::exp(s.sinks[h] - mx);
    for (int i = 0; i < s.d; ++i) {
      double acc = 0;
      for (int p = first; p <= pos; ++p) {
        const size_t slot = static_cast<size_t>(s.tables[seq][p / s.bs]) * s.bs + p % s.bs;
        acc += scores[p] * s.v[(slot * s.n_kv + kvh) * s.d + i];
      }
      out[h * s.d + i] = static_cast<float>(acc / sum);
    }
  }
}

struct Tokens {
  std::vector<int32_t> seq, pos;
};

// The variant the tests run: set by the fixture from its parameter.
cpu::CpuIsa g_isa = cpu::best_isa();

class PagedAttention : public ::testing::TestWithParam<cpu::CpuIsa> {
 protected:
  void SetUp() override { g_isa = GetParam(); }
  void TearDown() override { g_isa = cpu::best_isa(); }
};

std::vector<float> run(const CacheFixture& s, const Tokens& t, const std::vector<float>& q,
                       int threads) {
  std::vector<const int32_t*> tabs;
  for (const auto& tab : s.tables) tabs.push_back(tab.data());
  const int row = s.n_heads * s.d;
  std::vector<float> out(t.seq.size() * row, -1.0f);
  PagedAttentionArgs a;
  a.q = q.data();
  a.q_stride = row;
  a.out = out.data();
  a.out_stride = row;
  a.n_tokens = static_cast<int32_t>(t.seq.size());
  a.n_heads = s.n_heads;
  a.n_kv_heads = s.n_kv;
  a.head_dim = s.d;
  a.k_cache = s.kc();
  a.v_cache = s.vc();
  a.kv_type = s.kv_type;
  a.block_size = s.bs;
  a.token_seq = t.seq.data();
  a.token_pos = t.pos.data();
  a.block_tables = tabs.data();
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  a.window = s.window;
  a.softcap = s.softcap;
  a.sinks = s.sinks.empty() ? nullptr : s.sinks.data();
  ThreadPool pool(threads);
  paged_attention(a, pool, g_isa);
  return out;
}

// Every position of every sequence as one flattened batch, random queries,
// run with 2 threads.
struct Batch {
  Tokens tok;
  std::vector<float> q, out;
};
Batch every_position(const CacheFixture& s, std::mt19937& rng) {
  Batch b;
  for (int sq = 0; sq < static_cast<int>(s.lens.size()); ++sq)
    for (int p = 0; p < s.lens[sq]; ++p) b.tok.seq.push_back(sq), b.tok.pos.push_back(p);
  b.q.resize(b.tok.seq.size() * s.n_heads * s.d);
  std::normal_distribution<float> nd;
  for (auto& x : b.q) x = nd(rng);
  b.out = run(s, b.tok, b.q, 2);
  return b;
}

// Largest |out - naive| over the batch.
double worst_vs_naive(const CacheFixture& s, const Batch& b) {
  const int row = s.n_heads * s.d;
  std::vector<float> ref(row);
  double worst = 0;
  for (size_t i = 0; i < b.tok.seq.size(); ++i) {
    naive(s, b.tok.seq[i], b.tok.pos[i], b.q.data() + i * row, ref.data());
    for (int j = 0; j < row; ++j)
      worst = std::max(worst, std::abs(double(b.out[i * row + j]) - ref[j]));
  }
  return worst;
}

// The first token of b whose output differs from the token run alone with
// one thread (float ==, every element), or -1.
int first_unlike_alone(const CacheFixture& s, const Batch& b) {
  const int row = s.n_heads * s.d;
  for (size_t i = 0; i < b.tok.seq.size(); ++i) {
    const Tokens alone{{b.tok.seq[i]}, {b.tok.pos[i]}};
    const std::vector<float> qi(b.q.begin() + i * row, b.q.begin() + (i + 1) * row);
    const auto one = run(s, alone, qi, 1);
    for (int j = 0; j < row; ++j)
      if (!(one[j] == b.out[i * row + j])) return static_cast<int>(i);
  }
  return -1;
}

// Normal random queries for every token of b.
void random_queries(const CacheFixture& s, Batch& b, std::mt19937& rng) {
  b.q.resize(b.tok.seq.size() * s.n_heads * s.d);
  std::normal_distribution<float> nd;
  for (auto& x : b.q) x = nd(rng);
}

// b run with each thread count: within 2e-5 of naive, and every token, bit
// for bit, itself run alone with one thread.
void expect_naive_and_alone(const CacheFixture& s, Batch& b, std::initializer_list<int> threads,
                            const std::string& what) {
  for (int n : threads) {
    b.out = run(s, b.tok, b.q, n);
    EXPECT_LT(worst_vs_naive(s, b), 2e-5) << what;
    ASSERT_EQ(first_unlike_alone(s, b), -1) << what << " threads " << n;
  }
}

TEST_P(PagedAttention, MatchesNaiveAcrossSequencesAndTypes) {
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    std::mt19937 rng(5);
    CacheFixture s;
    s.build(rng, {13, 1, 37}, t);
    // Every position of every sequence as one flattened batch.
    const Batch b = every_position(s, rng);
    EXPECT_LT(worst_vs_naive(s, b), 2e-5) << dtype_name(t);
  }
}

// Every cache type at the head sizes of real models (64, 96, 128, 256: f16,
// f32 and q8_0; 80 and 40: not a multiple of 32, so no q8_0), one that is not
// a multiple of 8 (36: the AVX2 variant hands it to the scalar one), several
// GQA groups: against naive, and a token alone with one thread gives the
// same bits as in the batch with two.
TEST_P(PagedAttention, EveryCacheTypeAtModelHeadSizes) {
  struct Case {
    int d, n_heads, n_kv;
  };
  for (Case c : {Case{64, 8, 2}, Case{96, 6, 3}, Case{128, 4, 1}, Case{256, 2, 2}, Case{80, 6, 2},
                 Case{40, 4, 4}, Case{36, 6, 2}}) {
    for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
      if (t == DType::Q8_0 && c.d % 32 != 0) continue;
      std::mt19937 rng(c.d * 3 + static_cast<int>(t));
      CacheFixture s;
      s.d = c.d;
      s.n_heads = c.n_heads;
      s.n_kv = c.n_kv;
      s.build(rng, {35, 18}, t);
      const Batch b = every_position(s, rng);
      EXPECT_LT(worst_vs_naive(s, b), 2e-5) << dtype_name(t) << " head_dim " << c.d;
      const int row = s.n_heads * s.d;
      for (size_t pick : {size_t{0}, size_t{16}, b.tok.seq.size() - 1}) {
        const Tokens alone{{b.tok.seq[pick]}, {b.tok.pos[pick]}};
        const std::vector<float> q1(b.q.begin() + pick * row, b.q.begin() + (pick + 1) * row);
        const auto one = run(s, alone, q1, 1);
        for (int j = 0; j < row; ++j)
          ASSERT_EQ(one[j], b.out[pick * row + j])
              << dtype_name(t) << " head_dim " << c.d << " token " << pick;
      }
    }
  }
}

// Head dims 64 and 128 with an f16 cache take the AVX-512 register-resident
// kernel (128: the GQA group of 4 in two passes of 2 heads); 48 the AVX2 one.
TEST_P(PagedAttention, MatchesNaiveForCommonHeadDims) {
  for (int d : {48, 64, 128}) {
    std::mt19937 rng(11 + d);
    CacheFixture s;
    s.d = d;
    s.build(rng, {21, 40}, DType::F16);
    const Batch b = every_position(s, rng);
    EXPECT_LT(worst_vs_naive(s, b), 2e-5) << "head_dim " << d;
    // One token alone, with one thread, gives the same bits as in the batch.
    const int row = s.n_heads * s.d;
    const size_t pick = b.tok.seq.size() - 3;
    Tokens alone{{b.tok.seq[pick]}, {b.tok.pos[pick]}};
    std::vector<float> q1(b.q.begin() + pick * row, b.q.begin() + (pick + 1) * row);
    auto one = run(s, alone, q1, 1);
    for (int j = 0; j < row; ++j) ASSERT_EQ(one[j], b.out[pick * row + j]) << "head_dim " << d;
  }
}

// Attention sinks (gpt-oss: a raw logit per query head in the softmax's max
// and sum, no value), with full and windowed attention, every cache type, head
// sizes of each kernel (32: gpt-oss's test file, AVX2; 64 and 128: AVX-512 for
// f16 / q8_0; 36: scalar), against naive, and each token alone with one
// thread gives its bits in the batch.
TEST_P(PagedAttention, SinksMatchNaiveWithAndWithoutWindow) {
  for (int d : {32, 36, 64, 128})
    for (DType t : {DType::F32, DType::F16, DType::Q8_0})
      for (int window : {0, 8}) {
        if (t == DType::Q8_0 && d % 32 != 0) continue;
        std::mt19937 rng(d * 7 + static_cast<int>(t) + window);
        CacheFixture s;
        s.d = d;
        s.window = window;
        s.build(rng, {35, 18}, t);
        // Logits of the scores' order (|score| ~ 1), some above every score.
        std::normal_distribution<float> nd(1.0f, 2.0f);
        for (int h = 0; h < s.n_heads; ++h) s.sinks.push_back(nd(rng));
        Batch b;
        for (int sq = 0; sq < 2; ++sq)
          for (int p = 0; p < s.lens[sq]; ++p) b.tok.seq.push_back(sq), b.tok.pos.push_back(p);
        random_queries(s, b, rng);
        expect_naive_and_alone(s, b, {2},
                               std::string(dtype_name(t)) + " d " + std::to_string(d) + " window " +
                                   std::to_string(window));
      }
}

// As a window group's table: no block (-1) where every token of b has left it
// behind its window.
void drop_blocks_out_of_the_window(CacheFixture& s, const Batch& b) {
  for (size_t sq = 0; sq < s.tables.size(); ++sq) {
    int first = s.lens[sq];
    for (size_t i = 0; i < b.tok.seq.size(); ++i)
      if (b.tok.seq[i] == static_cast<int>(sq))
        first = std::min(first, std::max(0, b.tok.pos[i] - s.window + 1));
    for (int blk = 0; (blk + 1) * s.bs <= first; ++blk) s.tables[sq][blk] = -1;
  }
}

// Sliding windows (Gemma 2/3, gpt-oss) and score soft caps (Gemma 2) in every
// kernel (head sizes 32 and 256: AVX2; 64 and 128 with f16 / q8_0: AVX-512;
// 36: scalar), windows that start inside a chunk, on a chunk's or an AVX2
// segment's edge or past several segments, caps that bind (scores of a few
// units against a cap of 1.5) and Gemma 2's 50: a prompt of 150 tokens
// (tiles past their window), a chunked prefill's continuation and a decode
// token, with 1 and 2 threads, blocks of 8 (chunks across blocks) and the
// blocks every token has left behind dropped: each token within 2e-5 of naive
// and, bit for bit, itself run alone with one thread.
TEST_P(PagedAttention, WindowAndSoftcapMatchNaiveAndEachAlone) {
  struct Case {
    int d, window;
    float softcap;
    DType type;
  };
  for (Case c : {Case{64, 5, 0.0f, DType::F16}, Case{64, 16, 50.0f, DType::Q8_0},
                 Case{128, 37, 1.5f, DType::F16}, Case{128, 0, 1.5f, DType::Q8_0},
                 Case{32, 64, 1.5f, DType::F32}, Case{32, 100, 0.0f, DType::F16},
                 Case{256, 33, 50.0f, DType::F16}, Case{256, 0, 50.0f, DType::Q8_0},
                 Case{64, 1, 1.5f, DType::F32}, Case{36, 20, 1.5f, DType::F16}}) {
    std::mt19937 rng(c.d * 13 + c.window);
    CacheFixture s;
    s.d = c.d;
    s.n_heads = 6, s.n_kv = 2, s.bs = 8, s.n_blocks = 60;
    s.window = c.window;
    s.softcap = c.softcap;
    s.build(rng, {150, 90, 131}, c.type);
    Batch b;
    for (int p = 0; p < 150; ++p) b.tok.seq.push_back(0), b.tok.pos.push_back(p);
    for (int p = 70; p < 90; ++p) b.tok.seq.push_back(1), b.tok.pos.push_back(p);
    b.tok.seq.push_back(2), b.tok.pos.push_back(130);
    random_queries(s, b, rng);
    for (float& x : b.q) x *= 3.0f;  // scores of a few units: a cap of 1.5 binds
    if (c.window > 0) drop_blocks_out_of_the_window(s, b);
    expect_naive_and_alone(s, b, {1, 2},
                           std::string(dtype_name(c.type)) + " d " + std::to_string(c.d) +
                               " window " + std::to_string(c.window) + " softcap " +
                               std::to_string(c.softcap));
  }
}

// Decode tokens alone in a batch of few (the AVX2 kernel spreads their
// segments over the threads and folds them after) with windows that leave
// their first segments out and their blocks dropped (blocks of 8: a chunk
// starts in a dropped one), soft-capped, and with sinks: each within 2e-5 of
// naive and, bit for bit, itself alone with one thread.
TEST_P(PagedAttention, WindowedDecodeTokensAcrossSegments) {
  for (DType type : {DType::F16, DType::Q8_0, DType::F32})
    for (bool sinks : {false, true}) {
      std::mt19937 rng(303 + static_cast<int>(type) + sinks);
      CacheFixture s;
      s.n_heads = 8, s.n_kv = 2, s.d = 64, s.bs = 8, s.n_blocks = 150;
      s.window = 100;
      s.softcap = 50.0f;
      s.build(rng, {700, 257, 130, 64}, type);
      if (sinks) {
        std::normal_distribution<float> nd(1.0f, 2.0f);
        for (int h = 0; h < s.n_heads; ++h) s.sinks.push_back(nd(rng));
      }
      Batch b;
      for (int sq = 0; sq < 4; ++sq) b.tok.seq.push_back(sq), b.tok.pos.push_back(s.lens[sq] - 1);
      random_queries(s, b, rng);
      drop_blocks_out_of_the_window(s, b);
      expect_naive_and_alone(s, b, {2, 3}, std::string(dtype_name(type)) + (sinks ? " sinks" : ""));
    }
}

TEST_P(PagedAttention, TokenResultIndependentOfBatchAndThreads) {
  std::mt19937 rng(9);
  CacheFixture s;
  s.build(rng, {29, 17}, DType::F16);
  const int row = s.n_heads * s.d;
  std::vector<float> qtok(row);
  std::normal_distribution<float> nd;
  for (auto& x : qtok) x = nd(rng);
  // Alone.
  Tokens alone{{0}, {20}};
  auto a = run(s, alone, qtok, 1);
  // In a batch with other tokens, at a different index, with 3 threads.
  Tokens mixed{{1, 0, 1, 0}, {16, 3, 2, 20}};
  std::vector<float> q(4 * row);
  for (auto& x : q) x = nd(rng);
  std::copy(qtok.begin(), qtok.end(), q.begin() + 3 * row);
  auto b = run(s, mixed, q, 3);
  for (int j = 0; j < row; ++j) ASSERT_EQ(a[j], b[3 * row + j]) << j;
}

// A prompt's tokens run one KV head per work item; a decode token of another
// sequence runs its heads grouped (f16 and q8_0 caches) (and a single token alone, as in the
// head-dims test, too). A prompt token's bits do not change with the company.
TEST_P(PagedAttention, PromptTokensEqualWithAndWithoutADecodeToken) {
  for (int d : {64, 128})
    for (DType type : {DType::F16, DType::Q8_0}) {
      std::mt19937 rng(31 + d);
      CacheFixture s;
      s.d = d;
      s.build(rng, {40, 25}, type);
      const int row = s.n_heads * s.d;
      Tokens prompt;
      for (int p = 0; p < 40; ++p) prompt.seq.push_back(0), prompt.pos.push_back(p);
      std::vector<float> q((prompt.seq.size() + 1) * row);
      std::normal_distribution<float> nd;
      for (auto& x : q) x = nd(rng);
      const std::vector<float> q_prompt(q.begin(), q.end() - row);
      const auto alone = run(s, prompt, q_prompt, 2);
      Tokens mixed = prompt;
      mixed.seq.push_back(1), mixed.pos.push_back(24);  // a decode token
      const auto with = run(s, mixed, q, 2);
      for (size_t i = 0; i < alone.size(); ++i)
        ASSERT_EQ(alone[i], with[i]) << dtype_name(type) << " head_dim " << d;
    }
}

// Decode tokens of several sequences (f16 and q8_0 caches), each alone in
// its sequence, take their KV heads in runs (items of several heads, hinted head by head), also
// with GQA groups that are not the kernel's head set (1, 2 and 6 query heads per KV head, head_dim
// 64 and 128): each equals the naive result and, bit for bit, the same token run alone with one
// thread (other runs of heads).
TEST_P(PagedAttention, DecodeTokensInHeadRunsAndOtherGroupSizes) {
  struct Case {
    int n_heads, n_kv, d;
  };
  for (Case c :
       {Case{32, 8, 64}, Case{16, 8, 128}, Case{8, 8, 64}, Case{12, 2, 64}, Case{24, 4, 128}})
    for (DType type : {DType::F16, DType::Q8_0}) {
      std::mt19937 rng(c.n_heads * 7 + c.d);
      CacheFixture s;
      s.n_heads = c.n_heads;
      s.n_kv = c.n_kv;
      s.d = c.d;
      s.n_blocks = 60;
      s.build(rng, {37, 20, 45, 9, 50}, type);
      Batch b;
      for (int sq = 0; sq < static_cast<int>(s.lens.size()); ++sq)
        b.tok.seq.push_back(sq), b.tok.pos.push_back(s.lens[sq] - 1);
      random_queries(s, b, rng);
      expect_naive_and_alone(s, b, {1, 2},
                             std::string(dtype_name(type)) + " " + std::to_string(c.n_heads) + "/" +
                                 std::to_string(c.n_kv) + " d " + std::to_string(c.d));
    }
}

// Prompt chunks of several sequences in one batch (a prompt from position 0,
// a chunked prefill's continuation from position 13, tokens out of position
// order, a lone token between two of a sequence): each token equals the naive
// result and, bit for bit, itself run alone with one thread, however the
// batch cuts it into tiles of consecutive tokens.
TEST_P(PagedAttention, PromptTokensInTilesEqualEachAlone) {
  for (DType type : {DType::F16, DType::Q8_0, DType::F32}) {
    std::mt19937 rng(77);
    CacheFixture s;
    s.n_heads = 12, s.n_kv = 4, s.d = 64, s.n_blocks = 60;
    s.build(rng, {41, 26, 35}, type);
    Batch b;
    for (int p = 0; p < 41; ++p) b.tok.seq.push_back(0), b.tok.pos.push_back(p);
    for (int p = 13; p < 26; ++p) b.tok.seq.push_back(1), b.tok.pos.push_back(p);
    for (int p : {34, 3, 17, 16, 33}) b.tok.seq.push_back(2), b.tok.pos.push_back(p);
    b.tok.seq.push_back(0), b.tok.pos.push_back(7);
    b.tok.seq.push_back(2), b.tok.pos.push_back(20);
    random_queries(s, b, rng);
    expect_naive_and_alone(s, b, {1, 3}, dtype_name(type));
  }
}

// Contexts of many segments of the AVX2 kernel (64 positions, reduced apart
// and folded; decode tokens in a batch of few tiles spread their segments
// over the threads, in a batch of many each folds them in one item): decode
// tokens at 256, 257, 513 and 700 positions, and prompt tokens whose tiles
// straddle segment ends, with 1, 2 and 3 threads: each equals the naive
// result and, bit for bit, itself run alone with one thread.
TEST_P(PagedAttention, LongContextsAcrossSegments) {
  for (DType type : {DType::F16, DType::Q8_0, DType::F32}) {
    std::mt19937 rng(101);
    CacheFixture s;
    s.n_heads = 8, s.n_kv = 2, s.d = 64, s.bs = 16, s.n_blocks = 120;
    s.build(rng, {700, 257, 256, 513}, type);
    Batch b;
    for (int sq = 0; sq < 4; ++sq) b.tok.seq.push_back(sq), b.tok.pos.push_back(s.lens[sq] - 1);
    for (int p = 250; p < 263; ++p) b.tok.seq.push_back(0), b.tok.pos.push_back(p);
    for (int p = 507; p < 516; ++p) b.tok.seq.push_back(3), b.tok.pos.push_back(p);
    random_queries(s, b, rng);
    expect_naive_and_alone(s, b, {1, 2}, dtype_name(type));
    // The decode tokens alone in a batch (few tiles: their segments spread
    // over the threads and are folded after).
    Batch dec;
    dec.tok.seq.assign(b.tok.seq.begin(), b.tok.seq.begin() + 4);
    dec.tok.pos.assign(b.tok.pos.begin(), b.tok.pos.begin() + 4);
    dec.q.assign(b.q.begin(), b.q.begin() + 4 * s.n_heads * s.d);
    expect_naive_and_alone(s, dec, {2, 3}, dtype_name(type));
  }
}

// Two decode tokens of 1,300 positions (21 segments of 16 query heads of 64):
// with the AVX2 kernel's segment-state buffer lowered to hold one token's
// states but not two, the first keeps its segments apart and the second folds
// its segments in one item per KV head: both equal the naive result and, bit
// for bit, themselves alone with one thread. (At the default 16 MiB the same
// happens to two tokens of 8,320 positions with 64 heads of 256.)
TEST_P(PagedAttention, DecodeTokensPastTheSegmentBuffer) {
  struct Limit {
    explicit Limit(size_t floats) { cpu::detail::set_avx2_max_part_floats(floats); }
    ~Limit() { cpu::detail::set_avx2_max_part_floats(0); }
  };
  EXPECT_EQ(cpu::detail::avx2_max_part_floats(), size_t{4} << 20);  // 16 MiB of floats
  std::mt19937 rng(202);
  CacheFixture s;
  s.n_heads = 16, s.n_kv = 2, s.d = 64, s.bs = 16, s.n_blocks = 170;
  s.build(rng, {1300, 1300}, DType::F16);
  const size_t per_token = size_t{(1300 + 63) / 64} * s.n_heads * (s.d + 2);  // 22,176
  const Limit limit(30000);
  ASSERT_LE(per_token, cpu::detail::avx2_max_part_floats());
  ASSERT_GT(2 * per_token, cpu::detail::avx2_max_part_floats());
  Batch b;
  for (int sq = 0; sq < 2; ++sq) b.tok.seq.push_back(sq), b.tok.pos.push_back(s.lens[sq] - 1);
  random_queries(s, b, rng);
  expect_naive_and_alone(s, b, {2}, "f16");
}

INSTANTIATE_TEST_SUITE_P(Isa, PagedAttention, ::testing::ValuesIn(cpu::available_isas()),
                         [](const ::testing::TestParamInfo<cpu::CpuIsa>& i) {
                           return std::string(cpu::isa_name(i.param));
                         });

}  // namespace
}  // namespace pagellm
