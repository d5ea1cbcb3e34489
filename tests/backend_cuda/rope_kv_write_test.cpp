// The fused RoPE + KV write against its two halves: the same q rows and cache
// bytes as CudaRopeCache::apply on q and k followed by kv_write, bit for bit
// (on the GPU, and in the host renditions without one), with k left as it
// was; and q and the cached K as the CPU's RoPE and quantizers make them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/kv_write.h"
#include "backend/cuda/ops.h"
#include "cuda_test_util.h"
#include "tensor/convert.h"
#include "util/error.h"

namespace pagellm::cuda {
namespace {

using test::download;
using test::rel_error;
using test::upload;

struct Case {
  DType type;
  RopeStyle style;
  int32_t n_heads, n_kv_heads, head_dim, n_rot;
};

std::string name(const Case& c) {
  return std::string(dtype_name(c.type)) + (c.style == RopeStyle::kNeox ? " neox " : " norm ") +
         std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + "x" +
         std::to_string(c.head_dim) + " rot " + std::to_string(c.n_rot);
}

const Case kCases[] = {
    {DType::F16, RopeStyle::kNorm, 8, 2, 64, 64},
    {DType::F32, RopeStyle::kNeox, 6, 3, 128, 96},  // partial rotation
    {DType::Q8_0, RopeStyle::kNeox, 32, 8, 128, 128},
    {DType::Q8_0, RopeStyle::kNorm, 4, 4, 64, 32},
};

constexpr float kBase = 10000.0f, kScale = 0.5f;
constexpr int64_t kSlots = 48;

// A step of 7 tokens, one of them padding (slot -1).
struct Step {
  std::vector<int32_t> pos = {0, 1, 17, 300, 4095, 5, 32767};
  std::vector<int64_t> slots = {3, 4, 20, 47, 0, -1, 31};
  std::vector<float> q, k, v;
  int64_t n_tokens() const { return static_cast<int64_t>(pos.size()); }
};

Step make_step(const Case& c) {
  Step s;
  const int64_t T = s.n_tokens();
  s.q = test::random_floats(static_cast<size_t>(T * c.n_heads * c.head_dim), 31, 2.0f);
  s.k = test::random_floats(static_cast<size_t>(T * c.n_kv_heads * c.head_dim), 32, 2.0f);
  s.v = test::random_floats(static_cast<size_t>(T * c.n_kv_heads * c.head_dim), 33, 2.0f);
  return s;
}

size_t cache_bytes(const Case& c) {
  return static_cast<size_t>(kSlots * c.n_kv_heads) * dtype_row_bytes(c.type, c.head_dim);
}

KvWriteArgs kv_args(const Case& c, const Step& s) {
  KvWriteArgs a;
  a.k_stride = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  a.v_stride = a.k_stride;
  a.n_tokens = static_cast<int32_t>(s.n_tokens());
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = c.head_dim;
  a.cache_type = c.type;
  return a;
}

KvRopeArgs rope_args(const Case& c) {
  KvRopeArgs r;
  r.q_stride = static_cast<int64_t>(c.n_heads) * c.head_dim;
  r.n_heads = c.n_heads;
  r.n_rot = c.n_rot;
  r.neox = c.style == RopeStyle::kNeox;
  return r;
}

// q and the cached K against the CPU: RopeCache's rotation, then the
// cache type's rounding (dequantized K within the type's error); skipped
// slots stay zero.
void expect_matches_cpu(const Case& c, const Step& s, const std::vector<float>& q,
                        const std::vector<uint8_t>& k_cache) {
  const int64_t T = s.n_tokens();
  std::vector<float> want_q = s.q, want_k = s.k;
  RopeCache cpu(c.n_rot, kBase, kScale);
  cpu.prepare(s.pos.data(), T);
  cpu.apply(want_q.data(), T, static_cast<int64_t>(c.n_heads) * c.head_dim, c.n_heads, c.head_dim,
            c.style);
  cpu.apply(want_k.data(), T, static_cast<int64_t>(c.n_kv_heads) * c.head_dim, c.n_kv_heads,
            c.head_dim, c.style);
  EXPECT_LE(rel_error(q, want_q), 1e-6);
  const double tol = c.type == DType::F32 ? 1e-6 : c.type == DType::F16 ? 1e-3 : 1e-2;
  const size_t head_bytes = dtype_row_bytes(c.type, c.head_dim);
  std::vector<bool> written(kSlots, false);
  std::vector<float> row(static_cast<size_t>(c.head_dim));
  for (int64_t t = 0; t < T; ++t) {
    if (s.slots[t] < 0) continue;
    written[s.slots[t]] = true;
    for (int32_t h = 0; h < c.n_kv_heads; ++h) {
      dequantize_row(c.type, k_cache.data() + (s.slots[t] * c.n_kv_heads + h) * head_bytes,
                     row.data(), c.head_dim);
      const float* want = want_k.data() + (t * c.n_kv_heads + h) * c.head_dim;
      EXPECT_LE(rel_error(row, std::vector<float>(want, want + c.head_dim)), tol)
          << "token " << t << " head " << h;
    }
  }
  for (int64_t slot = 0; slot < kSlots; ++slot) {
    if (written[slot]) continue;
    const uint8_t* b = k_cache.data() + slot * c.n_kv_heads * head_bytes;
    EXPECT_EQ(std::vector<uint8_t>(b, b + c.n_kv_heads * head_bytes),
              std::vector<uint8_t>(c.n_kv_heads * head_bytes, 0))
        << "slot " << slot << " written";
  }
}

TEST(CudaRopeKvWrite, EqualsRopeThenKvWrite) {
  PAGELLM_REQUIRE_CUDA_DEVICE();
  CudaDevice dev(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const Step s = make_step(c);
    const int64_t T = s.n_tokens();
    const size_t bytes = cache_bytes(c);
    DeviceBuffer dpos = upload(dev, s.pos), dslots = upload(dev, s.slots), dv = upload(dev, s.v);
    CudaRopeCache rope(c.n_rot, kBase, kScale);
    rope.prepare(dev, dpos.as<int32_t>(), T);
    // The launches of the unfused path.
    DeviceBuffer q1 = upload(dev, s.q), k1 = upload(dev, s.k), kc1(dev, bytes), vc1(dev, bytes);
    dev.fill_zero(kc1.data(), bytes);
    dev.fill_zero(vc1.data(), bytes);
    rope.apply(dev, q1.as<float>(), T, rope_args(c).q_stride, c.n_heads, c.head_dim, c.style);
    rope.apply(dev, k1.as<float>(), T, kv_args(c, s).k_stride, c.n_kv_heads, c.head_dim, c.style);
    KvWriteArgs a = kv_args(c, s);
    a.k = k1.as<float>();
    a.v = dv.as<float>();
    a.slots = dslots.as<int64_t>();
    a.k_cache = kc1.data();
    a.v_cache = vc1.data();
    kv_write(dev, a);
    // The fused launch.
    DeviceBuffer q2 = upload(dev, s.q), k2 = upload(dev, s.k), kc2(dev, bytes), vc2(dev, bytes);
    dev.fill_zero(kc2.data(), bytes);
    dev.fill_zero(vc2.data(), bytes);
    a.k = k2.as<float>();
    a.k_cache = kc2.data();
    a.v_cache = vc2.data();
    KvRopeArgs r = rope_args(c);
    r.q = q2.as<float>();
    r.cos_sin = rope.cos_sin(T);
    rope_kv_write(dev, a, r);

    const auto q_fused = download<float>(dev, q2, s.q.size());
    const auto kc_fused = download<uint8_t>(dev, kc2, bytes);
    EXPECT_EQ(q_fused, download<float>(dev, q1, s.q.size()));
    EXPECT_TRUE(kc_fused == download<uint8_t>(dev, kc1, bytes));
    EXPECT_TRUE(download<uint8_t>(dev, vc2, bytes) == download<uint8_t>(dev, vc1, bytes));
    EXPECT_EQ(download<float>(dev, k2, s.k.size()), s.k);
    expect_matches_cpu(c, s, q_fused, kc_fused);
  }
}

TEST(CudaRopeKvWrite, HostRenditionEqualsRopeThenKvWrite) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const Step s = make_step(c);
    const int64_t T = s.n_tokens();
    const size_t bytes = cache_bytes(c);
    // Unfused: the RoPE kernel's and the KV write's host renditions.
    std::vector<float> q1 = s.q, k1 = s.k;
    std::vector<uint8_t> kc1(bytes, 0), vc1(bytes, 0);
    rope_host(q1.data(), s.pos.data(), T, rope_args(c).q_stride, c.n_heads, c.head_dim, c.n_rot,
              kBase, kScale, c.style);
    rope_host(k1.data(), s.pos.data(), T, kv_args(c, s).k_stride, c.n_kv_heads, c.head_dim, c.n_rot,
              kBase, kScale, c.style);
    KvWriteArgs a = kv_args(c, s);
    a.k = k1.data();
    a.v = s.v.data();
    a.slots = s.slots.data();
    a.k_cache = kc1.data();
    a.v_cache = vc1.data();
    kv_write_host(a);
    // Fused.
    std::vector<float> q2 = s.q, k2 = s.k;
    std::vector<uint8_t> kc2(bytes, 0), vc2(bytes, 0);
    const std::vector<float> table = rope_table_host(s.pos.data(), T, c.n_rot, kBase, kScale);
    a.k = k2.data();
    a.k_cache = kc2.data();
    a.v_cache = vc2.data();
    KvRopeArgs r = rope_args(c);
    r.q = q2.data();
    r.cos_sin = table.data();
    rope_kv_write_host(a, r);

    EXPECT_EQ(q2, q1);
    EXPECT_TRUE(kc2 == kc1);
    EXPECT_TRUE(vc2 == vc1);
    EXPECT_EQ(k2, s.k);
    expect_matches_cpu(c, s, q2, kc2);
  }
}

// Shapes the kernel cannot take are refused before any launch.
TEST(CudaRopeKvWrite, RefusesBadRotationsAndShapes) {
  const Case c = kCases[0];
  Step s = make_step(c);
  std::vector<uint8_t> kc(cache_bytes(c)), vc(cache_bytes(c));
  const std::vector<float> table = rope_table_host(s.pos.data(), s.n_tokens(), 128, kBase, kScale);
  KvWriteArgs a = kv_args(c, s);
  a.k = s.k.data();
  a.v = s.v.data();
  a.slots = s.slots.data();
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  const auto refused = [&](KvRopeArgs r) {
    r.q = s.q.data();
    r.cos_sin = table.data();
    EXPECT_THROW(rope_kv_write_host(a, r), ConfigError);
  };
  KvRopeArgs r = rope_args(c);
  r.n_rot = 63;  // odd
  refused(r);
  r.n_rot = c.head_dim + 2;  // past the head
  refused(r);
  r = rope_args(c);
  r.q_stride = c.head_dim;  // rows too short for n_heads heads
  refused(r);
  r = rope_args(c);
  r.n_heads = -1;
  refused(r);
  a.cache_type = DType::Q4_0;  // the KV write's own checks still apply
  refused(rope_args(c));
}

}  // namespace
}  // namespace pagellm::cuda
