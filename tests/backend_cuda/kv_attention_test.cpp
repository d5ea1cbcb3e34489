// CUDA KV write and paged attention against the CPU: the cache bytes must be
// the ones KvPool::write's quantizers produce, and attention over the same
// cache must match backend/cpu paged_attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>

#include "backend/cpu/paged_attention.h"
#include "backend/cuda/kv_write.h"
#include "backend/cuda/paged_attention.h"
#include "backend/cuda/q8_activations.h"
#include "cuda_test_util.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pagellm::cuda {
namespace {

using test::download;
using test::upload;

// Host cache rows written as KvPool::write does.
std::vector<uint8_t> cpu_cache(DType type, const std::vector<float>& rows, int64_t n_tokens,
                               const std::vector<int64_t>& slots, int64_t n_slots, int n_kv_heads,
                               int head_dim) {
  const size_t head_bytes = dtype_row_bytes(type, head_dim);
  std::vector<uint8_t> cache(static_cast<size_t>(n_slots) * n_kv_heads * head_bytes, 0);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_kv_heads; ++h)
      quantize_row(type, rows.data() + (t * n_kv_heads + h) * head_dim,
                   cache.data() + (static_cast<size_t>(slots[t]) * n_kv_heads + h) * head_bytes,
                   head_dim);
  return cache;
}

// The cache bytes of KvPool::write's quantizers against the CUDA kernel's on
// `dev`, or, with no device, against the kernel's host rendition.
void kv_write_case(const CudaDevice* dev) {
  const int n_kv_heads = 4, head_dim = 128, n_tokens = 9, n_slots = 64;
  const std::vector<int64_t> slots = {5, 6, 7, 40, 41, 0, 63, 17, 18};
  for (DType type : {DType::F16, DType::F32, DType::Q8_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)) + (dev ? "" : " (host rendition)"));
    auto k = test::random_floats(n_tokens * n_kv_heads * head_dim, 21, 2.0f);
    const auto v = test::random_floats(n_tokens * n_kv_heads * head_dim, 22, 2.0f);
    for (int i = 0; i < head_dim; ++i) k[i] = 0.0f;  // an all-zero head row: d = 0
    // A block with d = 1 and codes at exact halves: rounding must go away
    // from zero, as the CPU's quantizer does (not to even).
    const float halves[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 125.5f, -126.5f};
    for (size_t i = 0; i < std::size(halves); ++i) k[head_dim + i] = halves[i];
    const auto want_k = cpu_cache(type, k, n_tokens, slots, n_slots, n_kv_heads, head_dim);
    const auto want_v = cpu_cache(type, v, n_tokens, slots, n_slots, n_kv_heads, head_dim);
    KvWriteArgs a;
    a.k_stride = n_kv_heads * head_dim;
    a.v_stride = n_kv_heads * head_dim;
    a.n_tokens = n_tokens;
    a.n_kv_heads = n_kv_heads;
    a.head_dim = head_dim;
    a.cache_type = type;
    if (dev == nullptr) {
      std::vector<uint8_t> kc(want_k.size(), 0), vc(want_v.size(), 0);
      a.k = k.data();
      a.v = v.data();
      a.slots = slots.data();
      a.k_cache = kc.data();
      a.v_cache = vc.data();
      kv_write_host(a);
      EXPECT_TRUE(kc == want_k);
      EXPECT_TRUE(vc == want_v);
      continue;
    }
    DeviceBuffer dk = upload(*dev, k), dv = upload(*dev, v), ds = upload(*dev, slots);
    DeviceBuffer kc(*dev, want_k.size()), vc(*dev, want_v.size());
    dev->fill_zero(kc.data(), kc.bytes());
    dev->fill_zero(vc.data(), vc.bytes());
    a.k = dk.as<float>();
    a.v = dv.as<float>();
    a.slots = ds.as<int64_t>();
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    kv_write(*dev, a);
    EXPECT_TRUE(download<uint8_t>(*dev, kc, want_k.size()) == want_k);
    EXPECT_TRUE(download<uint8_t>(*dev, vc, want_v.size()) == want_v);
  }
}

TEST(CudaKvWrite, SameBytesAsCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  kv_write_case(&dev);
}

TEST(CudaKvWrite, HostRenditionSameBytesAsCpu) {
  kv_write_case(nullptr);
}

// A latent cache (MLA: v_cache == k_cache, one 576-element row per token):
// the rows are K's, as KvPool::write stores them; v is never stored over them.
void latent_kv_write_case(const CudaDevice* dev) {
  const int head_dim = 576, n_tokens = 5, n_slots = 32;
  const std::vector<int64_t> slots = {3, 30, 31, 0, 9};
  for (DType type : {DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)) + (dev ? "" : " (host rendition)"));
    const auto k = test::random_floats(n_tokens * head_dim, 31, 2.0f);
    const auto v = test::random_floats(n_tokens * head_dim, 32, 2.0f);  // not the latent
    const auto want = cpu_cache(type, k, n_tokens, slots, n_slots, 1, head_dim);
    KvWriteArgs a;
    a.k_stride = a.v_stride = head_dim;
    a.n_tokens = n_tokens;
    a.n_kv_heads = 1;
    a.head_dim = head_dim;
    a.cache_type = type;
    if (dev == nullptr) {
      std::vector<uint8_t> cache(want.size(), 0);
      a.k = k.data();
      a.v = v.data();
      a.slots = slots.data();
      a.k_cache = a.v_cache = cache.data();
      kv_write_host(a);
      EXPECT_TRUE(cache == want);
      continue;
    }
    DeviceBuffer dk = upload(*dev, k), dv = upload(*dev, v), ds = upload(*dev, slots);
    DeviceBuffer cache(*dev, want.size());
    dev->fill_zero(cache.data(), cache.bytes());
    a.k = dk.as<float>();
    a.v = dv.as<float>();
    a.slots = ds.as<int64_t>();
    a.k_cache = a.v_cache = cache.data();
    kv_write(*dev, a);
    EXPECT_TRUE(download<uint8_t>(*dev, cache, want.size()) == want);
  }
}

TEST(CudaKvWrite, LatentCacheStoresKOnly) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  latent_kv_write_case(&dev);
}

TEST(CudaKvWrite, LatentCacheStoresKOnlyHostRendition) {
  latent_kv_write_case(nullptr);
}

struct AttnCase {
  DType kv_type;
  int n_heads, n_kv_heads, head_dim;
  std::vector<int32_t> seq_lens;  // tokens already cached + this step's, per sequence
  std::vector<int32_t> step;      // this step's tokens per sequence (1 = decode)
  int32_t window = 0;             // sliding window (0: none); blocks before it are holes
  float softcap = 0.0f;
  bool sinks = false;  // per-head sink logits (gpt-oss)
  int v_dim = 0;       // > 0: a latent cache (MLA), n_kv_heads 1, V = K rows' first v_dim
};

// Int8 rows (q8_activations.h) in host memory: do they hold `rows`, as
// quantize_q8_activations makes them?
struct Q8Rows {
  int64_t n, cols;
  size_t bytes;
  std::vector<uint64_t> buf;
  Q8Rows(int64_t n_, int64_t cols_)
      : n(n_), cols(cols_), bytes(q8_act_bytes(n_, cols_)), buf(bytes / 8 + 3) {}
  void* data() {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(buf.data()) + 15) & ~uintptr_t{15});
  }
  bool holds(const std::vector<float>& rows) {
    std::vector<uint64_t> want(bytes / 8 + 3);
    auto* w =
        reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(want.data()) + 15) & ~uintptr_t{15});
    quantize_q8_activations_host(rows.data(), cols, n, cols, w);
    return std::memcmp(w, data(), bytes) == 0;
  }
};

// The CPU kernel's result for case c against the CUDA kernel's on `dev`, or,
// with no device, against the kernel's host rendition (paged_attention_host).
void run_attention_case(const CudaDevice* dev, const AttnCase& c, uint64_t seed) {
  const int block_size = 16;
  const int n_seqs = static_cast<int>(c.seq_lens.size());
  // Block tables: a shuffled pool of blocks, as a real allocator would leave it.
  int max_blocks = 0, total_blocks = 0;
  for (int32_t len : c.seq_lens) {
    max_blocks = std::max(max_blocks, (len + block_size - 1) / block_size);
    total_blocks += (len + block_size - 1) / block_size;
  }
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks) + 3);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(static_cast<uint32_t>(seed)));
  std::vector<int32_t> flat(static_cast<size_t>(n_seqs) * max_blocks, -1);
  std::vector<std::vector<int32_t>> tables(n_seqs);
  size_t next = 0;
  for (int s = 0; s < n_seqs; ++s)
    for (int b = 0; b < (c.seq_lens[s] + block_size - 1) / block_size; ++b) {
      tables[s].push_back(ids[next]);
      flat[static_cast<size_t>(s) * max_blocks + b] = ids[next++];
    }
  const int64_t n_slots = static_cast<int64_t>(ids.size()) * block_size;
  // Every cached position of every sequence gets K and V.
  std::vector<int64_t> slots;
  std::vector<int32_t> token_seq, token_pos;
  for (int s = 0; s < n_seqs; ++s)
    for (int32_t p = 0; p < c.seq_lens[s]; ++p) {
      slots.push_back(static_cast<int64_t>(tables[s][p / block_size]) * block_size +
                      p % block_size);
      if (p >= c.seq_lens[s] - c.step[s]) {
        token_seq.push_back(s);
        token_pos.push_back(p);
      }
    }
  const int64_t n_rows = static_cast<int64_t>(slots.size());
  const int KV = c.n_kv_heads * c.head_dim;
  const auto k = test::random_floats(n_rows * KV, seed + 1);
  const auto v = test::random_floats(n_rows * KV, seed + 2);
  const auto kc = cpu_cache(c.kv_type, k, n_rows, slots, n_slots, c.n_kv_heads, c.head_dim);
  const auto vc = c.v_dim > 0 ? kc  // a latent cache: the K rows are the values
                               : cpu_cache(c.kv_type, v, n_rows, slots, n_slots, c.n_kv_heads,
                                           c.head_dim);
  const int32_t T = static_cast<int32_t>(token_seq.size());
  const int64_t q_stride = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int vdim = c.v_dim > 0 ? c.v_dim : c.head_dim;
  const int64_t out_stride = static_cast<int64_t>(c.n_heads) * vdim;
  const auto q = test::random_floats(T * q_stride, seed + 3);
  // A window group drops the blocks no query of the step can see: holes
  // (-1) that neither kernel may read.
  if (c.window > 0)
    for (int s = 0; s < n_seqs; ++s) {
      const int32_t first = std::max(0, c.seq_lens[s] - c.step[s] - c.window + 1);
      for (int b = 0; (b + 1) * block_size <= first; ++b) {
        tables[s][b] = -1;
        flat[static_cast<size_t>(s) * max_blocks + b] = -1;
      }
    }

  std::vector<const int32_t*> table_ptrs;
  for (auto& t : tables) table_ptrs.push_back(t.data());
  std::vector<float> want(static_cast<size_t>(T * out_stride));
  PagedAttentionArgs pa;
  pa.q = q.data();
  pa.q_stride = q_stride;
  pa.out = want.data();
  pa.out_stride = out_stride;
  pa.v_dim = c.v_dim;
  pa.n_tokens = T;
  pa.n_heads = c.n_heads;
  pa.n_kv_heads = c.n_kv_heads;
  pa.head_dim = c.head_dim;
  pa.k_cache = kc.data();
  pa.v_cache = vc.data();
  pa.kv_type = c.kv_type;
  pa.block_size = block_size;
  pa.token_seq = token_seq.data();
  pa.token_pos = token_pos.data();
  pa.block_tables = table_ptrs.data();
  pa.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  pa.window = c.window;
  pa.softcap = c.softcap;
  // Sinks of the scores' order (|score| ~ 1 here), some above every score.
  std::vector<float> sinks = test::random_floats(c.n_heads, seed + 4);
  for (float& s : sinks) s = 4.0f * s + 1.0f;
  if (c.sinks) pa.sinks = sinks.data();
  ThreadPool pool(2);
  paged_attention(pa, pool);

  if (dev == nullptr) {
    PagedAttentionArgs ha = pa;  // host pointers, a flat table
    std::vector<float> got(want.size());
    ha.out = got.data();
    ha.block_tables = nullptr;
    ha.block_table_flat = flat.data();
    ha.block_table_stride = max_blocks;
    Q8Rows q8(T, out_stride);
    if (vdim % 32 == 0) {
      paged_attention_host(ha, q8.data());
      EXPECT_TRUE(q8.holds(got)) << "int8 rows, dim " << vdim << " (host rendition)";
    } else {
      EXPECT_THROW(paged_attention_host(ha, q8.data()), ConfigError);
      paged_attention_host(ha);
    }
    EXPECT_LE(test::rel_error(got, want), 2e-5)
        << dtype_name(c.kv_type) << " heads " << c.n_heads << "/" << c.n_kv_heads << " dim "
        << c.head_dim << " tokens " << T << " (host rendition)";
    return;
  }
  DeviceBuffer dq = upload(*dev, q), dk = upload(*dev, kc), dv = upload(*dev, vc);
  DeviceBuffer dseq = upload(*dev, token_seq), dpos = upload(*dev, token_pos),
               dtab = upload(*dev, flat);
  DeviceBuffer dout(*dev, want.size() * sizeof(float)), dsinks = upload(*dev, sinks);
  PagedAttentionArgs ga = pa;  // the same call, device pointers and a flat table
  ga.q = dq.as<float>();
  ga.out = dout.as<float>();
  ga.k_cache = dk.data();
  ga.v_cache = dv.data();
  ga.token_seq = dseq.as<int32_t>();
  ga.token_pos = dpos.as<int32_t>();
  ga.block_tables = nullptr;
  ga.block_table_flat = dtab.as<int32_t>();
  ga.block_table_stride = max_blocks;
  if (c.sinks) ga.sinks = dsinks.as<float>();
  const bool with_q8 = vdim % 32 == 0;
  DeviceBuffer dq8(*dev, q8_act_bytes(T, out_stride));
  cuda::paged_attention(*dev, ga, with_q8 ? dq8.data() : nullptr);
  const auto got = download<float>(*dev, dout, want.size());
  if (with_q8) {
    Q8Rows q8(T, out_stride);
    dev->to_host(q8.data(), dq8.data(), q8.bytes);
    EXPECT_TRUE(q8.holds(got)) << "int8 rows, dim " << c.head_dim;
  }
  EXPECT_LE(test::rel_error(got, want), 2e-5)
      << dtype_name(c.kv_type) << " heads " << c.n_heads << "/" << c.n_kv_heads << " dim "
      << c.head_dim << " tokens " << T;
  {
    // The kernel against its host rendition: the same lane code and merge
    // order (only the math library's exp / tanh and FMA contraction differ).
    PagedAttentionArgs ha = pa;
    std::vector<float> host(want.size());
    ha.out = host.data();
    ha.block_tables = nullptr;
    ha.block_table_flat = flat.data();
    ha.block_table_stride = max_blocks;
    paged_attention_host(ha);
    EXPECT_LE(test::rel_error(got, host), 1e-5)
        << dtype_name(c.kv_type) << " dim " << c.head_dim << " against the host rendition";
  }

  // The split launch (a thread block per partition, then their merge) gives
  // the one-block launch's bits, whatever the step's size.
  const int32_t parts =
      (max_blocks * block_size + kCudaAttentionPartition - 1) / kCudaAttentionPartition;
  if (parts > 1) {
    DeviceBuffer ws(*dev, attention_workspace_bytes(ga, parts));
    DeviceBuffer dsplit(*dev, want.size() * sizeof(float)),
        dq8s(*dev, q8_act_bytes(T, out_stride));
    PagedAttentionArgs sa = ga;
    sa.out = dsplit.as<float>();
    cuda::paged_attention(*dev, sa, with_q8 ? dq8s.data() : nullptr,
                          AttentionSplit{parts, ws.as<float>()});
    EXPECT_EQ(download<float>(*dev, dsplit, want.size()), got) << "split into " << parts;
    if (with_q8) {
      EXPECT_EQ(download<uint8_t>(*dev, dq8s, q8_act_bytes(T, out_stride)),
                download<uint8_t>(*dev, dq8, q8_act_bytes(T, out_stride)))
          << "int8 rows, split into " << parts;
    }
  }
}

void decode_cases(const CudaDevice* dev) {
  for (DType t : {DType::F16, DType::Q8_0, DType::F32})
    run_attention_case(dev, {t, 32, 8, 128, {1, 17, 300, 1000}, {1, 1, 1, 1}}, 100);
  // Contexts of several 512-position partitions, and at their edges; head
  // sizes whose dims fill two per thread (256) or leave threads without one (80).
  run_attention_case(dev, {DType::F16, 8, 2, 64, {2100, 513, 512, 1536}, {1, 1, 1, 1}}, 500);
  run_attention_case(dev, {DType::Q8_0, 4, 4, 256, {1100, 30}, {3, 1}}, 501);
  run_attention_case(dev, {DType::F16, 8, 2, 80, {1300}, {2}}, 502);
  run_attention_case(dev, {DType::F32, 4, 2, 128, {1025, 700}, {1, 1}}, 503);
}

void prefill_cases(const CudaDevice* dev) {
  for (DType t : {DType::F16, DType::Q8_0}) {
    // A whole prompt, a later chunk of a prompt, and a decode, in one batch.
    run_attention_case(dev, {t, 16, 4, 64, {75, 200, 33}, {75, 64, 1}}, 200);
    // Multi-head attention (no GQA), head_dim 256.
    run_attention_case(dev, {t, 4, 4, 256, {130}, {50}}, 300);
  }
  // f16 head size that is not a multiple of 32.
  run_attention_case(dev, {DType::F16, 8, 2, 80, {90, 5}, {90, 2}}, 400);
}

// Sliding windows (Gemma; partitions start at the window) and score soft caps
// (Gemma 2), in prefill chunks and decodes, with dropped blocks as holes.
void window_softcap_cases(const CudaDevice* dev) {
  run_attention_case(dev, {DType::F16, 8, 2, 64, {75, 700, 33}, {75, 64, 1}, 32, 0.0f}, 600);
  run_attention_case(dev, {DType::F16, 4, 1, 128, {1300, 40}, {1, 40}, 512, 50.0f}, 601);
  run_attention_case(dev, {DType::Q8_0, 8, 4, 64, {200, 1030}, {1, 1}, 0, 30.0f}, 602);
}

// Attention sinks (gpt-oss: head dim 64 in the real models, 32 in the test
// file), windowed and not, decodes and prefill chunks, split launches.
void sink_cases(const CudaDevice* dev) {
  run_attention_case(dev, {DType::F16, 8, 2, 64, {75, 700, 33}, {75, 64, 1}, 32, 0.0f, true}, 700);
  run_attention_case(dev, {DType::F32, 4, 2, 32, {1300, 40}, {1, 40}, 0, 0.0f, true}, 701);
  run_attention_case(dev, {DType::Q8_0, 8, 4, 64, {200, 1030}, {1, 1}, 128, 0.0f, true}, 702);
}

// MLA's latent cache: one KV head of [latent | rope] rows, values the latent
// (v_dim), every query head on it; decodes, prefill chunks, split launches,
// caches of every type, and v_dim not a multiple of 32 (no int8 rows).
void latent_cases(const CudaDevice* dev) {
  for (DType t : {DType::F16, DType::Q8_0, DType::F32}) {
    AttnCase c{t, 16, 1, 96, {75, 700, 33}, {75, 64, 1}};
    c.v_dim = 64;
    run_attention_case(dev, c, 800);
  }
  AttnCase decode{DType::F16, 8, 1, 160, {1300, 2}, {1, 2}};
  decode.v_dim = 128;
  run_attention_case(dev, decode, 801);
  AttnCase odd{DType::F32, 4, 1, 56, {40}, {40}};
  odd.v_dim = 40;
  run_attention_case(dev, odd, 802);
}

TEST(CudaPagedAttention, LatentCacheMatchesCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  latent_cases(&dev);
}

TEST(CudaPagedAttention, LatentCacheHostRenditionMatchesCpu) {
  latent_cases(nullptr);
}

// The head sizes of real models past the small tier (256): DeepSeek V2/V3,
// Kimi K2 and GLM-4.7-Flash's latent rows (kv_lora_rank 512 + rope 64, one
// KV head, 16-128 query heads) and Gemma 4's global layers (512); prefill
// chunks, decodes, split launches, windows, soft caps and sinks, and a size
// between the tiers (320).
void large_head_cases(const CudaDevice* dev) {
  for (DType t : {DType::F16, DType::Q8_0}) {
    AttnCase mla{t, 16, 1, 576, {1100, 60, 3}, {1, 40, 3}};
    mla.v_dim = 512;
    run_attention_case(dev, mla, 900);
    AttnCase wide{t, 128, 1, 576, {1300, 5}, {1, 2}};  // DeepSeek V3's 128 heads
    wide.v_dim = 512;
    run_attention_case(dev, wide, 901);
    run_attention_case(dev, {t, 8, 1, 512, {1100, 70}, {1, 70}}, 902);  // Gemma 4 global
    run_attention_case(dev, {t, 8, 2, 512, {800, 50}, {2, 50}, 128, 30.0f}, 903);
  }
  AttnCase sinks{DType::F16, 16, 1, 576, {900, 30}, {2, 30}, 256, 0.0f, true};
  sinks.v_dim = 512;
  run_attention_case(dev, sinks, 904);
  AttnCase capped{DType::Q8_0, 16, 1, 576, {700}, {1}, 0, 30.0f};
  capped.v_dim = 512;
  run_attention_case(dev, capped, 905);
  AttnCase odd{DType::F32, 4, 1, 576, {40}, {40}};  // values not whole int8 blocks
  odd.v_dim = 500;
  run_attention_case(dev, odd, 906);
  run_attention_case(dev, {DType::F16, 4, 2, 320, {600, 20}, {2, 20}, 0, 0.0f, true}, 907);
  run_attention_case(dev, {DType::F32, 4, 4, 512, {520}, {1}}, 908);
}

TEST(CudaPagedAttention, LargeHeadsMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  large_head_cases(&dev);
}

TEST(CudaPagedAttention, LargeHeadsHostRenditionMatchesCpu) {
  large_head_cases(nullptr);
}

TEST(CudaPagedAttention, HeadSizesAreChecked) {
  PagedAttentionArgs a;
  a.n_tokens = 1;
  a.n_heads = 4;
  a.n_kv_heads = 1;
  a.head_dim = 576;
  a.v_dim = 512;
  EXPECT_NO_THROW(validate(a));  // MLA's latent rows
  a.v_dim = 0;
  EXPECT_THROW(validate(a), ConfigError);  // 576 values per head: past the large tier
  a.head_dim = 512;
  EXPECT_NO_THROW(validate(a));  // Gemma 4's global heads
  a.head_dim = 577;
  a.v_dim = 512;
  EXPECT_THROW(validate(a), ConfigError);  // rows past 576
}

TEST(CudaPagedAttention, LatentCacheShapesAreChecked) {
  PagedAttentionArgs a;
  a.n_tokens = 1;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.head_dim = 64;
  a.v_dim = 32;
  EXPECT_THROW(validate(a), ConfigError);  // a latent cache has one KV head
  a.n_kv_heads = 1;
  EXPECT_NO_THROW(validate(a));
  a.v_dim = 65;
  EXPECT_THROW(validate(a), ConfigError);  // values past the row
}

TEST(CudaPagedAttention, SinksMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  sink_cases(&dev);
}

TEST(CudaPagedAttention, SinksHostRenditionMatchesCpu) {
  sink_cases(nullptr);
}

TEST(CudaPagedAttention, DecodeMatchesCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  decode_cases(&dev);
}

TEST(CudaPagedAttention, PrefillAndChunkedPrefillMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  prefill_cases(&dev);
}

// The kernel's lane code on the host (no GPU needed): block tables, GQA head
// mapping, the chunked online softmax and the warps' merge.
TEST(CudaPagedAttention, HostRenditionMatchesCpu) {
  decode_cases(nullptr);
  prefill_cases(nullptr);
}

TEST(CudaPagedAttention, WindowAndSoftcapMatchCpu) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  window_softcap_cases(&dev);
}

TEST(CudaPagedAttention, WindowAndSoftcapHostRenditionMatchesCpu) {
  window_softcap_cases(nullptr);
}

}  // namespace
}  // namespace pagellm::cuda
