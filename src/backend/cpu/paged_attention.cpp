#include "backend/cpu/paged_attention.h"

#include "backend/cpu/simd.h"  // first: wraps <immintrin.h>

#include "backend/cpu/cpu_isa.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/convert.h"
#include "tensor/fp16.h"

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
  // F16C where the CPU has it (chosen at run time).
  dequantize_row(DType::F16, static_cast<const uint16_t*>(base) + offset, dst, n);
}

// Head row of KV head kvh at position p of a sequence: the cache slot from
// the block table, times the heads per slot.
inline int64_t kv_row(const PagedAttentionArgs& a, const int32_t* table, int32_t p, int32_t kvh) {
  const int64_t slot =
      static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
  return slot * a.n_kv_heads + kvh;
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

#if PAGELLM_HAVE_AVX512
PAGELLM_TARGET_AVX512
// Positions are taken kChunk at a time (chunks start at position 0, so a
// token's chunks never depend on the batch): the chunk's K and V rows are
// widened to f32, its scores computed (one dot per head, fixed order), then
// one online-softmax update per chunk: m' = max(m, chunk max), acc and l
// rescaled by exp(m - m'), and the chunk's exp(s - m') weights folded in
// position by position.
constexpr int kChunk = 16;

// The same arithmetic as attention_avx512, in the same order, for f16 caches
// with head_dim = 16 * DV: K and V rows are widened straight from the cache
// (no f32 copies), and the accumulators of SG heads stay in registers. A
// GQA group larger than SG is done SG heads at a time.
template <int DV, int SG>
void attention_f16_regs(const PagedAttentionArgs& a, ThreadPool& pool) {
  const int group = a.n_heads / a.n_kv_heads;
  constexpr int d = 16 * DV;
  const int64_t work = static_cast<int64_t>(a.n_tokens) * a.n_kv_heads;
  const auto* kc = static_cast<const uint16_t*>(a.k_cache);
  const auto* vc = static_cast<const uint16_t*>(a.v_cache);
  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    alignas(64) float sc[SG][kChunk];
    alignas(64) float pw[SG][kChunk];
    for (int64_t w = begin; w < end; ++w) {
      const int32_t t = static_cast<int32_t>(w / a.n_kv_heads);
      const int32_t kvh = static_cast<int32_t>(w % a.n_kv_heads);
      const int32_t* table = a.block_tables[a.token_seq[t]];
      const int32_t n_ctx = a.token_pos[t] + 1;
      for (int g0 = 0; g0 < group; g0 += SG) {
        const int ng = std::min(SG, group - g0);
        const float* q0 = a.q + t * a.q_stride + (static_cast<int64_t>(kvh) * group + g0) * d;
        __m512 acc[SG][DV];
        float m[SG], l[SG];
        for (int g = 0; g < SG; ++g) {
          m[g] = -INFINITY;
          l[g] = 0.0f;
          for (int v = 0; v < DV; ++v) acc[g][v] = _mm512_setzero_ps();
        }
        for (int32_t p0 = 0; p0 < n_ctx; p0 += kChunk) {
          const int cn = std::min<int32_t>(kChunk, n_ctx - p0);
          int64_t off[kChunk];  // element offset of each position's head row
          for (int j = 0; j < cn; ++j) off[j] = kv_row(a, table, p0 + j, kvh) * d;
          for (int j = 0; j < kChunk; ++j) {
            if (j >= cn) {
              for (int g = 0; g < SG; ++g) sc[g][j] = -INFINITY;
              continue;
            }
            const uint16_t* kr = kc + off[j];
            __m512 k[DV];
            for (int v = 0; v < DV; ++v)
              k[v] = _mm512_cvtph_ps(
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kr + 16 * v)));
            for (int g = 0; g < SG; ++g) {
              if (g >= ng) break;
              __m512 s = _mm512_setzero_ps();
              for (int v = 0; v < DV; ++v)
                s = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + g * d + 16 * v), k[v], s);
              sc[g][j] = _mm512_reduce_add_ps(s) * a.scale;
            }
          }
          for (int g = 0; g < ng; ++g) {
            const __m512 s16 = _mm512_load_ps(sc[g]);
            const float cmax = _mm512_reduce_max_ps(s16);
            if (cmax > m[g]) {
              const float corr = std::exp(m[g] - cmax);  // 0 on the first chunk
              l[g] *= corr;
              const __m512 c = _mm512_set1_ps(corr);
              for (int v = 0; v < DV; ++v) acc[g][v] = _mm512_mul_ps(acc[g][v], c);
              m[g] = cmax;
            }
            _mm512_store_ps(pw[g], cpu::simd::exp16(_mm512_sub_ps(s16, _mm512_set1_ps(m[g]))));
            float lsum = 0.0f;
            for (int j = 0; j < cn; ++j) lsum += pw[g][j];
            l[g] += lsum;
          }
          for (int j = 0; j < cn; ++j) {
            const uint16_t* vr = vc + off[j];
            for (int v = 0; v < DV; ++v) {
              const __m512 vv = _mm512_cvtph_ps(
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vr + 16 * v)));
              for (int g = 0; g < SG; ++g)
                if (g < ng) acc[g][v] = _mm512_fmadd_ps(_mm512_set1_ps(pw[g][j]), vv, acc[g][v]);
            }
          }
        }
        for (int g = 0; g < ng; ++g) {
          float* o = a.out + t * a.out_stride + (static_cast<int64_t>(kvh) * group + g0 + g) * d;
          const __m512 inv = _mm512_set1_ps(l[g] > 0 ? 1.0f / l[g] : 0.0f);
          for (int v = 0; v < DV; ++v) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(acc[g][v], inv));
        }
      }
    }
  });
}

void attention_avx512(const PagedAttentionArgs& a, ThreadPool& pool) {
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.head_dim;
  const int dv = (d + 15) / 16;  // zmm per head row
  const __mmask16 tail = d % 16 == 0 ? __mmask16(0xFFFF) : __mmask16((1u << (d % 16)) - 1);
  const int64_t work = static_cast<int64_t>(a.n_tokens) * a.n_kv_heads;
  const int dpad = dv * 16;

  pool.parallel_for(work, [&](int64_t begin, int64_t end, int) {
    std::vector<float> kf(static_cast<size_t>(kChunk) * dpad), vf(kf.size());
    std::vector<float> acc(static_cast<size_t>(group) * dpad), m(group), l(group);
    alignas(64) float sc[kChunk];
    for (int64_t w = begin; w < end; ++w) {
      const int32_t t = static_cast<int32_t>(w / a.n_kv_heads);
      const int32_t kvh = static_cast<int32_t>(w % a.n_kv_heads);
      const int32_t* table = a.block_tables[a.token_seq[t]];
      const int32_t n_ctx = a.token_pos[t] + 1;
      const float* q0 = a.q + t * a.q_stride + static_cast<int64_t>(kvh) * group * d;
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(m.begin(), m.end(), -INFINITY);
      std::fill(l.begin(), l.end(), 0.0f);
      for (int32_t p0 = 0; p0 < n_ctx; p0 += kChunk) {
        const int cn = std::min<int32_t>(kChunk, n_ctx - p0);
        for (int j = 0; j < cn; ++j) {
          const int64_t row = kv_row(a, table, p0 + j, kvh);
          load_row(a.k_cache, a.kv_type, row, d, kf.data() + j * dpad);
          load_row(a.v_cache, a.kv_type, row, d, vf.data() + j * dpad);
        }
        for (int g = 0; g < group; ++g) {
          const float* qg = q0 + g * d;
          for (int j = 0; j < kChunk; ++j) {
            if (j >= cn) {
              sc[j] = -INFINITY;
              continue;
            }
            const float* kj = kf.data() + j * dpad;
            __m512 s = _mm512_setzero_ps();
            for (int v = 0; v < dv; ++v) {
              const __mmask16 mk = v == dv - 1 ? tail : __mmask16(0xFFFF);
              s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, qg + 16 * v),
                                  _mm512_maskz_loadu_ps(mk, kj + 16 * v), s);
            }
            sc[j] = _mm512_reduce_add_ps(s) * a.scale;
          }
          const __m512 s16 = _mm512_load_ps(sc);
          const float cmax = _mm512_reduce_max_ps(s16);
          float* accg = acc.data() + g * dpad;
          if (cmax > m[g]) {
            const float corr = std::exp(m[g] - cmax);  // 0 on the first chunk
            l[g] *= corr;
            const __m512 c = _mm512_set1_ps(corr);
            for (int v = 0; v < dv; ++v)
              _mm512_storeu_ps(accg + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(accg + 16 * v), c));
            m[g] = cmax;
          }
          alignas(64) float pw[kChunk];
          _mm512_store_ps(pw, cpu::simd::exp16(_mm512_sub_ps(s16, _mm512_set1_ps(m[g]))));
          float lsum = 0.0f;
          for (int j = 0; j < cn; ++j) lsum += pw[j];
          l[g] += lsum;
          for (int v = 0; v < dv; ++v) {
            __m512 o = _mm512_loadu_ps(accg + 16 * v);
            for (int j = 0; j < cn; ++j)
              o = _mm512_fmadd_ps(_mm512_set1_ps(pw[j]),
                                  _mm512_loadu_ps(vf.data() + j * dpad + 16 * v), o);
            _mm512_storeu_ps(accg + 16 * v, o);
          }
        }
      }
      for (int g = 0; g < group; ++g) {
        float* o = a.out + t * a.out_stride + (static_cast<int64_t>(kvh) * group + g) * d;
        const float inv = l[g] > 0 ? 1.0f / l[g] : 0.0f;
        for (int i = 0; i < d; ++i) o[i] = acc[static_cast<size_t>(g * dpad + i)] * inv;
      }
    }
  });
}
PAGELLM_TARGET_END
#endif  // PAGELLM_HAVE_AVX512

}  // namespace

void paged_attention(const PagedAttentionArgs& a, ThreadPool& pool) {
#if PAGELLM_HAVE_AVX512
  if (cpu::best_isa() == cpu::CpuIsa::Avx512) {
    if (a.kv_type == DType::F16 && a.head_dim == 64) return attention_f16_regs<4, 4>(a, pool);
    if (a.kv_type == DType::F16 && a.head_dim == 128) return attention_f16_regs<8, 2>(a, pool);
    return attention_avx512(a, pool);
  }
#endif
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
        const int64_t row = kv_row(a, table, p, kvh);
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
