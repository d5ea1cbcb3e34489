#include "backend/cpu/paged_attention.h"

#include <cmath>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/fp16.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace pagellm {

namespace {

// Loads head row `row` (= slot * n_kv_heads + kv_head) of n elements into f32.
inline void load_row(const void* base, DType type, int64_t row, int n, float* dst) {
  if (type == DType::Q8_0) {
    const auto* blk = static_cast<const BlockQ8_0*>(base) + row * (n / QK8_0);
    for (int b = 0; b < n / QK8_0; ++b) {
      const float d = fp16_to_fp32(blk[b].d);
      for (int i = 0; i < QK8_0; ++i) dst[b * QK8_0 + i] = d * static_cast<float>(blk[b].qs[i]);
    }
    return;
  }
  const int64_t offset = row * n;
  if (type == DType::F32) {
    const float* src = static_cast<const float*>(base) + offset;
    for (int i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
  int i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

inline float dot(const float* a, const float* b, int n) {
  // Fixed summation order (8 lanes, then a fixed tree), independent of batching.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

}  // namespace

void paged_attention(const PagedAttentionArgs& a, ThreadPool& pool) {
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.head_dim;
  const int64_t work = static_cast<int64_t>(a.n_tokens) * a.n_kv_heads;

  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    std::vector<float> kbuf(static_cast<size_t>(d)), vbuf(static_cast<size_t>(d));
    std::vector<float> acc(static_cast<size_t>(group) * d), m(group), l(group);
    for (int64_t w = begin; w < end; ++w) {
      const int32_t t = static_cast<int32_t>(w / a.n_kv_heads);
      const int32_t kvh = static_cast<int32_t>(w % a.n_kv_heads);
      const int32_t* table = a.block_tables[a.token_seq[t]];
      const int32_t n_ctx = a.token_pos[t] + 1;
      const float* q0 = a.q + t * a.q_stride + static_cast<int64_t>(kvh) * group * d;
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(m.begin(), m.end(), -INFINITY);
      std::fill(l.begin(), l.end(), 0.0f);
      for (int32_t p = 0; p < n_ctx; ++p) {
        const int64_t slot =
            static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
        const int64_t row = slot * a.n_kv_heads + kvh;
        load_row(a.k_cache, a.kv_type, row, d, kbuf.data());
        load_row(a.v_cache, a.kv_type, row, d, vbuf.data());
        for (int g = 0; g < group; ++g) {
          const float s = dot(q0 + g * d, kbuf.data(), d) * a.scale;
          float* accg = acc.data() + g * d;
          if (s > m[g]) {
            const float corr = std::exp(m[g] - s);  // exp(-inf) = 0 on the first position
            l[g] *= corr;
            for (int i = 0; i < d; ++i) accg[i] *= corr;
            m[g] = s;
          }
          const float pexp = std::exp(s - m[g]);
          l[g] += pexp;
          for (int i = 0; i < d; ++i) accg[i] += pexp * vbuf[i];
        }
      }
      for (int g = 0; g < group; ++g) {
        float* o = a.out + t * a.out_stride + (static_cast<int64_t>(kvh) * group + g) * d;
        const float inv = l[g] > 0 ? 1.0f / l[g] : 0.0f;
        for (int i = 0; i < d; ++i) o[i] = acc[static_cast<size_t>(g * d + i)] * inv;
      }
    }
  });
}

}  // namespace pagellm
